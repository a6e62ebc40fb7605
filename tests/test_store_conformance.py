"""The store conformance kit (`agentrt.testing.store_conformance`) on agentrt's three stores
and on a toy store that has the core only; and what the runtime refuses, by name, on a
store that lacks a capability."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

import attrs
import pytest
import trio
from _helpers import echo_backend

import agentrt
from agentrt import (
    Agent,
    AgentNotFound,
    InvalidOptions,
    MemoryStore,
    PostgresStore,
    SessionRecord,
    SQLiteStore,
    StoreError,
    Usage,
    open_runtime,
)
from agentrt.store import (
    ApprovalStore,
    BudgetStore,
    CredentialStore,
    LeaseStore,
    LiveProcessStore,
    RequestStore,
    RoutingStore,
    ScheduleStore,
    SessionRow,
    SessionStore,
    SpecStore,
    StoreCapabilities,
    TranscriptStore,
    TurnHistoryStore,
    WorkspaceStore,
    no_row,
    stored_reason,
)
from agentrt.testing import ManualClock, StoreCheck, StoreHarness, store_conformance


@attrs.define
class ToyStore:
    """A store with the core protocol only, over a dict: what a user's first store (before
    leases, live records, specs or transcripts) looks like."""

    clock: Callable[[], float] = time.time
    rows: dict[str, SessionRow] = attrs.field(factory=dict)
    _open: bool = False

    async def __aenter__(self) -> Self:
        await trio.lowlevel.checkpoint()
        if self._open:
            raise StoreError("<toy>", "already open")
        self._open = True
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        self._open = False
        await trio.lowlevel.checkpoint()

    def _row(self, name: str) -> SessionRow:
        if not self._open:
            raise StoreError("<toy>", "store is not open")
        row = self.rows.get(name)
        if row is None:
            raise no_row("<toy>", name)
        row.updated_at = self.clock()
        return row

    async def _enter(self) -> None:
        await trio.lowlevel.checkpoint()
        if not self._open:
            raise StoreError("<toy>", "store is not open")

    async def load(self, name: str) -> SessionRecord | None:
        await self._enter()
        row = self.rows.get(name)
        return None if row is None else SessionRecord(**attrs.asdict(row, recurse=False))

    async def checkpoint_session(
        self, name: str, *, backend: str, session_id: str | None, cwd: str | None
    ) -> None:
        await self._enter()
        if name in self.rows:
            row = self._row(name)
            if row.session_id != session_id:
                row.session_totals = agentrt.backend.SessionTotals()
            row.backend, row.session_id, row.cwd = backend, session_id, cwd
            return
        now = self.clock()
        self.rows[name] = SessionRow(
            name=name,
            backend=backend,
            session_id=session_id,
            cwd=cwd,
            turns=0,
            cost_usd=0.0,
            usage=Usage(),
            last_stop_reason=None,
            created_at=now,
            updated_at=now,
            live_pgid=None,
            live_pid=None,
            live_start_time=None,
            runtime_id=None,
            state=None,
        )

    async def record_turn(
        self,
        name: str,
        *,
        stop_reason: str,
        cost_usd: float | None,
        usage: Usage | None,
        session_id: str | None,
    ) -> None:
        await self._enter()
        row = self._row(name)
        row.turns += 1
        row.cost_usd += cost_usd or 0.0
        row.usage = row.usage.plus(usage or Usage())
        row.session_totals = row.session_totals.add(usage, cost_usd)
        row.last_stop_reason = stored_reason(stop_reason)
        if session_id is not None:
            row.session_id = session_id

    async def save_state(self, name: str, state: bytes | None) -> None:
        await self._enter()
        self._row(name).state = state

    async def forget(self, name: str) -> bool:
        await self._enter()
        return self.rows.pop(name, None) is not None

    async def list(self) -> Sequence[SessionRecord]:
        await self._enter()
        return tuple(
            SessionRecord(**attrs.asdict(row, recurse=False))
            for _, row in sorted(self.rows.items())
        )


@attrs.define
class Handles:
    """``open_handle`` for a store whose second handle comes from the first (``another``)."""

    first: SessionStore
    another: Callable[[SessionStore], SessionStore]
    made: int = 0

    def __call__(self) -> SessionStore:
        self.made += 1
        return self.first if self.made == 1 else self.another(self.first)


def harness_of(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> StoreHarness:
    clock, lease_clock = ManualClock(), ManualClock(500.0)
    if kind == "memory":
        memory = MemoryStore(clock=clock, lease_clock=lease_clock)
        return StoreHarness(
            Handles(memory, lambda first: memory.handle()), clock=clock, lease_clock=lease_clock
        )
    if kind == "sqlite":
        path = tmp_path / "sessions.sqlite3"
        return StoreHarness(
            lambda: SQLiteStore(path, clock=clock, lease_clock=lease_clock),
            clock=clock,
            lease_clock=lease_clock,
        )
    if kind == "postgres":  # leases on the server's clock: real time, a short ttl
        dsn = request.getfixturevalue("postgres_dsn")
        return StoreHarness(lambda: PostgresStore(dsn, clock=clock), clock=clock, ttl=2.0)
    toy = ToyStore(clock=clock)
    return StoreHarness(lambda: toy, clock=clock)


CHECKS = [check.name for check in store_conformance(StoreHarness(ToyStore))]


@pytest.mark.parametrize("name", CHECKS)
@pytest.mark.parametrize("kind", ["memory", "sqlite", "postgres", "toy"])
def test_the_store_passes_the_check(
    kind: str, name: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    # Not a trio test: a skip raised inside trio's run loses its reason.
    harness = harness_of(kind, request, tmp_path)
    (check,) = [check for check in store_conformance(harness) if check.name == name]
    why = check.skipped()
    if why is not None:
        # The toy lacks every capability; agentrt's stores lack only routing (not checked
        # here) and, on PostgreSQL, a lease clock to move by hand; MemoryStore keeps each
        # mailbox in memory, not requests in the store.
        assert (
            kind == "toy"
            or (kind == "postgres" and "lease clock" in why)
            or (kind == "memory" and why == "MemoryStore is not a RequestStore")
        ), why
        pytest.skip(why)
    trio.run(check.run)


def test_the_kit_holds_a_check_for_every_capability_and_names_its_protocol() -> None:
    checks = store_conformance(StoreHarness(ToyStore))
    assert {check.requires for check in checks} == {
        SessionStore,
        LiveProcessStore,
        LeaseStore,
        SpecStore,
        BudgetStore,
        TranscriptStore,
        WorkspaceStore,
        ApprovalStore,
        TurnHistoryStore,
        RequestStore,
        CredentialStore,
        ScheduleStore,
    }
    assert len({check.name for check in checks}) == len(checks)
    assert all(isinstance(check, StoreCheck) for check in checks)


async def test_a_check_that_does_not_apply_says_why_and_does_not_run() -> None:
    harness = StoreHarness(ToyStore)
    [check] = [c for c in store_conformance(harness) if c.requires is LeaseStore][:1]
    assert check.skipped() == "ToyStore is not a LeaseStore"
    with pytest.raises(RuntimeError, match="does not apply: ToyStore is not a LeaseStore"):
        await check.run()


async def test_a_store_that_breaks_the_contract_fails_its_check() -> None:
    @attrs.define
    class Forgetful(ToyStore):
        async def forget(self, name: str) -> bool:
            await self._enter()
            return True  # claims a row it never had

    harness = StoreHarness(Forgetful)
    [check] = [c for c in store_conformance(harness) if c.name == "an_empty_store_has_no_records"]
    with pytest.raises(AssertionError):
        await check.run()


def test_agentrts_stores_have_every_capability_routing_and_requests_where_programs_share(
    tmp_path: Path,
) -> None:
    capabilities = (
        LiveProcessStore,
        LeaseStore,
        SpecStore,
        BudgetStore,
        TranscriptStore,
        WorkspaceStore,
        ApprovalStore,
        TurnHistoryStore,
    )
    for store in (MemoryStore(), SQLiteStore(tmp_path / "s.sqlite3"), PostgresStore("host=x")):
        assert all(isinstance(store, capability) for capability in capabilities)
        # Routing and durable requests between programs: every store but the one in a
        # program's memory.
        assert isinstance(store, RoutingStore) is not isinstance(store, MemoryStore)
        assert isinstance(store, RequestStore) is not isinstance(store, MemoryStore)
    lacked = LiveProcessStore | LeaseStore | SpecStore | BudgetStore | WorkspaceStore
    assert not isinstance(ToyStore(), lacked | TurnHistoryStore)
    assert isinstance(ToyStore(), SessionStore)


async def test_the_runtime_tells_what_its_store_can_do(tmp_path: Path) -> None:
    # Asked once, as the runtime opens the store: each capability is the store or None.
    names = [field.name for field in attrs.fields(StoreCapabilities)]
    async with open_runtime(store=ToyStore()) as rt:
        assert [getattr(rt.store_capabilities, name) for name in names] == [None] * len(names)
    store = SQLiteStore(tmp_path / "s.sqlite3")
    async with open_runtime(store=store) as rt:
        capabilities = rt.store_capabilities
        assert capabilities == StoreCapabilities.of(store)
        assert {name for name in names if getattr(capabilities, name) is store} == set(names)
        assert capabilities.requests is store


# --- the runtime on the toy store: what needs a capability is refused, naming it ---


async def test_a_scripted_agent_runs_on_a_core_only_store() -> None:
    store = ToyStore()
    async with open_runtime(store=store) as rt:
        await rt.start_agent(Agent, name="x", backend=echo_backend())
        assert (await rt.ask("x", "hello")).text == "echo hello"
        await rt.stop_agent("x")
    record = store.rows["x"]
    assert (record.turns, record.last_stop_reason) == (1, "complete")


async def test_a_cli_agent_on_a_store_without_live_records_is_refused_by_name() -> None:
    async with open_runtime(store=ToyStore()) as rt:
        with pytest.raises(InvalidOptions) as refused:
            await rt.start_agent(Agent, name="coder", backend="claude")
        assert refused.value.key == "store"
        assert "LiveProcessStore" in str(refused.value)
        assert "'coder' runs CLI processes" in str(refused.value)
        assert rt.agents() == ()


@pytest.mark.parametrize(
    ("option", "protocol"), [("portable", "TranscriptStore"), ("failover", "SpecStore")]
)
async def test_an_option_the_store_cannot_keep_is_refused_at_start(
    option: str, protocol: str
) -> None:
    async with open_runtime(store=ToyStore()) as rt:
        with pytest.raises(InvalidOptions) as refused:
            await rt.start_agent(Agent, name="x", backend=echo_backend(), **{option: True})
        assert refused.value.key == option
        assert protocol in str(refused.value)
        assert rt.agents() == ()


@pytest.mark.parametrize(
    ("option", "value"), [("node", "host-a"), ("lease_ttl", 30), ("host_agents", True)]
)
async def test_ownership_options_need_a_lease_store(option: str, value: object) -> None:
    with pytest.raises(InvalidOptions) as refused:
        async with open_runtime(store=ToyStore(), **{option: value}):  # type: ignore[arg-type]
            pass
    assert refused.value.key == option
    assert "LeaseStore" in str(refused.value)


async def test_a_schedule_needs_a_schedule_store() -> None:
    async with open_runtime(store=ToyStore()) as rt:
        with pytest.raises(InvalidOptions) as refused:
            await rt.schedule("coder", "check the build", every=60)
        assert refused.value.key == "every"
        assert "ScheduleStore" in str(refused.value)
        with pytest.raises(InvalidOptions, match="ScheduleStore"):
            await rt.run_schedule("coder", "1")
        assert await rt.schedules("coder") == ()


async def test_a_name_the_runtime_does_not_run_on_a_store_without_routing() -> None:
    async with open_runtime(store=ToyStore()) as rt:
        with pytest.raises(AgentNotFound, match="store reaches no other runtime's agents"):
            await rt.ask("elsewhere", "hi")


async def test_an_object_that_is_not_a_store_is_refused_naming_the_argument() -> None:
    with pytest.raises(TypeError, match="store"):
        async with open_runtime(store=object()):  # type: ignore[arg-type]
            pass
