"""`agentrt._approvals.answer`, the unit: the agent's answer to an ask, who gave it, and the
crash of a callback that failed to answer (returned, for the actor to end the turn with)."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from trio.testing import MockClock

from agentrt import AddContext, Allow, Block, Deny, ToolDecisionEvent, ToolRequest
from agentrt._approvals import answer
from agentrt._asks import Decision, HookAnswer
from agentrt.backend import HookCall, ToolApproval
from agentrt.hooks import PreToolUseHook

REQUEST = ToolRequest(tool_name="Bash", input={"command": "ls"}, tool_use_id="t-1")


def approval() -> ToolApproval:
    return ToolApproval(REQUEST, lambda decision: repr(decision).encode())


def hook_call() -> HookCall:
    return HookCall(PreToolUseHook(), lambda reply: repr(reply).encode())


class FakeAgent:
    """Answers each ask with ``value``, or raises ``raises``, or never answers; records the
    questions."""

    def __init__(self, value: Any = None, *, raises: Exception | None = None, hangs: bool = False):
        self.value, self.raises, self.hangs = value, raises, hangs
        self.calls: list[tuple[str, Any]] = []

    async def __call__(self, name: str, question: Any) -> Any:
        self.calls.append((name, question))
        if self.hangs:
            await trio.sleep_forever()
        if self.raises is not None:
            raise self.raises
        return self.value


@pytest.mark.parametrize("decision", [Allow(updated_input={"command": "ls -a"}), Deny("no")])
async def test_a_tool_decision_is_the_reply_and_its_event(decision: Decision) -> None:
    call = FakeAgent(decision)
    reply, events, crash = await answer(approval(), call, 60.0, "a")
    assert call.calls == [("approve_tool", REQUEST)]
    assert reply == repr(decision).encode() and crash is None
    [event] = events
    assert isinstance(event, ToolDecisionEvent)
    assert (event.tool_use_id, event.allowed, event.decided_by) == (
        "t-1",
        isinstance(decision, Allow),
        "approve_tool",
    )
    assert event.message == (decision.message if isinstance(decision, Deny) else None)


async def test_no_decision_in_time_denies_and_is_no_crash(
    autojump_clock: MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    reply, [event], crash = await answer(approval(), FakeAgent(hangs=True), 5.0, "a")
    assert trio.current_time() == 5.0
    assert reply == repr(Deny("the agent did not allow the tool (timeout)")).encode()
    assert isinstance(event, ToolDecisionEvent)
    assert (event.allowed, event.decided_by, crash) == (False, "timeout", None)
    assert "agent 'a': approve_tool did not answer within approval_timeout (5 s)" in caplog.text


@pytest.mark.parametrize(
    ("call", "error"),
    [(FakeAgent(raises=ValueError("boom")), ValueError), (FakeAgent("yes"), TypeError)],
    ids=["raises", "wrong type"],
)
async def test_a_failing_approve_tool_denies_and_comes_back_as_a_crash(
    call: FakeAgent, error: type[Exception]
) -> None:
    reply, [event], crash = await answer(approval(), call, 60.0, "a")
    assert reply == repr(Deny("the agent did not allow the tool (error)")).encode()
    assert isinstance(event, ToolDecisionEvent) and event.decided_by == "error"
    assert crash is not None and crash.callback == "approve_tool"
    assert type(crash.error) is error


@pytest.mark.parametrize("reply", [Block("not now"), AddContext("mind the tests"), None])
async def test_a_hook_answer_is_the_reply_without_events(reply: HookAnswer) -> None:
    assert await answer(hook_call(), FakeAgent(reply), 60.0, "a") == (
        repr(reply).encode(),
        (),
        None,
    )


async def test_a_hook_answered_with_a_decision_is_a_crash() -> None:
    reply, events, crash = await answer(hook_call(), FakeAgent(Allow()), 60.0, "a")
    assert (reply, events) == (b"None", ())
    assert crash is not None and crash.callback == "handle_hook"
    assert (
        "handle_hook returned Allow(updated_input=None); expected Block or AddContext or None"
        in str(crash.error)
    )
