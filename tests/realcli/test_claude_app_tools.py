"""Application tools (`agentrt.tool`) called by the pinned real ``claude`` against the fake
API, through the public API: the runtime serves them on its loopback MCP server, the CLI
finds them through its ToolSearch (2.1.332 defers MCP tools) and calls them, and what the
tool returned, raised or refused is in the model's next request."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import msgspec
import pytest
import trio

from agentrt import (
    Agent,
    MemoryStore,
    Response,
    StopReason,
    Tool,
    ToolResultEvent,
    open_runtime,
    tool,
)
from agentrt.testing import AnthropicText, AnthropicToolUse, RecordedRequest, open_fake_anthropic

from ._claude import Claude

pytestmark = pytest.mark.realcli

TURN_BOUND = 60
LOOKUP = "mcp__agentrt__lookup"


class Entry(msgspec.Struct):
    word: str
    meaning: str


@tool
async def lookup(word: str, times: int = 1) -> Entry:
    """Look a word up in the glossary."""
    await trio.lowlevel.checkpoint()  # a tool runs in the runtime's trio loop
    return Entry(word, " ".join(["a greeting"] * times))


@tool
async def explode(reason: str) -> str:
    """Always fails."""
    raise RuntimeError(f"glossary offline: {reason}")


class Librarian(Agent):
    """Its method tool counts the calls on the instance that serves the agent."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    @tool
    async def remember(self, note: str) -> str:
        """Remember a note."""
        self.calls.append(note)
        return f"noted ({len(self.calls)})"

    app_tools = (remember, lookup)


def calls(*replies: AnthropicToolUse, answer: str = "Done.") -> list[Any]:
    """Load the tools the replies call through ToolSearch, then call them, then answer."""
    names = [r.name for r in replies]
    return [AnthropicToolUse.tool_search(*names), *replies, AnthropicText(answer)]


async def ask_coder(
    claude: Claude, app_tools: list[Tool], *prompts: str, **options: Any
) -> list[Response]:
    """Start "coder" with these tools and ``claude.agent_options(**options)``; ask each
    prompt in turn."""
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(
            Agent,
            name="coder",
            backend="claude",
            app_tools=app_tools,
            **claude.agent_options(**options),
        )
        with trio.fail_after(TURN_BOUND):
            return [await rt.ask("coder", prompt) for prompt in prompts]


def only_result(request: RecordedRequest) -> Mapping[str, Any]:
    (result,) = request.tool_results()
    return result


def result_text(result: Mapping[str, Any]) -> str:
    content = result["content"]
    if isinstance(content, str):
        return content
    return "".join(block.get("text", "") for block in content)


async def test_a_tool_result_reaches_the_model(claude: Claude) -> None:
    claude.api.set_script(calls(AnthropicToolUse.mcp("agentrt", "lookup", {"word": "hello"})))
    (response,) = await ask_coder(claude, [lookup], "What does hello mean?")

    assert response.stop_reason is StopReason.COMPLETE and response.text.endswith("Done.")
    first, called, answered = claude.api.message_requests
    # The CLI offers the tool by name in a system text, not in `tools` (deferred).
    assert LOOKUP not in [t.get("name") for t in first.body["tools"]]
    assert any(LOOKUP in text for text in first.texts())
    # After ToolSearch the next request has the schema made from the hints.
    (schema,) = [t for t in called.body["tools"] if t["name"] == LOOKUP]
    assert schema["description"] == "Look a word up in the glossary."
    assert schema["input_schema"]["properties"]["word"] == {"type": "string"}
    assert schema["input_schema"]["required"] == ["word"]
    result = only_result(answered)
    assert not result.get("is_error")
    assert msgspec.json.decode(result_text(result)) == {"word": "hello", "meaning": "a greeting"}
    outcomes = [e for e in response.events if isinstance(e, ToolResultEvent)]
    assert [e.is_error for e in outcomes] == [False, False]


async def test_a_method_tool_runs_on_the_agent_instance(claude: Claude) -> None:
    claude.api.set_script(
        calls(
            AnthropicToolUse.mcp("agentrt", "remember", {"note": "one"}),
            AnthropicToolUse.mcp("agentrt", "remember", {"note": "two"}),
        )
    )
    agent = Librarian()
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(agent, name="librarian", backend="claude", **claude.agent_options())
        with trio.fail_after(TURN_BOUND):
            await rt.ask("librarian", "Remember two notes.")

    assert agent.calls == ["one", "two"]
    last = claude.api.message_requests[-1]
    assert result_text(only_result(last)) == "noted (2)"


async def failed_call_then_ask(
    claude: Claude, app_tool: Tool, call: AnthropicToolUse
) -> Mapping[str, Any]:
    """A turn whose one tool call fails, then a second turn on the same agent (checked to
    answer, on the same session); the tool result the model got."""
    claude.api.set_script([*calls(call), AnthropicText("Still here.")])
    one, two = await ask_coder(claude, [app_tool], "Use the glossary.", "Are you alive?")
    assert one.stop_reason is StopReason.COMPLETE
    assert two.text == "Still here." and two.session_id == one.session_id
    return only_result(claude.api.message_requests[2])


async def test_a_tool_that_raises_gives_an_error_result_and_the_agent_lives(
    claude: Claude,
) -> None:
    call = AnthropicToolUse.mcp("agentrt", "explode", {"reason": "maintenance"})
    result = await failed_call_then_ask(claude, explode, call)
    assert result["is_error"] is True
    assert "explode raised RuntimeError: glossary offline: maintenance" in result_text(result)


async def test_bad_arguments_give_an_error_result_naming_the_argument(claude: Claude) -> None:
    call = AnthropicToolUse.mcp("agentrt", "lookup", {"word": "hi", "times": "twice"})
    result = await failed_call_then_ask(claude, lookup, call)
    assert result["is_error"] is True
    expected = "invalid arguments for lookup: argument `times`: Expected `int`, got `str`"
    assert expected in result_text(result)


async def test_the_tools_are_reached_around_a_proxy(claude: Claude) -> None:
    """Claude Code sends even a loopback request to ``HTTP(S)_PROXY`` (measured: with a dead
    proxy the server "failed to connect"); the runtime adds the server's host to
    ``NO_PROXY``, so the token never reaches the proxy."""
    connections: list[object] = []

    async def proxy(stream: trio.SocketStream) -> None:
        connections.append(stream.socket.getpeername())
        await stream.aclose()

    script = calls(AnthropicToolUse.mcp("agentrt", "lookup", {"word": "hello"}))
    async with trio.open_nursery() as nursery, open_fake_anthropic(script, host="localhost") as api:
        serve = functools.partial(trio.serve_tcp, proxy, 0, host="127.0.0.1")
        (listener,) = await nursery.start(serve)
        address = f"http://127.0.0.1:{listener.socket.getsockname()[1]}"
        proxied = {name: address for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy")}
        # Only the fake API ("localhost") is bypassed as the environment says.
        env = {"ANTHROPIC_BASE_URL": api.base_url, "NO_PROXY": "localhost", "no_proxy": None}
        await ask_coder(claude, [lookup], "What does hello mean?", env={**env, **proxied})
        nursery.cancel_scope.cancel()

    result = only_result(api.message_requests[-1])
    assert not result.get("is_error") and "a greeting" in result_text(result)
    assert connections == []


async def test_without_built_in_tools_the_tools_are_offered_directly(claude: Claude) -> None:
    """``tools=[]`` leaves out ToolSearch too: the CLI then puts the MCP tools in ``tools``,
    and a model calls them without loading them first."""
    claude.api.set_script(
        [AnthropicToolUse.mcp("agentrt", "lookup", {"word": "hi"}), AnthropicText("Done.")]
    )
    await ask_coder(claude, [lookup], "What does hi mean?", tools=[])

    first, answered = claude.api.message_requests
    assert LOOKUP in [t["name"] for t in first.body["tools"]]
    assert "a greeting" in result_text(only_result(answered))


async def test_tools_on_a_warm_process_across_turns(claude: Claude) -> None:
    # Turn 1 loads the tool through ToolSearch and calls it; turn 2, on the same process,
    # calls it again (already loaded).
    first = AnthropicToolUse.mcp("agentrt", "remember", {"note": "one"})
    second = AnthropicToolUse.mcp("agentrt", "remember", {"note": "two"})
    claude.api.set_script([*calls(first), second, AnthropicText("Done again.")])
    agent = Librarian()
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(
            agent, name="librarian", backend="claude", keep_alive=60, **claude.agent_options()
        )
        with trio.fail_after(TURN_BOUND):
            await rt.ask("librarian", "Remember one.")
            pid = (await rt.status("librarian")).cli_pid
            again = await rt.ask("librarian", "Remember another.")
        assert pid is not None and (await rt.status("librarian")).cli_pid == pid
    assert agent.calls == ["one", "two"] and again.text.endswith("Done again.")
    assert result_text(only_result(claude.api.message_requests[-1])) == "noted (2)"
