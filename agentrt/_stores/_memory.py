"""`MemoryStore`: a SessionStore in this process's memory, for tests."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable, Sequence, Set
from typing import Self

import attrs
import trio

from .._errors import BranchInUse, StoreError
from .._events import NO_TOTALS, Usage
from .._records import (
    Lease,
    LeaseOwner,
    OperatorDecision,
    PendingApproval,
    SessionRecord,
    SessionRow,
    StoredBudget,
    StoredCredential,
    StoredTranscript,
    StoredTurn,
    StoredWorkspace,
)
from .._schedule import Schedule
from ._history import check_keep, check_page
from ._protocols import NO_USAGE, ClosedOnExit, check_fence, granted_epoch, no_row, stored_reason
from ._transcripts import MemoryTranscripts


@attrs.define
class _LeaseRow:
    epoch: int
    owner: LeaseOwner | None
    renewed_at: float
    expires_at: float


@attrs.define
class _Tables:
    """What the handles of one MemoryStore share."""

    # Mutable rows, changed field by field; a SessionRecord is made only when one is read
    # (a frozen record replaced by attrs.evolve on each update costs scripted asks).
    rows: dict[str, SessionRow] = attrs.field(factory=dict)
    leases: dict[str, _LeaseRow] = attrs.field(factory=dict)
    transcripts: MemoryTranscripts = attrs.field(factory=MemoryTranscripts)
    # Supervisor specs by name, in start order (a replaced spec keeps its place).
    specs: dict[str, str] = attrs.field(factory=dict)
    budgets: dict[str, tuple[StoredBudget, ...]] = attrs.field(factory=dict)
    workspaces: dict[str, StoredWorkspace] = attrs.field(factory=dict)
    # Tool calls waiting for a person, by id, with the decision once taken.
    approvals: dict[str, tuple[PendingApproval, OperatorDecision | None]] = attrs.field(
        factory=dict
    )
    # Each agent's finished turns, oldest first, numbered in the order they were recorded
    # (a list: a deque costs 600 bytes an agent before its first entry).
    history: dict[str, list[tuple[int, StoredTurn]]] = attrs.field(factory=dict)
    recorded: itertools.count[int] = attrs.field(factory=itertools.count)
    # What holds each credential, by key, and the credential each agent uses.
    credentials: dict[str, StoredCredential] = attrs.field(factory=dict)
    # Each agent's: its credential's key, whether its halt holds it, whether its park does.
    agent_credentials: dict[str, tuple[str, bool, bool]] = attrs.field(factory=dict)
    # Each agent's schedules by id, in the order they were added.
    schedules: dict[str, Schedule] = attrs.field(factory=dict)


@attrs.define(eq=False)
class MemoryStore(ClosedOnExit):
    """A store in this process's memory, for tests: every capability of `agentrt.store`
    but routing.

    It uses no threads, so it keeps exact times under ``trio.testing.MockClock`` (a store
    that waits on a worker thread lets an autojumping clock run ahead). Its records outlive
    :meth:`~SessionStore.aclose`: opening it again, for instance in a second runtime, finds them.

    ``clock`` gives the records' timestamps (``time.time`` unless a test passes its own).
    ``lease_clock`` measures leases: trio's clock (``trio.current_time``, so a
    ``MockClock`` moves leases too) unless a test passes its own. The records and leases
    are this object's; :meth:`handle` gives another handle on them, as a second program
    opening the same SQLite file has (its own open state and leases), for a second runtime
    in the same test.

    Cancellation: each method is one checkpoint followed by the whole change, so a
    cancelled call changes nothing.
    """

    clock: Callable[[], float] = time.time
    lease_clock: Callable[[], float] = trio.current_time
    _tables: _Tables = attrs.field(factory=_Tables, init=False, repr=False)
    # The epoch of each lease this handle acquired, which its writes for that name carry.
    _epochs: dict[str, int] = attrs.field(factory=dict, init=False, repr=False)
    _open: bool = attrs.field(default=False, init=False)

    _PATH = "<memory>"

    def handle(self) -> MemoryStore:
        """Another handle on this store's records and leases, closed until entered."""
        other = MemoryStore(clock=self.clock, lease_clock=self.lease_clock)
        other._tables = self._tables
        return other

    @property
    def shared_between_programs(self) -> bool:
        """False: only this program sees the store (its handles are its own)."""
        return False

    @property
    def _rows(self) -> dict[str, SessionRow]:
        return self._tables.rows

    @property
    def _leases(self) -> dict[str, _LeaseRow]:
        return self._tables.leases

    async def __aenter__(self) -> Self:
        await trio.lowlevel.checkpoint()
        if self._open:
            raise StoreError(self._PATH, "already open")
        self._open = True
        self._epochs.clear()
        return self

    async def aclose(self) -> None:
        self._open = False
        await trio.lowlevel.checkpoint()

    async def _enter(self) -> None:
        # A cancellation point, not a schedule point: nothing here waits, and a turn makes
        # several store calls.
        await trio.lowlevel.checkpoint_if_cancelled()
        if not self._open:
            raise StoreError(self._PATH, "store is not open")

    def _fence(self, name: str) -> None:
        epoch = self._epochs.get(name)
        if epoch is None:
            return  # this handle holds no lease on it: its writes are not fenced
        row = self._tables.leases.get(name)
        if row is not None and row.epoch == epoch and row.owner is not None:
            return  # still the holder (every write of a turn): no Lease made to say so
        check_fence(self._PATH, name, epoch, self._lease(name))

    def _lease(self, name: str) -> Lease | None:
        row = self._leases.get(name)
        if row is None:
            return None
        now = self.lease_clock()
        return Lease(
            name=name,
            epoch=row.epoch,
            owner=row.owner,
            age=now - row.renewed_at,
            remaining=row.expires_at - now,
        )

    def _changing(self, name: str) -> SessionRow:
        """The row of ``name``, stamped as updated now; `StoreError` without one."""
        row = self._tables.rows.get(name)
        if row is None:
            raise no_row(self._PATH, name)
        row.updated_at = self.clock()
        return row

    async def load(self, name: str) -> SessionRecord | None:
        await self._enter()
        row = self._rows.get(name)
        return None if row is None else _record(row)

    async def checkpoint_session(
        self, name: str, *, backend: str, session_id: str | None, cwd: str | None
    ) -> None:
        await self._enter()
        self._fence(name)
        if name in self._rows:
            row = self._changing(name)
            if row.session_id != session_id:
                row.session_totals = NO_TOTALS
            row.backend, row.session_id, row.cwd = backend, session_id, cwd
            return
        now = self.clock()
        self._rows[name] = SessionRow(
            name=name,
            backend=backend,
            session_id=session_id,
            cwd=cwd,
            turns=0,
            cost_usd=0.0,
            usage=NO_USAGE,
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
        self._count_turn(name, stored_reason(stop_reason), cost_usd, usage, session_id)

    def _count_turn(
        self,
        name: str,
        reason: str,
        cost_usd: float | None,
        usage: Usage | None,
        session_id: str | None,
    ) -> None:
        self._fence(name)
        row = self._changing(name)
        row.turns += 1
        row.cost_usd += cost_usd or 0.0
        if usage is not None:
            row.usage = row.usage.plus(usage)
        row.session_totals = row.session_totals.add(usage, cost_usd)
        row.last_stop_reason = reason
        if session_id is not None:
            row.session_id = session_id

    async def set_live_process(
        self,
        name: str,
        *,
        pgid: int,
        pid: int,
        start_time: int,
        runtime_id: str,
        marker: str | None = None,
    ) -> None:
        await self._enter()
        self._fence(name)
        row = self._changing(name)
        row.live_pgid, row.live_pid, row.live_start_time = pgid, pid, start_time
        row.runtime_id, row.live_marker = runtime_id, marker
        row.live_idle = False

    async def set_live_idle(self, name: str, idle: bool) -> None:
        await self._enter()
        self._fence(name)
        row = self._rows.get(name)
        if row is not None and row.live_pgid is not None:
            self._changing(name).live_idle = idle

    async def clear_live_process(self, name: str) -> None:
        await self._enter()
        self._fence(name)
        row = self._rows.get(name)
        if row is not None and row.live_pgid is not None:
            row = self._changing(name)
            row.live_pgid = row.live_pid = row.live_start_time = None
            row.runtime_id = row.live_marker = None
            row.live_idle = False

    async def live_processes(self) -> Sequence[SessionRecord]:
        await self._enter()
        return tuple(r for r in self._all() if r.live_pgid is not None)

    async def save_state(self, name: str, state: bytes | None) -> None:
        await self._enter()
        self._fence(name)
        self._changing(name).state = None if state is None else bytes(state)

    async def forget(self, name: str) -> bool:
        await self._enter()
        self._fence(name)
        self._tables.specs.pop(name, None)
        self._tables.history.pop(name, None)
        return self._rows.pop(name, None) is not None

    async def record_turn_with_history(
        self, turn: StoredTurn, *, session_id: str | None, keep: int
    ) -> None:
        check_keep(keep)
        await self._enter()
        reason = stored_reason(turn.outcome)
        self._count_turn(turn.name, reason, turn.cost_usd, turn.usage, session_id)
        entries = self._tables.history.setdefault(turn.name, [])
        # A stop reason is kept as it is (the common case): no copy of the entry for it.
        stored = turn if reason == turn.outcome else attrs.evolve(turn, outcome=reason)
        entries.append((next(self._tables.recorded), stored))
        if len(entries) > keep:
            del entries[: len(entries) - keep]

    async def turn_history(
        self, name: str | None, *, limit: int, offset: int = 0
    ) -> Sequence[StoredTurn]:
        check_page(limit, offset)
        await self._enter()
        history = self._tables.history
        lists = [history.get(name, ())] if name is not None else list(history.values())
        entries = (entry for entries in lists for entry in entries)
        newest = sorted(entries, key=lambda entry: entry[0], reverse=True)
        return tuple(turn for _, turn in newest[offset : offset + limit])

    async def save_spec(self, name: str, spec: str | None) -> None:
        await self._enter()
        self._fence(name)
        if spec is None:
            self._tables.specs.pop(name, None)
        else:
            self._tables.specs[name] = spec

    async def specs(self) -> Sequence[tuple[str, str]]:
        await self._enter()
        return tuple(self._tables.specs.items())

    async def save_budgets(self, name: str, budgets: Sequence[StoredBudget]) -> None:
        await self._enter()
        self._fence(name)
        if budgets:
            self._tables.budgets[name] = tuple(budgets)
        else:
            self._tables.budgets.pop(name, None)

    async def budgets(self) -> Sequence[tuple[str, tuple[StoredBudget, ...]]]:
        await self._enter()
        return tuple(sorted(self._tables.budgets.items()))

    async def list(self) -> Sequence[SessionRecord]:
        await self._enter()
        return self._all()

    async def save_credential(self, credential: StoredCredential) -> None:
        await self._enter()
        self._tables.credentials[credential.key] = attrs.evolve(
            credential, agents=(), ignore_halt=(), ignore_park=()
        )

    async def use_credential(
        self, name: str, key: str, *, halts: bool = True, parks: bool = True
    ) -> None:
        await self._enter()
        self._tables.agent_credentials[name] = (key, halts, parks)

    async def credential(self, key: str) -> StoredCredential | None:
        await self._enter()
        return self._tables.credentials.get(key)

    async def credentials(self) -> Sequence[StoredCredential]:
        await self._enter()
        used = sorted(self._tables.agent_credentials.items())

        def of(stored: StoredCredential) -> StoredCredential:
            mine = [(name, halts, parks) for name, (key, halts, parks) in used if key == stored.key]
            return attrs.evolve(
                stored,
                agents=tuple(name for name, _, _ in mine),
                ignore_halt=tuple(name for name, halts, _ in mine if not halts),
                ignore_park=tuple(name for name, _, parks in mine if not parks),
            )

        return tuple(of(stored) for _, stored in sorted(self._tables.credentials.items()))

    async def save_workspace(self, workspace: StoredWorkspace) -> None:
        await self._enter()
        self._fence(workspace.name)
        w = workspace
        for other in self._tables.workspaces.values():  # checked and stored in one step
            if (other.repo, other.branch) == (w.repo, w.branch) and other.name != w.name:
                raise BranchInUse(w.repo, w.branch, f"agent {other.name!r}")
        self._tables.workspaces[w.name] = w

    async def drop_workspace(self, name: str) -> bool:
        await self._enter()
        self._fence(name)
        return self._tables.workspaces.pop(name, None) is not None

    async def workspaces(self) -> Sequence[StoredWorkspace]:
        await self._enter()
        return tuple(w for _, w in sorted(self._tables.workspaces.items()))

    async def put_approval(self, approval: PendingApproval) -> None:
        await self._enter()
        if approval.id in self._tables.approvals:
            raise StoreError(self._PATH, f"an approval with id {approval.id!r} exists")
        self._tables.approvals[approval.id] = (approval, None)

    async def pending_approvals(self) -> Sequence[PendingApproval]:
        await self._enter()
        now = self.clock()
        rows = self._tables.approvals.values()
        pending = (a for a, decided in rows if decided is None and a.expires_at > now)
        return tuple(sorted(pending, key=lambda a: (a.requested_at, a.id)))

    async def decide_approval(self, id: str, decision: OperatorDecision) -> bool:
        await self._enter()
        found = self._tables.approvals.get(id)
        if found is None or found[1] is not None or found[0].expires_at <= self.clock():
            return False
        self._tables.approvals[id] = (found[0], decision)
        return True

    async def decision_of(self, id: str) -> OperatorDecision | None:
        await self._enter()
        found = self._tables.approvals.get(id)
        return None if found is None else found[1]

    async def remove_approval(self, id: str) -> OperatorDecision | None:
        await self._enter()
        found = self._tables.approvals.pop(id, None)
        return None if found is None else found[1]

    async def add_schedule(self, schedule: Schedule) -> Schedule:
        await self._enter()
        kept = self._tables.schedules
        if schedule.id in kept:
            raise StoreError(self._PATH, f"a schedule with id {schedule.id!r} exists")
        if schedule.key is not None:
            for other in kept.values():
                if other.name == schedule.name and other.key == schedule.key:
                    return other
        kept[schedule.id] = schedule
        return schedule

    async def schedules(self, name: str | None = None) -> Sequence[Schedule]:
        await self._enter()
        kept = self._tables.schedules.values()
        return tuple(s for s in kept if name is None or s.name == name)

    async def drop_schedule(self, name: str, id: str) -> bool:
        await self._enter()
        kept = self._tables.schedules
        if id not in kept or kept[id].name != name:
            return False
        del kept[id]
        return True

    async def make_schedule_due(self, name: str, id: str, due: float) -> bool:
        await self._enter()
        kept = self._tables.schedules
        if id not in kept or kept[id].name != name:
            return False
        kept[id] = attrs.evolve(kept[id], next_due=due)
        return True

    async def record_schedule_fire(
        self,
        name: str,
        id: str,
        *,
        due: float,
        next_due: float,
        fired_at: float | None,
        request: str | None,
    ) -> bool:
        await self._enter()
        kept = self._tables.schedules
        schedule = kept.get(id)
        if schedule is None or schedule.name != name or schedule.next_due != due:
            return False
        if fired_at is None:
            kept[id] = attrs.evolve(schedule, next_due=next_due)
        else:
            kept[id] = attrs.evolve(
                schedule, next_due=next_due, last_run=fired_at, last_request=request
            )
        return True

    async def append_transcript(
        self, name: str, *, session_id: str, path: str, offset: int, data: bytes
    ) -> None:
        await self._enter()
        self._fence(name)
        self._tables.transcripts.append(self._PATH, name, session_id, path, offset, data)

    async def load_transcript(self, name: str) -> StoredTranscript | None:
        await self._enter()
        return self._tables.transcripts.load(name)

    async def acquire_lease(
        self, name: str, owner: LeaseOwner, *, ttl: float, replacing: int | None = None
    ) -> Lease:
        await self._enter()
        epoch = granted_epoch(name, self._lease(name), replacing)
        now = self.lease_clock()
        self._leases[name] = _LeaseRow(epoch, owner, now, now + ttl)
        self._epochs[name] = epoch
        lease = self._lease(name)
        assert lease is not None
        return lease

    async def renew_leases(self, *, ttl: float) -> Set[str]:
        await self._enter()
        now = self.lease_clock()
        lost = set()
        for name, epoch in self._epochs.items():
            row = self._leases.get(name)
            if row is None or row.epoch != epoch or row.owner is None:
                lost.add(name)
            else:
                row.renewed_at, row.expires_at = now, now + ttl
        return frozenset(lost)

    async def release_leases(self, names: Iterable[str]) -> None:
        await self._enter()
        for name in names:
            epoch = self._epochs.pop(name, None)
            row = self._leases.get(name)
            if row is not None and row.epoch == epoch:
                row.owner = None
                if epoch == 1 and name not in self._rows:
                    del self._leases[name]

    async def leases(self) -> Sequence[Lease]:
        await self._enter()
        return tuple(lease for name in sorted(self._leases) if (lease := self._lease(name)))

    def _all(self) -> tuple[SessionRecord, ...]:
        return tuple(_record(row) for _, row in sorted(self._rows.items()))


def _record(row: SessionRow) -> SessionRecord:
    return SessionRecord(**attrs.asdict(row, recurse=False))
