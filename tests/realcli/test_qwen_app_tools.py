"""Application tools (`agentrt.tool`) called by the pinned real qwen against the fake API,
through the public API: the runtime serves them on its loopback MCP server, the backend
names that server in Qwen Code's settings (trusted, its token in the 0600 file), the model
calls the tool and what it returned is in the model's next request."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
import trio

from agentrt import Agent, MemoryStore, StopReason, open_runtime, tool
from agentrt.testing import AnthropicText, AnthropicToolUse

from ._qwen import Qwen

pytestmark = pytest.mark.realcli

BOUND = 90


class Entry(msgspec.Struct):
    word: str
    meaning: str


@tool
async def lookup(word: str) -> Entry:
    """Look a word up in the glossary."""
    await trio.lowlevel.checkpoint()
    return Entry(word, "a greeting")


LOOKUP = "mcp__agentrt__lookup"


async def ask_coder(qwen: Qwen, prompt: str) -> Any:
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(
            Agent, name="coder", backend="qwen", app_tools=[lookup], **qwen.agent_options()
        )
        with trio.fail_after(BOUND):
            return await rt.ask("coder", prompt)


async def test_a_deferred_tool_found_and_called_reaches_the_model(qwen: Qwen) -> None:
    # 0.24.4 defers MCP tools: named in a system reminder, reached through tool_search and
    # tool_call; trusted, the call needs no approval even headless.
    qwen.api.set_script(
        [
            AnthropicToolUse("tool_search", {"query": f"select:{LOOKUP}"}),
            AnthropicToolUse("tool_call", {"name": LOOKUP, "arguments": {"word": "hello"}}),
            AnthropicText("Done."),
        ]
    )
    response = await ask_coder(qwen, "What does hello mean?")
    assert response.stop_reason is StopReason.COMPLETE and response.text.endswith("Done.")
    first, searched, called = qwen.api.message_requests
    assert LOOKUP not in [t["name"] for t in first.body["tools"]]
    assert any(LOOKUP in text for text in first.texts())
    assert "Look a word up in the glossary." in str(searched.tool_results())
    (result,) = called.tool_results()
    assert msgspec.json.decode(result["content"]) == {"word": "hello", "meaning": "a greeting"}


async def test_a_direct_call_by_name_runs_too(qwen: Qwen) -> None:
    qwen.api.set_script(
        [AnthropicToolUse.mcp("agentrt", "lookup", {"word": "hello"}), AnthropicText("Done.")]
    )
    response = await ask_coder(qwen, "What does hello mean?")
    assert response.text.endswith("Done.")
    (result,) = qwen.api.message_requests[-1].tool_results()
    assert msgspec.json.decode(result["content"]) == {"word": "hello", "meaning": "a greeting"}
