"""Durable requests through the runtime: `tell` and `ask` store a request before they
return, the agent's loop claims and settles it, a new owner adopts what a dead one left,
and callers re-attach by key, from this program or another one on the store."""

from __future__ import annotations

import logging
import os
import signal
import sqlite3
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
from proc_helpers import wait_for_status

from agentrt import (
    Agent,
    AgentNotFound,
    AgentStopped,
    Completed,
    ErrorEvent,
    Event,
    Failed,
    InvalidOptions,
    MemoryStore,
    NotFound,
    OwnerDied,
    Pending,
    PostgresStore,
    Ref,
    ResultEvent,
    SQLiteStore,
    StopReason,
    StoreError,
    TurnFailed,
    Withdrawn,
    open_runtime,
)
from agentrt.store import LeaseOwner
from agentrt.testing import Gate, ScriptedBackend, reply

CHILD = Path(__file__).parent / "durable_child.py"
AGENTS = ("a0", "a1", "a2")


def upper() -> ScriptedBackend:
    return ScriptedBackend(default=lambda call: reply(call.prompt.upper(), session_id="s"))


class _Lines:
    """A child program's stdout, read line by line."""

    def __init__(self, process: trio.Process) -> None:
        assert process.stdout is not None
        self._stream = process.stdout
        self._buffer = b""
        self.lines: list[str] = []

    async def until(self, line: str) -> list[str]:
        # Bounded, not timed: a loaded machine starts a child and fsyncs slowly.
        with trio.fail_after(300):
            while line not in self.lines:
                chunk = await self._stream.receive_some()
                assert chunk, f"the child ended before {line!r}: {self.lines[-5:]}"
                self._buffer += chunk
                *done, self._buffer = self._buffer.split(b"\n")
                self.lines += [part.decode() for part in done]
        return self.lines


async def _child(path: str, record: Path, policy: str, mode: str) -> trio.Process:
    argv = [sys.executable, str(CHILD), path, str(record), policy, mode]
    return await trio.lowlevel.open_process(argv, stdout=subprocess.PIPE)


async def _stop(process: trio.Process) -> None:
    if process.returncode is None:
        process.send_signal(signal.SIGKILL)
    await process.wait()


@pytest.mark.parametrize("policy", ["fail", "retry"])
async def test_a_sigkilled_owner_s_queue_runs_once_in_order_in_the_next_program(
    tmp_path: Path, policy: str
) -> None:
    """The issue's test: 3 agents, 50 keyed tells, the owner SIGKILLed mid-turn. The next
    program runs each of the 49 queued requests exactly once, in order per agent; the one
    that was running ends OwnerDied (or, with retry, runs once more on its session); a
    caller program that outlived the owner gets every answer by key."""
    await _sigkill_and_restart(str(tmp_path / "sessions.sqlite3"), tmp_path, policy)


async def test_the_same_on_postgresql(tmp_path: Path, postgres_dsn: str) -> None:
    await _sigkill_and_restart(postgres_dsn, tmp_path, "fail")


async def _sigkill_and_restart(path: str, tmp_path: Path, policy: str) -> None:
    record = tmp_path / "prompts.tsv"
    owner = await _child(path, record, policy, "fill")
    caller = nxt = None
    try:
        await _Lines(owner).until("READY")
        caller = await _child(path, record, policy, "caller")
        owner.send_signal(signal.SIGKILL)
        await owner.wait()
        nxt = await _child(path, record, policy, "run")
        await _Lines(nxt).until("DONE")
        results = await _Lines(caller).until("DONE")
        assert await nxt.wait() == 0
        assert await caller.wait() == 0
    finally:
        for process in (owner, caller, nxt):
            if process is not None:
                await _stop(process)
    seen = [line.split("\t") for line in record.read_text().splitlines()]
    # The dead owner ran p0 only; the next one ran each other prompt once (p0 again on
    # its session with retry), in the order it was told, per agent.
    assert seen[0] == ["a0", "p0", "None"]
    rest = seen[1:]
    assert Counter(prompt for _agent, prompt, _session in rest) == Counter(
        f"p{n}" for n in range(0 if policy == "retry" else 1, 50)
    )
    for agent in AGENTS:
        told = [int(p[1:]) for a, p, _s in rest if a == agent]
        assert told == sorted(told)
    if policy == "retry":
        assert rest[[p for _a, p, _s in rest].index("p0")] == ["a0", "p0", "sess-a0"]
    by_key = {line.split()[1]: line.split()[2:] for line in results if line.startswith("RESULT")}
    assert len(by_key) == 50
    for n in range(1, 50):
        assert by_key[f"job-{n}"] == ["complete", f"answer_to_p{n}", f"sess-a{n % 3}"]
    if policy == "retry":
        assert by_key["job-0"] == ["complete", "answer_to_p0", "sess-a0"]
    else:
        assert by_key["job-0"] == ["failed", "OwnerDied", "sess-a0"]


async def test_a_key_stores_and_starts_once_and_re_attaches_after_a_restart(
    tmp_path: Path,
) -> None:
    path = tmp_path / "sessions.sqlite3"
    backend = upper()
    async with open_runtime(store=SQLiteStore(path)) as rt:
        await rt.start_agent(Agent, name="a", backend=backend)
        first = await rt.tell("a", "one", key="job-1")
        assert await rt.tell("a", "one, again", key="job-1") == first
        assert await rt.request("a", "job-1") == first
        result = await rt.wait(first)
        assert isinstance(result, Completed) and result.response.text == "ONE"
        assert (await rt.ask("a", "two", key="job-2")).text == "TWO"
        # The key's first request answers: nothing new runs.
        assert (await rt.ask("a", "two, again", key="job-2")).text == "TWO"
        assert await rt.request("a", "job-3") is None
    assert backend.prompts == ["one", "two"]
    # Another program on the store, which runs no agent "a": the kept outcome, by key.
    async with open_runtime(store=SQLiteStore(path)) as rt:
        ref = await rt.request("a", "job-1")
        assert ref == first
        polled = await rt.poll(first)
        assert isinstance(polled, Completed) and polled.response.text == "ONE"
        waited = await rt.wait(first)
        assert isinstance(waited, Completed) and waited.response.session_id == "s"
        assert isinstance(await rt.poll(type(first)("a", 12345)), NotFound)


async def test_a_queued_request_survives_a_clean_close_and_a_withdrawn_one_does_not(
    tmp_path: Path,
) -> None:
    path = tmp_path / "sessions.sqlite3"
    gate = Gate()
    async with open_runtime(store=SQLiteStore(path)) as rt:
        held = ScriptedBackend([*reply("x", session_id="s")[:1], gate, *reply("x")[1:]])
        await rt.start_agent(Agent, name="a", backend=held)
        running = await rt.tell("a", "first")
        await gate.wait_reached()
        queued = await rt.tell("a", "second")
        dropped = await rt.tell("a", "third")
        assert await rt.withdraw(dropped)
        assert isinstance(await rt.poll(dropped), Withdrawn)
        assert isinstance(await rt.poll(queued), Pending)
        keyed = await rt.tell("a", "fourth", key="job-4")
        status = await rt.status("a")
        assert (status.queued, status.queued_keys) == (2, ("job-4",))
        assert status.oldest_queued is not None and status.oldest_queued >= 0
        assert await rt.withdraw(keyed)
    # The running request ended with the program (cancelled); the queued one waits for
    # the next owner, which runs it.
    backend = upper()
    async with open_runtime(store=SQLiteStore(path)) as rt:
        await rt.start_agent(Agent, name="a", backend=backend)
        result = await rt.wait(queued)
        assert isinstance(result, Completed) and result.response.text == "SECOND"
        assert isinstance(await rt.poll(dropped), Withdrawn)
        stopped = await rt.poll(running)
        assert isinstance(stopped, Failed)
    assert backend.prompts == ["second"]


async def _streamed(rt: Any, ref: Any) -> list[Event]:
    async with rt.stream(ref) as stream:
        return [event async for event in stream]


async def test_a_stream_re_attached_to_a_settled_request_gives_what_the_store_keeps(
    tmp_path: Path,
) -> None:
    """rt.stream on a ref found again by key, after its request settled: its answer as a
    ResultEvent (text, session id), from the program that ran it, from the next program
    while it owns the agent, and from one where no runtime runs it; a withdrawn request's
    stream says so in an ErrorEvent; a ref the store does not keep gives nothing."""
    path = tmp_path / "sessions.sqlite3"
    gate = Gate()
    async with open_runtime(store=SQLiteStore(path)) as rt:
        held = ScriptedBackend(
            [*reply("ONE", session_id="s")[:1], gate, *reply("ONE", session_id="s")[1:]]
        )
        await rt.start_agent(Agent, name="a", backend=held)
        done = await rt.tell("a", "one", key="job-1")
        await gate.wait_reached()
        dropped = await rt.tell("a", "two", key="job-2")
        assert await rt.withdraw(dropped)
        gate.release()
        assert isinstance(await rt.wait(done), Completed)
        [answer] = await _streamed(rt, await rt.request("a", "job-1"))
        assert isinstance(answer, ResultEvent)
        assert (answer.text, answer.session_id) == ("ONE", "s")
    for owner in (True, False):
        async with open_runtime(store=SQLiteStore(path)) as rt:
            if owner:
                await rt.start_agent(Agent, name="a", backend=upper())
            ref = await rt.request("a", "job-1")
            assert ref == done
            [answer] = await _streamed(rt, ref)
            assert isinstance(answer, ResultEvent) and answer.text == "ONE"
            [withdrawn] = await _streamed(rt, await rt.request("a", "job-2"))
            assert isinstance(withdrawn, ErrorEvent)
            assert withdrawn.reason is StopReason.CANCELLED and "withdrawn" in withdrawn.message
            unknown = type(done)("a", 12345)
            if owner:
                assert await _streamed(rt, unknown) == []
            else:  # neither a runtime nor the store knows it
                with pytest.raises(AgentNotFound):
                    await _streamed(rt, unknown)


async def test_a_key_on_a_store_that_keeps_no_requests_is_refused() -> None:
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(Agent, name="a", backend=upper())
        with pytest.raises(InvalidOptions) as refused:
            await rt.tell("a", "one", key="job-1")
        assert refused.value.key == "key" and "SQLiteStore" in refused.value.why
        with pytest.raises(InvalidOptions):
            await rt.request("a", "job-1")
        assert (await rt.ask("a", "one")).text == "ONE"


async def test_bad_durable_options_and_keys_are_refused(tmp_path: Path) -> None:
    async with open_runtime(store=SQLiteStore(tmp_path / "s.sqlite3")) as rt:
        with pytest.raises(InvalidOptions) as refused:
            await rt.start_agent(Agent, name="a", backend=upper(), on_owner_death="again")
        assert refused.value.key == "on_owner_death" and "'retry'" in refused.value.why
        with pytest.raises(InvalidOptions) as refused:
            await rt.start_agent(Agent, name="a", backend=upper(), result_ttl=-1)
        assert refused.value.key == "result_ttl"
        await rt.start_agent(Agent, name="a", backend=upper())
        with pytest.raises(InvalidOptions) as refused:
            await rt.tell("a", "one", key="")
        assert refused.value.key == "key"


class _CountingStore(SQLiteStore):
    """Counts the store calls that changed a row (each is one transaction)."""

    writes = 0

    async def _call(self, work: Any, *, fence: str | None = None, atomic: bool = False) -> Any:
        def counted(conn: sqlite3.Connection) -> Any:
            before = conn.total_changes
            try:
                return work(conn)
            finally:
                if conn.total_changes != before:
                    type(self).writes += 1

        return await super()._call(counted, fence=fence, atomic=atomic)


@pytest.mark.parametrize("turn_history", [1000, 0])
async def test_a_request_costs_one_write_beyond_its_turn_s_record(
    tmp_path: Path, turn_history: int
) -> None:
    """An ask of an agent waiting for work is stored started, in one write (not an
    accept and a claim); the outcome is written with the turn's record, whether turn
    history is kept or not: 2 in all for a scripted turn, whose record is the one write
    it made before requests were kept. Each turn is counted in the session row either
    way, and entered in the history only where it is kept."""
    _CountingStore.writes = 0
    async with open_runtime(store=_CountingStore(tmp_path / "s.sqlite3")) as rt:
        await rt.start_agent(Agent, name="a", backend=upper(), turn_history=turn_history)
        await rt.ask("a", "warm up")  # the first turn writes the session's row too
        before = _CountingStore.writes
        for n in range(10):
            await rt.ask("a", f"p{n}")
        assert (_CountingStore.writes - before) / 10 == 2
        history = rt.store_capabilities.turn_history
        assert history is not None
        entries = await history.turn_history("a", limit=20)
        assert len(entries) == (11 if turn_history else 0)
    async with _CountingStore(tmp_path / "s.sqlite3") as store:
        record = await store.load("a")
    assert record is not None and record.turns == 11


class _HeldStart(SQLiteStore):
    """Holds each start_request's answer, once it is written, until ``go`` is set."""

    written: trio.Event | None = None
    go: trio.Event | None = None

    async def start_request(self, name: str, **kwargs: Any) -> str | None:
        id = await super().start_request(name, **kwargs)
        if self.written is not None and self.go is not None:
            self.written.set()
            await self.go.wait()
        return id


async def test_a_request_started_as_it_was_stored_waits_unstarted_if_the_agent_halted(
    tmp_path: Path,
) -> None:
    """A tell to an agent waiting for work is stored started; when the agent halts before
    the write returns, the request goes back to the store's queue unstarted, and runs once,
    claimed then, after the agent is unhalted."""
    path = tmp_path / "sessions.sqlite3"
    store, backend = _HeldStart(path), upper()
    async with open_runtime(store=store) as rt:
        await rt.start_agent(Agent, name="a", backend=backend)
        assert (await rt.ask("a", "warm up")).text == "WARM UP"
        store.written, store.go = trio.Event(), trio.Event()
        refs = []
        async with trio.open_nursery() as nursery:

            async def tell() -> None:
                refs.append(await rt.tell("a", "later"))

            nursery.start_soon(tell)
            await store.written.wait()
            await rt.halt("a")
            store.go.set()
        [ref] = refs
        [queued] = await store.queued_requests("a")
        assert (queued.id, queued.attempts, queued.epoch) == (str(ref.id), 0, None)
        assert isinstance(await rt.poll(ref), Pending)
        assert (await rt.status("a")).queued == 1
        await rt.unhalt("a")
        result = await rt.wait(ref)
        assert isinstance(result, Completed) and result.response.text == "LATER"
        ran = await store.find_request("a", id=str(ref.id))
        assert ran is not None and (ran.state, ran.attempts) == ("settled", 1)
    assert backend.prompts == ["warm up", "later"]


async def test_tells_at_once_to_a_waiting_agent_each_run_once_in_the_store_s_order(
    tmp_path: Path,
) -> None:
    """Of tells racing to an agent waiting for work, one is stored started, the rest
    queued behind it: each runs once, in the order the store accepted them."""
    path = tmp_path / "sessions.sqlite3"
    backend = upper()
    async with open_runtime(store=SQLiteStore(path)) as rt:
        await rt.start_agent(Agent, name="a", backend=backend)
        refs = {}
        async with trio.open_nursery() as nursery:
            for n in range(6):

                async def tell(prompt: str) -> None:
                    refs[await rt.tell("a", prompt)] = prompt

                nursery.start_soon(tell, f"p{n}")
        for ref in refs:
            assert isinstance(await rt.wait(ref), Completed)
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("SELECT id, attempts, outcome FROM requests ORDER BY seq").fetchall()
    finally:
        conn.close()
    prompts = {str(ref.id): prompt for ref, prompt in refs.items()}
    assert [row[1:] for row in rows] == [(1, "complete")] * 6
    assert backend.prompts == [prompts[row[0]] for row in rows]


async def test_an_answer_whose_owner_lost_the_lease_mid_turn_is_the_store_s_outcome(
    tmp_path: Path,
) -> None:
    """The owner's lease passes to another program while the turn runs (a frozen owner,
    found dead), which ends the request OwnerDied. The old owner's answer is refused by
    the store, and its own caller is told OwnerDied too, as every program reading the
    store is: one outcome per request."""
    path = tmp_path / "sessions.sqlite3"
    gate = Gate()
    held = ScriptedBackend([*reply("x", session_id="s")[:1], gate, *reply("x", session_id="s")[1:]])
    async with open_runtime(store=SQLiteStore(path), lease_ttl=600) as rt:
        await rt.start_agent(Agent, name="a", backend=held)
        async with trio.open_nursery() as nursery:

            async def ask() -> None:
                with pytest.raises(OwnerDied) as died:
                    await rt.ask("a", "p", key="job-1")
                assert died.value.session_id == "s"

            nursery.start_soon(ask)
            await gate.wait_reached()
            async with SQLiteStore(path) as other:
                [lease] = [lease for lease in await other.leases() if lease.name == "a"]
                owner = LeaseOwner(node="other", pid=1, start_time=1, runtime_id="other")
                await other.acquire_lease("a", owner, ttl=600, replacing=lease.epoch)
                [ended] = await other.end_orphaned_requests("a", retry=False, result_ttl=60)
                assert ended.outcome is not None and ended.outcome.outcome == "owner_died"
            gate.release()
        ref = await rt.request("a", "job-1")
        assert ref is not None
        result = await rt.poll(ref)
        assert isinstance(result, Failed) and isinstance(result.error, OwnerDied)


async def test_an_owner_dead_before_its_first_turn_wrote_the_row_is_in_the_history(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An agent's first request was stored started, and its owner died before its turn
    wrote the session row (as in a cross-host chaos run: a host killed between accepting a
    new agent's first request and its CLI naming a session). The next owner ends the
    request OwnerDied and enters that in the turn history, writing the row the dead
    owner's turn owed: no error, and nothing answered was lost (the turn named no session,
    so it had reported nothing)."""
    await _dead_before_the_row(lambda: SQLiteStore(tmp_path / "s.sqlite3"), caplog)


async def test_the_same_dead_owner_on_postgresql(
    postgres_dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    await _dead_before_the_row(lambda: PostgresStore(postgres_dsn), caplog)


async def _dead_before_the_row(
    store_of: Callable[[], SQLiteStore | PostgresStore], caplog: pytest.LogCaptureFixture
) -> None:
    # A runtime of this node whose process is gone (its start time is not this one's).
    dead = LeaseOwner(node="here", pid=os.getpid(), start_time=1, runtime_id="here:dead")
    async with store_of() as store:
        await store.acquire_lease("a", dead, ttl=600)
        started = await store.start_request("a", id="7", prompt="p", key="job-7", origin="tell")
        assert started == "7" and await store.load("a") is None
    backend = upper()
    async with open_runtime(store=store_of(), node="here") as rt:
        await rt.start_agent(Agent, name="a", backend=backend)
        result = await rt.poll(Ref("a", 7))
        assert isinstance(result, Failed) and isinstance(result.error, OwnerDied)
        history = rt.store_capabilities.turn_history
        assert history is not None
        [died] = await history.turn_history("a", limit=10)
        assert (died.outcome, died.node) == ("owner_died", "here")
        assert died.answer is not None and died.answer.startswith("owner died mid-turn")
        assert (await rt.ask("a", "next")).text == "NEXT"
        assert [turn.outcome for turn in await history.turn_history("a", limit=10)] == [
            "complete",
            "owner_died",
        ]
    assert backend.prompts == ["next"]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_a_stopped_agent_s_queue_is_withdrawn_in_the_store(tmp_path: Path) -> None:
    """stop_agent fails the queued requests (AgentStopped) and withdraws them in the store:
    the next owner of the name does not run what its callers were told has stopped."""
    path = tmp_path / "sessions.sqlite3"
    gate = Gate()
    async with open_runtime(store=SQLiteStore(path)) as rt:
        held = ScriptedBackend([*reply("x", session_id="s")[:1], gate, *reply("x")[1:]])
        await rt.start_agent(Agent, name="a", backend=held)
        await rt.tell("a", "first")
        await gate.wait_reached()
        queued = await rt.tell("a", "second", key="job-2")
        asked = await rt.tell("a", "an ask's turn")
        async with trio.open_nursery() as nursery:

            async def ask() -> None:
                with pytest.raises(AgentStopped):
                    await rt.ask("a", "asked")

            nursery.start_soon(ask)
            await wait_for_status(rt, "a", lambda status: status.queued == 3)
            await rt.stop_agent("a")
        # Gone from here: the store's word, read from it.
        assert isinstance(await rt.poll(queued), Withdrawn)
        assert isinstance(await rt.poll(asked), Withdrawn)
    backend = upper()
    async with open_runtime(store=SQLiteStore(path)) as rt:
        await rt.start_agent(Agent, name="a", backend=backend)
        assert isinstance(await rt.wait(queued), Withdrawn)
        assert (await rt.ask("a", "third")).text == "THIRD"
    assert backend.prompts == ["third"]


async def test_a_secret_in_a_queued_prompt_or_an_answer_never_reaches_the_store(
    tmp_path: Path,
) -> None:
    """This program runs its prompt as given; the store keeps it, and the answer,
    redacted, so a later owner runs the redacted prompt."""
    secret = "sk-ant-api03-" + "z" * 40
    path = tmp_path / "sessions.sqlite3"
    gate = Gate()
    echo = ScriptedBackend(default=lambda call: reply(f"echo {call.prompt}", session_id="s"))
    async with open_runtime(store=SQLiteStore(path)) as rt:
        held = ScriptedBackend([*reply("x", session_id="s")[:1], gate, *reply("x")[1:]])
        await rt.start_agent(Agent, name="a", backend=held)
        await rt.tell("a", "first")
        await gate.wait_reached()
        queued = await rt.tell("a", f"use {secret} later")
    assert secret.encode() not in path.read_bytes()
    async with open_runtime(store=SQLiteStore(path)) as rt:
        await rt.start_agent(Agent, name="a", backend=echo)
        result = await rt.wait(queued)
        assert isinstance(result, Completed)
        assert result.response.text == "echo use [REDACTED] later"
        assert (await rt.ask("a", f"now {secret}")).text == f"echo now {secret}"
    assert echo.prompts == ["use [REDACTED] later", f"now {secret}"]
    assert secret.encode() not in path.read_bytes()


class _RefusedRow:
    """Refuses the next ``refusals`` writes of the session row (the database down)."""

    refusals = 0

    async def checkpoint_session(self, name: str, **kwargs: Any) -> None:
        if self.refusals:
            self.refusals -= 1
            raise StoreError("<refusing>", "database is down")
        await super().checkpoint_session(name, **kwargs)  # type: ignore[misc]


class _RefusedSQLite(_RefusedRow, SQLiteStore):
    pass


class _RefusedPostgres(_RefusedRow, PostgresStore):
    pass


@pytest.mark.parametrize("session_id", ["s", None])
async def test_a_claim_the_store_refused_is_made_again_and_its_request_settles(
    tmp_path: Path, session_id: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    """A new agent's first turn starts while the store refuses the write of its session
    row: the claim, and the checkpoint of the session the CLI names, which fails the turn
    (store_failed). The row is not taken as written: the turn's record claims it again,
    so the request settles with that failure where every program reads it (not left
    running until its owner changes), and later turns are recorded and settled too. The
    same with a turn that names no session, whose only write of the row is the claim."""
    path = tmp_path / "s.sqlite3"
    await _refused_claim(lambda: _RefusedSQLite(path), session_id, caplog)


async def test_the_same_refused_claim_on_postgresql(
    postgres_dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    await _refused_claim(lambda: _RefusedPostgres(postgres_dsn), "s", caplog)


async def _refused_claim(
    store_of: Callable[[], _RefusedSQLite | _RefusedPostgres],
    session_id: str | None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = store_of()
    backend = ScriptedBackend(
        default=lambda call: reply(call.prompt.upper(), session_id=session_id)
    )
    async with open_runtime(store=store) as rt:
        await rt.start_agent(Agent, name="a", backend=backend)
        store.refusals = 1 if session_id is None else 2
        first = await rt.tell("a", "one", key="job-1")
        result = await rt.wait(first)
        if session_id is None:
            assert isinstance(result, Completed) and result.response.text == "ONE"
        else:
            assert isinstance(result, Failed) and isinstance(result.error, TurnFailed)
            assert result.error.reason is StopReason.STORE_FAILED
        assert (await rt.ask("a", "two", key="job-2")).text == "TWO"
        async with store_of() as other:  # what another program reads
            one = await other.find_request("a", key="job-1")
            two = await other.find_request("a", key="job-2")
            record = await other.load("a")
    assert store.refusals == 0
    assert one is not None and one.state == "settled" and one.outcome is not None
    assert one.outcome.outcome == ("complete" if session_id is None else "store_failed")
    assert two is not None and two.state == "settled" and two.outcome is not None
    assert (two.outcome.outcome, two.outcome.answer) == ("complete", "TWO")
    assert record is not None and (record.session_id, record.turns) == (session_id, 2)
    assert backend.prompts == ["one", "two"]
    assert "could not record the agent" in caplog.text
    assert "could not settle a request" not in caplog.text


class _SettlementFails(SQLiteStore):
    """Fails the next ``failures`` settlements as a database that went down under them
    does: before their write, or (``landed``) after it."""

    failures = 0
    landed = False

    async def settle_request(self, name: str, id: str, outcome: Any, **kwargs: Any) -> bool:
        if not self.failures:
            return await super().settle_request(name, id, outcome, **kwargs)
        self.failures -= 1
        if self.landed:
            await super().settle_request(name, id, outcome, **kwargs)
        raise StoreError("<failing>", "the connection broke: this call may have been made")


@pytest.mark.parametrize("landed", [False, True])
async def test_a_settlement_the_store_failed_is_what_every_caller_reads(
    tmp_path: Path, landed: bool
) -> None:
    """The store fails a turn's settlement, which may or may not have been written: the
    owner asks the store until it answers and settles the request again where it still
    runs, so its caller's answer is the one every other program reads (not an answer the
    store lacks, its request left running until the name's next owner ends it
    owner_died), and the turn is recorded once."""
    path = tmp_path / "s.sqlite3"
    store = _SettlementFails(path)
    async with open_runtime(store=store) as rt:
        await rt.start_agent(Agent, name="a", backend=upper())
        store.failures, store.landed = 2, landed
        assert (await rt.ask("a", "one", key="job-1")).text == "ONE"
        async with SQLiteStore(path) as other:  # what another program reads
            stored = await other.find_request("a", key="job-1")
            record = await other.load("a")
        assert stored is not None and stored.outcome is not None
        assert (stored.state, stored.outcome.answer) == ("settled", "ONE")
        assert record is not None and record.turns == 1
        assert store.failures == (1 if landed else 0)  # made again only where not made
