"""The operator console in headless Chromium over the pinned real claude: a Bash call the
agent hands to a person (`AskOperator`) runs when Allow is clicked in the page, and does
not when Deny is (the model reads the message); Interrupt in the page ends a turn whose
Bash is running, and every process of it is gone."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from browser import open_browser, skip_without_browser
from proc_helpers import marked, wait_until

from agentrt import (
    Agent,
    AskOperator,
    Completed,
    Failed,
    MemoryStore,
    StopReason,
    ToolDecisionEvent,
    ToolRequest,
    open_console,
    open_runtime,
)
from agentrt.testing import AnthropicReply, AnthropicText, AnthropicToolUse, RecordedRequest

from ._claude import MARKER_VAR, Claude

pytestmark = pytest.mark.realcli

TURN_BOUND = 120


@pytest.fixture(autouse=True)
def browser_available() -> None:
    skip_without_browser()


def script_for(command: str) -> Any:
    def script(request: RecordedRequest) -> AnthropicReply:
        content = request.messages[-1].get("content")
        results = [
            b
            for b in (content if isinstance(content, list) else [])
            if isinstance(b, dict) and b.get("type") == "tool_result"
        ]
        if not results:
            return AnthropicToolUse("Bash", {"command": command, "description": "Touch"})
        return AnthropicText(f"tool said: {results[0].get('content')}")

    return script


class AsksAPerson(Agent):
    def approve_tool(self, request: ToolRequest) -> AskOperator:
        return AskOperator(reason=f"{request.tool_name} changes the project")


@pytest.mark.parametrize("allow", [True, False], ids=["allow", "deny"])
async def test_an_approval_answered_in_the_browser(claude: Claude, allow: bool) -> None:
    claude.api.set_script(script_for("touch original.txt"))
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(
            AsksAPerson,
            name="coder",
            backend="claude",
            **claude.agent_options(approval_timeout=TURN_BOUND),
        )
        async with open_console(rt) as console, open_browser() as browser:
            await browser.get(console.url)
            ref = await rt.tell("coder", "make the file")
            card = await browser.wait_text(".approval", lambda t: "Bash" in t)
            assert "coder" in card and "original.txt" in card and "s left" in card
            assert "Bash changes the project" in card
            await browser.screenshot("approval")
            if allow:
                await browser.click(".approval button.allow")
            else:
                await browser.type(".approval input.message", "not on this branch")
                await browser.click(".approval button.deny")
            with trio.fail_after(TURN_BOUND):
                settled = await rt.wait(ref)
            await browser.wait_text("#approvals", lambda t: "Bash" not in t)
    assert isinstance(settled, Completed)
    [decision] = [e for e in settled.response.events if isinstance(e, ToolDecisionEvent)]
    assert (decision.allowed, decision.decided_by) == (allow, "console")
    assert (claude.project / "original.txt").exists() == allow
    if not allow:
        assert "not on this branch" in claude.api.message_requests[-1].texts()
        assert settled.response.text == "tool said: not on this branch"


async def test_interrupt_in_the_page_ends_the_turn_and_its_processes(claude: Claude) -> None:
    claude.api.set_script(script_for("touch original.txt && sleep 300"))
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(
            Agent, name="coder", backend="claude", **claude.agent_options(allowed_tools=["Bash"])
        )
        async with open_console(rt) as console, open_browser() as browser:
            await browser.get(console.url)
            await browser.get(f"{console.address}/agent?name=coder")
            await browser.type("#prompt", "make the file, then wait")
            await browser.click("#do-tell")
            # The Bash tool runs: the file it made is what shows it.
            await wait_until((claude.project / "original.txt").exists, TURN_BOUND)
            assert marked(MARKER_VAR, claude.marker) != []
            await browser.wait_text("#events", lambda t: "tool_use" in t)
            current = (await rt.status("coder")).current
            assert current is not None
            await browser.click("#do-interrupt")
            await browser.wait_text("#outcome", lambda t: t == "interrupt done")
            with trio.fail_after(TURN_BOUND):
                settled = await rt.wait(current.ref)
            assert isinstance(settled, Failed)
            assert settled.error.reason is StopReason.INTERRUPTED
            assert marked(MARKER_VAR, claude.marker) == []
            text = await browser.wait_text("#events", lambda t: "interrupted" in t)
            assert "error" in text
