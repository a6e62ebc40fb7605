"""The console of one node following a turn of the real claude another node runs, in
headless Chromium: the owner is a program of its own (tests/route_child.py, node-a) running
the pinned claude against the fake API; the console is this test's runtime (node-b) on the
same PostgreSQL. The turn's text shows on the agent page while its Bash still runs, and the
page's Interrupt, routed to the owner, ends it and every process of it. Over SQLite, with
the console a program of its own (``agentrt console --store FILE``): the owner killed
mid-turn is shown, its queued requests stay listed, and when its program starts again the
killed turn is in the history as ``owner_died`` and the queued requests run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import trio
from browser import open_browser, skip_without_browser
from proc_helpers import Program, kill_marked, marked, store_programs, wait_until

from agentrt import PostgresStore, open_console, open_runtime
from agentrt.testing import AnthropicReply, AnthropicText, AnthropicToolUse, RecordedRequest

from ._claude import MARKER_VAR, Claude

pytestmark = pytest.mark.realcli

CHILD = Path(__file__).parents[1] / "route_child.py"
CONSOLE = (sys.executable, "-m", "agentrt", "console")
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


def slow_then_answers(request: RecordedRequest) -> AnthropicReply:
    """The told turn ("wait a while"): a Bash that sleeps, then text with one that sleeps
    on (the page follows it while its owner is killed); any other prompt is answered."""
    content = request.messages[-1].get("content")
    prompt = request.texts("user")[-1]
    if prompt != "wait a while" and "tool_result" not in json.dumps(content):
        return AnthropicText(f"done: {prompt}")
    return script(request)


async def test_the_console_of_another_program_shows_the_owner_killed_mid_turn_over_sqlite(
    claude: Claude, tmp_path: Path
) -> None:
    """``agentrt console --store FILE``, a program of its own, follows a real claude turn
    of the owner program (route_child.py) on the same SQLite file; the owner is SIGKILLed
    mid-turn with two requests queued behind it. The page says the turn ended, why the
    agent cannot be reached and that its owner ended (not "in a turn"), and still lists
    the queued requests; once the owner's program starts again on the file, the turn that
    was running is in the history as ``owner_died`` and the queued requests run."""
    skip_without_browser()
    claude.api.set_script(slow_then_answers)
    store = tmp_path / "shared.sqlite3"
    options = tmp_path / "options.json"
    options.write_text(json.dumps(claude.agent_options(kill_grace=0.1, allowed_tools=["Bash"])))
    argv = [*CONSOLE, "--store", str(store), "--bind", "127.0.0.1:0"]
    async with store_programs(CHILD, str(store)) as start_program:
        owner = await start_program("node-a", "60", str(options))
        assert (await owner.line()).startswith("STARTED ")
        console = Program(await trio.lowlevel.open_process(argv, stdout=subprocess.PIPE))
        try:
            url = (await console.line(bound=TURN_BOUND)).rpartition(" ")[2]
            address = url.partition("/?")[0]
            async with open_browser() as browser:
                await browser.get(url)
                await browser.get(f"{address}/agent?name=x")
                await browser.wait_text("#agent-state", lambda t: t == "idle")
                await browser.type("#prompt", "wait a while")
                await browser.click("#do-tell")
                with trio.fail_after(TURN_BOUND):
                    while await browser.text("#live") != "Halfway there":  # noqa: ASYNC110
                        await trio.sleep(0.1)
                await wait_until((claude.project / "waiting.txt").exists, TURN_BOUND)
                for n in (1, 2):
                    await browser.type("#prompt", f"queued {n}")
                    await browser.click("#do-tell")
                    await browser.wait_text("#outcome", lambda t: t.startswith("tell done"))
                await browser.wait_text("#queue tbody", lambda t: t.count("queued ") == 2)
                await owner.kill()
                # The page says the turn ended, and why the agent cannot be reached.
                ended = await browser.wait_text("#events", lambda t: f"pid {owner.pid}" in t)
                assert "node 'node-a'" in ended, ended
                await browser.wait_text("#unreachable", lambda t: f"pid {owner.pid}" in t)
                # No turn shown running for ever; the queued work is still listed.
                await browser.wait_text("#agent-state", lambda t: t == "owner ended")
                facts = await browser.text("#facts")
                assert "current request\nnone" in facts, facts
                assert (await browser.text("#queue tbody")).count("queued ") == 2
                await browser.screenshot("agent-whose-claude-owner-was-killed")
                # The owner's program again: the dead turn ends owner_died, the queue runs.
                again = await start_program("node-a", "60", str(options))
                assert (await again.line(bound=TURN_BOUND)).startswith("STARTED ")
                await browser.wait_text("#agent-state", lambda t: t == "idle")
                history = await browser.wait_text(
                    "#history tbody", lambda t: t.count("done: queued") == 2
                )
                rows = history.splitlines()
                assert "done: queued 2" in rows[0] and "done: queued 1" in rows[1], rows
                assert "owner_died" in rows[2] and "owner died mid-turn" in rows[2], rows
                assert await browser.text("#queue tbody") == ""
                await browser.screenshot("agent-whose-claude-owner-came-back")
            await wait_until(lambda: not marked(MARKER_VAR, claude.marker), TURN_BOUND)
        finally:
            await console.kill()
            assert console.process.stdout is not None
            await console.process.stdout.aclose()
            await kill_marked(MARKER_VAR, claude.marker)
