"""`MemoryStore`: a SessionStore in this process's memory, for tests."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, Self

import attrs
import trio

from ._errors import StoreError
from ._events import NO_TOTALS, Usage
from ._store import NO_USAGE, ClosedOnExit, SessionRecord, no_row, stored_reason


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
    # Each record's fields as a dict: a turn's updates are dict updates, and a SessionRecord
    # is made only when one is read (attrs.evolve per update cost more than a scripted turn's
    # mailbox round trip).
    _records: dict[str, dict[str, Any]] = attrs.field(factory=dict, init=False, repr=False)
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

    def _update(self, name: str, **changes: Any) -> None:
        record = self._records.get(name)
        if record is None:
            raise no_row(self._PATH, name)
        record.update(changes, updated_at=self.clock())

    async def load(self, name: str) -> SessionRecord | None:
        await self._enter()
        record = self._records.get(name)
        return None if record is None else SessionRecord(**record)

    async def checkpoint_session(
        self, name: str, *, backend: str, session_id: str | None, cwd: str | None
    ) -> None:
        await self._enter()
        record = self._records.get(name)
        if record is not None:
            same = record["session_id"] == session_id
            totals = record["session_totals"] if same else NO_TOTALS
            self._update(
                name, backend=backend, session_id=session_id, cwd=cwd, session_totals=totals
            )
            return
        now = self.clock()
        new = SessionRecord(
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
        self._records[name] = attrs.asdict(new, recurse=False)

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
        record = self._records.get(name)
        if record is None:
            raise no_row(self._PATH, name)
        self._update(
            name,
            turns=record["turns"] + 1,
            cost_usd=record["cost_usd"] + (cost_usd or 0.0),
            usage=record["usage"].plus(usage or NO_USAGE),
            session_totals=record["session_totals"].add(usage, cost_usd),
            last_stop_reason=stored_reason(stop_reason),
            session_id=record["session_id"] if session_id is None else session_id,
        )

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
        self._update(
            name,
            live_pgid=pgid,
            live_pid=pid,
            live_start_time=start_time,
            runtime_id=runtime_id,
            live_marker=marker,
        )

    async def clear_live_process(self, name: str) -> None:
        await self._enter()
        record = self._records.get(name)
        if record is not None and record["live_pgid"] is not None:
            self._update(
                name,
                live_pgid=None,
                live_pid=None,
                live_start_time=None,
                runtime_id=None,
                live_marker=None,
            )

    async def live_processes(self) -> Sequence[SessionRecord]:
        await self._enter()
        return tuple(r for r in self._all() if r.live_pgid is not None)

    async def save_state(self, name: str, state: bytes | None) -> None:
        await self._enter()
        self._update(name, state=None if state is None else bytes(state))

    async def forget(self, name: str) -> bool:
        await self._enter()
        return self._records.pop(name, None) is not None

    async def list(self) -> Sequence[SessionRecord]:
        await self._enter()
        return self._all()

    def _all(self) -> tuple[SessionRecord, ...]:
        return tuple(SessionRecord(**r) for _, r in sorted(self._records.items()))
