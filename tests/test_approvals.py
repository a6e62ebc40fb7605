"""``Agent.approve_tool`` and ``Agent.handle_hook`` through the public API, on the fake CLI.

The fake (live mode, step "ask") sends the control requests Claude Code sends (``can_use_tool``
with ``--permission-prompt-tool stdio``, ``hook_callback`` for the hooks the opening named)
and prints the answer it got, so each decision path and its bounds are checked on the wire.
The real claude's tier is tests/realcli/test_claude_approvals.py.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from trio.testing import MockClock

import agentrt
from agentrt import (
    AddContext,
    Agent,
    Allow,
    Block,
    Deny,
    MemoryStore,
    RawEvent,
    Response,
    Runtime,
    ToolDecisionEvent,
    ToolRequest,
)
from agentrt.hooks import Hook
from agentrt.testing import fake_cli_executable

FAST: dict[str, Any] = {"kill_grace": 0.3, "startup": 10, "watchdog": 30}
TOOL = {
    "subtype": "can_use_tool",
    "tool_name": "Bash",
    "input": {"command": "rm -rf build"},
    "tool_use_id": "toolu_1",
}
USE = [
    "emit",
    {
        "type": "assistant",
        "session_id": "s-1",
        "parent_tool_use_id": "toolu_task",
        "message": {
            "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": TOOL["input"]}
            ]
        },
    },
]


async def start(
    rt: Runtime, tmp_path: Path, agent: type[Agent], *turn: Any, **options: Any
) -> None:
    binary = fake_cli_executable(str(tmp_path), ["live", {"turns": [[*turn, ["answer"]]]}])
    await rt.start_agent(agent, name="a", backend="claude", binary=binary, **{**FAST, **options})


def answers(response: Response) -> list[Any]:
    """What the fake CLI was answered, in order (its "answered" lines, as raw events)."""
    return [
        e.data["response"]["response"]
        for e in response.events
        if isinstance(e, RawEvent) and isinstance(e.data, dict) and e.data.get("type") == "answered"
    ]


class Approver(Agent):
    decision: Any = Allow()
    delay = 0.0
    seen: list[ToolRequest]

    def __init__(self) -> None:
        self.seen = []

    async def approve_tool(self, request: ToolRequest) -> Any:
        self.seen.append(request)
        await trio.sleep(self.delay)
        if isinstance(self.decision, Exception):
            raise self.decision
        return self.decision


def approver(**attributes: Any) -> type[Approver]:
    return type("CustomApprover", (Approver,), attributes)


async def test_a_denial_reaches_the_cli_and_the_turns_events(tmp_path: Path) -> None:
    agent = approver(decision=Deny("not in this repository"))
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        await start(rt, tmp_path, agent, USE, ["ask", TOOL], retention="lossless")
        response = await rt.ask("a", "clean up")
    assert answers(response) == [{"behavior": "deny", "message": "not in this repository"}]
    [decision] = [e for e in response.events if isinstance(e, ToolDecisionEvent)]
    assert (decision.tool_use_id, decision.allowed, decision.message) == (
        "toolu_1",
        False,
        "not in this repository",
    )
    assert decision.decided_by == "approve_tool"
    # The fake's result lists no denial: the runtime adds the agent's own.
    assert response.permission_denials == (
        agentrt.PermissionDenial(tool_name="Bash", tool_use_id="toolu_1", input=TOOL["input"]),
    )


async def test_the_request_names_the_tool_and_its_subagents_task(tmp_path: Path) -> None:
    instance = approver()()
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        binary = fake_cli_executable(
            str(tmp_path), ["live", {"turns": [[USE, ["ask", TOOL], ["answer"]]]}]
        )
        await rt.start_agent(instance, name="a", backend="claude", binary=binary, **FAST)
        await rt.ask("a", "clean up")
    assert instance.seen == [
        ToolRequest("Bash", {"command": "rm -rf build"}, "toolu_1", parent_tool_use_id="toolu_task")
    ]


async def test_an_allow_may_change_the_input(tmp_path: Path) -> None:
    agent = approver(decision=Allow(updated_input={"command": "rm -rf build/tmp"}))
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        await start(rt, tmp_path, agent, ["ask", TOOL], retention="lossless")
        response = await rt.ask("a", "clean up")
    assert answers(response) == [
        {"behavior": "allow", "updatedInput": {"command": "rm -rf build/tmp"}}
    ]
    plain = approver()
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        await start(rt, tmp_path, plain, ["ask", TOOL], retention="lossless")
        response = await rt.ask("a", "clean up")
    assert answers(response) == [{"behavior": "allow", "updatedInput": TOOL["input"]}]


async def test_an_approval_past_its_bound_denies(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    agent = approver(delay=30.0)
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        await start(rt, tmp_path, agent, ["ask", TOOL], retention="lossless", approval_timeout=0.2)
        with trio.fail_after(10):
            response = await rt.ask("a", "clean up")
    [answer] = answers(response)
    assert answer["behavior"] == "deny" and "timeout" in answer["message"]
    [decision] = [e for e in response.events if isinstance(e, ToolDecisionEvent)]
    assert decision.decided_by == "timeout" and not decision.allowed
    assert "approve_tool did not answer within approval_timeout" in caplog.text


class Silent(Agent):
    """An approve_tool that never answers; ``asked`` is set once it was called."""

    asked: trio.Event

    async def approve_tool(self, request: ToolRequest) -> Any:
        self.asked.set()
        await trio.sleep_forever()


async def start_silent(rt: Runtime, tmp_path: Path, **options: Any) -> Silent:
    # A warm agent whose first turn asks, then answers; later turns only answer. The bounds
    # are far apart, so nothing here depends on how fast the machine is.
    agent = Silent()
    agent.asked = trio.Event()
    turns = [[["ask", TOOL], ["answer"]], [["answer"]]]
    binary = fake_cli_executable(str(tmp_path), ["live", {"turns": turns}])
    bounds = {"keep_alive": 60, "kill_grace": 2, "approval_timeout": 60, "startup": 30}
    await rt.start_agent(agent, name="a", backend="claude", binary=binary, **bounds, **options)
    return agent


async def test_an_interrupt_while_the_agent_is_asked_ends_the_turn_in_band(tmp_path: Path) -> None:
    # Issue 34/3: nothing read the CLI while approve_tool was awaited, so the CLI's end of
    # the interrupted turn went unseen: it was killed after kill_grace, the turn ended only
    # when the reading's drain bound cut the wait.
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        agent = await start_silent(rt, tmp_path)
        async with trio.open_nursery() as nursery:
            failed: list[BaseException] = []

            async def ask() -> None:
                with pytest.raises(agentrt.TurnFailed) as caught:
                    await rt.ask("a", "one")
                failed.append(caught.value)

            nursery.start_soon(ask)
            with trio.fail_after(30):
                await agent.asked.wait()
            pid = (await rt.status("a")).cli_pid
            interrupted = trio.current_time()
            await rt.interrupt("a")
        took = trio.current_time() - interrupted
        [failure] = failed
        assert isinstance(failure, agentrt.TurnFailed)
        assert failure.reason is agentrt.StopReason.INTERRUPTED
        with trio.fail_after(30):
            second = await rt.ask("a", "two")
        assert second.text == "2: two"
        # The CLI ended its turn in band, within kill_grace (2 s), and lives on.
        assert pid is not None and (await rt.status("a")).cli_pid == pid
    assert took < 30  # half the approval bound


async def test_a_cli_that_dies_while_the_agent_is_asked_ends_the_turn_at_once(
    tmp_path: Path,
) -> None:
    # Issue 34/3: the death went unseen until approval_timeout (60 s here) had passed.
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        agent = await start_silent(rt, tmp_path)
        async with trio.open_nursery() as nursery:
            failed: list[tuple[agentrt.TurnFailed, float]] = []

            async def ask() -> None:
                with pytest.raises(agentrt.TurnFailed) as caught:
                    await rt.ask("a", "one")
                failed.append((caught.value, trio.current_time()))

            nursery.start_soon(ask)
            with trio.fail_after(30):
                await agent.asked.wait()
            pid = (await rt.status("a")).cli_pid
            assert pid is not None
            killed = trio.current_time()
            os.kill(pid, signal.SIGKILL)
    [(failure, ended)] = failed
    assert failure.reason is agentrt.StopReason.PROCESS_CRASHED
    assert "SIGKILL" in failure.message
    assert ended - killed < 30  # half the approval bound


class Held(Agent):
    """An approve_tool that denies once the test lets it (``release``); ``asked`` is set once
    it was called."""

    asked: trio.Event
    release: trio.Event

    async def approve_tool(self, request: ToolRequest) -> Any:
        self.asked.set()
        await self.release.wait()
        return Deny("not now")


@pytest.fixture
def jumping_clock() -> MockClock:
    """Real time, plus the jumps a test makes."""
    return MockClock(rate=1.0)


async def test_the_first_event_bound_does_not_count_the_wait_for_the_agent(
    tmp_path: Path, jumping_clock: MockClock
) -> None:
    # Issue 34/3: a question the CLI asks before any content (Claude Code's UserPromptSubmit
    # hook; the fake's approval here) was timed as the model's silence: an agent that took
    # longer than first_event to answer lost the turn to first_event_timeout.
    agent = Held()
    agent.asked, agent.release = trio.Event(), trio.Event()
    binary = fake_cli_executable(str(tmp_path), ["live", {"turns": [[["ask", TOOL], ["answer"]]]}])
    bounds = {"first_event": 30, "approval_timeout": 600, "watchdog": 600, "startup": 30}
    # A lease that outlives the jump.
    async with agentrt.open_runtime(store=MemoryStore(), lease_ttl=1000) as rt:
        await rt.start_agent(
            agent, name="a", backend="claude", binary=binary, retention="lossless", **bounds
        )
        async with trio.open_nursery() as nursery:
            responses: list[Response] = []

            async def ask() -> None:
                responses.append(await rt.ask("a", "clean up"))

            nursery.start_soon(ask)
            with trio.fail_after(30):
                await agent.asked.wait()
            jumping_clock.jump(60)  # the agent took twice first_event to answer
            await trio.testing.wait_all_tasks_blocked()
            agent.release.set()
    [response] = responses
    assert response.stop_reason is agentrt.StopReason.COMPLETE
    assert answers(response) == [{"behavior": "deny", "message": "not now"}]


@pytest.mark.parametrize("bad", [RuntimeError("boom"), "yes"], ids=["raises", "returns a str"])
async def test_a_failing_approval_denies_and_crashes_the_agent(tmp_path: Path, bad: Any) -> None:
    agent = approver(decision=bad)
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        await start(rt, tmp_path, agent, ["ask", TOOL], ["hang"], restart="temporary")
        with trio.fail_after(10), pytest.raises(agentrt.AgentStopped) as info:
            await rt.ask("a", "clean up")
    assert "approve_tool" in str(info.value)


class Hooks(Agent):
    replies: dict[str, Any] = {}
    seen: list[Hook] = []

    def handle_hook(self, hook: Hook) -> Any:
        type(self).seen.append(hook)
        return self.replies.get(hook.kind)


def hook_request(event: str, **data: Any) -> dict[str, Any]:
    return {
        "subtype": "hook_callback",
        "callback_id": event,
        "input": {"hook_event_name": event, "session_id": "s-1", **data},
    }


@pytest.mark.parametrize(
    ("event", "data", "reply", "wire"),
    [
        (
            "PreToolUse",
            {"tool_name": "Bash", "tool_input": {"command": "ls"}, "tool_use_id": "t1"},
            Block("no shell here"),
            {
                "hookSpecificOutput": {
                    "hookEventName": "PreToolUse",
                    "permissionDecision": "deny",
                    "permissionDecisionReason": "no shell here",
                }
            },
        ),
        (
            "PostToolUse",
            {"tool_name": "Bash", "tool_response": {"stdout": "x"}},
            AddContext("the output is stale"),
            {
                "hookSpecificOutput": {
                    "hookEventName": "PostToolUse",
                    "additionalContext": "the output is stale",
                }
            },
        ),
        (
            "UserPromptSubmit",
            {"prompt": "hi"},
            Block("off topic"),
            {"decision": "block", "reason": "off topic"},
        ),
        (
            "Stop",
            {},
            Block("run the tests first"),
            {"decision": "block", "reason": "run the tests first"},
        ),
        ("SubagentStop", {}, None, {}),
    ],
)
async def test_hooks_map_to_the_clis_hook_protocol(
    tmp_path: Path, event: str, data: dict[str, Any], reply: Any, wire: dict[str, Any]
) -> None:
    kinds = {
        "PreToolUse": "before_tool",
        "PostToolUse": "after_tool",
        "UserPromptSubmit": "prompt_submitted",
        "Stop": "stopping",
        "SubagentStop": "subagent_stopping",
    }
    agent = type("H", (Hooks,), {"replies": {kinds[event]: reply}, "seen": []})
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        await start(rt, tmp_path, agent, ["ask", hook_request(event, **data)], retention="lossless")
        response = await rt.ask("a", "go")
    assert answers(response) == [wire]
    [hook] = agent.seen
    assert hook.kind == kinds[event]
    assert getattr(hook, "tool_name", None) == data.get("tool_name")
    assert getattr(hook, "prompt", None) == data.get("prompt")


async def test_without_keep_alive_each_turn_has_a_live_process_of_its_own(tmp_path: Path) -> None:
    agent = approver()
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        await start(rt, tmp_path, agent, ["ask", TOOL])
        first = await rt.ask("a", "one")
        assert (await rt.status("a")).cli_pid is None  # gone with its turn
        second = await rt.ask("a", "two")
    # Each a new process's first turn.
    assert (first.text, second.text) == ("1: one", "1: two")
