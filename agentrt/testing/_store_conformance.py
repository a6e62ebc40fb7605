"""The store conformance kit: the checks every agentrt store passes, as plain async calls
(no test framework needed), so that a store of one's own (Redis, DynamoDB, ...) proves it
behaves as agentrt's own stores do.

Each `StoreCheck` needs one capability protocol of `agentrt.store` (``requires``) and is
skipped on a store without it. A check opens its handles from a `StoreHarness`, which
makes handles on one set of data, empty at first: give each check a harness of its own.
"""

from __future__ import annotations

import functools
import itertools
import math
import re
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol, TypeVar, cast

import attrs
import trio

from .._errors import AgentAlreadyStarted, BranchInUse, LeaseLost, StoreError
from .._events import SessionTotals, StopReason, Usage
from .._records import (
    LeaseOwner,
    OperatorDecision,
    PendingApproval,
    SessionRecord,
    StoredBudget,
    StoredTurn,
    StoredWorkspace,
)
from .._stores._protocols import (
    ApprovalStore,
    BudgetStore,
    LeaseStore,
    LiveProcessStore,
    SessionStore,
    SpecStore,
    StoreCapabilities,
    TranscriptStore,
    TurnHistoryStore,
    WorkspaceStore,
)

_T = TypeVar("_T")
_E = TypeVar("_E", bound=BaseException)


@attrs.define
class ManualClock:
    """A clock a check moves by hand (``advance``); pass it to a store as its wall or lease
    clock, and to the harness."""

    now: float = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@attrs.frozen
class StoreHarness:
    """How the checks reach a store.

    ``open_handle()`` makes a new handle, not opened yet, on this harness's data (empty at
    first): the first is the store under test; the lease checks open a second one, as
    another program sharing the data has (its own open state and leases). ``clock`` is the
    wall clock the handles stamp records with and ``lease_clock`` the one they time
    leases on, when the store takes clocks (`ManualClock`); None means real time: the
    checks then skip exact timestamps, and wait ``ttl`` (keep it short, 2 s say) for a
    lease to expire.
    """

    open_handle: Callable[[], SessionStore]
    clock: ManualClock | None = None
    lease_clock: ManualClock | None = None
    ttl: float = 10.0

    async def advance(self, seconds: float) -> None:
        """Let ``seconds`` pass on the lease clock."""
        if self.lease_clock is None:
            await trio.sleep(seconds)
        else:
            self.lease_clock.advance(seconds)


Body = Callable[[StoreHarness], Awaitable[None]]


@attrs.frozen
class StoreCheck:
    """One conformance check: ``name``, the protocol it needs (``requires``), and
    ``run()``, which raises `AssertionError` (or the store's exception) when the store
    fails it. `skipped` says why it does not apply (None: it does)."""

    name: str
    requires: type
    harness: StoreHarness = attrs.field(repr=False)
    _body: Body = attrs.field(repr=False)
    _needs: Callable[[StoreHarness], str | None] = attrs.field(repr=False)

    def skipped(self) -> str | None:
        """Why this check does not apply to the harness's store, or None."""
        store = self.harness.open_handle()
        if not StoreCapabilities.of(store).has(self.requires):
            return f"{type(store).__name__} is not a {self.requires.__name__}"
        return self._needs(self.harness)

    async def run(self) -> None:
        """Run the check; a check that does not apply raises `RuntimeError` saying why."""
        why = self.skipped()
        if why is not None:
            raise RuntimeError(f"check {self.name!r} does not apply: {why}")
        await self._body(self.harness)


def _always(harness: StoreHarness) -> str | None:
    return None


def _manual_lease_clock(harness: StoreHarness) -> str | None:
    return None if harness.lease_clock is not None else "needs a lease clock to move by hand"


def _hypothesis(harness: StoreHarness) -> str | None:
    try:
        import hypothesis  # noqa: F401
    except ImportError:
        return "needs hypothesis"
    return _manual_lease_clock(harness)


_CHECKS: list[tuple[str, type, Body, Callable[[StoreHarness], str | None]]] = []


def _check(
    requires: type, needs: Callable[[StoreHarness], str | None] = _always
) -> Callable[[Body], Body]:
    def register(body: Body) -> Body:
        _CHECKS.append((body.__name__.lstrip("_"), requires, body, needs))
        return body

    return register


def store_conformance(harness: StoreHarness) -> tuple[StoreCheck, ...]:
    """Every conformance check, on ``harness``; run each on a harness of its own."""
    return tuple(
        StoreCheck(name, requires, harness, body, needs) for name, requires, body, needs in _CHECKS
    )


# --- helpers that do what pytest would ---


@contextmanager
def _raises(kind: type[_E], match: str | None = None) -> Iterator[list[_E]]:
    caught: list[_E] = []
    try:
        yield caught
    except kind as exc:
        if match is not None and not re.search(match, str(exc)):
            raise AssertionError(f"{exc!r} does not match {match!r}") from exc
        caught.append(exc)
    else:
        raise AssertionError(f"{kind.__name__} was not raised")


def _near(actual: float, expected: float, within: float) -> bool:
    return math.isclose(actual, expected, abs_tol=within)


async def _open(harness: StoreHarness) -> SessionStore:
    store = harness.open_handle()
    await store.__aenter__()
    return store


async def _checkpoint(store: SessionStore, name: str, session_id: str | None = None) -> None:
    await store.checkpoint_session(name, backend="claude", session_id=session_id, cwd=None)


async def _loaded(store: SessionStore, name: str) -> SessionRecord:
    record = await store.load(name)
    assert record is not None, f"no record of {name!r}"
    return record


def _owner(node: str, pid: int) -> LeaseOwner:
    return LeaseOwner(node=node, pid=pid, start_time=7, runtime_id=f"{node}:{pid}:7:x")


_A, _B = _owner("host-a", 4242), _owner("host-b", 5151)


# --- the core: every store ---


@_check(SessionStore)
async def _an_empty_store_has_no_records(harness: StoreHarness) -> None:
    store = await _open(harness)
    try:
        assert await store.load("coder") is None
        assert list(await store.list()) == []
        live = StoreCapabilities.of(store).live
        if live is not None:
            assert list(await live.live_processes()) == []
        assert await store.forget("coder") is False
    finally:
        await store.aclose()


@_check(SessionStore)
async def _checkpoint_creates_a_row_with_zero_totals(harness: StoreHarness) -> None:
    store = await _open(harness)
    try:
        await store.checkpoint_session("coder", backend="claude", session_id="s-1", cwd="/repo")
        record = await _loaded(store, "coder")
        created = record.created_at if harness.clock is None else harness.clock.now
        assert record == SessionRecord(
            name="coder",
            backend="claude",
            session_id="s-1",
            cwd="/repo",
            turns=0,
            cost_usd=0.0,
            usage=Usage(),
            last_stop_reason=None,
            created_at=created,
            updated_at=created,
            live_pgid=None,
            live_pid=None,
            live_start_time=None,
            runtime_id=None,
            state=None,
        )
    finally:
        await store.aclose()


@_check(SessionStore)
async def _checkpoint_again_updates_identity_and_keeps_totals(harness: StoreHarness) -> None:
    store = await _open(harness)
    try:
        await store.checkpoint_session("coder", backend="claude", session_id="s-1", cwd="/repo")
        await store.record_turn(
            "coder",
            stop_reason="complete",
            cost_usd=0.25,
            usage=Usage(input_tokens=5),
            session_id=None,
        )
        await store.save_state("coder", b"state")
        first = await _loaded(store, "coder")
        if harness.clock is not None:
            harness.clock.advance(1000.0)
        await store.checkpoint_session("coder", backend="codex", session_id="s-2", cwd=None)
        record = await _loaded(store, "coder")
        assert (record.backend, record.session_id, record.cwd) == ("codex", "s-2", None)
        assert (record.turns, record.cost_usd, record.usage) == (1, 0.25, Usage(input_tokens=5))
        assert record.state == b"state"
        assert record.created_at == first.created_at
        if harness.clock is not None:
            assert record.updated_at == first.created_at + 1000.0
        # A fresh start or a reset: no conversation, the rest stays.
        await store.checkpoint_session("coder", backend="codex", session_id=None, cwd=None)
        record = await _loaded(store, "coder")
        assert record.session_id is None
        assert record.turns == 1
    finally:
        await store.aclose()


@_check(SessionStore)
async def _session_totals_sum_one_session_and_restart_with_a_new_id(
    harness: StoreHarness,
) -> None:
    store = await _open(harness)
    try:
        await store.checkpoint_session("coder", backend="claude", session_id="s-1", cwd="/r")
        for cost in (0.25, 0.5):
            await store.record_turn(
                "coder",
                stop_reason="complete",
                cost_usd=cost,
                usage=Usage(output_tokens=2),
                session_id="s-1",
            )
        # The same id again (a restart resuming it) keeps the session's totals.
        await store.checkpoint_session("coder", backend="claude", session_id="s-1", cwd="/r")
        record = await _loaded(store, "coder")
        assert record.session_totals == SessionTotals(
            usage=Usage(output_tokens=4), cost_usd=0.75, turns=2
        )
        # A new session (or none, after a reset) starts from zero; the agent's totals go on.
        await store.checkpoint_session("coder", backend="claude", session_id="s-2", cwd="/r")
        await store.record_turn(
            "coder", stop_reason="complete", cost_usd=1.0, usage=None, session_id="s-2"
        )
        record = await _loaded(store, "coder")
        assert record.session_totals == SessionTotals(cost_usd=1.0, turns=1)
        assert (record.cost_usd, record.turns) == (1.75, 3)
        await store.checkpoint_session("coder", backend="claude", session_id=None, cwd="/r")
        record = await _loaded(store, "coder")
        assert record.session_totals == SessionTotals()
    finally:
        await store.aclose()


@_check(SessionStore)
async def _record_turn_accumulates_cost_usage_and_keeps_last_reason(
    harness: StoreHarness,
) -> None:
    store = await _open(harness)
    clock = harness.clock
    try:
        await store.checkpoint_session("coder", backend="claude", session_id="s-1", cwd="/repo")
        created = (await _loaded(store, "coder")).created_at
        turns: list[tuple[Any, float | None, Usage | None, str | None]] = [
            (
                StopReason.COMPLETE,
                0.5,
                Usage(
                    input_tokens=10,
                    output_tokens=20,
                    cache_creation_input_tokens=30,
                    cache_read_input_tokens=40,
                ),
                "s-1",
            ),
            (StopReason.TOTAL_TIMEOUT, None, None, None),
            ("complete", 0.125, Usage(input_tokens=1, output_tokens=2), "s-9"),
        ]
        for stop_reason, cost, usage, session_id in turns:
            if clock is not None:
                clock.advance(1.0)
            await store.record_turn(
                "coder",
                stop_reason=stop_reason,
                cost_usd=cost,
                usage=usage,
                session_id=session_id,
            )
        record = await _loaded(store, "coder")
        assert record.turns == 3
        assert record.cost_usd == 0.625
        assert record.usage == Usage(
            input_tokens=11,
            output_tokens=22,
            cache_creation_input_tokens=30,
            cache_read_input_tokens=40,
        )
        assert record.last_stop_reason == "complete"
        assert record.session_id == "s-9"
        assert record.created_at == created
        if clock is not None:
            assert record.updated_at == created + 3.0
    finally:
        await store.aclose()


@_check(SessionStore)
async def _a_stop_reason_is_kept_as_its_plain_value(harness: StoreHarness) -> None:
    store = await _open(harness)
    try:
        await _checkpoint(store, "coder")
        await store.record_turn(
            "coder",
            stop_reason=StopReason.TOTAL_TIMEOUT,
            cost_usd=None,
            usage=None,
            session_id=None,
        )
        record = await _loaded(store, "coder")
        assert type(record.last_stop_reason) is str
        assert record.last_stop_reason == "total_timeout"
    finally:
        await store.aclose()


@_check(SessionStore)
async def _stored_text_is_redacted(harness: StoreHarness) -> None:
    store = await _open(harness)
    try:
        await _checkpoint(store, "coder")
        secret = "sk-ant-api03-abcdefghijklmnop"
        await store.record_turn(
            "coder",
            stop_reason=f"cli_error: Authorization: Bearer {secret}",
            cost_usd=None,
            usage=None,
            session_id=None,
        )
        reason = (await _loaded(store, "coder")).last_stop_reason
        assert reason is not None
        assert secret not in reason
        assert reason.startswith("cli_error: ")
        assert "[REDACTED]" in reason
    finally:
        await store.aclose()


@_check(SessionStore)
async def _writes_without_a_row_are_refused_naming_the_agent(harness: StoreHarness) -> None:
    store = await _open(harness)
    try:
        with _raises(StoreError, match="'ghost'"):
            await store.record_turn(
                "ghost", stop_reason="complete", cost_usd=1.0, usage=None, session_id=None
            )
        with _raises(StoreError, match="'ghost'"):
            await store.save_state("ghost", b"x")
        live = StoreCapabilities.of(store).live
        if live is not None:
            with _raises(StoreError, match="'ghost'"):
                await live.set_live_process("ghost", pgid=1, pid=1, start_time=1, runtime_id="r")
            await live.clear_live_process("ghost")  # cleanup of nothing is fine
        assert await store.load("ghost") is None
    finally:
        await store.aclose()


@_check(SessionStore)
async def _state_blob_round_trips_and_can_be_dropped(harness: StoreHarness) -> None:
    store = await _open(harness)
    try:
        await _checkpoint(store, "coder")
        blob = bytes(range(256)) * 4096  # 1 MiB, every byte value
        for state in (blob, b"", None):
            await store.save_state("coder", state)
            assert (await _loaded(store, "coder")).state == state
    finally:
        await store.aclose()


@_check(SessionStore)
async def _forget_removes_one_row_and_list_is_by_name(harness: StoreHarness) -> None:
    store = await _open(harness)
    try:
        for name in ("zeta", "alpha", "mid"):
            await _checkpoint(store, name, f"s-{name}")
        assert [r.name for r in await store.list()] == ["alpha", "mid", "zeta"]
        assert await store.forget("mid") is True
        assert await store.forget("mid") is False
        assert await store.load("mid") is None
        records = await store.list()
        assert [(r.name, r.session_id) for r in records] == [
            ("alpha", "s-alpha"),
            ("zeta", "s-zeta"),
        ]
    finally:
        await store.aclose()


@_check(SessionStore)
async def _a_closed_store_refuses_calls_and_reopens_with_its_records(
    harness: StoreHarness,
) -> None:
    store = await _open(harness)
    try:
        await _checkpoint(store, "coder", "s-1")
        with _raises(StoreError, match="already open"):
            async with store:
                pass
        await store.aclose()
        await store.aclose()  # idempotent
        with _raises(StoreError, match="not open"):
            await store.load("coder")
        with _raises(StoreError, match="not open"):
            await _checkpoint(store, "x")
        async with store:
            assert (await _loaded(store, "coder")).session_id == "s-1"
    finally:
        await store.aclose()  # once more: allowed


@_check(SessionStore)
async def _concurrent_writers_from_many_tasks_are_all_kept(harness: StoreHarness) -> None:
    store = await _open(harness)
    live = StoreCapabilities.of(store).live
    try:
        await _checkpoint(store, "shared")

        async def worker(i: int) -> None:
            name = f"agent-{i:03d}"
            await _checkpoint(store, name, f"s-{i}")
            await store.record_turn(
                "shared",
                stop_reason="complete",
                cost_usd=0.25,
                usage=Usage(input_tokens=i),
                session_id=None,
            )
            if live is not None:
                await live.set_live_process(name, pgid=i, pid=i, start_time=i, runtime_id="rt")
            mine = await _loaded(store, name)  # each task reads its own writes
            assert mine.session_id == f"s-{i}"
            assert live is None or mine.live_pgid == i

        n = 60
        async with trio.open_nursery() as nursery:
            for i in range(n):
                nursery.start_soon(worker, i)
        shared = await _loaded(store, "shared")
        assert shared.turns == n
        assert shared.cost_usd == 0.25 * n
        assert shared.usage.input_tokens == sum(range(n))
        assert len(await store.list()) == n + 1
        if live is not None:
            assert [r.live_pgid for r in await live.live_processes()] == list(range(n))
    finally:
        await store.aclose()


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


async def _closing(*stores: SessionStore) -> None:
    for store in stores:
        await store.aclose()


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


# --- failover specs ---


@_check(SpecStore)
async def _specs_keep_their_start_order_and_go_with_forget(harness: StoreHarness) -> None:
    store = await _open(harness)
    kept = StoreCapabilities.of(store).specs
    assert kept is not None
    try:
        assert list(await kept.specs()) == []
        for name in ("zeta", "alpha", "mid"):
            await kept.save_spec(name, f'{{"v": "{name}"}}')  # needs no session row
        await kept.save_spec("zeta", '{"v": 2}')  # replaced, keeps its place
        assert list(await kept.specs()) == [
            ("zeta", '{"v": 2}'),
            ("alpha", '{"v": "alpha"}'),
            ("mid", '{"v": "mid"}'),
        ]
        await kept.save_spec("alpha", None)
        await _checkpoint(store, "mid")
        await store.forget("mid")  # the row and its spec
        assert list(await kept.specs()) == [("zeta", '{"v": 2}')]
    finally:
        await _closing(store)


# --- budgets ---


@_check(BudgetStore)
async def _budgets_keep_their_order_and_limits_and_outlive_a_reopen(
    harness: StoreHarness,
) -> None:
    own = StoredBudget(scope="agent 'zeta'", key="k-own", usd=0.5, tokens=None)
    supervisor = StoredBudget(scope="supervisor", key="k-sup", usd=None, tokens=12_000_000_000)
    runtime = StoredBudget(scope="runtime", key="k-rt", usd=1.4, tokens=900)
    store = await _open(harness)
    kept = StoreCapabilities.of(store).budgets
    assert kept is not None
    try:
        assert list(await kept.budgets()) == []
        await kept.save_budgets("zeta", (runtime,))  # needs no session row
        await kept.save_budgets("zeta", (own, supervisor, runtime))  # replaced, in order
        await kept.save_budgets("alpha", (runtime,))
        await kept.save_budgets("mid", (supervisor,))
        await kept.save_budgets("mid", ())  # none: dropped
    finally:
        await _closing(store)
    store = await _open(harness)
    kept = StoreCapabilities.of(store).budgets
    assert kept is not None
    try:
        assert list(await kept.budgets()) == [
            ("alpha", (runtime,)),
            ("zeta", (own, supervisor, runtime)),
        ]
    finally:
        await _closing(store)


# --- portable transcripts ---


@_check(TranscriptStore)
async def _a_transcript_grows_by_chunks_and_a_stale_one_writes_nothing(
    harness: StoreHarness,
) -> None:
    store = await _open(harness)
    kept = StoreCapabilities.of(store).transcripts
    assert kept is not None
    try:
        assert await kept.load_transcript("coder") is None
        path = "projects/w/s1.jsonl"
        await kept.append_transcript("coder", session_id="s1", path=path, offset=0, data=b"ab")
        await kept.append_transcript("coder", session_id="s1", path=path, offset=2, data=b"cd")
        with _raises(StoreError, match="'coder'"):  # not where the stored one ends
            await kept.append_transcript("coder", session_id="s1", path=path, offset=3, data=b"x")
        with _raises(StoreError):  # another session, not from the start
            await kept.append_transcript("coder", session_id="s2", path=path, offset=4, data=b"x")
        stored = await kept.load_transcript("coder")
        assert stored is not None
        assert (stored.session_id, stored.path, stored.data) == ("s1", path, b"abcd")
        await kept.append_transcript("coder", session_id="s2", path="t2", offset=0, data=b"new")
        stored = await kept.load_transcript("coder")
        assert stored is not None and (stored.session_id, stored.data) == ("s2", b"new")
        with _raises(ValueError):
            await kept.append_transcript("coder", session_id="s2", path="../x", offset=0, data=b"")
        assert await kept.load_transcript("other") is None
    finally:
        await _closing(store)


# --- workspaces ---


def _workspace(name: str, branch: str, base: str | None = None) -> StoredWorkspace:
    return StoredWorkspace(
        name=name,
        repo="/srv/repo",
        path=f"/srv/repo.worktrees/{name}",
        branch=branch,
        base=base,
        node="host-a",
    )


@_check(WorkspaceStore)
async def _a_workspace_is_kept_by_name_replaced_and_outlives_forget(
    harness: StoreHarness,
) -> None:
    store = await _open(harness)
    kept = StoreCapabilities.of(store).workspaces
    assert kept is not None
    try:
        assert list(await kept.workspaces()) == []
        coder = _workspace("coder", "agentrt/coder", base="main")
        await kept.save_workspace(coder)  # needs no session row
        await kept.save_workspace(_workspace("alpha", "agentrt/alpha"))
        assert list(await kept.workspaces()) == [_workspace("alpha", "agentrt/alpha"), coder]
        moved = attrs.evolve(coder, path="/elsewhere", node="host-b")
        await kept.save_workspace(moved)
        await _checkpoint(store, "coder")
        await store.forget("coder")  # the session row only: the worktree may hold work
        assert [w for w in await kept.workspaces() if w.name == "coder"] == [moved]
        assert await kept.drop_workspace("coder") is True
        assert await kept.drop_workspace("coder") is False
        assert [w.name for w in await kept.workspaces()] == ["alpha"]
    finally:
        await _closing(store)


@_check(WorkspaceStore)
async def _a_branch_is_one_agents_whichever_handles_race_for_it(harness: StoreHarness) -> None:
    one, two = await _open(harness), await _open(harness)
    one_kept = StoreCapabilities.of(one).workspaces
    two_kept = StoreCapabilities.of(two).workspaces
    assert one_kept is not None and two_kept is not None
    try:
        coder = _workspace("coder", "agentrt/shared")
        await one_kept.save_workspace(coder)
        with _raises(BranchInUse) as taken:
            await two_kept.save_workspace(_workspace("other", "agentrt/shared"))
        assert (taken[0].repo, taken[0].branch) == ("/srv/repo", "agentrt/shared")
        assert taken[0].holder == "agent 'coder'"
        await one_kept.save_workspace(attrs.evolve(coder, node="host-b"))  # its own: replaced
        elsewhere = attrs.evolve(_workspace("other", "agentrt/shared"), repo="/srv/other")
        await two_kept.save_workspace(elsewhere)  # the same name in another repository
        # Saves racing for one branch from two handles (two programs, or two hosts): the
        # check and the write are one step, so exactly one is stored.
        for round in range(5):
            branch = f"race/{round}"
            stored = await _racing_saves(
                branch, [(f"r{round}-{i}", s) for i, s in enumerate([one_kept, two_kept] * 3)]
            )
            assert len(stored) == 1, stored
            assert [w.name for w in await two_kept.workspaces() if w.branch == branch] == stored
    finally:
        await _closing(one, two)


async def _racing_saves(branch: str, savers: list[tuple[str, WorkspaceStore]]) -> list[str]:
    """Save a workspace on ``branch`` for each (name, handle) at once; the names stored."""
    stored: list[str] = []

    async def save(name: str, store: WorkspaceStore) -> None:
        try:
            await store.save_workspace(_workspace(name, branch))
        except BranchInUse:
            return
        stored.append(name)

    async with trio.open_nursery() as nursery:
        for name, store in savers:
            nursery.start_soon(save, name, store)
    return stored


# --- approvals waiting for a person: decided exactly once, from any handle ---


def _approval(id: str, requested_at: float = 1000.0) -> PendingApproval:
    return PendingApproval(
        id=id,
        name="coder",
        tool_name="Bash",
        tool_use_id=f"toolu_{id}",
        input='{"command": "ls"}',
        reason="shell",
        runtime_id="r-1",
        request=3,
        requested_at=requested_at,
        expires_at=requested_at + 60.0,
    )


_BY_CONSOLE = OperatorDecision(
    allowed=True, updated_input='{"command": "ls -l"}', decided_by="console"
)


@_check(ApprovalStore)
async def _an_approval_is_decided_once_and_removed_with_its_decision(
    harness: StoreHarness,
) -> None:
    store = await _open(harness)
    desk = StoreCapabilities.of(store).approvals
    assert desk is not None
    try:
        assert list(await desk.pending_approvals()) == []
        await desk.put_approval(_approval("b", requested_at=2000.0))
        await desk.put_approval(_approval("a"))
        assert [a.id for a in await desk.pending_approvals()] == ["a", "b"]  # oldest first
        assert (await desk.pending_approvals())[0] == _approval("a")
        with _raises(StoreError, match="'a' exists"):
            await desk.put_approval(_approval("a"))
        assert await desk.decision_of("a") is None
        assert await desk.decide_approval("a", _BY_CONSOLE)
        assert not await desk.decide_approval("a", OperatorDecision(allowed=False, decided_by="x"))
        assert await desk.decision_of("a") == _BY_CONSOLE
        assert [a.id for a in await desk.pending_approvals()] == ["b"]
        assert await desk.remove_approval("a") == _BY_CONSOLE
        assert await desk.remove_approval("a") is None
        assert await desk.decision_of("a") is None
        assert not await desk.decide_approval("a", _BY_CONSOLE)  # gone: refused
        denied = OperatorDecision(allowed=False, message="not here", decided_by="console")
        assert await desk.decide_approval("b", denied)
        assert await desk.remove_approval("b") == denied
        assert await desk.remove_approval("never") is None
        assert not await desk.decide_approval("never", denied)
    finally:
        await store.aclose()


@_check(ApprovalStore)
async def _concurrent_decisions_from_two_handles_decide_once(harness: StoreHarness) -> None:
    one, two = await _open(harness), await _open(harness)
    one_desk = StoreCapabilities.of(one).approvals
    two_desk = StoreCapabilities.of(two).approvals
    assert one_desk is not None and two_desk is not None
    try:
        await one_desk.put_approval(_approval("a"))
        assert [a.id for a in await two_desk.pending_approvals()] == ["a"]
        won: list[str] = []

        async def decide(store: ApprovalStore, by: str) -> None:
            if await store.decide_approval("a", OperatorDecision(allowed=True, decided_by=by)):
                won.append(by)

        async with trio.open_nursery() as nursery:
            for i in range(8):
                nursery.start_soon(decide, one_desk if i % 2 else two_desk, f"console-{i}")
        assert len(won) == 1
        decided = await one_desk.remove_approval("a")
        assert decided is not None and decided.decided_by == won[0]
    finally:
        await _closing(one, two)


# --- the turn history ---


def _turn(name: str, n: int = 1, **changes: Any) -> StoredTurn:
    turn = StoredTurn(
        name=name,
        node="host-a",
        started_at=1000.0 + n,
        ended_at=1000.5 + n,
        duration=0.5,
        outcome="complete",
        cost_usd=0.01 * n,
        usage=Usage(input_tokens=n, output_tokens=2 * n),
        prompt=f"prompt {n}",
        answer=f"answer {n}",
    )
    return attrs.evolve(turn, **changes)


@_check(TurnHistoryStore)
async def _a_turn_with_history_is_counted_and_kept_newest_first_and_bounded(
    harness: StoreHarness,
) -> None:
    store = await _open(harness)
    history = StoreCapabilities.of(store).turn_history
    assert history is not None
    try:
        assert list(await history.turn_history(None, limit=10)) == []
        await _checkpoint(store, "a", "s-1")
        await _checkpoint(store, "b")
        for n in (1, 2, 3):
            await history.record_turn_with_history(_turn("a", n), session_id="s-1", keep=2)
        failed = _turn("b", 4, outcome="interrupted", cost_usd=None, answer=None)
        await history.record_turn_with_history(failed, session_id="s-2", keep=2)
        record = await _loaded(store, "a")
        assert (record.turns, record.last_stop_reason) == (3, "complete")
        assert _near(record.cost_usd, 0.06, 1e-9)
        assert record.usage == Usage(input_tokens=6, output_tokens=12)
        assert (await _loaded(store, "b")).session_id == "s-2"
        # The two newest of "a" stay; the first went out with the third.
        assert list(await history.turn_history("a", limit=10)) == [_turn("a", 3), _turn("a", 2)]
        assert [t.name for t in await history.turn_history(None, limit=10)] == ["b", "a", "a"]
        assert list(await history.turn_history(None, limit=1, offset=1)) == [_turn("a", 3)]
        assert list(await history.turn_history("b", limit=10)) == [failed]
        assert list(await history.turn_history("a", limit=0)) == []
        assert list(await history.turn_history("nobody", limit=10)) == []
        with _raises(StoreError, match="'c'"):  # no row: nothing is kept
            await history.record_turn_with_history(_turn("c"), session_id=None, keep=2)
        assert list(await history.turn_history("c", limit=10)) == []
        for bad in (0, -1):
            with _raises(ValueError, match="keep"):
                await history.record_turn_with_history(_turn("a"), session_id=None, keep=bad)
        with _raises(ValueError, match="offset"):
            await history.turn_history("a", limit=1, offset=-1)
        assert (await _loaded(store, "a")).turns == 3
        assert await store.forget("a")  # its history goes with its row
        assert [t.name for t in await history.turn_history(None, limit=10)] == ["b"]
        await _checkpoint(store, "d")
        for n in range(1, 5):  # fewer than it keeps: every one stays
            await history.record_turn_with_history(_turn("d", n), session_id=None, keep=5)
        assert [t.prompt for t in await history.turn_history("d", limit=10)] == [
            "prompt 4",
            "prompt 3",
            "prompt 2",
            "prompt 1",
        ]
    finally:
        await store.aclose()


@_check(TurnHistoryStore)
async def _a_turn_history_keeps_its_stop_reason_redacted_and_outlives_a_reopen(
    harness: StoreHarness,
) -> None:
    store = await _open(harness)
    history = StoreCapabilities.of(store).turn_history
    assert history is not None
    secret = "sk-ant-api03-" + "x" * 30
    try:
        await _checkpoint(store, "a")
        turn = _turn("a", outcome=f"custom failure {secret}")
        await history.record_turn_with_history(turn, session_id=None, keep=5)
    finally:
        await store.aclose()
    again = await _open(harness)
    again_history = StoreCapabilities.of(again).turn_history
    assert again_history is not None
    try:
        [kept] = await again_history.turn_history("a", limit=5)
        assert secret not in kept.outcome and kept.outcome.startswith("custom failure")
        assert kept == attrs.evolve(turn, outcome=kept.outcome)
        assert (await _loaded(again, "a")).last_stop_reason == kept.outcome
    finally:
        await again.aclose()
