"""What the two SQL stores (_store_sqlite, _store_postgres) share: the session table's
columns and statements, written once with ``?`` placeholders, and the SessionStore methods
on session rows, over each store's own ``_call``."""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Protocol, TypeVar

from .._events import SessionTotals, Usage
from .._records import SessionRecord, StoredBudget
from ._protocols import NO_USAGE, ClosedOnExit, no_row, stored_reason

_T = TypeVar("_T")

SESSION_COLUMNS = (
    "name, backend, session_id, cwd, turns, cost_usd, input_tokens, output_tokens,"
    " cache_creation_input_tokens, cache_read_input_tokens, last_stop_reason, created_at,"
    " updated_at, live_pgid, live_pid, live_start_time, runtime_id, state, live_marker,"
    " session_cost_usd, session_input_tokens, session_output_tokens,"
    " session_cache_creation_input_tokens, session_cache_read_input_tokens, live_idle,"
    " session_turns"
)

# One statement, so concurrent writers (other connections too) never lose an increment.
RECORD_TURN = """
UPDATE sessions SET
    turns = turns + 1, cost_usd = cost_usd + ?,
    input_tokens = input_tokens + ?, output_tokens = output_tokens + ?,
    cache_creation_input_tokens = cache_creation_input_tokens + ?,
    cache_read_input_tokens = cache_read_input_tokens + ?,
    session_cost_usd = session_cost_usd + ?,
    session_input_tokens = session_input_tokens + ?,
    session_output_tokens = session_output_tokens + ?,
    session_cache_creation_input_tokens = session_cache_creation_input_tokens + ?,
    session_cache_read_input_tokens = session_cache_read_input_tokens + ?,
    session_turns = session_turns + 1,
    last_stop_reason = ?, session_id = COALESCE(?, session_id), updated_at = ?
WHERE name = ?
"""

SET_LIVE = """
UPDATE sessions SET live_pgid = ?, live_pid = ?, live_start_time = ?, runtime_id = ?,
    live_marker = ?, live_idle = FALSE, updated_at = ?
WHERE name = ?
"""

SET_LIVE_IDLE = """
UPDATE sessions SET live_idle = ?, updated_at = ?
WHERE name = ? AND live_pgid IS NOT NULL
"""

CLEAR_LIVE = """
UPDATE sessions SET live_pgid = NULL, live_pid = NULL, live_start_time = NULL,
    runtime_id = NULL, live_marker = NULL, live_idle = FALSE, updated_at = ?
WHERE name = ? AND live_pgid IS NOT NULL
"""


# The supervisor specs of agents (_failover), in start order: ``started`` numbers them.
CREATE_AGENT_SPECS = """
CREATE TABLE agent_specs (
    name TEXT PRIMARY KEY NOT NULL,
    started BIGINT NOT NULL,
    spec TEXT NOT NULL
)
"""

_SAVE_SPEC = """
INSERT INTO agent_specs (name, started, spec)
VALUES (?, (SELECT COALESCE(MAX(started), 0) + 1 FROM agent_specs), ?)
ON CONFLICT (name) DO UPDATE SET spec = excluded.spec
"""


# The budgets that apply to each agent name, in the order the runtime checks them
# (`BudgetStore`). DOUBLE PRECISION and BIGINT: one statement for both engines (SQLite
# reads them as REAL and INTEGER).
CREATE_BUDGETS = """
CREATE TABLE agent_budgets (
    name TEXT NOT NULL,
    place INTEGER NOT NULL,
    scope TEXT NOT NULL,
    budget_key TEXT NOT NULL,
    usd DOUBLE PRECISION,
    tokens BIGINT,
    PRIMARY KEY (name, place)
)
"""

_DROP_BUDGETS = "DELETE FROM agent_budgets WHERE name = ?"
_INSERT_BUDGET = """
INSERT INTO agent_budgets (name, place, scope, budget_key, usd, tokens) VALUES (?, ?, ?, ?, ?, ?)
"""
_SELECT_BUDGETS = """
SELECT name, scope, budget_key, usd, tokens FROM agent_budgets ORDER BY name, place
"""


def _usage(inp: int, out: int, cache_new: int, cache_read: int) -> Usage:
    return Usage(
        input_tokens=inp,
        output_tokens=out,
        cache_creation_input_tokens=cache_new,
        cache_read_input_tokens=cache_read,
    )


def record_turn_params(
    name: str,
    stop_reason: str,
    cost_usd: float | None,
    usage: Usage | None,
    session_id: str | None,
    now: float,
) -> tuple[object, ...]:
    """The parameters of `RECORD_TURN`."""
    u = usage or NO_USAGE
    figures = (
        cost_usd or 0.0,
        u.input_tokens,
        u.output_tokens,
        u.cache_creation_input_tokens,
        u.cache_read_input_tokens,
    )
    return (*figures, *figures, stored_reason(stop_reason), session_id, now, name)


def record_from_row(row: Sequence[Any]) -> SessionRecord:
    (name, backend, session_id, cwd, turns, cost_usd, inp, out, cache_new, cache_read) = row[:10]
    (stop, created, updated, pgid, pid, start_time, runtime_id, state, marker) = row[10:19]
    (session_cost, *session_tokens) = row[19:24]
    return SessionRecord(
        name=name,
        backend=backend,
        session_id=session_id,
        cwd=cwd,
        turns=turns,
        cost_usd=cost_usd,
        usage=_usage(inp, out, cache_new, cache_read),
        last_stop_reason=stop,
        created_at=created,
        updated_at=updated,
        live_pgid=pgid,
        live_pid=pid,
        live_start_time=start_time,
        runtime_id=runtime_id,
        state=state,
        live_marker=marker,
        live_idle=bool(row[24]),  # SQLite's 0 / 1
        session_totals=SessionTotals(
            usage=_usage(*session_tokens), cost_usd=session_cost, turns=row[25]
        ),
    )


class SqlCalls(Protocol):
    """What the capability mixins of a SQL store (`SqlSessions`' kin: requests, schedules,
    credentials, ...) call on the store they are mixed into: its clock, its name for
    errors, its statements in its engine's placeholders, and its one connection."""

    clock: Callable[[], float]

    @property
    def _where(self) -> str: ...

    def _sql(self, statement: str) -> str: ...

    async def _call(
        self, work: Callable[[Any], _T], *, fence: str | None = None, atomic: bool = False
    ) -> _T: ...


class SqlSessions(ClosedOnExit):
    """The session-row methods of a SQL store. A subclass gives ``clock``, `_where`, its
    `_call` (``work`` on its connection, fenced by ``fence``'s lease), its upsert and its
    driver's placeholder."""

    clock: Callable[[], float]
    _UPSERT_SESSION: ClassVar[str]
    _PLACEHOLDER: ClassVar[str] = "?"

    @property
    @abc.abstractmethod
    def _where(self) -> str:
        """The store as error messages name it."""

    @abc.abstractmethod
    async def _call(
        self, work: Callable[[Any], _T], *, fence: str | None = None, atomic: bool = False
    ) -> _T: ...

    def _sql(self, statement: str) -> str:
        return statement.replace("?", self._PLACEHOLDER)

    async def _update(self, name: str, sql: str, params: tuple[object, ...]) -> None:
        statement = self._sql(sql)

        def work(conn: Any) -> int:
            rowcount: int = conn.execute(statement, params).rowcount
            return rowcount

        if await self._call(work, fence=name) == 0:
            raise no_row(self._where, name)

    async def _select(self, where: str, params: tuple[object, ...]) -> tuple[SessionRecord, ...]:
        sql = self._sql(f"SELECT {SESSION_COLUMNS} FROM sessions {where} ORDER BY name")

        def work(conn: Any) -> tuple[SessionRecord, ...]:
            return tuple(record_from_row(row) for row in conn.execute(sql, params))

        return await self._call(work)

    async def load(self, name: str) -> SessionRecord | None:
        records = await self._select("WHERE name = ?", (name,))
        return records[0] if records else None

    async def checkpoint_session(
        self, name: str, *, backend: str, session_id: str | None, cwd: str | None
    ) -> None:
        now = self.clock()
        params = (name, backend, session_id, cwd, now, now)
        upsert = self._UPSERT_SESSION
        await self._call(lambda conn: conn.execute(upsert, params), fence=name)

    async def record_turn(
        self,
        name: str,
        *,
        stop_reason: str,
        cost_usd: float | None,
        usage: Usage | None,
        session_id: str | None,
    ) -> None:
        params = record_turn_params(name, stop_reason, cost_usd, usage, session_id, self.clock())
        await self._update(name, RECORD_TURN, params)

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
        params = (pgid, pid, start_time, runtime_id, marker, self.clock(), name)
        await self._update(name, SET_LIVE, params)

    async def clear_live_process(self, name: str) -> None:
        params, sql = (self.clock(), name), self._sql(CLEAR_LIVE)
        await self._call(lambda conn: conn.execute(sql, params), fence=name)

    async def set_live_idle(self, name: str, idle: bool) -> None:
        params, sql = (idle, self.clock(), name), self._sql(SET_LIVE_IDLE)
        await self._call(lambda conn: conn.execute(sql, params), fence=name)

    async def live_processes(self) -> Sequence[SessionRecord]:
        return await self._select("WHERE live_pgid IS NOT NULL", ())

    async def save_state(self, name: str, state: bytes | None) -> None:
        blob = None if state is None else bytes(state)
        sql = "UPDATE sessions SET state = ?, updated_at = ? WHERE name = ?"
        await self._update(name, sql, (blob, self.clock(), name))

    async def forget(self, name: str) -> bool:
        sql = self._sql("DELETE FROM sessions WHERE name = ?")
        drop_spec = self._sql("DELETE FROM agent_specs WHERE name = ?")
        drop_history = self._sql("DELETE FROM turn_history WHERE name = ?")

        def work(conn: Any) -> int:
            rowcount: int = conn.execute(sql, (name,)).rowcount
            conn.execute(drop_spec, (name,))
            conn.execute(drop_history, (name,))
            return rowcount

        return await self._call(work, fence=name, atomic=True) > 0

    async def list(self) -> Sequence[SessionRecord]:
        return await self._select("", ())

    async def save_spec(self, name: str, spec: str | None) -> None:
        params: tuple[str, ...] = (name,) if spec is None else (name, spec)
        sql = self._sql("DELETE FROM agent_specs WHERE name = ?" if spec is None else _SAVE_SPEC)
        await self._call(lambda conn: conn.execute(sql, params), fence=name)

    async def specs(self) -> Sequence[tuple[str, str]]:
        sql = "SELECT name, spec FROM agent_specs ORDER BY started, name"

        def work(conn: Any) -> tuple[tuple[str, str], ...]:
            return tuple((name, spec) for name, spec in conn.execute(sql))

        return await self._call(work)

    async def save_budgets(self, name: str, budgets: Sequence[StoredBudget]) -> None:
        """Store the budgets of ``name`` in their order, replacing what was stored."""
        drop, insert = self._sql(_DROP_BUDGETS), self._sql(_INSERT_BUDGET)
        rows = [(name, i, b.scope, b.key, b.usd, b.tokens) for i, b in enumerate(budgets)]

        def work(conn: Any) -> None:
            conn.execute(drop, (name,))
            for row in rows:
                conn.execute(insert, row)

        await self._call(work, fence=name, atomic=True)

    async def budgets(self) -> Sequence[tuple[str, tuple[StoredBudget, ...]]]:
        """Every name's stored budgets, by name."""

        def work(conn: Any) -> dict[str, tuple[StoredBudget, ...]]:
            stored: dict[str, tuple[StoredBudget, ...]] = {}
            for name, scope, key, usd, tokens in conn.execute(_SELECT_BUDGETS):
                budget = StoredBudget(scope=scope, key=key, usd=usd, tokens=tokens)
                stored[name] = (*stored.get(name, ()), budget)
            return stored

        return tuple((await self._call(work)).items())
