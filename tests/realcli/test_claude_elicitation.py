"""An MCP server's question on the pinned real claude (MCP's ``elicitation/create``, from a
stdio server of the ``mcp`` package): the CLI hands it to its host as a control request,
which reaches ``approve_tool`` as a `ToolRequest` whose ``question`` is a typed
`McpElicitation`; `Answers` fill the form (read as the schema's types), `Deny` declines, and
`AskOperator` hands it to a person through the store (decided once; in the console's page,
by a field per property of the form), or answers its ``default`` when nobody does."""

from __future__ import annotations

import json
import sys
from pathlib import Path
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
    McpElicitation,
    MemoryStore,
    ToolDecisionEvent,
    ToolRequest,
    open_console,
    open_runtime,
)
from agentrt.store import OperatorDecision
from agentrt.testing import AnthropicReply, AnthropicText, AnthropicToolUse, RecordedRequest

from ._claude import Claude

pytestmark = pytest.mark.realcli

TURN_BOUND = 60
SERVER = Path(__file__).with_name("elicit_server.py")
ASKED = "Which colour, and how many?"
SCHEMA = {
    "type": "object",
    "properties": {
        "colour": {"type": "string", "title": "Colour"},
        "count": {"type": "integer", "title": "Count"},
    },
    "required": ["colour", "count"],
}


def told(request: RecordedRequest) -> list[Any]:
    """The tool results in the conversation so far."""
    return [
        block.get("content")
        for message in request.messages
        if isinstance(message.get("content"), list)
        for block in message["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]


def picks_then_echoes(request: RecordedRequest) -> AnthropicReply:
    """The model loads the server's tool, calls it, then says what it was told."""
    results = told(request)
    if not results:
        return AnthropicToolUse.tool_search("mcp__asker__pick")
    if len(results) == 1:
        return AnthropicToolUse.mcp("asker", "pick", {})
    last = results[-1]
    return AnthropicText(last if isinstance(last, str) else json.dumps(last))


class Answering(Agent):
    """Allows the server's tool; answers its question with ``answer``."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.asked: list[ToolRequest] = []

    def approve_tool(self, request: ToolRequest) -> Any:
        if request.question is None:
            return Allow() if request.tool_name == "mcp__asker__pick" else None
        self.asked.append(request)
        return self.answer


def options(claude: Claude, **more: Any) -> dict[str, Any]:
    config = {"mcpServers": {"asker": {"command": sys.executable, "args": [str(SERVER)]}}}
    return claude.agent_options(mcp_config=[config], **more)


async def test_an_mcp_servers_question_reaches_approve_tool_typed_and_its_answer_the_server(
    claude: Claude,
) -> None:
    claude.api.set_script(picks_then_echoes)
    agent = Answering(Answers({"colour": "blue", "count": "3"}))
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(agent, name="coder", backend="claude", **options(claude))
        with trio.fail_after(TURN_BOUND):
            response = await rt.ask("coder", "pick a colour")
    [request] = agent.asked
    assert request.tool_name == "McpElicitation"
    assert request.question == McpElicitation(server="asker", message=ASKED, schema=SCHEMA)
    # The count went as the integer the schema asks for: the server's check took it.
    assert "action=accept colour='blue' count=3" in response.text
    [decision] = [
        e
        for e in response.events
        if isinstance(e, ToolDecisionEvent) and e.tool_name == "McpElicitation"
    ]
    assert decision.allowed and decision.decided_by == "approve_tool"


async def test_an_mcp_servers_question_denied_is_declined(claude: Claude) -> None:
    claude.api.set_script(picks_then_echoes)
    agent = Answering(Deny("nobody is here"))
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(agent, name="coder", backend="claude", **options(claude))
        with trio.fail_after(TURN_BOUND):
            response = await rt.ask("coder", "pick a colour")
    assert "action=decline" in response.text


async def test_ask_operator_hands_an_mcp_servers_question_to_a_person_who_answers_once(
    claude: Claude,
) -> None:
    claude.api.set_script(picks_then_echoes)
    store = MemoryStore()
    agent = Answering(AskOperator("the user picks", default=Deny("nobody answered")))
    async with open_runtime(store=store) as rt:
        await rt.start_agent(agent, name="coder", backend="claude", **options(claude))
        with trio.fail_after(TURN_BOUND):
            ref = await rt.tell("coder", "pick a colour")
            while True:  # the store has no event to wait on: polled, as a console does
                waiting = await store.pending_approvals()
                if waiting:
                    break
                await trio.sleep(0.05)
            [pending] = waiting
            assert (pending.tool_name, pending.reason) == ("McpElicitation", "the user picks")
            asked = json.loads(pending.input)
            assert (asked["message"], asked["requested_schema"]) == (ASKED, SCHEMA)
            # The console's "Allow with edited input": the form's content.
            content = json.dumps({"colour": "green", "count": 2})
            decision = OperatorDecision(allowed=True, updated_input=content, decided_by="console")
            assert await store.decide_approval(pending.id, decision)
            assert not await store.decide_approval(pending.id, decision)  # once
            result = await rt.wait(ref)
    assert isinstance(result, Completed)
    assert "action=accept colour='green' count=2" in result.response.text
    [event] = [
        e
        for e in result.response.events
        if isinstance(e, ToolDecisionEvent) and e.tool_name == "McpElicitation"
    ]
    assert event.decided_by == "console"


async def test_ask_operator_answers_its_default_when_nobody_decides(claude: Claude) -> None:
    claude.api.set_script(picks_then_echoes)
    agent = Answering(
        AskOperator("the user picks", default=Answers({"colour": "red", "count": "1"}))
    )
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(
            agent, name="coder", backend="claude", **options(claude, approval_timeout=1.0)
        )
        with trio.fail_after(TURN_BOUND):
            response = await rt.ask("coder", "pick a colour")
    assert "action=accept colour='red' count=1" in response.text
    [event] = [
        e
        for e in response.events
        if isinstance(e, ToolDecisionEvent) and e.tool_name == "McpElicitation"
    ]
    assert event.decided_by == "default"


async def test_an_mcp_servers_question_answered_in_the_console(claude: Claude) -> None:
    skip_without_browser()
    claude.api.set_script(picks_then_echoes)
    agent = Answering(AskOperator("the user picks"))
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(
            agent, name="coder", backend="claude", **options(claude, approval_timeout=TURN_BOUND)
        )
        async with open_console(rt) as console, open_browser() as browser:
            await browser.get(console.url)
            ref = await rt.tell("coder", "pick a colour")
            card = await browser.wait_text(".approval", lambda t: ASKED in t)
            assert "asker: " + ASKED in card and "Colour" in card and "Count" in card
            await browser.type(".approval input[name=colour]", "teal")
            await browser.type(".approval input[name=count]", "4")
            await browser.click(".approval button.answer-send")
            with trio.fail_after(TURN_BOUND):
                result = await rt.wait(ref)
    assert isinstance(result, Completed)
    assert "action=accept colour='teal' count=4" in result.response.text
