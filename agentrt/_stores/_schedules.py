"""Each agent's schedules (`ScheduleStore`) in the two SQL stores: one table, the statements
written once with ``?`` placeholders, over each store's own ``_call``. A fire's record is one
conditional UPDATE on the due time it fired for, and an add with a key one INSERT that
does nothing on the key's conflict, so neither races, whichever connection makes it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._errors import StoreError
from .._schedule import Schedule
from ._sql import SqlCalls

# ``every`` or ``cron`` is set, as `Schedule` says (neither on a wake-up, of ``origin``
# "wakeup", nor on a one-shot cron job of the CLI's, of ``origin`` "cron"). The prompt is
# the work to do, stored as given, as a queued request's is.
CREATE_SCHEDULES = (
    """
    CREATE TABLE schedules (
        id TEXT PRIMARY KEY NOT NULL,
        name TEXT NOT NULL,
        prompt TEXT NOT NULL,
        every DOUBLE PRECISION,
        cron TEXT,
        overlap TEXT NOT NULL,
        schedule_key TEXT,
        created_at DOUBLE PRECISION NOT NULL,
        next_due DOUBLE PRECISION NOT NULL,
        last_run DOUBLE PRECISION,
        last_request TEXT,
        origin TEXT NOT NULL
    )
    """,
    "CREATE INDEX schedules_by_name ON schedules (name, created_at)",
    "CREATE UNIQUE INDEX schedules_by_key ON schedules (name, schedule_key)"
    " WHERE schedule_key IS NOT NULL",
)

_COLUMNS = (
    "id, name, prompt, every, cron, overlap, schedule_key, created_at, next_due, last_run,"
    " last_request, origin"
)
_SELECT = f"SELECT {_COLUMNS} FROM schedules"
_HAS_ID = "SELECT 1 FROM schedules WHERE id = ?"
_INSERT = f"""
INSERT INTO schedules ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (name, schedule_key) WHERE schedule_key IS NOT NULL DO NOTHING
"""
_BY_KEY = f"{_SELECT} WHERE name = ? AND schedule_key = ?"
_ALL = f"{_SELECT} ORDER BY created_at, id"
_OF = f"{_SELECT} WHERE name = ? ORDER BY created_at, id"
_DROP = "DELETE FROM schedules WHERE name = ? AND id = ?"
_DUE = "UPDATE schedules SET next_due = ? WHERE name = ? AND id = ?"
_FIRED = """
UPDATE schedules SET next_due = ?, last_run = ?, last_request = ?
WHERE name = ? AND id = ? AND next_due = ?
"""
_SKIPPED = "UPDATE schedules SET next_due = ? WHERE name = ? AND id = ? AND next_due = ?"


def _schedule(row: Sequence[Any]) -> Schedule:
    id, name, prompt, every, cron, overlap, key, created_at, next_due, last_run, request = row[:11]
    return Schedule(
        id=id,
        name=name,
        prompt=prompt,
        every=every,
        cron=cron,
        overlap=overlap,
        key=key,
        created_at=created_at,
        next_due=next_due,
        last_run=last_run,
        last_request=request,
        origin=row[11],
    )


class SqlSchedules:
    """The `ScheduleStore` methods of a SQL store."""

    async def add_schedule(self: SqlCalls, schedule: Schedule) -> Schedule:
        s = schedule
        params = (
            *(s.id, s.name, s.prompt, s.every, s.cron, s.overlap, s.key),
            *(s.created_at, s.next_due, s.last_run, s.last_request, s.origin),
        )
        has_id, insert, by_key = self._sql(_HAS_ID), self._sql(_INSERT), self._sql(_BY_KEY)

        def work(conn: Any) -> Schedule | None:
            if conn.execute(has_id, (s.id,)).fetchone() is not None:
                return None
            conn.execute(insert, params)
            if s.key is None:
                return s
            return _schedule(conn.execute(by_key, (s.name, s.key)).fetchone())

        kept = await self._call(work, atomic=True)
        if kept is None:
            raise StoreError(self._where, f"a schedule with id {s.id!r} exists")
        return kept

    async def schedules(self: SqlCalls, name: str | None = None) -> Sequence[Schedule]:
        sql = self._sql(_ALL if name is None else _OF)
        params = () if name is None else (name,)
        rows = await self._call(lambda conn: conn.execute(sql, params).fetchall())
        return tuple(_schedule(row) for row in rows)

    async def drop_schedule(self: SqlCalls, name: str, id: str) -> bool:
        return await _changed(self, _DROP, (name, id))

    async def make_schedule_due(self: SqlCalls, name: str, id: str, due: float) -> bool:
        return await _changed(self, _DUE, (due, name, id))

    async def record_schedule_fire(
        self: SqlCalls,
        name: str,
        id: str,
        *,
        due: float,
        next_due: float,
        fired_at: float | None,
        request: str | None,
    ) -> bool:
        if fired_at is None:
            return await _changed(self, _SKIPPED, (next_due, name, id, due))
        return await _changed(self, _FIRED, (next_due, fired_at, request, name, id, due))


async def _changed(store: SqlCalls, statement: str, params: tuple[object, ...]) -> bool:
    sql = store._sql(statement)

    def work(conn: Any) -> int:
        rowcount: int = conn.execute(sql, params).rowcount
        return rowcount

    return await store._call(work) == 1
