"""Each agent's finished turns (`TurnHistoryStore`) in the two SQL stores: one table, the
statements written once with ``?`` placeholders, over each store's own ``_call``. A turn's
entry goes in with the session row's count, in one transaction, and the entries of the
agent past the newest ``keep`` go out with it, so the table stays bounded."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .._events import Usage
from .._records import StoredTurn
from ._protocols import no_row, stored_reason
from ._sql import RECORD_TURN, SqlCalls, record_turn_params

# ``id`` orders the entries as they were recorded (ID_COLUMN: each database's own kind
# of increasing key).
CREATE_TURN_HISTORY = (
    """
    CREATE TABLE turn_history (
        id ID_COLUMN,
        name TEXT NOT NULL,
        node TEXT NOT NULL,
        started_at DOUBLE PRECISION NOT NULL,
        ended_at DOUBLE PRECISION NOT NULL,
        duration DOUBLE PRECISION NOT NULL,
        outcome TEXT NOT NULL,
        cost_usd DOUBLE PRECISION,
        input_tokens BIGINT NOT NULL,
        output_tokens BIGINT NOT NULL,
        cache_creation_input_tokens BIGINT NOT NULL,
        cache_read_input_tokens BIGINT NOT NULL,
        prompt TEXT,
        answer TEXT
    )
    """,
    "CREATE INDEX turn_history_by_name ON turn_history (name, id)",
)

_COLUMNS = (
    "name, node, started_at, ended_at, duration, outcome, cost_usd, input_tokens,"
    " output_tokens, cache_creation_input_tokens, cache_read_input_tokens, prompt, answer"
)
_INSERT = f"INSERT INTO turn_history ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
# Everything of the name older than its keep-th newest entry (none while it has fewer).
_PRUNE = """
DELETE FROM turn_history WHERE name = ? AND id < (
    SELECT id FROM turn_history WHERE name = ? ORDER BY id DESC LIMIT 1 OFFSET ?
)
"""


def check_keep(keep: int, *, least: int = 1) -> None:
    """Refuse a history bound below ``least``: a caller of `record_turn_with_history`
    keeping none writes none; a request's settlement with ``keep=0`` records its turn in
    the session row only."""
    if isinstance(keep, bool) or not isinstance(keep, int) or keep < least:
        raise ValueError(
            f"keep must be an int >= {least} (the entries kept per agent), not {keep!r}"
        )


def check_page(limit: int, offset: int) -> None:
    """Refuse a page of the history that is not two counts."""
    for key, value in (("limit", limit), ("offset", offset)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{key} must be an int >= 0, not {value!r}")


def turn_writes(
    store: SqlCalls, turn: StoredTurn, *, session_id: str | None, keep: int
) -> Callable[[Any], bool]:
    """The statements of `record_turn_with_history`, to run in a transaction of the
    caller's (a request's settlement shares it): False, having written nothing, without
    the session row. ``keep=0``: the session row's count only (`SessionStore.record_turn`),
    no entry, for an agent that keeps no history."""
    check_keep(keep, least=0)
    t, u = turn, turn.usage
    count = record_turn_params(t.name, t.outcome, t.cost_usd, u, session_id, store.clock())
    entry = (
        *(t.name, t.node, t.started_at, t.ended_at, t.duration, stored_reason(t.outcome)),
        *(t.cost_usd, u.input_tokens, u.output_tokens, u.cache_creation_input_tokens),
        *(u.cache_read_input_tokens, t.prompt, t.answer),
    )
    update, insert, prune = store._sql(RECORD_TURN), store._sql(_INSERT), store._sql(_PRUNE)

    def work(conn: Any) -> bool:
        if conn.execute(update, count).rowcount == 0:
            return False
        if keep > 0:
            conn.execute(insert, entry)
            conn.execute(prune, (t.name, t.name, keep - 1))
        return True

    return work


class SqlTurnHistory:
    """The `TurnHistoryStore` methods of a SQL store."""

    async def record_turn_with_history(
        self: SqlCalls, turn: StoredTurn, *, session_id: str | None, keep: int
    ) -> None:
        check_keep(keep)
        work = turn_writes(self, turn, session_id=session_id, keep=keep)
        if not await self._call(work, fence=turn.name, atomic=True):
            raise no_row(self._where, turn.name)

    async def turn_history(
        self: SqlCalls, name: str | None, *, limit: int, offset: int = 0
    ) -> Sequence[StoredTurn]:
        check_page(limit, offset)
        where = "" if name is None else "WHERE name = ?"
        sql = self._sql(
            f"SELECT {_COLUMNS} FROM turn_history {where} ORDER BY id DESC LIMIT ? OFFSET ?"
        )
        params = (limit, offset) if name is None else (name, limit, offset)

        def work(conn: Any) -> tuple[StoredTurn, ...]:
            return tuple(_turn(row) for row in conn.execute(sql, params))

        return await self._call(work)


def _turn(row: Sequence[Any]) -> StoredTurn:
    name, node, started_at, ended_at, duration, outcome, cost_usd = row[:7]
    inp, out, cache_new, cache_read, prompt, answer = row[7:]
    usage = Usage(
        input_tokens=inp,
        output_tokens=out,
        cache_creation_input_tokens=cache_new,
        cache_read_input_tokens=cache_read,
    )
    return StoredTurn(
        name=name,
        node=node,
        started_at=started_at,
        ended_at=ended_at,
        duration=duration,
        outcome=outcome,
        cost_usd=cost_usd,
        usage=usage,
        prompt=prompt,
        answer=answer,
    )
