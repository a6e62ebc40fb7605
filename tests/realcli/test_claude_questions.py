"""Questions for a person on the pinned real claude, through the public API: the fake model
calls ``AskUserQuestion`` and ``ExitPlanMode``; each reaches ``approve_tool`` typed
(`UserQuestions`, `PlanApproval`), and the answer reaches the model in the form the CLI
takes: `Answers` by question, a plan approved or sent back. `AskOperator` hands a question to
a person through the store (decided once; in the console's page, by its answer buttons),
or answers its ``default`` when nobody does."""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio
from browser import open_browser, skip_without_browser

from agentrt import (
    Agent,
    Allow,
    Answers,
    AskOperator,
    Completed,
    Deny,
    MemoryStore,
    PlanApproval,
    Question,
    QuestionOption,
    ToolDecisionEvent,
    ToolRequest,
    UserQuestions,
    open_console,
    open_runtime,
)
from agentrt.store import OperatorDecision
from agentrt.testing import AnthropicReply, AnthropicText, AnthropicToolUse, RecordedRequest

from ._claude import Claude

pytestmark = pytest.mark.realcli

TURN_BOUND = 60
COLOUR = "Which colour?"
ASKED = {
    "questions": [
        {
            "question": COLOUR,
            "header": "Colour",
            "options": [
                {"label": "red", "description": "warm"},
                {"label": "blue", "description": "cool"},
            ],
            "multiSelect": False,
        }
    ]
}


def tool_results(request: RecordedRequest) -> list[Any]:
    """What the tools told the model so far, in the whole conversation (the CLI may put a
    message of its own after the last one)."""
    return [
        block.get("content")
        for message in request.messages
        if isinstance(message.get("content"), list)
        for block in message["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]


def then_echo(first: AnthropicToolUse) -> Any:
    """The model calls ``first``, then says what the tool told it."""

    def reply(request: RecordedRequest) -> AnthropicReply:
        results = tool_results(request)
        if not results:
            return first
        return AnthropicText(results[-1] if isinstance(results[-1], str) else json.dumps(results))

    return reply


asks_then_echoes = then_echo(AnthropicToolUse("AskUserQuestion", ASKED))


class Answering(Agent):
    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.asked: list[ToolRequest] = []

    def approve_tool(self, request: ToolRequest) -> Any:
        self.asked.append(request)
        return self.answer


async def test_a_question_reaches_approve_tool_typed_and_its_answer_the_model(
    claude: Claude,
) -> None:
    claude.api.set_script(asks_then_echoes)
    agent = Answering(Answers({COLOUR: "blue"}))
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(agent, name="coder", backend="claude", **claude.agent_options())
        with trio.fail_after(TURN_BOUND):
            response = await rt.ask("coder", "pick a colour")
    [request] = agent.asked
    assert request.tool_name == "AskUserQuestion"
    assert request.question == UserQuestions(
        (
            Question(
                COLOUR,
                "Colour",
                (QuestionOption("red", "warm"), QuestionOption("blue", "cool")),
            ),
        )
    )
    assert '"Which colour?"="blue"' in response.text
    [decision] = [e for e in response.events if isinstance(e, ToolDecisionEvent)]
    assert decision.allowed and decision.updated_input == {"answers": {COLOUR: "blue"}}


@pytest.mark.parametrize(
    ("answer", "told"),
    [
        (Allow(), "User has approved exiting plan mode"),
        (Deny("Keep the tests in the plan"), "Keep the tests in the plan"),
    ],
)
async def test_a_plan_approval_is_approved_or_sent_back(
    claude: Claude, answer: Allow | Deny, told: str
) -> None:
    claude.api.set_script(
        then_echo(AnthropicToolUse("ExitPlanMode", {"plan": "1. Write the tests."}))
    )
    agent = Answering(answer)
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(
            agent,
            name="coder",
            backend="claude",
            **claude.agent_options(permission_mode="plan"),
        )
        with trio.fail_after(TURN_BOUND):
            response = await rt.ask("coder", "plan it")
    [request] = agent.asked
    assert request.tool_name == "ExitPlanMode"
    assert isinstance(request.question, PlanApproval)
    assert told in response.text


async def test_ask_operator_hands_a_question_to_a_person_who_answers_once(
    claude: Claude,
) -> None:
    claude.api.set_script(asks_then_echoes)
    store = MemoryStore()
    agent = Answering(AskOperator("the user picks", default=Answers({COLOUR: "red"})))
    async with open_runtime(store=store) as rt:
        await rt.start_agent(agent, name="coder", backend="claude", **claude.agent_options())
        with trio.fail_after(TURN_BOUND):
            ref = await rt.tell("coder", "pick a colour")
            while True:  # the store has no event to wait on: polled, as a console does
                waiting = await store.pending_approvals()
                if waiting:
                    break
                await trio.sleep(0.05)
            [pending] = waiting
            assert (pending.tool_name, pending.reason) == ("AskUserQuestion", "the user picks")
            answered = {**json.loads(pending.input), "answers": {COLOUR: "blue"}}
            decision = OperatorDecision(
                allowed=True, updated_input=json.dumps(answered), decided_by="console"
            )
            assert await store.decide_approval(pending.id, decision)
            assert not await store.decide_approval(pending.id, decision)  # once
            result = await rt.wait(ref)
    assert isinstance(result, Completed)
    assert '"Which colour?"="blue"' in result.response.text
    [event] = [e for e in result.response.events if isinstance(e, ToolDecisionEvent)]
    assert event.decided_by == "console"


async def test_ask_operator_answers_its_default_when_nobody_decides(claude: Claude) -> None:
    claude.api.set_script(asks_then_echoes)
    agent = Answering(AskOperator("the user picks", default=Answers({COLOUR: "red"})))
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(
            agent,
            name="coder",
            backend="claude",
            **claude.agent_options(approval_timeout=1.0),
        )
        with trio.fail_after(TURN_BOUND):
            response = await rt.ask("coder", "pick a colour")
    assert '"Which colour?"="red"' in response.text
    [event] = [e for e in response.events if isinstance(e, ToolDecisionEvent)]
    assert event.decided_by == "default"


async def test_a_question_answered_in_the_console(claude: Claude) -> None:
    skip_without_browser()
    claude.api.set_script(asks_then_echoes)
    agent = Answering(AskOperator("the user picks"))
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(
            agent,
            name="coder",
            backend="claude",
            **claude.agent_options(approval_timeout=TURN_BOUND),
        )
        async with open_console(rt) as console, open_browser() as browser:
            await browser.get(console.url)
            ref = await rt.tell("coder", "pick a colour")
            card = await browser.wait_text(".approval", lambda t: COLOUR in t)
            assert "red" in card and "blue" in card
            await browser.click(".approval .options button:nth-child(2)")  # blue
            await browser.click(".approval button.answer-send")
            with trio.fail_after(TURN_BOUND):
                result = await rt.wait(ref)
    assert isinstance(result, Completed)
    assert '"Which colour?"="blue"' in result.response.text
