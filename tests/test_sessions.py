"""Durable sessions on the mock clock: the session id survives interrupts, watchdogs and
crashes; state checkpoints; resume="auto" / False / id and the cwd rule; session_lost."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import attrs
import msgspec
import pytest
import trio
from _helpers import echo, echo_backend, settle
from proc_helpers import Watcher
from trio.testing import MockClock

from agentrt import (
    Agent,
    AgentStopped,
    Completed,
    ErrorEvent,
    Failed,
    InvalidOptions,
    MemoryStore,
    Ref,
    Response,
    SessionEvent,
    SessionMismatch,
    SQLiteStore,
    StopReason,
    StoreError,
    TurnFailed,
    open_runtime,
)
from agentrt.testing import Exit, Gate, ScriptedBackend, Sleep, fake_cli_executable, reply


class CrashOnce(Agent):
    crashed = False

    def handle_response(self, ref: Ref, response: Response) -> None:
        if "crash" in response.text and not CrashOnce.crashed:
            CrashOnce.crashed = True
            raise RuntimeError("boom")


async def test_the_session_id_survives_interrupt_watchdog_and_crash(
    autojump_clock: MockClock,
) -> None:
    CrashOnce.crashed = False
    gate = Gate()
    store = MemoryStore()
    backend = ScriptedBackend(
        [SessionEvent(session_id="s1"), gate],  # interrupted
        [SessionEvent(session_id="s2"), Sleep(100)],  # watchdog at 10 s
        reply("crash", session_id="s3"),  # handle_response crashes the agent
        default=echo,
    )
    async with open_runtime(store=store) as rt:
        await rt.start_agent(CrashOnce, name="a", backend=backend, watchdog=10)
        ref = await rt.tell("a", "one")
        await gate.wait_reached()
        await rt.interrupt("a")
        await rt.wait(ref)
        with pytest.raises(TurnFailed) as watchdog:
            await rt.ask("a", "two")
        assert watchdog.value.reason is StopReason.TOTAL_TIMEOUT
        assert watchdog.value.session_id == "s2"
        with pytest.raises(AgentStopped):
            await rt.ask("a", "three")
        record = await store.load("a")
        assert record is not None and record.session_id == "s3"
        assert (await rt.ask("a", "four")).text == "echo four"
        assert (await rt.status("a")).restarts == 1
    # Each turn resumed the id the previous one reported, whatever ended it.
    assert backend.session_ids == [None, "s1", "s2", "s3"]


@attrs.define
class Tally:
    turns: int = 0
    notes: list[str] = attrs.field(factory=list)


class Counter(Agent):
    state_type = Tally

    def __init__(self) -> None:
        self.tally = Tally()
        self.restored: list[Tally] = []

    def handle_response(self, ref: Ref, response: Response) -> None:
        self.tally.turns += 1
        if "crash" in response.text:
            raise RuntimeError("boom")

    def handle_event(self, event: Any) -> None:
        self.tally.notes.append(str(event))

    def checkpoint_state(self) -> Tally:
        return self.tally

    async def restore_state(self, state: Tally) -> None:
        await trio.lowlevel.checkpoint()
        self.restored.append(attrs.evolve(state, notes=list(state.notes)))
        self.tally = state


async def test_state_checkpoints_round_trip_through_a_restart(autojump_clock: MockClock) -> None:
    made: list[Counter] = []

    def factory() -> Counter:
        made.append(Counter())
        return made[-1]

    store = MemoryStore()
    async with open_runtime(store=store) as rt:
        await rt.start_agent(factory, name="a", backend=ScriptedBackend(default=echo))
        await rt.ask("a", "one")
        await rt.notify("a", "note")
        await settle()
        with pytest.raises(AgentStopped):
            await rt.ask("a", "crash")
        await trio.sleep(1)
        await rt.ask("a", "three")
    assert len(made) == 2
    # The crash came after handle_response counted, before the state was saved.
    assert made[1].restored == [Tally(1, ["note"])]
    assert made[1].tally == Tally(2, ["note"])
    record = await _load(store, "a")
    assert record.state is not None
    assert msgspec.json.decode(record.state) == {"turns": 2, "notes": ["note"]}


async def _load(store: MemoryStore, name: str) -> Any:
    async with store:
        record = await store.load(name)
    assert record is not None
    return record


async def test_state_and_session_survive_a_new_runtime_unless_started_fresh(
    autojump_clock: MockClock,
) -> None:
    store = MemoryStore()
    first = ScriptedBackend(reply("x", session_id="s1"))
    async with open_runtime(store=store) as rt:
        await rt.start_agent(Counter, name="a", backend=first)
        await rt.ask("a", "one")
    again = ScriptedBackend(default=echo)
    async with open_runtime(store=store) as rt:
        await rt.start_agent(Counter, name="a", backend=again)
        assert (await rt.status("a")).session_id == "s1"
        await rt.ask("a", "two")
    async with open_runtime(store=store) as rt:
        agent = Counter()
        await rt.start_agent(agent, name="a", backend=again, resume=False)
        assert agent.restored == []
        await rt.ask("a", "three")
    assert again.session_ids == ["s1", None]
    record = await _load(store, "a")
    assert (record.turns, msgspec.json.decode(record.state)["turns"]) == (3, 1)


async def test_state_that_cannot_be_encoded_crashes_the_agent(autojump_clock: MockClock) -> None:
    class Opaque(Agent):
        def checkpoint_state(self) -> Any:
            return object()

    async with open_runtime() as rt:
        await rt.start_agent(Opaque, name="a", backend=ScriptedBackend(default=echo))
        with pytest.raises(AgentStopped) as info:
            await rt.ask("a", "x")
        assert "checkpoint_state raised" in info.value.reason


async def test_stored_state_that_does_not_decode_is_refused_at_start(
    autojump_clock: MockClock,
) -> None:
    store = MemoryStore()
    async with store:
        await store.checkpoint_session("a", backend="scripted", session_id=None, cwd=None)
        await store.save_state("a", b'{"turns": "many"}')
    async with open_runtime(store=store) as rt:
        with pytest.raises(SessionMismatch, match="resume=False"):
            await rt.start_agent(Counter, name="a", backend=ScriptedBackend())
        await rt.start_agent(Counter, name="a", backend=ScriptedBackend(), resume=False)


# --- resume and the working directory ---


async def _first_session(store: MemoryStore, cwd: str) -> None:
    async with open_runtime(store=store) as rt:
        backend = ScriptedBackend(reply("x", session_id="s1"))
        await rt.start_agent(Agent, name="a", backend=backend, cwd=cwd)
        await rt.ask("a", "hello")


async def test_another_cwd_is_refused_unless_a_fresh_session_is_asked_for(
    tmp_path: Path, autojump_clock: MockClock
) -> None:
    store = MemoryStore()
    here, there = tmp_path / "here", tmp_path / "there"
    here.mkdir()
    there.mkdir()
    os.symlink(here, tmp_path / "link")
    await _first_session(store, str(here))
    backend = ScriptedBackend(default=echo)
    async with open_runtime(store=store) as rt:
        with pytest.raises(SessionMismatch) as info:
            await rt.start_agent(Agent, name="a", backend=backend, cwd=str(there))
        message = str(info.value)
        assert str(here) in message and str(there) in message
        assert "s1" in message and "resume=False" in message
        assert rt.agents() == ()
        # The same directory by another path is the same directory.
        await rt.start_agent(Agent, name="a", backend=backend, cwd=str(tmp_path / "link"))
        await rt.ask("a", "resumed")
        await rt.stop_agent("a")
        await rt.start_agent(Agent, name="a", backend=backend, cwd=str(there), resume=False)
        await rt.ask("a", "fresh")
    assert backend.session_ids == ["s1", None]
    record = await _load(store, "a")
    assert (record.session_id, record.cwd) == (None, str(there))


async def test_resume_takes_a_session_id_and_checks_the_backend(autojump_clock: MockClock) -> None:
    store = MemoryStore()
    await _first_session(store, os.getcwd())

    class Other(ScriptedBackend):
        name = "other"

    async with open_runtime(store=store) as rt:
        with pytest.raises(SessionMismatch, match="belongs to backend 'scripted'"):
            await rt.start_agent(Agent, name="a", backend=Other())
        forced = ScriptedBackend(default=echo)
        await rt.start_agent(Agent, name="a", backend=forced, resume="s-forced")
        await rt.ask("a", "x")
        assert forced.session_ids == ["s-forced"]
        for bad in ("", True, None, 3):
            with pytest.raises(InvalidOptions, match="resume"):
                await rt.start_agent(Agent, name="b", backend=forced, resume=bad)


async def test_a_name_being_started_is_taken(autojump_clock: MockClock) -> None:
    release = trio.Event()

    class Slow(Agent):
        async def init_agent(self, **options: Any) -> dict[str, Any]:
            await release.wait()
            return options

    async with open_runtime() as rt, trio.open_nursery() as nursery:
        nursery.start_soon(lambda: rt.start_agent(Slow, name="a", backend=ScriptedBackend()))
        await settle()
        with pytest.raises(Exception, match="already running"):
            await rt.start_agent(Agent, name="a", backend=ScriptedBackend())
        release.set()


async def test_the_default_store_is_sqlite_at_the_default_path(
    default_store: None, tmp_path: Path
) -> None:
    async with open_runtime() as rt:
        assert isinstance(rt.store, SQLiteStore)
        await rt.start_agent(Agent, name="a", backend=ScriptedBackend(reply("x", session_id="s")))
        await rt.ask("a", "x")
    path = tmp_path / "agentrt-store" / "sessions.sqlite3"
    async with SQLiteStore(path) as store:
        record = await store.load("a")
    assert record is not None and record.session_id == "s"


async def test_a_corrupt_default_store_is_named_at_open(
    default_store: None, tmp_path: Path
) -> None:
    path = tmp_path / "agentrt-store" / "sessions.sqlite3"
    path.parent.mkdir()
    path.write_bytes(b"this is not a database, " * 100)
    with pytest.raises(StoreError) as info:
        async with open_runtime():
            pass
    assert str(path) in str(info.value)
    assert path.read_bytes().startswith(b"this is not a database")


# --- session lost ---

LOST = ErrorEvent(
    reason=StopReason.SESSION_LOST,
    message="No conversation found with session ID: s1",
    session_id="s1",
)


class FreshWatcher(Watcher):
    on_session_lost = "fresh"


def lost_backend() -> ScriptedBackend:
    return ScriptedBackend(
        reply("first", session_id="s1"),
        [LOST, Exit(1)],
        reply("again", session_id="s2"),
        default=echo,
    )


async def test_session_lost_fails_the_turn_and_keeps_the_id_by_default(
    autojump_clock: MockClock,
) -> None:
    store = MemoryStore()
    backend = lost_backend()
    agent = Watcher()
    async with open_runtime(store=store) as rt:
        await rt.start_agent(agent, name="a", backend=backend)
        await rt.ask("a", "one")
        ref = await rt.tell("a", "two")
        stream = rt.stream(ref)
        kinds = [event.kind async for event in stream]
        result = await rt.wait(ref)
        assert kinds == ["session_lost", "error"]
        assert isinstance(result, Failed)
        error = result.error
        assert isinstance(error, TurnFailed) and error.reason is StopReason.SESSION_LOST
        assert error.session_id == "s1"
        assert (await rt.status("a")).session_id == "s1"
        await rt.ask("a", "three")  # runs on the kept id
    assert [e.kind for e in agent.events][-5:] == [
        "session_lost",
        "error",
        "session",
        "text",
        "result",
    ]
    assert [e.reason for e in agent.errors] == [StopReason.SESSION_LOST]
    assert backend.session_ids == [None, "s1", "s1"]


async def test_session_lost_names_the_ways_out_and_each_works(autojump_clock: MockClock) -> None:
    backend = lost_backend()
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(Watcher(), name="a", backend=backend)
        await rt.ask("a", "one")
        with pytest.raises(TurnFailed) as lost:
            await rt.ask("a", "two")
        message = lost.value.message
        assert message.startswith("No conversation found with session ID: s1. ")
        ways_out = ["rt.reset_session(name)", "resume=False", "--new", 'on_session_lost="fresh"']
        assert all(way in message for way in ways_out), message
        # Each is spelt as the API spells it: reset_session starts afresh...
        await rt.reset_session("a")
        assert (await rt.ask("a", "three")).session_id == "s2"
        # ...and start_agent takes resume=False and on_session_lost="fresh".
        await rt.stop_agent("a")
        await rt.start_agent(
            Watcher(), name="a", backend=echo_backend(), resume=False, on_session_lost="fresh"
        )
    usage = await trio.run_process(
        [sys.executable, "-m", "agentrt", "ask", "--help"], capture_stdout=True
    )
    assert b"--new" in usage.stdout


@pytest.mark.parametrize("how", ["class", "option"])
async def test_session_lost_fresh_retries_once_on_a_new_session(
    how: str, autojump_clock: MockClock
) -> None:
    store = MemoryStore()
    backend = lost_backend()
    agent = FreshWatcher() if how == "class" else Watcher()
    options = {"on_session_lost": "fresh"} if how == "option" else {}
    async with open_runtime(store=store) as rt:
        await rt.start_agent(agent, name="a", backend=backend, **options)
        await rt.ask("a", "one")
        ref = await rt.tell("a", "two")
        kinds = [event.kind async for event in rt.stream(ref)]
        result = await rt.wait(ref)
        assert kinds == ["session_lost", "session", "text", "result"]
        assert isinstance(result, Completed)
        response = result.response
        assert (response.text, response.session_id) == ("again", "s2")
        assert (await rt.status("a")).turns == 3
    assert agent.errors == []
    assert backend.session_ids == [None, "s1", None]
    assert backend.prompts == ["one", "two", "two"]
    record = await _load(store, "a")
    assert (record.session_id, record.turns, record.last_stop_reason) == ("s2", 3, "complete")


async def test_on_session_lost_is_validated() -> None:
    async with open_runtime() as rt:
        with pytest.raises(InvalidOptions, match="on_session_lost"):
            await rt.start_agent(Agent, name="a", backend=ScriptedBackend(), on_session_lost="x")


async def test_only_a_turn_that_started_records_the_agent_and_its_backend(
    tmp_path: Path,
) -> None:
    class Counting(Agent):
        state_type = int

        def checkpoint_state(self) -> int:
            return 7

    store = MemoryStore()
    async with open_runtime(store=store) as rt:
        missing = fake_cli_executable(str(tmp_path), ["answer"], name="codex")
        await rt.start_agent(Counting, name="bob", backend="codex", binary=missing, cwd="/")
        os.unlink(missing)  # gone by the turn: it cannot spawn
        with pytest.raises(TurnFailed) as failed:
            await rt.ask("bob", "hi")
        assert failed.value.reason is StopReason.SPAWN_FAILED
        await rt.reset_session("bob")
        assert await store.load("bob") is None  # no codex turn ran: nothing says codex
        await rt.stop_agent("bob")
        await rt.start_agent(
            Counting, name="bob", backend=ScriptedBackend(reply("ok", session_id="s1")), cwd="/"
        )
        await rt.ask("bob", "hi")
        record = await store.load("bob")
    assert record is not None
    assert (record.backend, record.session_id, record.turns, record.cwd) == (
        "scripted",
        "s1",
        1,
        "/",
    )
    assert record.state == b"7"
