"""Application tools (`agentrt.tool`) called by the pinned codex against the fake OpenAI
API, through the public API: codex 0.171.0 reaches the runtime's loopback MCP server from
its ``-c mcp_servers.agentrt.*`` overrides with the token from its environment, defers the
tools behind its ``tool_search`` and calls them in the namespace ``mcp__agentrt``."""

from __future__ import annotations

from typing import Any

import pytest
import trio

import agentrt
from agentrt import Agent, Response, StopReason, ToolResultEvent, ToolUseEvent, tool
from agentrt.testing import FakeOpenAI, OpenAIReply, OpenAIRequest, open_fake_openai

from ._codex import codex_binary, codex_place

BINARY = codex_binary()
pytestmark = [
    pytest.mark.realcli,
    pytest.mark.skipif(BINARY is None, reason="codex is not installed: run `make codex-cli`"),
]
TURN_BOUND = 60


@tool
async def lookup(word: str, times: int = 1) -> str:
    """Look a word up in the glossary."""
    return " ".join([f"{word}: a greeting"] * times)


@tool
async def explode(reason: str) -> str:
    """Always fails."""
    raise RuntimeError(f"glossary offline: {reason}")


def tool_calls(response: Response) -> list[tuple[str, bool]]:
    """(name, is_error) of each tool call of the turn, as the runtime's events say."""
    names = {e.id: e.name for e in response.events if isinstance(e, ToolUseEvent)}
    return [
        (names[e.tool_use_id], e.is_error)
        for e in response.events
        if isinstance(e, ToolResultEvent)
    ]


def tool_outputs(request: OpenAIRequest) -> list[Any]:
    return [item for item in request.input_items() if item.get("type") == "function_call_output"]


async def run(api: FakeOpenAI, tools: list[agentrt.Tool], *prompts: str) -> list[Any]:
    assert BINARY is not None
    async with codex_place(api) as place, agentrt.open_runtime() as rt:
        await rt.start_agent(
            Agent,
            name="coder",
            backend="codex",
            app_tools=tools,
            kill_grace=0.5,
            **place.raw_options(BINARY),
        )
        with trio.fail_after(TURN_BOUND):
            return [await rt.ask("coder", prompt) for prompt in prompts]


async def test_a_tool_result_reaches_the_model() -> None:
    script = [
        OpenAIReply.tool_search("glossary lookup"),
        OpenAIReply.mcp_call("agentrt", "lookup", {"word": "hello", "times": 2}),
        OpenAIReply.text("Done."),
    ]
    async with open_fake_openai(script) as api:
        (response,) = await run(api, [lookup], "What does hello mean?")
        searched = api.model_calls[1]
        answered = api.model_calls[2]

    assert response.stop_reason is StopReason.COMPLETE and response.text == "Done."
    assert tool_calls(response) == [("mcp__agentrt__lookup", False)]
    # tool_search found the tool, with the schema made from its hints.
    (found,) = [i for i in searched.input_items() if i.get("type") == "tool_search_output"]
    (namespace,) = found["tools"]
    assert namespace["name"] == "mcp__agentrt"
    (offered,) = namespace["tools"]
    assert offered["name"] == "lookup"
    assert offered["description"] == "Look a word up in the glossary."
    assert offered["parameters"]["required"] == ["word"]
    (output,) = tool_outputs(answered)
    assert "hello: a greeting hello: a greeting" in str(output["output"])


async def test_a_tool_that_raises_gives_an_error_result_and_the_agent_lives() -> None:
    """The failed call ends nothing: the next turn (``exec resume``) calls a tool again."""
    script = [
        OpenAIReply.tool_search("glossary"),
        OpenAIReply.mcp_call("agentrt", "explode", {"reason": "maintenance"}),
        OpenAIReply.text("It failed."),
        OpenAIReply.mcp_call("agentrt", "lookup", {"word": "again"}),
        OpenAIReply.text("Still here."),
    ]
    async with open_fake_openai(script) as api:
        one, two = await run(api, [explode, lookup], "Try the glossary.", "And now?")
        failed, resumed = api.model_calls[2], api.model_calls[4]

    assert one.stop_reason is StopReason.COMPLETE
    # codex sends the model the error's text; its own item says the call failed.
    assert tool_calls(one) == [("mcp__agentrt__explode", True)]
    (output,) = tool_outputs(failed)
    assert "explode raised RuntimeError: glossary offline: maintenance" in str(output["output"])
    assert two.text == "Still here." and two.session_id == one.session_id
    assert tool_calls(two) == [("mcp__agentrt__lookup", False)]
    assert "again: a greeting" in str(tool_outputs(resumed)[-1]["output"])


async def test_bad_arguments_give_an_error_result_naming_the_argument() -> None:
    script = [
        OpenAIReply.tool_search("glossary lookup"),
        OpenAIReply.mcp_call("agentrt", "lookup", {"word": "hi", "times": "twice"}),
        OpenAIReply.text("It failed."),
    ]
    async with open_fake_openai(script) as api:
        await run(api, [lookup], "Look it up twice.")
        answered = api.model_calls[2]

    (output,) = tool_outputs(answered)
    expected = "invalid arguments for lookup: argument `times`: Expected `int`, got `str`"
    assert expected in str(output["output"])
