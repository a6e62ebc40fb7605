"""Where background work meets `when_busy`, steering and budgets on the pinned real claude:
a warm agent keeps a background task while a prompt arrives mid-turn with
``when_busy="interrupt"`` (it ends the running turn as an interrupt does, and spares the
task and the CLI) or ``"steer"`` (it joins the turn); and the turn the CLI starts when the
task ends runs although the agent's budget is spent, while the next prompt is refused."""

from __future__ import annotations

import json

import pytest
import trio

from agentrt import (
    Agent,
    BudgetExceeded,
    Completed,
    Failed,
    MemoryStore,
    Ref,
    Response,
    StopReason,
    TurnFailed,
    open_runtime,
)
from agentrt.testing import AnthropicReply, AnthropicText, AnthropicToolUse, RecordedRequest

from ._claude import Claude, sleeping, tool_results, wait_for_process

pytestmark = pytest.mark.realcli

TURN_BOUND = 30


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


async def test_a_steer_joins_a_turn_while_a_background_task_runs(claude: Claude) -> None:
    def script(request: RecordedRequest) -> AnthropicReply:
        results = tool_results(request)
        if results == 0:
            arguments = {"command": "sleep 30", "description": "Wait", "run_in_background": True}
            return AnthropicToolUse("Bash", arguments)
        if results == 1:
            return AnthropicToolUse("Bash", {"command": "sleep 2", "description": "Pause"})
        return AnthropicText(
            "heard you" if "use the blue one" in json.dumps(request.messages) else "ok"
        )

    claude.api.set_script(script)
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(
            Agent,
            name="coder",
            backend="claude",
            keep_alive=60,
            background=True,
            when_busy="steer",
            **claude.agent_options(allowed_tools=["Bash"]),
        )
        with trio.fail_after(TURN_BOUND):
            ref = await rt.tell("coder", "go")
            await wait_for_process(claude.marker, lambda p: p.cmdline == "sleep 2")
            pid = (await rt.status("coder")).cli_pid
            assert await rt.tell("coder", "use the blue one") == ref  # joins the turn
            result = await rt.wait(ref)
        assert isinstance(result, Completed) and result.response.text == "heard you"
        status = await rt.status("coder")
        assert status.cli_pid == pid and [t.kind for t in status.background] == ["local_bash"]
        assert len(sleeping(claude, 30)) == 1


async def test_a_turn_the_cli_starts_runs_past_a_spent_budget_and_the_next_prompt_does_not(
    claude: Claude,
) -> None:
    """The CLI runs the task's turn already: no budget refuses it (the guide's rule); it is
    counted, and the application's next prompt meets the spent budget."""
    seen: list[Response] = []
    arrived = trio.Event()

    class Watches(Agent):
        def handle_response(self, ref: Ref, response: Response) -> None:
            seen.append(response)
            if response.origin == "task":
                arrived.set()

    def script(request: RecordedRequest) -> AnthropicReply:
        last = json.dumps(request.messages[-1].get("content"))
        if "task-notification" in last or "background-task" in last:
            return AnthropicText("the task ended")
        if tool_results(request) == 0:
            arguments = {"command": "sleep 3", "description": "Wait", "run_in_background": True}
            return AnthropicToolUse("Bash", arguments)
        return AnthropicText("ok")

    claude.api.set_script(script)
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(
            Watches,
            name="coder",
            backend="claude",
            keep_alive=60,
            background=True,
            budget_tokens=1,  # spent by the first turn
            **claude.agent_options(allowed_tools=["Bash"]),
        )
        with trio.fail_after(TURN_BOUND):
            first = await rt.ask("coder", "start it")
            await arrived.wait()
            with pytest.raises(BudgetExceeded):
                await rt.ask("coder", "and now?")
        status = await rt.status("coder")
    assert first.origin == "user" and first.usage is not None
    assert [r.origin for r in seen] == ["user", "task"] and seen[1].text == "the task ended"
    assert status.turns == 2 and status.state == "halted"
