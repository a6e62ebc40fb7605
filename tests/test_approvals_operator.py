"""`AskOperator`: a tool call handed to a person waits in the store until a decision is
made there (by a console, any handle on the store) or the ``approval_timeout`` bound
denies it; the decision arrives once and the `ToolDecisionEvent` names who decided."""

from __future__ import annotations

import json

import trio
from trio.testing import MockClock

from agentrt import Allow, AskOperator, Deny, MemoryStore, ToolDecisionEvent, ToolRequest
from agentrt._approvals import OPERATOR_POLL, Operators, answer
from agentrt.backend import ToolApproval
from agentrt.store import OperatorDecision, PendingApproval

SECRET = "sk-ant-api03-" + "y" * 40
REQUEST = ToolRequest(
    tool_name="Bash", input={"command": f"curl -H 'x-api-key: {SECRET}' x"}, tool_use_id="t-1"
)


def approval() -> ToolApproval:
    return ToolApproval(REQUEST, lambda decision: repr(decision).encode())


async def asks_operator(name: str, question: object) -> AskOperator:
    return AskOperator(reason="network access")


async def pending(store: MemoryStore) -> PendingApproval:
    while True:  # the store has no event to wait on: polled, as a console does
        found = await store.pending_approvals()
        if found:
            [one] = found
            return one
        await trio.sleep(OPERATOR_POLL)


async def test_a_console_decision_reaches_the_turn_once(autojump_clock: MockClock) -> None:
    store = MemoryStore()
    console = store.handle()  # another handle on the same store, as another node's console
    async with store, console:
        operators = Operators(store, "r-1", 7)
        edited = {"command": "curl x"}
        decision = OperatorDecision(
            allowed=True, updated_input=json.dumps(edited), decided_by="console"
        )
        async with trio.open_nursery() as nursery:
            got: list[object] = []

            async def ask() -> None:
                got.append(await answer(approval(), asks_operator, 60.0, "coder", operators))

            nursery.start_soon(ask)
            waiting = await pending(console)
            assert (waiting.name, waiting.tool_name, waiting.request) == ("coder", "Bash", 7)
            assert waiting.reason == "network access"
            assert SECRET not in waiting.input and "[REDACTED]" in waiting.input
            assert waiting.expires_at - waiting.requested_at == 60.0
            assert await console.decide_approval(waiting.id, decision)
            assert not await console.decide_approval(waiting.id, decision)
        [(reply, events, crash)] = got  # type: ignore[misc]
        assert reply == repr(Allow(updated_input=edited)).encode() and crash is None
        [event] = events
        assert isinstance(event, ToolDecisionEvent)
        assert (event.allowed, event.decided_by, event.updated_input) == (True, "console", edited)
        assert await console.pending_approvals() == ()
        assert not await console.decide_approval(waiting.id, decision)  # gone


async def test_a_denial_carries_its_message(autojump_clock: MockClock) -> None:
    store = MemoryStore()
    async with store:
        async with trio.open_nursery() as nursery:
            got: list[object] = []

            async def ask() -> None:
                operators = Operators(store, "r-1", None)
                got.append(await answer(approval(), asks_operator, 60.0, "coder", operators))

            nursery.start_soon(ask)
            waiting = await pending(store)
            denied = OperatorDecision(allowed=False, message="not today", decided_by="console")
            await store.decide_approval(waiting.id, denied)
        [(reply, events, _)] = got  # type: ignore[misc]
        assert reply == repr(Deny("not today")).encode()
        assert events[0].decided_by == "console" and events[0].message == "not today"


async def test_no_decision_within_the_bound_denies_and_leaves_nothing_pending(
    autojump_clock: MockClock,
) -> None:
    store = MemoryStore()
    async with store:
        start = trio.current_time()
        reply, events, crash = await answer(
            approval(), asks_operator, 30.0, "coder", Operators(store, "r-1", 1)
        )
        assert trio.current_time() - start <= 30.0 + OPERATOR_POLL
        assert b"timeout" in reply and crash is None
        assert (events[0].allowed, events[0].decided_by) == (False, "timeout")
        assert await store.pending_approvals() == ()


async def test_without_an_approval_store_it_is_denied_saying_why() -> None:
    reply, events, crash = await answer(
        approval(), asks_operator, 30.0, "coder", Operators(None, "r-1", 1)
    )
    assert b"the store keeps no approvals" in reply and crash is None
    assert events[0].decided_by == "error"
