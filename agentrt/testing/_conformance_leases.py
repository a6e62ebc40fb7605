"""Conformance checks of live process records and of leases: two handles on one store, as
two programs sharing it.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar, cast

import trio

from .._errors import AgentAlreadyStarted, LeaseLost, StoreError
from .._stores._protocols import (
    LeaseStore,
    LiveProcessStore,
    SessionStore,
    StoreCapabilities,
)
from ._conformance_kit import (
    _A,
    _B,
    ManualClock,
    StoreHarness,
    _check,
    _checkpoint,
    _closing,
    _hypothesis,
    _loaded,
    _near,
    _open,
    _owner,
    _raises,
    _turn,
    _workspace,
)

_T = TypeVar("_T")


# --- live process records ---


@_check(LiveProcessStore)
async def _live_process_is_recorded_listed_and_cleared(harness: StoreHarness) -> None:
    store = await _open(harness)
    records = StoreCapabilities.of(store).live
    assert records is not None
    clock = harness.clock
    try:
        for name in ("b", "a", "c"):
            await _checkpoint(store, name)
        before = (await _loaded(store, "b")).updated_at
        if clock is not None:
            clock.advance(5.0)
        await records.set_live_process(
            "c", pgid=300, pid=301, start_time=3000, runtime_id="rt-1", marker="7.abc"
        )
        await records.set_live_process("a", pgid=100, pid=100, start_time=1000, runtime_id="rt-2")
        live = await records.live_processes()
        assert [r.name for r in live] == ["a", "c"]
        c = live[1]
        assert (c.live_pgid, c.live_pid, c.live_start_time, c.runtime_id) == (
            300,
            301,
            3000,
            "rt-1",
        )
        assert (c.live_marker, live[0].live_marker) == ("7.abc", None)
        if clock is not None:
            assert c.updated_at == before + 5.0
            clock.advance(1.0)
        await records.clear_live_process("c")
        await records.clear_live_process("b")  # had none: nothing changes
        assert [r.name for r in await records.live_processes()] == ["a"]
        c_after, b_after = await _loaded(store, "c"), await _loaded(store, "b")
        assert (c_after.live_pgid, c_after.live_pid, c_after.live_start_time) == (None,) * 3
        assert c_after.runtime_id is None and c_after.live_marker is None
        assert b_after.updated_at == before
        if clock is not None:
            assert c_after.updated_at == before + 6.0
    finally:
        await store.aclose()


@_check(LiveProcessStore)
async def _a_warm_cli_idling_between_turns_is_recorded_until_its_process_goes(
    harness: StoreHarness,
) -> None:
    store = await _open(harness)
    records = StoreCapabilities.of(store).live
    assert records is not None
    clock = harness.clock

    async def idle(name: str) -> tuple[bool, float]:
        record = await _loaded(store, name)
        return record.live_idle, record.updated_at

    try:
        await _checkpoint(store, "a")
        created = (await _loaded(store, "a")).updated_at
        await records.set_live_idle("a", True)  # no live process: nothing to mark
        await records.set_live_idle("ghost", True)  # no row: nothing either
        assert await idle("a") == (False, created)
        await records.set_live_process("a", pgid=10, pid=10, start_time=1, runtime_id="rt")
        assert (await idle("a"))[0] is False  # a new process runs a turn
        if clock is not None:
            clock.advance(1.0)
        await records.set_live_idle("a", True)
        marked = await idle("a")
        assert marked[0] is True
        if clock is not None:
            assert marked[1] == created + 1.0
        (live,) = await records.live_processes()  # still the reaper's to find
        assert (live.live_pgid, live.live_idle) == (10, True)
        await records.set_live_idle("a", False)  # the next turn takes it
        assert (await idle("a"))[0] is False
        await records.set_live_idle("a", True)
        await records.set_live_process("a", pgid=20, pid=20, start_time=2, runtime_id="rt")
        assert (await idle("a"))[0] is False
        await records.set_live_idle("a", True)
        await records.clear_live_process("a")  # it hibernated or died
        assert (await idle("a"))[0] is False
        assert list(await records.live_processes()) == []
    finally:
        await store.aclose()


# --- leases: two handles on one store, as two programs sharing it ---


class _Leasing(SessionStore, LeaseStore, Protocol):
    """A store with leases."""


async def _two(harness: StoreHarness) -> tuple[_Leasing, _Leasing]:
    one, two = await _open(harness), await _open(harness)
    assert StoreCapabilities.of(one).leases is not None
    assert StoreCapabilities.of(two).leases is not None
    return cast(_Leasing, one), cast(_Leasing, two)


def _about(harness: StoreHarness, actual: float, fraction: float) -> bool:
    """Whether ``actual`` is ``fraction`` of the ttl, as read back (real time moves on)."""
    return _near(actual, fraction * harness.ttl, 0.0 if harness.lease_clock else 0.25)


@_check(LeaseStore)
async def _a_held_lease_is_refused_to_another_owner_naming_the_holder(
    harness: StoreHarness,
) -> None:
    one, two = await _two(harness)
    ttl = harness.ttl
    try:
        lease = await one.acquire_lease("x", _A, ttl=ttl)
        assert (lease.epoch, lease.owner, lease.remaining) == (1, _A, ttl)
        with _raises(AgentAlreadyStarted) as refused:
            await two.acquire_lease("x", _B, ttl=ttl)
        holder = refused[0].holder
        assert holder is not None and holder.owner == _A
        assert "node 'host-a', pid 4242" in str(refused[0])
        assert (await two.acquire_lease("y", _B, ttl=ttl)).epoch == 1  # another name is free
    finally:
        await _closing(one, two)


@_check(LeaseStore)
async def _an_expired_lease_is_taken_and_the_old_holders_writes_are_refused(
    harness: StoreHarness,
) -> None:
    one, two = await _two(harness)
    writer = one
    ttl = harness.ttl
    try:
        await one.acquire_lease("x", _A, ttl=ttl)
        await _checkpoint(writer, "x", "s1")
        await harness.advance(0.8 * ttl)
        with _raises(AgentAlreadyStarted):
            await two.acquire_lease("x", _B, ttl=ttl)
        await harness.advance(0.2 * ttl)
        taken = await two.acquire_lease("x", _B, ttl=ttl)
        assert (taken.epoch, taken.owner) == (2, _B)
        with _raises(LeaseLost) as lost:
            await _checkpoint(writer, "x", "stale")
        assert (lost[0].name, lost[0].epoch) == ("x", 1)
        assert "epoch 2 is held by node 'host-b', pid 5151" in str(lost[0])
        assert isinstance(lost[0], StoreError)
        stale: list[Awaitable[object]] = [
            writer.record_turn("x", stop_reason="complete", cost_usd=1, usage=None, session_id="z"),
            writer.save_state("x", b"{}"),
            writer.forget("x"),
        ]
        can = StoreCapabilities.of(one)
        if can.live is not None:
            stale.append(
                can.live.set_live_process("x", pgid=1, pid=1, start_time=1, runtime_id="r")
            )
            stale.append(can.live.clear_live_process("x"))
        if can.specs is not None:
            stale.append(can.specs.save_spec("x", "{}"))
        if can.budgets is not None:
            stale.append(can.budgets.save_budgets("x", ()))
        if can.transcripts is not None:
            stale.append(
                can.transcripts.append_transcript("x", session_id="s", path="t", offset=0, data=b"")
            )
        if can.workspaces is not None:
            stale.append(can.workspaces.save_workspace(_workspace("x", "agentrt/x")))
            stale.append(can.workspaces.drop_workspace("x"))
        if can.turn_history is not None:
            stale.append(
                can.turn_history.record_turn_with_history(_turn("x"), session_id=None, keep=5)
            )
        for write in stale:
            with _raises(LeaseLost):
                await write
        record = await _loaded(two, "x")
        assert (record.session_id, record.turns) == ("s1", 0)
        history = StoreCapabilities.of(two).turn_history
        if history is not None:
            assert list(await history.turn_history("x", limit=10)) == []
        assert await one.renew_leases(ttl=ttl) == {"x"}
        await _checkpoint(two, "x", "s2")  # the new owner's writes go through
    finally:
        await _closing(one, two)


@_check(LeaseStore)
async def _a_renewed_lease_lasts_ttl_from_the_renewal(harness: StoreHarness) -> None:
    one, two = await _two(harness)
    ttl = harness.ttl
    try:
        await one.acquire_lease("x", _A, ttl=ttl)
        await harness.advance(0.8 * ttl)
        assert await one.renew_leases(ttl=ttl) == set()
        await harness.advance(0.8 * ttl)
        with _raises(AgentAlreadyStarted):
            await two.acquire_lease("x", _B, ttl=ttl)
        [lease] = await two.leases()
        assert _about(harness, lease.age, 0.8), lease
        assert _about(harness, lease.remaining, 0.2), lease
        assert lease.held
        await harness.advance(0.2 * ttl)
        assert (await two.acquire_lease("x", _B, ttl=ttl)).epoch == 2
    finally:
        await _closing(one, two)


@_check(LeaseStore)
async def _replacing_takes_only_the_current_epoch(harness: StoreHarness) -> None:
    one, two = await _two(harness)
    ttl = harness.ttl
    try:
        await one.acquire_lease("x", _A, ttl=ttl)
        with _raises(AgentAlreadyStarted):
            await two.acquire_lease("x", _B, ttl=ttl, replacing=7)
        assert (await two.acquire_lease("x", _B, ttl=ttl, replacing=1)).epoch == 2
        assert await one.renew_leases(ttl=ttl) == {"x"}
    finally:
        await _closing(one, two)


@_check(LeaseStore)
async def _a_released_lease_is_free_at_once_and_listed_without_owner(
    harness: StoreHarness,
) -> None:
    one, two = await _two(harness)
    ttl = harness.ttl
    try:
        await one.acquire_lease("x", _A, ttl=ttl)
        await _checkpoint(one, "x", "s1")
        await one.release_leases(["x"])
        [lease] = await two.leases()
        assert (lease.epoch, lease.owner, lease.held) == (1, None, False)
        assert (await two.acquire_lease("x", _B, ttl=ttl)).epoch == 2
        await one.release_leases(["x"])  # no longer its lease: nothing happens
        [lease] = await two.leases()
        assert lease.owner == _B
    finally:
        await _closing(one, two)


@_check(LeaseStore)
async def _a_first_lease_released_before_any_session_row_leaves_no_row(
    harness: StoreHarness,
) -> None:
    one, two = await _two(harness)
    ttl = harness.ttl
    try:
        await one.acquire_lease("x", _A, ttl=ttl)
        await one.release_leases(["x"])
        assert list(await two.leases()) == []  # as before the start
        assert (await two.acquire_lease("x", _B, ttl=ttl)).epoch == 1
        # A later epoch stays when released: one that expired is still held by a handle.
        await harness.advance(ttl)
        assert (await one.acquire_lease("x", _A, ttl=ttl)).epoch == 2
        await one.release_leases(["x"])
        [lease] = await two.leases()
        assert (lease.epoch, lease.owner) == (2, None)
        with _raises(LeaseLost):
            await _checkpoint(two, "x", "s1")  # the woken epoch 1 is fenced still
    finally:
        await _closing(one, two)


@_check(LeaseStore)
async def _many_leases_are_released_in_one_call_and_only_this_handles(
    harness: StoreHarness,
) -> None:
    one, two = await _two(harness)
    ttl = harness.ttl
    names = [f"a{i:03d}" for i in range(200)]
    try:
        for name in names:
            await one.acquire_lease(name, _A, ttl=ttl)
            if name.endswith("0"):  # a tenth kept, released, by their session rows
                await _checkpoint(one, name, "s1")
        await two.acquire_lease("theirs", _B, ttl=ttl)
        await one.release_leases(["theirs", *names, "never-leased"])
        leases = {lease.name: lease for lease in await two.leases()}
        assert [n for n in names if n in leases] == [n for n in names if n.endswith("0")]
        assert [n for n in leases if leases[n].owner is None] == names[::10]
        assert "never-leased" not in leases
        assert leases["theirs"].owner == _B and leases["theirs"].held
        assert await one.renew_leases(ttl=ttl) == set()  # it holds nothing now
        await one.release_leases([])
    finally:
        await _closing(one, two)


@_check(LeaseStore)
async def _a_reopened_handle_holds_no_lease(harness: StoreHarness) -> None:
    one, two = await _two(harness)
    ttl = harness.ttl
    try:
        await one.acquire_lease("x", _A, ttl=ttl)
        await one.aclose()
        async with one:
            assert await one.renew_leases(ttl=ttl) == set()
    finally:
        await _closing(one, two)


@_check(LeaseStore, _hypothesis)
async def _at_most_one_handle_writes_for_a_name(harness: StoreHarness) -> None:
    """A state machine (hypothesis): handles acquire, renew, release and steal leases
    while the lease clock moves. A lease is granted (unless replacing) only when the model
    says its last holder's lease has ended; after every step at most one handle that took
    a lease can write for a name as its owner, and it is the owner the store names."""
    from hypothesis import settings
    from hypothesis import strategies as st
    from hypothesis.stateful import (
        RuleBasedStateMachine,
        invariant,
        rule,
        run_state_machine_as_test,
    )

    assert harness.lease_clock is not None
    clock: ManualClock = harness.lease_clock
    # The harness's data outlives each example: each one has names of its own.
    examples = itertools.count()

    def call(work: Callable[[], Awaitable[_T]]) -> _T:
        async def run() -> _T:
            return await work()

        return trio.from_thread.run(run)

    class LeaseMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            n = next(examples)
            self.names = (f"m{n}-x", f"m{n}-y")
            self.stores = [call(lambda: _open(harness)) for _ in range(3)]
            self.leasing = [
                leases
                for s in self.stores
                if (leases := StoreCapabilities.of(s).leases) is not None
            ]
            self.owners = [_owner(f"n{i}", i) for i in range(3)]
            self.taken: list[set[str]] = [set() for _ in self.stores]
            # The model: name -> (holder, expiry on the lease clock); a release drops it.
            self.held: dict[str, tuple[int, float]] = {}
            for name in self.names:  # rows to write to, made before any lease
                call(functools.partial(_checkpoint, self.stores[0], name, "s0"))

        def teardown(self) -> None:
            for store in self.stores:
                call(store.aclose)

        @rule(h=st.integers(0, 2), which=st.integers(0, 1), ttl=st.sampled_from([1.0, 5.0]))
        def acquire(self, h: int, which: int, ttl: float) -> None:
            name = self.names[which]
            try:
                call(lambda: self.leasing[h].acquire_lease(name, self.owners[h], ttl=ttl))
            except AgentAlreadyStarted as exc:
                assert exc.holder is not None and exc.holder.held
                assert name in self.held and self.held[name][1] > clock.now
            else:
                assert name not in self.held or self.held[name][1] <= clock.now
                self.taken[h].add(name)
                self.held[name] = (h, clock.now + ttl)

        @rule(h=st.integers(0, 2), which=st.integers(0, 1))
        def steal(self, h: int, which: int) -> None:
            """A caller that found the holder dead replaces its epoch."""
            name, store = self.names[which], self.leasing[h]
            epochs = [lease.epoch for lease in call(store.leases) if lease.name == name]
            if epochs:
                (replacing,) = epochs
                owner = self.owners[h]
                call(lambda: store.acquire_lease(name, owner, ttl=2.0, replacing=replacing))
                self.taken[h].add(name)
                self.held[name] = (h, clock.now + 2.0)

        @rule(h=st.integers(0, 2), ttl=st.sampled_from([1.0, 5.0]))
        def renew(self, h: int, ttl: float) -> None:
            lost = call(lambda: self.leasing[h].renew_leases(ttl=ttl))
            assert lost <= self.taken[h]
            for name in self.taken[h] - lost:
                assert self.held[name][0] == h
                self.held[name] = (h, clock.now + ttl)

        @rule(h=st.integers(0, 2), which=st.integers(0, 1))
        def release(self, h: int, which: int) -> None:
            name = self.names[which]
            call(lambda: self.leasing[h].release_leases([name]))
            self.taken[h].discard(name)
            if self.held.get(name, (None,))[0] == h:
                del self.held[name]

        @rule(seconds=st.sampled_from([0.5, 1.0, 3.0, 6.0]))
        def expire(self, seconds: float) -> None:
            clock.advance(seconds)

        @invariant()
        def at_most_one_owner(self) -> None:
            current = {lease.name: lease for lease in call(self.leasing[0].leases)}
            for name in self.names:
                writers = [h for h in range(3) if name in self.taken[h] and self._writes(h, name)]
                assert len(writers) <= 1
                if writers:
                    assert current[name].owner == self.owners[writers[0]]

        def _writes(self, h: int, name: str) -> bool:
            try:
                call(lambda: self.stores[h].save_state(name, None))
            except LeaseLost:
                return False
            return True

    chosen = settings(max_examples=60, stateful_step_count=25, deadline=None)
    await trio.to_thread.run_sync(lambda: run_state_machine_as_test(LeaseMachine, settings=chosen))
