"""Tier 3: every hang ends by a bound of its own, through ask with real processes. A CLI that
closes its output and lingers, one that prints its result and lingers, a grandchild that keeps
stdout open after the CLI exited, a line nested too deep to decode: each turn ends, the tree
is killed (the autouse fixture checks that nothing is left), and a printed result is kept.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
from cli_programs import init_frame, result_frame
from proc_helpers import IGNORE_INT, Watcher, child, running, wait_until

from agentrt import (
    Agent,
    Failed,
    RawEvent,
    Response,
    Runtime,
    StopReason,
    TurnFailed,
    open_runtime,
)
from agentrt.testing import fake_cli_executable

# Short graces keep these fast; each test sets the bound it is about.
FAST: dict[str, Any] = {"kill_grace": 0.2, "startup": 10, "watchdog": 30}
INIT = ["emit", init_frame()]


async def start(rt: Runtime, tmp_path: Path, *steps: Any, agent: Agent, **options: Any) -> None:
    binary = fake_cli_executable(str(tmp_path), *steps, name="claude")
    await rt.start_agent(agent, name="a", backend="claude", binary=binary, **{**FAST, **options})


async def timed_ask(rt: Runtime) -> tuple[Response | TurnFailed, float]:
    started = trio.current_time()
    with trio.fail_after(30):
        try:
            outcome: Response | TurnFailed = await rt.ask("a", "hi")
        except TurnFailed as error:
            outcome = error
    return outcome, trio.current_time() - started


# --- a CLI that closes its output and lingers ----------------------------------------------


async def test_a_cli_that_closes_its_output_and_lingers_is_ended_after_the_grace(
    tmp_path: Path,
) -> None:
    # The case (there with watchdog=3, idle=2): before, the ask never ended.
    agent = Watcher()
    async with open_runtime() as rt:
        await start(
            rt, tmp_path, INIT, ["close_output"], ["hang"], agent=agent, watchdog=60, idle=2
        )
        error, took = await timed_ask(rt)
    assert isinstance(error, TurnFailed)
    assert error.reason is StopReason.MALFORMED_OUTPUT
    assert "closed its output and did not exit within 0.2 s" in error.message
    assert error.session_id == init_frame()["session_id"]
    assert took < 8  # the grace and the ladder, before the watchdog


async def test_a_result_before_the_output_closed_is_kept(tmp_path: Path) -> None:
    agent = Watcher()
    async with open_runtime() as rt:
        await start(
            rt,
            tmp_path,
            INIT,
            ["emit", result_frame("done")],
            ["close_output"],
            ["hang"],
            agent=agent,
            watchdog=60,
        )
        response, took = await timed_ask(rt)
    assert isinstance(response, Response)
    assert response.text == "done"
    assert response.stop_reason is StopReason.COMPLETE
    assert took < 8


@pytest.mark.parametrize("how", ["watchdog", "interrupt", "stop_agent"])
async def test_every_bound_holds_while_a_closed_cli_lingers(tmp_path: Path, how: str) -> None:
    # The grace after EOF is long here (kill_grace=20): the watchdog, an interrupt and
    # stop_agent must each end the turn within it. The CLI ignores SIGINT, so the interrupt
    # escalates.
    agent = Watcher()
    options: dict[str, Any] = {"kill_grace": 20, "watchdog": 2 if how == "watchdog" else 30}
    # A lease long enough for that kill ladder (it must fit in half of lease_ttl).
    async with open_runtime(lease_ttl=90) as rt:
        await start(
            rt,
            tmp_path,
            IGNORE_INT,
            INIT,
            child(["hang"], setsid=True, stdout="null", stderr="null"),
            ["close_output"],
            ["hang"],
            agent=agent,
            **options,
        )
        ref = await rt.tell("a", "hi")
        await wait_until(lambda: bool(agent.spawned()), 5)
        [grandchild] = agent.spawned()
        started = trio.current_time()
        with trio.fail_after(10):
            if how == "interrupt":
                assert await rt.interrupt("a")
            if how == "stop_agent":
                await rt.stop_agent("a")
            else:
                outcome = await rt.wait(ref)
                assert isinstance(outcome, Failed) and isinstance(outcome.error, TurnFailed)
                expected = (
                    StopReason.INTERRUPTED if how == "interrupt" else StopReason.TOTAL_TIMEOUT
                )
                assert outcome.error.reason is expected
        took = trio.current_time() - started
    assert took < 8
    assert not running(grandchild)


# --- a CLI that prints its result and lingers ----------------------------------------------


async def test_after_result_bounds_a_cli_that_lingers_after_its_result(tmp_path: Path) -> None:
    agent = Watcher()
    async with open_runtime() as rt:
        await start(
            rt,
            tmp_path,
            INIT,
            child(["hang"], setsid=True, stdout="null", stderr="null"),
            ["emit", result_frame("the answer")],
            ["hang"],  # a thread, a background task: it never exits by itself
            agent=agent,
            after_result=0.5,
        )
        response, took = await timed_ask(rt)
    assert isinstance(response, Response)
    assert response.text == "the answer"
    assert response.stop_reason is StopReason.COMPLETE
    assert 0.5 <= took < 5
    [grandchild] = agent.spawned()
    assert not running(grandchild)


async def test_a_later_result_replaces_the_earlier_and_restarts_the_bound(tmp_path: Path) -> None:
    async with open_runtime() as rt:
        await start(
            rt,
            tmp_path,
            INIT,
            ["emit", result_frame("started the task")],
            ["sleep", 0.6],
            INIT,
            ["emit", result_frame("the task is done")],
            ["hang"],
            agent=Watcher(),
            after_result=1.0,
        )
        response, took = await timed_ask(rt)
    assert isinstance(response, Response)
    assert response.text == "the task is done"
    assert 1.6 <= took < 6


async def test_the_watchdog_after_a_result_keeps_the_result(tmp_path: Path) -> None:
    # Before, this failed as total_timeout and the answer was lost.
    async with open_runtime() as rt:
        await start(
            rt,
            tmp_path,
            INIT,
            ["emit", result_frame("the answer")],
            ["hang"],
            agent=Watcher(),
            watchdog=2,
        )
        response, took = await timed_ask(rt)
    assert isinstance(response, Response)
    assert response.text == "the answer"
    assert 2 <= took < 8


# --- a grandchild that keeps stdout open after the CLI exited ------------------------------


async def test_a_chatty_grandchild_holding_stdout_does_not_hold_the_turn(tmp_path: Path) -> None:
    # It writes a line every 0.1 s; before, each line renewed the drain after the exit and
    # the turn ran into its watchdog (and failed, losing the result).
    agent = Watcher()
    tick = [["emit", {"type": "tick"}], ["sleep", 0.1]]
    async with open_runtime() as rt:
        await start(
            rt,
            tmp_path,
            INIT,
            child(["repeat", 1000, tick], setsid=True, stderr="null"),
            ["emit", result_frame("the answer")],
            ["exit", 0],
            agent=agent,
            watchdog=60,
        )
        response, took = await timed_ask(rt)
    assert isinstance(response, Response)
    assert response.text == "the answer"
    assert took < 6  # the drain after the exit and the ladder, before the watchdog
    [grandchild] = agent.spawned()
    assert not running(grandchild)


# --- a line that cannot be decoded ---------------------------------------------------------


async def test_json_nested_too_deep_is_an_unreadable_line_and_the_result_after_it_counts(
    tmp_path: Path,
) -> None:
    deep = "[" * 10_000 + "]" * 10_000
    nested_object = '{"type": "assistant", "message": ' * 10_000 + "1" + "}" * 10_000
    agent = Watcher()
    async with open_runtime() as rt:
        await start(
            rt,
            tmp_path,
            INIT,
            ["write", deep + "\n"],
            ["write", nested_object + "\n"],
            ["emit", result_frame("the answer")],
            ["exit", 0],
            agent=agent,
        )
        response, _ = await timed_ask(rt)
    assert isinstance(response, Response)
    assert response.text == "the answer"
    notes = [e.note for e in agent.events if isinstance(e, RawEvent) and e.note]
    assert len(notes) == 2
    assert all(note.startswith("unreadable line (") for note in notes)
    # Only the start of an unreadable line is kept.
    assert all(len(e.data) <= 4096 for e in agent.events if isinstance(e, RawEvent) and e.note)
