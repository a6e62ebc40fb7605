"""The console in a real headless Chromium (tests/browser.py): the fleet page lists the
agents of two nodes sharing PostgreSQL and filters them, a running turn's text appears on
the agent page as it streams (another program's too, over SQLite, and its owner killed
mid-turn is shown), the page's Interrupt ends a turn, a stopped agent's page
says so and offers no action, a link to an agent's page with the token opens that page,
and a wrong or missing token gets nothing. Each page's screenshot lands in
build/console-screenshots/."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
import trio
from browser import Browser, open_browser, skip_without_browser
from proc_helpers import store_programs
from test_routing import CHILD as ROUTE_CHILD
from test_routing import start_owner

import agentrt
from agentrt import (
    Failed,
    MemoryStore,
    PostgresStore,
    SQLiteStore,
    StopReason,
    TextEvent,
    ToolUseEvent,
    open_console,
)
from agentrt.testing import Gate, ScriptedBackend, reply

BOUND = 60


@pytest.fixture(autouse=True)
def browser_available() -> None:
    skip_without_browser()


def gated(gate: Gate, first: str) -> ScriptedBackend:
    return ScriptedBackend(default=lambda call: [TextEvent(text=first), gate, *reply("done")])


async def test_the_fleet_page_lists_two_nodes_agents_on_postgres(postgres_dsn: str) -> None:
    async with (
        agentrt.open_runtime(store=PostgresStore(postgres_dsn), node="alpha") as alpha,
        agentrt.open_runtime(store=PostgresStore(postgres_dsn), node="beta") as beta,
        agentrt.open_runtime(store=PostgresStore(postgres_dsn), node="desk") as desk,
    ):
        for rt, name in ((alpha, "alpha-coder"), (alpha, "alpha-reviewer"), (beta, "beta-coder")):
            await rt.start_agent(agentrt.Agent, name=name, backend=ScriptedBackend(default=ok))
            await rt.ask(name, "hello")
        async with open_console(desk) as console, open_browser() as browser:
            await browser.get(console.url)
            table = await browser.wait_text(
                "#fleet tbody", lambda t: all(n in t for n in ("alpha-coder", "beta-coder"))
            )
            rows = {line.split()[0]: line.split() for line in table.splitlines()}
            assert rows["alpha-coder"][1] == "alpha" and rows["beta-coder"][1] == "beta"
            assert rows["alpha-reviewer"][1] == "alpha"
            assert "idle" in rows["beta-coder"]
            await browser.screenshot("fleet")
            await browser.run(lambda: _select(browser, "#f-node", "beta"))
            table = await browser.wait_text("#fleet tbody", lambda t: "alpha" not in t)
            assert table.split()[0] == "beta-coder"


async def test_a_running_turns_text_appears_live_and_interrupt_ends_it() -> None:
    gate = Gate()
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(agentrt.Agent, name="coder", backend=gated(gate, "Reading the repo"))
        async with open_console(rt) as console, open_browser() as browser:
            await browser.get(console.url)
            await browser.get(f"{console.address}/agent?name=coder")
            await browser.wait_text("#agent-state", lambda t: t == "idle")
            await browser.type("#prompt", "look around")
            await browser.click("#do-tell")
            await browser.wait_text("#live", lambda t: t == "Reading the repo")
            assert gate.reached
            current = (await rt.status("coder")).current
            assert current is not None
            await browser.screenshot("agent")
            await browser.click("#do-interrupt")
            await browser.wait_text("#outcome", lambda t: t == "interrupt done")
            with trio.fail_after(BOUND):
                result = await rt.wait(current.ref)
            assert isinstance(result, Failed)
            assert result.error.reason == StopReason.INTERRUPTED
            await browser.wait_text("#agent-state", lambda t: t == "idle")


async def test_another_programs_turn_on_sqlite_is_followed_and_interrupted(
    tmp_path: Path,
) -> None:
    """The console of this program over an SQLite file another program (route_child.py)
    runs agent "x" on: the page follows its turn live, and Interrupt reaches it."""
    path = tmp_path / "shared.sqlite3"
    async with store_programs(ROUTE_CHILD, str(path)) as start_program:
        program = await start_owner(start_program, "node-a")
        async with (
            agentrt.open_runtime(store=SQLiteStore(path), node="desk") as rt,
            open_console(rt) as console,
            open_browser() as browser,
        ):
            await browser.get(console.url)
            await browser.get(f"{console.address}/agent?name=x")
            await browser.wait_text("#agent-state", lambda t: t == "idle")
            await browser.type("#prompt", "chatty job")
            await browser.click("#do-tell")
            await browser.wait_text("#live", lambda t: "node-a working" in t)
            assert (await rt.status("x")).state == "processing"
            await browser.screenshot("agent-of-another-program")
            await browser.click("#do-interrupt")
            await browser.wait_text("#outcome", lambda t: t == "interrupt done")
            await browser.wait_text("#events", lambda t: "error | interrupted" in t)
            await browser.wait_text("#agent-state", lambda t: t == "idle")
            # The owner killed mid-turn: the page says its turn ended, and why.
            await browser.type("#prompt", "chatty job")
            await browser.click("#do-tell")
            # Killed only once the page reads the new turn: the first turn's text is still
            # on the page until the new one's starts, and a kill before the tell's answer
            # (or before the page's first read of the turn) has no turn to end on the page.
            told = await browser.wait_text("#outcome", lambda t: t.startswith("tell done"))
            ref = told.removeprefix("tell done (request ").removesuffix(")")
            await browser.wait_text("#turn-ref", lambda t: t == ref)
            await browser.wait_text("#live", lambda t: "node-a working" in t)
            await program.kill()
            ended = await browser.wait_text("#events", lambda t: f"pid {program.pid}" in t)
            assert "error | cancelled" in ended and "node 'node-a'" in ended
            # Its owner gone, the page says why the agent cannot be reached.
            await browser.wait_text("#unreachable", lambda t: f"pid {program.pid}" in t)
            await browser.screenshot("agent-whose-owner-was-killed")


async def test_a_running_turns_messages_are_shown_apart() -> None:
    gate = Gate()

    def two_messages(call: object) -> list[object]:
        # A message, a tool call, the next message still streaming.
        said = TextEvent(text="Counting.", message_boundary=True)
        tool = ToolUseEvent(id="t1", name="Bash", input={"command": "wc -w"})
        return [said, tool, TextEvent(text="Three "), TextEvent(text="words."), gate]

    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        backend = ScriptedBackend(default=two_messages)
        await rt.start_agent(agentrt.Agent, name="coder", backend=backend)
        async with open_console(rt) as console, open_browser() as browser:
            await browser.get(console.url)
            await browser.get(f"{console.address}/agent?name=coder")
            await browser.wait_text("#agent-state", lambda t: t == "idle")
            await browser.type("#prompt", "count the words")
            await browser.click("#do-tell")
            shown = await browser.wait_text("#live", lambda t: t.endswith("words."))
            assert shown == "Counting.\n\nThree words."
            gate.release()


async def test_the_history_and_its_charts_and_the_budget_are_on_the_pages(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.sqlite3")
    async with agentrt.open_runtime(store=store) as rt:
        backend = ScriptedBackend(default=ok)
        await rt.start_agent(agentrt.Agent, name="coder", backend=backend, budget_usd=3.0)
        for n in range(3):
            await rt.ask("coder", f"step {n}")
        async with open_console(rt) as console, open_browser() as browser:
            await browser.get(console.url)
            await browser.get(f"{console.address}/agent?name=coder")
            table = await browser.wait_text("#history tbody", lambda t: "step 0" in t)
            rows = table.splitlines()
            assert len(rows) == 3 and "step 2" in rows[0] and "step 0" in rows[2]  # newest first
            assert all("complete" in row and "fine" in row for row in rows)
            await browser.wait_text("#facts", lambda t: "budget left\n$3.0000" in t)
            budgets = "budgets\nagent 'coder': $3.0000 of $3.0000 left (binds)"
            await browser.wait_text("#facts", lambda t: budgets in t)
            lines = await browser.run(lambda: _count(browser, "#h-cost svg path.line"))
            bars = await browser.run(lambda: _count(browser, "#h-outcomes svg rect.bar"))
            assert (lines, bars) == (1, 1)
            await browser.screenshot("agent-history")
            await browser.get(f"{console.address}/")  # the fleet's lines come from the store
            await browser.wait_text("#chart-span", lambda t: "the fleet's last 3 turns" in t)
            # Every slot of the charts' grid holds a chart, drawn.
            assert await browser.run(lambda: _count(browser, ".charts > :not(figure)")) == 0
            drawn = ".charts figure svg > :is(path.line, rect.bar)"
            charts = await browser.run(lambda: _count(browser, drawn))
            assert charts == 4
            row = await browser.wait_text("#fleet tbody", lambda t: "coder" in t)
            assert row.endswith("$3.0000")  # the budget left


async def test_a_stopped_agents_page_says_so_and_offers_no_action() -> None:
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(agentrt.Agent, name="coder", backend=ScriptedBackend(default=ok))
        await rt.ask("coder", "hello")
        await rt.stop_agent("coder")
        async with open_console(rt) as console, open_browser() as browser:
            await browser.get(console.url)
            await browser.get(f"{console.address}/agent?name=coder")
            await browser.wait_text("#agent-state", lambda t: t == "stopped")
            why = await browser.wait_text("#unreachable", lambda t: t != "")
            assert why.startswith("No runtime runs this agent")
            assert await browser.run(lambda: _count(browser, "#unreachable.error")) == 0
            controls = ".actions button, .actions textarea"
            enabled = f"{controls.replace(',', ':enabled,')}:enabled"
            assert await browser.run(lambda: _count(browser, controls)) == 8
            assert await browser.run(lambda: _count(browser, enabled)) == 0
            await browser.screenshot("agent-stopped")
            # Started again, it is acted on again.
            await rt.start_agent(agentrt.Agent, name="coder", backend=ScriptedBackend(default=ok))
            await browser.wait_text("#agent-state", lambda t: t == "idle")
            assert await browser.run(lambda: _count(browser, enabled)) == 8
            assert await browser.text("#unreachable") == ""  # hidden


async def test_a_link_to_an_agents_page_with_the_token_opens_that_page() -> None:
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(agentrt.Agent, name="alpha", backend=ScriptedBackend(default=ok))
        async with open_console(rt) as console, open_browser() as browser:
            [token] = parse_qs(urlsplit(console.url).query)["token"]
            await browser.get(f"{console.address}/agent?name=alpha&token={token}")
            await browser.wait_text("#agent-state", lambda t: t == "idle")
            assert await browser.text("#agent-name") == "alpha"
            address = await browser.run(lambda: browser.driver.current_url)
            assert address == f"{console.address}/agent?name=alpha"  # the token moved out


async def test_a_typed_error_is_shown_on_the_page() -> None:
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(agentrt.Agent, name="coder", backend=ScriptedBackend(default=ok))
        async with open_console(rt) as console, open_browser() as browser:
            await browser.get(console.url)
            await browser.get(f"{console.address}/agent?name=coder")
            await browser.wait_text("#agent-state", lambda t: t == "idle")
            await browser.click("#do-ask")  # an empty prompt
            shown = await browser.wait_text("#outcome", lambda t: t.startswith("ValueError"))
            assert "prompt must not be empty" in shown


async def test_a_wrong_or_missing_token_gets_nothing() -> None:
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(agentrt.Agent, name="coder", backend=ScriptedBackend(default=ok))
        async with open_console(rt) as console, open_browser() as browser:
            for url in (f"{console.address}/", f"{console.address}/?token=wrong"):
                await browser.get(url)
                source = await browser.run(lambda: browser.driver.page_source)
                assert "coder" not in source and "Fleet" not in source
                assert "agentrt-csrf" not in source
            await browser.screenshot("no-token")


def ok(call: object) -> list[object]:
    return reply("fine")


def _count(browser: Browser, css: str) -> int:
    from selenium.webdriver.common.by import By

    return len(browser.driver.find_elements(By.CSS_SELECTOR, css))


def _select(browser: object, css: str, value: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    driver = browser.driver  # type: ignore[attr-defined]
    Select(driver.find_element(By.CSS_SELECTOR, css)).select_by_value(value)


async def test_queued_tells_are_listed_and_one_withdrawn_never_runs(tmp_path: Path) -> None:
    gate = Gate()
    backend = gated(gate, "Busy")
    async with agentrt.open_runtime(store=SQLiteStore(tmp_path / "s.sqlite3")) as rt:
        await rt.start_agent(agentrt.Agent, name="coder", backend=backend)
        running = await rt.tell("coder", "first")
        await gate.wait_reached()
        refs = [await rt.tell("coder", f"queued {n}", key=f"job-{n}") for n in range(3)]
        async with open_console(rt) as console, open_browser() as browser:
            await browser.get(console.url)
            await browser.get(f"{console.address}/agent?name=coder")
            listed = await browser.wait_text("#queue tbody", lambda t: t.count("queued ") == 3)
            assert [line.split()[1] for line in listed.splitlines()] == [
                "job-0",
                "job-1",
                "job-2",
            ]
            await browser.screenshot("queue")
            await browser.click(f'#queue tr[data-ref="{refs[1].id}"] button.withdraw')
            await browser.wait_text("#outcome", lambda t: t == f"request #{refs[1].id} withdrawn")
            listed = await browser.wait_text("#queue tbody", lambda t: t.count("queued ") == 2)
            assert "queued 1" not in listed
            gate.release()
            for ref in (running, refs[0], refs[2]):
                assert isinstance(await rt.wait(ref), agentrt.Completed)
    assert backend.prompts == ["first", "queued 0", "queued 2"]
