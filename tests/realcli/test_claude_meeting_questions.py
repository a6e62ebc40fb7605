"""Where questions for a person meet the older operations, on the pinned real claude: an
`AskOperator` question waiting in the store when the agent is stopped, or when a prompt
arrives for an agent whose `when_busy` is ``"interrupt"``: the question leaves the store
with its turn, nobody is left to answer a turn that no longer runs. A halt, which lets the
running turn end, leaves the question to be answered, and holds what comes after it."""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio
import trio.testing
from proc_helpers import wait_for_status

from agentrt import (
    Agent,
    AgentStopped,
    AskOperator,
    Completed,
    Failed,
    MemoryStore,
    Pending,
    StopReason,
    ToolRequest,
    TurnFailed,
    open_runtime,
)
from agentrt.store import OperatorDecision, PendingApproval
from agentrt.testing import AnthropicReply, AnthropicText, AnthropicToolUse, RecordedRequest

from ._claude import Claude

pytestmark = pytest.mark.realcli

TURN_BOUND = 60
ASKED = {
    "questions": [
        {
            "question": "Which colour?",
            "header": "Colour",
            "options": [
                {"label": "red", "description": "warm"},
                {"label": "blue", "description": "cool"},
            ],
            "multiSelect": False,
        }
    ]
}


def asks_unless_told_otherwise(request: RecordedRequest) -> AnthropicReply:
    # The newest message only: the conversation keeps the question asked before it.
    if "say done" in json.dumps(request.messages[-1:]):
        return AnthropicText("done")
    if "tool_result" in json.dumps(request.messages[-1:]):
        return AnthropicText("answered")
    return AnthropicToolUse("AskUserQuestion", ASKED)


class Operator(Agent):
    """Hands every question to a person, who never answers within the test."""

    def approve_tool(self, request: ToolRequest) -> Any:
        return AskOperator("the user picks")


async def waiting_question(store: MemoryStore) -> PendingApproval:
    while True:  # the store has no event to wait on: polled, as a console does
        found = await store.pending_approvals()
        if found:
            [one] = found
            return one
        await trio.sleep(0.05)


async def test_stop_agent_while_a_question_waits_ends_the_turn_and_the_question(
    claude: Claude,
) -> None:
    claude.api.set_script(asks_unless_told_otherwise)
    store = MemoryStore()
    async with open_runtime(store=store) as rt:
        await rt.start_agent(
            Operator(),
            name="coder",
            backend="claude",
            **claude.agent_options(approval_timeout=600.0, keep_alive=600),
        )
        with trio.fail_after(TURN_BOUND):
            ref = await rt.tell("coder", "pick a colour")
            pending = await waiting_question(store)
            assert pending.tool_name == "AskUserQuestion"
            results: list[object] = []
            async with trio.open_nursery() as nursery:

                async def wait() -> None:
                    # Waiting before the stop: once stopped, the name is gone from here.
                    results.append(await rt.wait(ref))

                nursery.start_soon(wait)
                await trio.testing.wait_all_tasks_blocked()
                await rt.stop_agent("coder")
        [result] = results
        assert isinstance(result, Failed) and isinstance(result.error, AgentStopped)
        assert await store.pending_approvals() == ()


async def test_an_interrupting_prompt_ends_a_turn_whose_question_waits(claude: Claude) -> None:
    claude.api.set_script(asks_unless_told_otherwise)
    store = MemoryStore()
    async with open_runtime(store=store) as rt:
        await rt.start_agent(
            Operator(),
            name="coder",
            backend="claude",
            **claude.agent_options(approval_timeout=600.0, keep_alive=600, when_busy="interrupt"),
        )
        with trio.fail_after(TURN_BOUND):
            asked = await rt.tell("coder", "pick a colour")
            await waiting_question(store)
            response = await rt.ask("coder", "never mind, say done")
            result = await rt.wait(asked)
        assert response.text == "done"
        assert isinstance(result, Failed) and isinstance(result.error, TurnFailed)
        assert result.error.reason is StopReason.INTERRUPTED
        assert await store.pending_approvals() == ()


async def test_a_halt_leaves_the_waiting_question_to_be_answered_and_holds_the_next_prompt(
    claude: Claude,
) -> None:
    claude.api.set_script(asks_unless_told_otherwise)
    store = MemoryStore()
    async with open_runtime(store=store) as rt:
        await rt.start_agent(
            Operator(),
            name="coder",
            backend="claude",
            **claude.agent_options(approval_timeout=600.0, keep_alive=600),
        )
        with trio.fail_after(TURN_BOUND):
            ref = await rt.tell("coder", "pick a colour")
            pending = await waiting_question(store)
            await rt.halt("coder")
            later = await rt.tell("coder", "say done")
            assert [p.id for p in await store.pending_approvals()] == [pending.id]
            answered = {**json.loads(pending.input), "answers": {"Which colour?": "blue"}}
            decision = OperatorDecision(
                allowed=True, updated_input=json.dumps(answered), decided_by="console"
            )
            assert await store.decide_approval(pending.id, decision)
            result = await rt.wait(ref)
            status = await wait_for_status(rt, "coder", lambda s: s.state == "halted")
            assert status.queued == 1 and isinstance(await rt.poll(later), Pending)
            await rt.unhalt("coder")
            done = await rt.wait(later)
        assert isinstance(result, Completed) and result.response.text == "answered"
        assert isinstance(done, Completed) and done.response.text == "done"
