"""`MemoryStore`: a SessionStore in this process's memory, for tests."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Self

import attrs
import trio

from ._errors import StoreError
from ._events import NO_TOTALS, Usage
from ._store import NO_USAGE, ClosedOnExit, SessionRecord, SessionRow, no_row, stored_reason


@attrs.define(eq=False)
class MemoryStore(ClosedOnExit):
    """A :class:`SessionStore` in this process's memory, for tests.

    It uses no threads, so it keeps exact times under ``trio.testing.MockClock`` (a store
    that waits on a worker thread lets an autojumping clock run ahead). Its records outlive
    :meth:`aclose`: opening it again, for instance in a second runtime, finds them.

    ``clock`` gives the records' timestamps (``time.time`` unless a test passes its own).

    Cancellation: each method is one checkpoint followed by the whole change, so a
    cancelled call changes nothing.
    """

    clock: Callable[[], float] = time.time
    # Mutable rows, changed field by field; a SessionRecord is made only when one is read
    # (a frozen record replaced by attrs.evolve on each update costs scripted asks).
    _rows: dict[str, SessionRow] = attrs.field(factory=dict, init=False, repr=False)
    _open: bool = attrs.field(default=False, init=False)

    _PATH = "<memory>"

    async def __aenter__(self) -> Self:
        await trio.lowlevel.checkpoint()
        if self._open:
            raise StoreError(self._PATH, "already open")
        self._open = True
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

    def _changing(self, name: str) -> SessionRow:
        """The row of ``name``, stamped as updated now; `StoreError` without one."""
        row = self._rows.get(name)
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
        row = self._changing(name)
        row.turns += 1
        row.cost_usd += cost_usd or 0.0
        row.usage = row.usage.plus(usage or NO_USAGE)
        row.session_totals = row.session_totals.add(usage, cost_usd)
        row.last_stop_reason = stored_reason(stop_reason)
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
        row = self._changing(name)
        row.live_pgid, row.live_pid, row.live_start_time = pgid, pid, start_time
        row.runtime_id, row.live_marker = runtime_id, marker

    async def clear_live_process(self, name: str) -> None:
        await self._enter()
        row = self._rows.get(name)
        if row is not None and row.live_pgid is not None:
            row = self._changing(name)
            row.live_pgid = row.live_pid = row.live_start_time = None
            row.runtime_id = row.live_marker = None

    async def live_processes(self) -> Sequence[SessionRecord]:
        await self._enter()
        return tuple(r for r in self._all() if r.live_pgid is not None)

    async def save_state(self, name: str, state: bytes | None) -> None:
        await self._enter()
        self._changing(name).state = None if state is None else bytes(state)

    async def forget(self, name: str) -> bool:
        await self._enter()
        return self._rows.pop(name, None) is not None

    async def list(self) -> Sequence[SessionRecord]:
        await self._enter()
        return self._all()

    def _all(self) -> tuple[SessionRecord, ...]:
        return tuple(_record(row) for _, row in sorted(self._rows.items()))


def _record(row: SessionRow) -> SessionRecord:
    return SessionRecord(**attrs.asdict(row, recurse=False))
