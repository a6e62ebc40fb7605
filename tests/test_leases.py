"""Leases: which runtime owns an agent name. The runtime's renewals and fence under a
MockClock, and programs of their own sharing a store. What every store's lease operations
and fencing must do (two handles, the state machine) is the conformance kit's
(tests/test_store_conformance.py); SQLite's boot clock is here."""

from __future__ import annotations

import os
import signal
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from pathlib import Path
from typing import TypeVar

import attrs
import pytest
import trio
import trio.testing
from _helpers import echo_backend, settle
from cli_programs import SID, FakeClaude, init_frame
from proc_helpers import Program, store_programs, turn_processes, wait_for_status, wait_until

import agentrt
from agentrt import (
    Agent,
    AgentAlreadyStarted,
    AgentStopped,
    InvalidOptions,
    LeaseOwner,
    MemoryStore,
    SessionStore,
    SQLiteStore,
    StoreError,
    TurnFailed,
    open_runtime,
)
from agentrt.testing import Exit, Gate, fake_cli_executable

T = TypeVar("T")


class LeaseClock:
    """The store's lease clock, moved by hand."""

    def __init__(self) -> None:
        self.now = 500.0

    def __call__(self) -> float:
        return self.now


def owner(node: str, pid: int = 4242) -> LeaseOwner:
    return LeaseOwner(node=node, pid=pid, start_time=7, runtime_id=f"{node}:{pid}:7:x")


A, B = owner("host-a"), owner("host-b", 5151)
TTL = 10.0


@pytest.fixture
def lease_clock() -> LeaseClock:
    return LeaseClock()


async def test_an_sqlite_lease_of_an_earlier_boot_has_expired(
    tmp_path: Path, lease_clock: LeaseClock
) -> None:
    path = tmp_path / "sessions.sqlite3"
    async with SQLiteStore(path, lease_clock=lease_clock) as one:
        await one.acquire_lease("x", A, ttl=TTL)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE leases SET clock = 'another boot'")
    async with SQLiteStore(path, lease_clock=lease_clock) as two:
        [lease] = await two.leases()
        assert lease.owner == A and not lease.held
        assert (await two.acquire_lease("x", B, ttl=TTL)).epoch == 2


# --- the runtime: ownership, renewal, the fence (MockClock, MemoryStore handles) ---


async def test_a_name_another_live_runtime_owns_is_refused_naming_it() -> None:
    store = MemoryStore()
    async with (
        open_runtime(store=store, node="host-a") as a,
        open_runtime(store=store.handle(), node="host-b") as b,
    ):
        await a.start_agent(Agent, name="x", backend=echo_backend())
        with pytest.raises(AgentAlreadyStarted) as refused:
            await b.start_agent(Agent, name="x", backend=echo_backend())
        assert f"node 'host-a', pid {a._context.ownership.owner.pid}" in str(refused.value)
        assert b.agents() == ()
        # A second runtime of this very process and node: alive, so refused too.
        async with open_runtime(store=store.handle(), node="host-a") as c:
            with pytest.raises(AgentAlreadyStarted):
                await c.start_agent(Agent, name="x", backend=echo_backend())
        await a.stop_agent("x")
        await b.start_agent(Agent, name="x", backend=echo_backend())
        assert (await b.ask("x", "hi")).text == "echo hi"


async def test_a_runtime_that_closed_gives_its_names_back(autojump_clock: object) -> None:
    store = MemoryStore()
    async with open_runtime(store=store) as a:
        await a.start_agent(Agent, name="x", backend=echo_backend())
        await a.ask("x", "hi")
        await a.start_agent(Agent, name="y", backend=echo_backend())
    async with store.handle() as reader:
        # y never ran a turn: its lease went with its row, as if it never started.
        [x] = await reader.leases()
    assert x.name == "x" and x.owner is None
    async with open_runtime(store=store) as b:
        await b.start_agent(Agent, name="x", backend=echo_backend())
        assert trio.current_time() == 0  # at once, not after the lease


async def test_stopping_and_starting_a_name_again_in_one_runtime(autojump_clock: object) -> None:
    async with open_runtime() as rt:
        for _ in range(3):
            await rt.start_agent(Agent, name="x", backend=echo_backend())
            await rt.ask("x", "hi")  # a session row: the released lease stays
            await rt.stop_agent("x")
        await rt.start_agent(Agent, name="x", backend=echo_backend())
        [lease] = await rt.store.leases()
        assert lease.epoch == 4 and lease.held


async def test_leases_are_renewed_while_agents_run(autojump_clock: object) -> None:
    store = MemoryStore()
    async with open_runtime(store=store, lease_ttl=10) as rt:
        await rt.start_agent(Agent, name="x", backend=echo_backend())
        await trio.sleep(100)
        [lease] = await store.leases()
        assert lease.held and lease.age <= 2.0  # renewed every lease_ttl / 5
        assert (await rt.ask("x", "still mine")).text == "echo still mine"


@attrs.define(eq=False)
class CutOff(MemoryStore):
    """A MemoryStore whose lease renewals and releases fail from ``cut`` on (the database
    is gone for this handle)."""

    cut: bool = False
    renewals: list[float] = attrs.field(factory=list)
    releases: list[float] = attrs.field(factory=list)

    async def renew_leases(self, *, ttl: float) -> frozenset[str]:
        if self.cut:
            self.renewals.append(trio.current_time())
            raise StoreError("<memory>", "connection refused")
        return frozenset(await super().renew_leases(ttl=ttl))

    async def release_leases(self, names: Iterable[str]) -> None:
        self.releases.append(trio.current_time())
        if self.cut:
            raise StoreError("<memory>", "connection refused")
        await super().release_leases(names)


async def test_a_runtime_that_cannot_renew_stops_its_agents_before_the_lease_ends(
    autojump_clock: object, caplog: pytest.LogCaptureFixture
) -> None:
    store = CutOff()
    gate = Gate()
    async with open_runtime(store=store, lease_ttl=10) as rt, trio.open_nursery() as nursery:
        await rt.start_agent(Agent, name="x", backend=echo_backend([gate]), kill_grace=1)
        await rt.start_agent(Agent, name="idle", backend=echo_backend())
        outcome: list[BaseException] = []
        answered = trio.Event()

        async def ask() -> None:
            try:
                await rt.ask("x", "long job")
            except AgentStopped as exc:
                outcome.append(exc)
            answered.set()

        nursery.start_soon(ask)
        await gate.wait_reached()
        await trio.sleep(3.5)  # renewals at 2 s intervals went through
        [lease] = [lease for lease in await _leases(store) if lease.name == "x"]
        cut_at = trio.current_time()
        store.cut = True
        last_renewal = cut_at - lease.age
        await answered.wait()
        stopped_at = trio.current_time()
        assert rt.agents() == ()
        # Fenced half a lease after the last renewal that went through, with two failed
        # renewals in between; the store's lease is still valid then.
        assert stopped_at == pytest.approx(last_renewal + 5, abs=0.2)
        assert len(store.renewals) == 2
        [error] = outcome
        assert isinstance(error, AgentStopped)
        assert error.reason.startswith("lease lost: not renewed for 5 s")
        assert "lease lost" in caplog.text
        # Stopped, not crashed: nothing restarts it, and the runtime goes on.
        await trio.sleep(30)
        assert rt.agents() == ()
        store.cut = False


async def test_a_loop_held_past_the_fence_time_keeps_the_agent_nobody_else_took(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    # A process starved of CPU beside a busy machine, or one long synchronous step: the
    # renewal due meanwhile never ran, and when the loop runs again the fence's deadline
    # has passed too. The store still holds the lease for this runtime (nobody took it):
    # the renewal is made at once and the agent goes on.
    store = MemoryStore()
    async with open_runtime(store=store, lease_ttl=10) as rt:
        await rt.start_agent(Agent, name="x", backend=echo_backend())
        for _ in range(5):
            await trio.sleep(2.1)  # just after a renewal
            autojump_clock.jump(6)  # the loop held: no task runs for 6 s
            await settle()
            assert rt.agents() == ("x",), caplog.text
        [lease] = await store.leases()
        assert lease.held and lease.age == 0
        assert (await rt.ask("x", "still mine")).text == "echo still mine"
    assert "lease lost" not in caplog.text


class FenceSteps(trio.abc.Instrument):
    """Counts the steps of the runtime's fencing task (each wake-up is one)."""

    def __init__(self) -> None:
        self.steps = 0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if "_fence_forever" in task.name:
            self.steps += 1


async def test_a_new_grant_does_not_wake_the_fence(autojump_clock: object) -> None:
    counter = FenceSteps()
    trio.lowlevel.add_instrument(counter)
    try:
        async with open_runtime(store=MemoryStore(), lease_ttl=10) as rt:
            await rt.start_agent(Agent, name="first", backend=echo_backend())
            await settle()
            before, at = counter.steps, trio.current_time()
            assert before > 0  # the fence's task is the one counted
            for i in range(200):
                await rt.start_agent(Agent, name=f"a{i}", backend=echo_backend())
            await settle()
            # No renewal came between (the clock stood still): no step of the fence at all.
            assert trio.current_time() == at
            assert counter.steps == before
            await trio.sleep(5.5)  # past the first lease's fence time: renewed, none lost
            assert len(rt.agents()) == 201
    finally:
        trio.lowlevel.remove_instrument(counter)


@attrs.define(eq=False)
class SlowRelease(MemoryStore):
    """A MemoryStore whose lease releases take 0.4 s a call (a slow round trip)."""

    calls: int = 0

    async def release_leases(self, names: Iterable[str]) -> None:
        self.calls += 1
        await trio.sleep(0.4)
        await super().release_leases(names)


class SlowToStop(Agent):
    """Takes its time in terminate_agent, within the runtime's bound on it."""

    async def terminate_agent(self, reason: str | BaseException) -> None:
        await trio.sleep(4.9)


async def test_a_shutdown_longer_than_half_a_lease_loses_no_lease(
    autojump_clock: object, caplog: pytest.LogCaptureFixture
) -> None:
    store = SlowRelease()
    async with open_runtime(store=store, lease_ttl=10) as rt:
        for i in range(20):  # one call each, their releases took 8 s, past the fence's 5 s
            await rt.start_agent(Agent, name=f"quick{i}", backend=echo_backend())
        await rt.start_agent(SlowToStop, name="slow", backend=echo_backend())
        await trio.sleep(1.9)  # just before a renewal: the slow agent's lease is oldest
        closing = trio.current_time()
    assert trio.current_time() - closing > 5
    assert "lease lost" not in caplog.text
    assert store.calls <= 3  # batched: the ones ended by then go in one call
    async with store.handle() as reader:
        assert [lease for lease in await reader.leases() if lease.owner is not None] == []


@attrs.define(eq=False)
class CountedRelease(MemoryStore):
    """A MemoryStore that records each call giving leases back."""

    released: list[list[str]] = attrs.field(factory=list)

    async def release_leases(self, names: Iterable[str]) -> None:
        names = list(names)
        self.released.append(names)
        await super().release_leases(names)


async def test_a_closing_runtime_gives_its_leases_back_in_a_call_or_two(
    autojump_clock: object,
) -> None:
    store = CountedRelease()
    async with open_runtime(store=store, lease_ttl=10) as rt:
        for i in range(500):
            await rt.start_agent(Agent, name=f"a{i}", backend=echo_backend())
        await rt.stop_agent("a0")  # given back at once, on its own
    assert store.released[0] == ["a0"]
    # The others in a call or two (those the renewer finds ended while the rest stop), not
    # one call each.
    rest = store.released[1:]
    assert 1 <= len(rest) <= 2
    released = sorted(name for names in rest for name in names)
    assert released == sorted(f"a{i}" for i in range(1, 500))
    async with store.handle() as reader:
        assert not any(lease.held for lease in await reader.leases())


async def test_an_agent_whose_lease_another_runtime_took_is_stopped(
    autojump_clock: object,
) -> None:
    store = MemoryStore()
    async with open_runtime(store=store, node="host-a") as rt:
        await rt.start_agent(Agent, name="x", backend=echo_backend())
        [lease] = await store.leases()
        async with store.handle() as thief:
            await thief.acquire_lease("x", B, ttl=TTL, replacing=lease.epoch)
            await trio.sleep(2.5)  # the next renewal finds it gone
            assert rt.agents() == ()
            [now] = await thief.leases()
            assert now.owner == B  # the loser's release did not touch it


@attrs.define(eq=False)
class SlowRenewal(MemoryStore):
    """A MemoryStore whose lease renewals take ``delay`` s a call (a round trip to a far
    database)."""

    delay: float = 0.0

    async def renew_leases(self, *, ttl: float) -> frozenset[str]:
        await trio.sleep(self.delay)
        return frozenset(await super().renew_leases(ttl=ttl))


class Crashes(Agent):
    """Notes the turn failures its ``handle_error`` is given."""

    def __init__(self) -> None:
        self.errors: list[TurnFailed] = []

    def handle_error(self, ref: agentrt.Ref, error: TurnFailed) -> None:
        self.errors.append(error)


async def test_a_cli_killed_as_a_frozen_runtime_wakes_past_its_fence_ends_as_the_lease_lost(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # A runtime frozen past its lease: meanwhile its fence guard SIGKILLed the turn's CLI and
    # another node took the name. Awake, it sees both at once, the CLI's death and its
    # overdue fence, whose renewal waits for the store. The turn must end as the lease lost
    # (as when the fence comes first), not as a crash of a CLI its own fence killed.
    store = SlowRenewal()
    gate = Gate()
    agent = Crashes()
    backend = echo_backend([gate, Exit(returncode=None, signal=signal.SIGKILL)])
    async with open_runtime(store=store, node="host-a", lease_ttl=10) as rt:
        await rt.start_agent(agent, name="x", backend=backend)
        outcome: list[BaseException] = []
        answered = trio.Event()

        async def ask() -> None:
            try:
                await rt.ask("x", "a long job")
            except (AgentStopped, TurnFailed) as exc:
                outcome.append(exc)
            answered.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask)
            await gate.wait_reached()
            await trio.sleep(2.1)  # just after a renewal
            [lease] = await store.leases()
            async with store.handle() as thief:
                # Frozen from here (no checkpoint until the jump is made): the CLI dies, the
                # name is taken, the store is slow to answer the renewal made on waking.
                await thief.acquire_lease("x", B, ttl=TTL, replacing=lease.epoch)
                store.delay = 1.0
                autojump_clock.jump(6)
                gate.release()
                await answered.wait()
        [error] = outcome
        assert isinstance(error, AgentStopped), error
        assert error.reason.startswith("lease lost: another runtime holds it now")
        assert agent.errors == []  # no turn failure reached the agent either
        # Stopped, not crashed: nothing restarts it on a runtime that no longer owns it.
        await trio.sleep(30)
        assert rt.agents() == ()


async def test_a_takeover_after_the_lease_on_another_node(autojump_clock: object) -> None:
    store = CutOff()
    async with open_runtime(store=store, node="host-a") as a:
        await a.start_agent(Agent, name="x", backend=echo_backend())
        store.cut = True  # host-a is cut off from here on
        async with open_runtime(store=store.handle(), node="host-b") as b:
            while True:
                try:
                    await b.start_agent(Agent, name="x", backend=echo_backend())
                    break
                except AgentAlreadyStarted:
                    await trio.sleep(0.5)
            took = trio.current_time()
            assert a.agents() == ()  # fenced at 5 s
            assert 10 <= took <= 12  # once the lease of 10 s ended on the store
            assert (await b.ask("x", "hi")).text == "echo hi"


@attrs.define
class Outage:
    """A store shared by runtimes of this test, and a way to make it unwritable for a
    while: PostgreSQL's server stopped, or SQLite's file locked by another writer."""

    open: Callable[[], SessionStore]
    down: Callable[[], None]
    up: Callable[[], None]


@pytest.fixture(params=["sqlite", "postgres"])
def outage(request: pytest.FixtureRequest, tmp_path: Path) -> Outage:
    if request.param == "postgres":
        server = request.getfixturevalue("postgres_server")
        dsn = request.getfixturevalue("postgres_dsn")
        return Outage(lambda: agentrt.PostgresStore(dsn), server.stop, server.start)
    path = tmp_path / "sessions.sqlite3"
    locker = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    request.addfinalizer(locker.close)
    return Outage(
        # A short busy_timeout: a write that finds the lock held fails soon.
        lambda: SQLiteStore(path, busy_timeout=0.5),
        lambda: locker.execute("BEGIN EXCLUSIVE"),
        lambda: locker.execute("ROLLBACK"),
    )


async def test_a_fenced_agents_cli_is_sigkilled_with_no_interrupt_and_no_grace(
    tmp_path: Path,
) -> None:
    # Its conversation is the next owner's, who may run it already (a runtime frozen past its
    # lease wakes to find it fenced): a graceful stop bought nothing but a CLI beside that
    # owner's for its graces. This CLI would note the ladder's SIGINT or SIGTERM, and exit.
    noted = tmp_path / "noted"
    binary = fake_cli_executable(
        str(tmp_path),
        *(["on", sig, [["record", str(noted)]]] for sig in ("SIGINT", "SIGTERM")),
        ["emit", init_frame()],
        ["hang"],
        name="claude",
    )
    store = CutOff()
    async with open_runtime(store=store, lease_ttl=2.4, kill_grace=0.1) as rt:
        await rt.start_agent(Agent, name="x", backend="claude", binary=binary, cwd=str(tmp_path))
        outcome: list[AgentStopped] = []

        async def ask() -> None:
            try:
                await rt.ask("x", "a long job")
            except AgentStopped as exc:
                outcome.append(exc)

        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(ask)
                # Reported after the CLI set its handlers: it can note a signal from now on.
                await wait_for_status(rt, "x", lambda st: st.session_id is not None, bound=30)
                store.cut = True
        [error] = outcome
        assert error.reason.startswith("lease lost")
        assert turn_processes(f"{os.getpid()}.") == []
        assert not noted.exists(), "the fenced CLI was stopped gracefully"


async def test_a_lease_fenced_while_the_store_was_down_is_not_renewed_when_it_is_back(
    outage: Outage, caplog: pytest.LogCaptureFixture
) -> None:
    # Issue 35's replay: the store is down for longer than half a lease; host-a fences "x"
    # and cannot give its lease back; once the store is back host-a starts "y", so it renews
    # again. It must renew "y" only: host-b takes "x" over within lease_ttl.
    ttl = 4.0
    options = {"lease_ttl": ttl, "kill_grace": 0.1}
    async with open_runtime(store=outage.open(), node="host-a", **options) as a:
        await a.start_agent(Agent, name="x", backend=echo_backend())
        await trio.to_thread.run_sync(outage.down)
        try:
            with trio.fail_after(ttl + 30):
                while a.agents() or "could not be released" not in caplog.text:  # noqa: ASYNC110
                    await trio.sleep(0.05)
        finally:
            await trio.to_thread.run_sync(outage.up)
        back = trio.current_time()
        await a.start_agent(Agent, name="y", backend=echo_backend())
        async with open_runtime(store=outage.open(), node="host-b", **options) as b:
            with trio.fail_at(back + ttl + 5):
                while True:
                    try:
                        await b.start_agent(Agent, name="x", backend=echo_backend())
                        break
                    except AgentAlreadyStarted:
                        await trio.sleep(0.1)
            assert (await b.ask("x", "hi")).text == "echo hi"
            assert a.agents() == ("y",)
            assert (await a.ask("y", "still here")).text == "echo still here"


async def test_a_release_the_store_refused_is_tried_again_at_the_renewals_pace(
    autojump_clock: object,
) -> None:
    store = CutOff()
    async with open_runtime(store=store, lease_ttl=10) as rt:
        await rt.start_agent(Agent, name="x", backend=echo_backend())
        store.cut = True
        start = trio.current_time()
        await rt.stop_agent("x")  # its release is refused, and kept
        await trio.sleep(9)
        # Every lease_ttl / 5, not in a loop.
        assert [t - start for t in store.releases] == [0, 2, 4, 6, 8]
        store.cut = False
        await trio.sleep(1.5)
        # Given back once the store took it (a first lease of a name without a session row
        # goes with its row).
        assert [lease for lease in await _leases(store) if lease.owner is not None] == []
        await trio.sleep(20)
        assert len(store.releases) == 6


async def _leases(store: SessionStore) -> list[agentrt.Lease]:
    return list(await store.leases())


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("lease_ttl", 0.5),
        ("lease_ttl", float("nan")),
        ("lease_ttl", "10"),
        ("node", ""),
        ("kill_grace", 0),
        ("kill_grace", "2"),
    ],
)
async def test_bad_ownership_options_are_refused_naming_them(key: str, value: object) -> None:
    with pytest.raises(InvalidOptions) as refused:
        async with open_runtime(**{key: value}):  # type: ignore[arg-type]
            pass
    assert refused.value.key == key


async def test_a_kill_grace_that_does_not_fit_in_the_lease_is_refused() -> None:
    async with open_runtime(lease_ttl=10) as rt:
        with pytest.raises(InvalidOptions) as refused:
            await rt.start_agent(Agent, name="x", backend=echo_backend(), kill_grace=3)
        assert refused.value.key == "kill_grace" and "lease_ttl=10" in str(refused.value)
        assert rt.agents() == ()
        await settle()
        assert await rt.store.leases() == ()


@pytest.mark.parametrize("lease_ttl", [5, 9.5, 2])
async def test_a_lease_too_short_for_the_default_kill_grace_is_refused_at_open(
    tmp_path: Path, lease_ttl: float
) -> None:
    path = tmp_path / "store.sqlite3"
    with pytest.raises(InvalidOptions) as refused:
        async with open_runtime(store=path, lease_ttl=lease_ttl):
            pass
    error = refused.value
    assert (error.key, error.value) == ("lease_ttl", lease_ttl)
    message = str(error)
    assert f"lease_ttl={lease_ttl:g} " in message and "kill_grace=2 " in message
    assert "lease_ttl >= 4 x kill_grace + 2 s" in message  # the rule
    assert "a lease_ttl of at least 10 s" in message
    assert not path.exists()  # refused before anything was opened


async def test_a_short_lease_takes_the_kill_grace_of_agents_that_give_none(tmp_path: Path) -> None:
    with pytest.raises(InvalidOptions) as refused:
        async with open_runtime(lease_ttl=3, kill_grace=0.3):
            pass
    assert refused.value.key == "lease_ttl"
    assert "a kill_grace of at most 0.25 s" in str(refused.value)
    # A CLI that closes its output and lingers is given kill_grace to exit.
    binary = fake_cli_executable(
        str(tmp_path), ["emit", init_frame()], ["close_output"], ["hang"], name="claude"
    )
    async with open_runtime(store=MemoryStore(), lease_ttl=3, kill_grace=0.25) as rt:
        await rt.start_agent(Agent, name="a", backend="claude", binary=binary, cwd=str(tmp_path))
        with trio.fail_after(30), pytest.raises(TurnFailed) as failed:
            await rt.ask("a", "hi")
        # An agent's own kill_grace is checked against the lease as before.
        with pytest.raises(InvalidOptions) as own:
            await rt.start_agent(Agent, name="b", backend=echo_backend(), kill_grace=0.3)
    assert "closed its output and did not exit within 0.25 s" in failed.value.message
    assert own.value.key == "kill_grace" and "kill_grace=0.3 " in str(own.value)


# --- programs of their own on one SQLite file ---

CHILD = Path(__file__).parent / "lease_child.py"


@pytest.fixture(params=["sqlite", "postgres"])
async def programs(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[Callable[..., Awaitable[Program]]]:
    """Start lease_child.py programs on one store: an SQLite file, or a PostgreSQL database
    (whose programs stand for hosts when they name different nodes)."""
    store = (
        str(tmp_path / "sessions.sqlite3")
        if request.param == "sqlite"
        else request.getfixturevalue("postgres_dsn")
    )
    async with store_programs(CHILD, store) as run:

        async def start(node: str, lease_ttl: float, mode: str = "once", *cli: str) -> Program:
            return await run(node, str(lease_ttl), mode, *cli)

        yield start


async def test_two_programs_one_owner_and_a_killed_owner_is_replaced_at_once(
    programs: Callable[..., Awaitable[Program]],
) -> None:
    first = await programs("node-a", 60)
    assert await first.line() == "STARTED"
    second = await programs("node-a", 60)
    refused = await second.line()
    assert refused.startswith("REFUSED ") and f"node 'node-a', pid {first.pid}" in refused
    await first.kill()
    # Its lease has 60 s left, but its pid is gone: taken at once on the same node.
    start = trio.current_time()
    third = await programs("node-a", 60)
    assert await third.line() == "STARTED"
    assert trio.current_time() - start < 30
    # A program naming another node cannot see node-a's processes: refused while the
    # lease lasts, even though this owner too will be killed.
    fourth = await programs("node-b", 60)
    assert f"node 'node-a', pid {third.pid}" in await fourth.line()


async def test_another_node_takes_a_killed_owners_name_once_its_lease_has_expired(
    programs: Callable[..., Awaitable[Program]],
) -> None:
    ttl = 3.0
    first = await programs("node-a", ttl)
    assert await first.line() == "STARTED"
    # Refused while the owner lives, before the kill: a loaded machine's program start may
    # take longer than the lease's ttl.
    second = await programs("node-b", ttl, "wait")
    assert await second.line() == "REFUSED"
    await first.kill()
    killed = trio.current_time()
    assert await second.line() == "STARTED"
    # The lease was renewed at most ttl / 5 before the kill, and lasts ttl from then.
    assert trio.current_time() - killed >= ttl * 0.8 - 0.1


async def test_a_runtime_frozen_past_its_lease_has_its_cli_dead_before_another_node_starts(
    programs: Callable[..., Awaitable[Program]], tmp_path: Path
) -> None:
    cli = FakeClaude(tmp_path / "cli")  # a turn that starts a setsid'd tool and hangs
    ttl = 3.0
    first = await programs("node-a", ttl, "once", cli.binary, str(tmp_path))
    assert await first.line() == "STARTED"
    assert await first.line() == f"SESSION {SID}"
    prefix = f"{first.pid}."
    await wait_until(lambda: len(turn_processes(prefix)) == 2, bound=10)
    second = await programs("node-b", ttl, "wait", cli.binary, str(tmp_path))
    assert await second.line() == "REFUSED"  # before the freeze, as above
    os.kill(first.pid, signal.SIGSTOP)
    try:
        assert await second.line() == "STARTED"
        # The frozen runtime's fence guard killed its CLI and tool before the lease could
        # pass; the new owner's CLI starts only now.
        assert turn_processes(prefix) == []
        assert await second.line() == f"SESSION {SID}"
    finally:
        os.kill(first.pid, signal.SIGCONT)
    # Awake again, it finds its lease lost and stops the agent instead of driving it.
    result = await first.line()
    assert result.startswith("RESULT Failed(") and "lease lost" in result, result
    await trio.sleep(0.5)
    assert turn_processes(prefix) == []
    assert len(turn_processes(f"{second.pid}.")) == 2  # the new owner's turn runs on
