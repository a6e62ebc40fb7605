"""The scheduled prompts' capability (`ScheduleStore`): each agent's schedules, kept in the
store, so that whichever program owns the agent fires them, each fire once. One of the store
protocols (`_protocols.py` lists them all and resolves them into `StoreCapabilities`); the
SQL stores implement it in `_schedules.py`, `MemoryStore` in its own tables, and the
runtime's side is `agentrt._scheduler`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from .._schedule import Schedule


@runtime_checkable
class ScheduleStore(Protocol):
    """Each agent's schedules (`Schedule`): added, listed, made due, fired and removed by
    any program on the store. Times are wall clock seconds, given by the caller. The one
    write that races, a fire's record, is conditional on the due time it fired for, so of
    the programs that fire one due time, one records it."""

    async def add_schedule(self, schedule: Schedule) -> Schedule:
        """Keep ``schedule`` and return it; or, when a schedule of its agent has its
        ``key``, keep nothing and return that one (of adds racing with one key, one is
        kept). An id the store has already is `StoreError`."""
        ...

    async def schedules(self, name: str | None = None) -> Sequence[Schedule]:
        """The schedules of agent ``name`` (of every agent when None), oldest first."""
        ...

    async def drop_schedule(self, name: str, id: str) -> bool:
        """Remove the schedule ``id`` of ``name``; False if there is none."""
        ...

    async def make_schedule_due(self, name: str, id: str, due: float) -> bool:
        """Set the next due time of the schedule ``id`` of ``name`` to ``due`` (its owner
        fires it then); False if there is none."""
        ...

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
        """Record the fire of the schedule ``id`` of ``name`` that was due at ``due``: its
        next due time becomes ``next_due`` and, when ``fired_at`` is given (not a skipped
        fire), its ``last_run`` ``fired_at`` and its ``last_request`` ``request``. Only if
        its next due time is still ``due``: False, changing nothing, otherwise (another
        program recorded it, it was made due anew, or it is gone)."""
        ...
