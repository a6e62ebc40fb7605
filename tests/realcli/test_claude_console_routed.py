"""The console of one node following a turn of the real claude another node runs, in
headless Chromium: the owner is a program of its own (tests/route_child.py, node-a) running
the pinned claude against the fake API; the console is this test's runtime (node-b) on the
same PostgreSQL. The turn's text shows on the agent page while its Bash still runs, and the
page's Interrupt, routed to the owner, ends it and every process of it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import trio
from browser import open_browser, skip_without_browser
from proc_helpers import kill_marked, marked, wait_until
from test_leases import Program

from agentrt import PostgresStore, open_console, open_runtime
from agentrt.testing import AnthropicReply, AnthropicToolUse, RecordedRequest

from ._claude import MARKER_VAR, Claude

pytestmark = pytest.mark.realcli

CHILD = Path(__file__).parents[1] / "route_child.py"
TURN_BOUND = 120


def script(request: RecordedRequest) -> AnthropicReply:
    # The text comes with the second tool call, once the page follows the turn.
    content = request.messages[-1].get("content")
    if not any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content or ()):
        return AnthropicToolUse("Bash", {"command": "sleep 1", "description": "Wait"})
    return AnthropicToolUse(
        "Bash",
        {"command": "touch waiting.txt && sleep 300", "description": "Wait"},
        text="Halfway there",
    )


async def test_a_console_on_another_node_shows_the_turn_live(
    claude: Claude, postgres_dsn: str, tmp_path: Path
) -> None:
    skip_without_browser()
    claude.api.set_script(script)
    options = tmp_path / "options.json"
    options.write_text(json.dumps(claude.agent_options(kill_grace=0.1, allowed_tools=["Bash"])))
    argv = [sys.executable, str(CHILD), postgres_dsn, "node-a", "60", str(options)]
    process = await trio.lowlevel.open_process(argv, stdout=subprocess.PIPE)
    owner = Program(process)
    try:
        assert (await owner.line()).startswith("STARTED ")
        async with (
            open_runtime(store=PostgresStore(postgres_dsn), node="node-b") as rt,
            open_console(rt) as console,
            open_browser() as browser,
        ):
            await browser.get(console.url)
            await browser.get(f"{console.address}/agent?name=x")
            await browser.wait_text("#agent-state", lambda t: t == "idle")
            await browser.type("#prompt", "wait a while")
            await browser.click("#do-tell")
            # The CLI's start and its first Bash come first: longer than a page's wait.
            with trio.fail_after(TURN_BOUND):
                while await browser.text("#live") != "Halfway there":  # noqa: ASYNC110
                    await trio.sleep(0.1)
            # Live: the turn still runs (its second Bash sleeps) on the other node.
            await wait_until((claude.project / "waiting.txt").exists, TURN_BOUND)
            assert (await rt.status("x")).state == "processing"
            assert marked(MARKER_VAR, claude.marker) != []
            await browser.wait_text("#events", lambda t: "waiting.txt" in t)
            await browser.screenshot("agent-routed")
            await browser.click("#do-interrupt")
            await browser.wait_text("#outcome", lambda t: t == "interrupt done")
            await browser.wait_text("#events", lambda t: "interrupted" in t)
            await wait_until(lambda: not marked(MARKER_VAR, claude.marker), TURN_BOUND)
            await browser.wait_text("#agent-state", lambda t: t == "idle")
    finally:
        await owner.kill()
        assert process.stdout is not None
        await process.stdout.aclose()
        await kill_marked(MARKER_VAR, claude.marker)
