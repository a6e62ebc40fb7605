"""Where background work meets `when_busy` on the pinned real claude: a warm agent keeps a
background task while a prompt arrives mid-turn with ``when_busy="interrupt"``. The prompt
ends the running turn as an interrupt does, and spares the background task and the CLI."""

from __future__ import annotations

import pytest
import trio
from proc_helpers import marked

from agentrt import Agent, Failed, MemoryStore, StopReason, TurnFailed, open_runtime
from agentrt.testing import AnthropicReply, AnthropicText, AnthropicToolUse, RecordedRequest

from ._claude import MARKER_VAR, Claude, wait_for_process

pytestmark = pytest.mark.realcli

TURN_BOUND = 30


def tool_results(request: RecordedRequest) -> int:
    return sum(
        1
        for m in request.messages
        if isinstance(m.get("content"), list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    )


def sleeping(claude: Claude, seconds: int) -> list[int]:
    return [p.pid for p in marked(MARKER_VAR, claude.marker) if p.cmdline == f"sleep {seconds}"]


async def test_an_interrupting_prompt_spares_the_background_task(claude: Claude) -> None:
    # The model starts `sleep 30` in the background, then waits in a foreground `sleep 20`;
    # the second prompt ends that turn (and the foreground command), not the background.
    def script(request: RecordedRequest) -> AnthropicReply:
        results = tool_results(request)
        if results == 0:
            arguments = {"command": "sleep 30", "description": "Wait", "run_in_background": True}
            return AnthropicToolUse("Bash", arguments)
        if results == 1:
            return AnthropicToolUse("Bash", {"command": "sleep 20", "description": "Pause"})
        return AnthropicText("ok")

    claude.api.set_script(script)
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(
            Agent,
            name="coder",
            backend="claude",
            keep_alive=60,
            background=True,
            when_busy="interrupt",
            **claude.agent_options(allowed_tools=["Bash"]),
        )
        with trio.fail_after(TURN_BOUND):
            ref = await rt.tell("coder", "go")
            await wait_for_process(claude.marker, lambda p: p.cmdline == "sleep 20")
            pid = (await rt.status("coder")).cli_pid
            response = await rt.ask("coder", "stop waiting")
            result = await rt.wait(ref)
            while sleeping(claude, 20):  # noqa: ASYNC110 (no event for another process's end)
                await trio.sleep(0.05)
        assert isinstance(result, Failed) and isinstance(result.error, TurnFailed)
        assert result.error.reason is StopReason.INTERRUPTED
        assert response.text == "ok" and response.origin == "user"
        status = await rt.status("coder")
        assert status.cli_pid == pid and [t.kind for t in status.background] == ["local_bash"]
        assert len(sleeping(claude, 30)) == 1
