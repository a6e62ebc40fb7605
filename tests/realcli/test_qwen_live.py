"""The pinned real qwen on its live channel (``--input-format stream-json``), through the
public API: warm turns on one process with their history, through an interrupt in band that
keeps the process, tool approvals allowed and denied, and a shell tool denied by the backend
when the agent answers no approvals; hooks refused at ``start_agent``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
from proc_helpers import running

from agentrt import (
    Agent,
    Allow,
    Deny,
    Failed,
    InvalidOptions,
    MemoryStore,
    Runtime,
    StopReason,
    ToolRequest,
    TurnFailed,
    open_runtime,
)
from agentrt.hooks import Hook
from agentrt.testing import (
    AnthropicHang,
    AnthropicReply,
    AnthropicText,
    AnthropicToolUse,
    RecordedRequest,
)

from ._qwen import Qwen

pytestmark = pytest.mark.realcli

BOUND = 90
COMMAND = "touch ran.txt"


def echo(request: RecordedRequest) -> AnthropicReply:
    prompt = request.last_user_text().strip()
    if "hang" in prompt:
        return AnthropicHang()
    return AnthropicText(f"said {prompt!r}")


def shell_then_report(request: RecordedRequest) -> AnthropicReply:
    results = request.tool_results()
    if not results:
        return AnthropicToolUse("run_shell_command", {"command": COMMAND})
    return AnthropicText(f"tool said: {results[-1].get('content')}")


@asynccontextmanager
async def agent(qwen: Qwen, kind: type[Agent] = Agent, **options: Any) -> AsyncIterator[Runtime]:
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(
            kind, name="coder", backend="qwen", kill_grace=1.0, **qwen.agent_options(**options)
        )
        yield rt


async def cli_pid(rt: Runtime) -> int:
    pid = (await rt.status("coder")).cli_pid
    assert pid is not None
    return pid


async def test_warm_turns_share_one_process_and_the_conversation_through_an_interrupt(
    qwen: Qwen,
) -> None:
    qwen.api.set_script(echo)
    async with agent(qwen, keep_alive=60) as rt:
        with trio.fail_after(BOUND):
            one = await rt.ask("coder", "first prompt")
            pid = await cli_pid(rt)
            two = await rt.ask("coder", "second prompt")
            # An interrupt in band ends the turn and keeps the process.
            ref = await rt.tell("coder", "now hang")
            await qwen.api.wait_requests(3)  # the hanging model call is under way
            assert await rt.interrupt("coder")
            result = await rt.wait(ref)
            assert isinstance(result, Failed) and isinstance(result.error, TurnFailed)
            assert result.error.reason is StopReason.INTERRUPTED
            three = await rt.ask("coder", "third prompt")
        assert await cli_pid(rt) == pid
    assert [r.text for r in (one, two, three)] == [
        "said 'first prompt'",
        "said 'second prompt'",
        "said 'third prompt'",
    ]
    assert {two.session_id, three.session_id} == {one.session_id} != {None}
    history = qwen.api.message_requests[-1].texts()
    assert any("first prompt" in t for t in history) and any("second prompt" in t for t in history)
    # Each turn's own usage, though the live CLI prints the session's running total.
    assert three.usage is not None and (three.usage.input_tokens, three.usage.output_tokens) == (
        10,
        5,
    )
    assert len(qwen.api.message_requests) == 4
    assert not running(pid)


class Decides(Agent):
    decision: Any = Allow()
    requests: list[ToolRequest] = []

    async def approve_tool(self, request: ToolRequest) -> Any:
        type(self).requests.append(request)
        return self.decision


async def test_an_allowed_shell_command_runs(qwen: Qwen) -> None:
    qwen.api.set_script(shell_then_report)
    allows = type("Allows", (Decides,), {"requests": []})
    async with agent(qwen, allows) as rt:
        with trio.fail_after(BOUND):
            response = await rt.ask("coder", "go")
    [request] = allows.requests
    assert request.tool_name == "run_shell_command" and request.input == {"command": COMMAND}
    assert request.tool_use_id
    assert (qwen.project / "ran.txt").exists()
    assert "Exit Code: 0" in response.text


async def test_a_denied_shell_command_never_runs_and_the_model_reads_why(qwen: Qwen) -> None:
    qwen.api.set_script(shell_then_report)
    denies = type("Denies", (Decides,), {"decision": Deny("not on this branch"), "requests": []})
    async with agent(qwen, denies) as rt:
        with trio.fail_after(BOUND):
            response = await rt.ask("coder", "go")
    assert len(denies.requests) == 1
    assert not (qwen.project / "ran.txt").exists()
    assert "not on this branch" in response.text


async def test_a_warm_agent_without_approvals_has_the_shell_denied(qwen: Qwen) -> None:
    qwen.api.set_script(shell_then_report)
    async with agent(qwen, keep_alive=60) as rt:
        with trio.fail_after(BOUND):
            response = await rt.ask("coder", "go")
    assert not (qwen.project / "ran.txt").exists()
    assert "approve_tool" in response.text


class Hooks(Agent):
    def handle_hook(self, hook: Hook) -> Any:
        return None


async def test_hooks_are_refused_naming_why(qwen: Qwen) -> None:
    async with open_runtime(store=MemoryStore()) as rt:
        with pytest.raises(InvalidOptions) as refused:
            await rt.start_agent(Hooks, name="coder", backend="qwen", **qwen.agent_options())
    assert "hook" in str(refused.value)
