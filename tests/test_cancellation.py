"""Cancelling an ask cancels its request; cancelling a wait leaves its tell alone."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio
from _helpers import Recorder, echo_backend
from cli_programs import SID, FakeClaude
from proc_helpers import turn_processes, wait_until
from trio.testing import MockClock

import agentrt
from agentrt import (
    Agent,
    Completed,
    Pending,
    SessionEvent,
    SQLiteStore,
    StopReason,
    open_runtime,
)
from agentrt.testing import Gate, reply


async def test_a_cancelled_queued_ask_never_runs(autojump_clock: MockClock) -> None:
    gate = Gate()
    backend = echo_backend([gate, *reply("first")])
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=backend, watchdog=None)
        ref = await rt.tell("a", "first")
        await gate.wait_reached()
        with trio.move_on_after(3):
            await rt.ask("a", "queued")
        assert (await rt.status("a")).queued == 0
        gate.release()
        assert isinstance(await rt.wait(ref), Completed)
        assert (await rt.ask("a", "next")).text == "echo next"
    assert backend.prompts == ["first", "next"]


async def test_an_ask_cancelled_before_its_turn_starts_spawns_nothing(
    autojump_clock: MockClock,
) -> None:
    entered = trio.Event()

    class Slow(Recorder):
        async def pre_turn(self, prompt: str) -> None:  # type: ignore[override]
            super().pre_turn(prompt)
            entered.set()
            await trio.sleep(10)

    agent = Slow()
    backend = echo_backend()
    async with open_runtime() as rt:
        await rt.start_agent(agent, name="a", backend=backend)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(rt.ask, "a", "never")
            await entered.wait()
            nursery.cancel_scope.cancel()
        # The caller did not wait for pre_turn: no turn was running yet.
        assert trio.current_time() == 0.0
        await trio.sleep(11)  # past pre_turn
        assert agent.only("error") == [StopReason.CANCELLED]
    assert backend.prompts == []


async def test_a_cancelled_running_ask_stops_its_turn_and_keeps_the_session(
    autojump_clock: MockClock,
) -> None:
    gate = Gate()
    agent = Recorder()
    script = [SessionEvent(session_id="s1"), gate, *reply("never")]
    backend = echo_backend(script)
    async with open_runtime() as rt:
        await rt.start_agent(agent, name="a", backend=backend, watchdog=None)
        with trio.move_on_after(5) as scope:
            await rt.ask("a", "long")
        assert scope.cancelled_caught
        # The turn ended before the cancellation reached the caller, at the cancel's time.
        assert trio.current_time() == 5.0
        assert (await rt.status("a")).state == "idle"
        assert (await rt.status("a")).session_id == "s1"
        record = await rt.store.load("a")
        assert record is not None
        assert (record.session_id, record.last_stop_reason) == ("s1", "cancelled")
        # The agent goes on, on the same session.
        assert (await rt.ask("a", "next")).text == "echo next"
    assert agent.only("error") == [StopReason.CANCELLED]
    assert backend.session_ids == [None, "s1"]


async def test_fail_after_around_a_module_level_ask_cancels_its_turn(
    autojump_clock: MockClock,
) -> None:
    gate = Gate()
    agent = Recorder()
    async with open_runtime():
        await agentrt.start_agent(agent, name="a", backend=echo_backend([gate]), watchdog=None)
        with pytest.raises(trio.TooSlowError):
            with trio.fail_after(2):
                await agentrt.ask("a", "long")
        assert trio.current_time() == 2.0
        assert (await agentrt.status("a")).state == "idle"
    assert agent.only("error") == [StopReason.CANCELLED]


async def test_an_ask_cancelled_while_waiting_for_a_process_slot_runs_nothing(
    autojump_clock: MockClock,
) -> None:
    gate = Gate()
    busy = echo_backend([gate, *reply("busy")])
    waiting = echo_backend()
    async with open_runtime(max_processes=1) as rt:
        await rt.start_agent(Agent, name="busy", backend=busy, watchdog=None)
        await rt.start_agent(Agent, name="waiting", backend=waiting)
        ref = await rt.tell("busy", "hold the slot")
        await gate.wait_reached()
        with trio.move_on_after(4):
            await rt.ask("waiting", "never")
        assert trio.current_time() == 4.0
        assert (await rt.status("waiting")).state == "idle"
        assert rt.statistics().turns_waiting == 0
        gate.release()
        assert isinstance(await rt.wait(ref), Completed)
    assert waiting.prompts == []


async def test_a_cancelled_wait_leaves_the_tell_running(autojump_clock: MockClock) -> None:
    gate = Gate()
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=echo_backend([gate, *reply("done")]))
        ref = await rt.tell("a", "job")
        with trio.move_on_after(3):
            await rt.wait(ref)
        assert await rt.poll(ref) == Pending()
        assert (await rt.status("a")).state == "processing"
        gate.release()
        result = await rt.wait(ref)
    assert isinstance(result, Completed) and result.response.text == "done"


async def test_the_cli_tree_is_gone_when_a_cancelled_ask_returns(tmp_path: Path) -> None:
    # The fake CLI reports its session, starts a tool in a new session and hangs.
    cli = FakeClaude(tmp_path / "cli")
    marker_prefix = f"{os.getpid()}."
    async with open_runtime(store=SQLiteStore(tmp_path / "s.sqlite3")) as rt:
        await rt.start_agent(
            Agent, name="coder", backend="claude", binary=cli.binary, kill_grace=0.3
        )
        async with trio.open_nursery() as nursery:
            cancel = trio.CancelScope()

            async def ask() -> None:
                with cancel:
                    await rt.ask("coder", "long job")

            nursery.start_soon(ask)
            # The CLI and its tool are both running.
            await wait_until(lambda: len(turn_processes(marker_prefix)) == 2, bound=20)
            cancel.cancel()
        # The ask has returned: nothing the turn started is still running.
        assert cancel.cancelled_caught
        assert turn_processes(marker_prefix) == []
        # The session was kept: the next turn resumes it.
        cli.answer("resumed")
        assert (await rt.ask("coder", "next")).text == "resumed"
        assert cli.resumed() == SID
        record = await rt.store.load("coder")
        assert record is not None
        assert record.turns == 2
