"""Each agent's durable requests (`RequestStore`) in the two SQL stores: one table, the
statements written once with ``?`` placeholders, over each store's own ``_call``.

A request's row goes ``queued`` -> ``running`` -> ``settled``, each step one conditional
UPDATE in a transaction: the claim checks the lease epoch in the same transaction (the
store's fenced ``_call``), so a woken stale owner claims nothing, and the settlement
shares the transaction of the turn's record (`turn_writes`). A request its owner runs at
once is inserted ``running`` (`start_request`: the enqueue and the claim in one fenced
transaction), so it costs one write beyond its turn's record."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Protocol

from .._errors import MailboxFull, StoreError
from .._records import OWNER_DIED, WITHDRAWN, RequestOutcome, StoredRequest, StoredTurn
from .._redact import redact
from ._history import turn_writes
from ._protocols import no_row, stored_reason
from ._sql import SqlCalls

# ``seq`` orders an agent's queue (ID_COLUMN: each database's own kind of increasing key);
# a request handed back for retry keeps its ``seq``, so it starts again before the rest.
# ``epoch`` is the lease epoch of the owner that started it. The prompt is the work itself,
# stored as given, so it is kept only while the request waits or runs: settling drops it.
CREATE_REQUESTS = (
    """
    CREATE TABLE requests (
        seq ID_COLUMN,
        name TEXT NOT NULL,
        id TEXT NOT NULL,
        prompt TEXT,
        size BIGINT NOT NULL,
        request_key TEXT,
        origin TEXT NOT NULL,
        accepted_at DOUBLE PRECISION NOT NULL,
        state TEXT NOT NULL,
        epoch BIGINT,
        attempts BIGINT NOT NULL DEFAULT 0,
        outcome TEXT,
        answer TEXT,
        error TEXT,
        session_id TEXT,
        settled_at DOUBLE PRECISION,
        expires_at DOUBLE PRECISION
    )
    """,
    "CREATE UNIQUE INDEX requests_by_id ON requests (name, id)",
    "CREATE UNIQUE INDEX requests_by_key ON requests (name, request_key)"
    " WHERE request_key IS NOT NULL",
    "CREATE INDEX requests_by_state ON requests (name, state, seq)",
    "CREATE INDEX requests_expiring ON requests (expires_at) WHERE expires_at IS NOT NULL",
)

_COLUMNS = (
    "name, id, prompt, request_key, origin, accepted_at, state, epoch, attempts,"
    " outcome, answer, error, session_id, settled_at, expires_at"
)
_SELECT = f"SELECT {_COLUMNS} FROM requests"
# Kept: not settled, or settled and not expired yet.
_KEPT = "(expires_at IS NULL OR expires_at > ?)"
_INSERT = """
INSERT INTO requests (name, id, prompt, size, request_key, origin, accepted_at, state)
VALUES (?, ?, ?, ?, ?, ?, ?, 'queued')
"""
# A request its owner starts at once, under its lease epoch: queued and claimed in one.
_INSERT_STARTED = """
INSERT INTO requests
    (name, id, prompt, size, request_key, origin, accepted_at, state, epoch, attempts)
VALUES (?, ?, ?, ?, ?, ?, ?, 'running', ?, 1)
"""
_BY_KEY = f"SELECT id FROM requests WHERE name = ? AND request_key = ? AND {_KEPT}"
_DROP_EXPIRED_KEY = """
DELETE FROM requests WHERE name = ? AND request_key = ? AND expires_at <= ?
"""
_HAS_ID = "SELECT 1 FROM requests WHERE name = ? AND id = ?"
# Cast: PostgreSQL sums a BIGINT as NUMERIC (a Decimal in Python).
_QUEUED_TOTALS = """
SELECT COUNT(*), CAST(COALESCE(SUM(size), 0) AS BIGINT) FROM requests
WHERE name = ? AND state = 'queued'
"""
_BUSY = "SELECT 1 FROM requests WHERE name = ? AND state IN ('queued', 'running') LIMIT 1"
_QUEUED = f"{_SELECT} WHERE name = ? AND state = 'queued' ORDER BY seq"
_NEXT = "SELECT seq FROM requests WHERE name = ? AND state = 'queued' ORDER BY seq LIMIT 1"
_START = """
UPDATE requests SET state = 'running', epoch = ?, attempts = attempts + 1
WHERE seq = ? AND state = 'queued'
"""
_SETTLE = """
UPDATE requests SET state = 'settled', prompt = NULL, outcome = ?, answer = ?, error = ?,
    session_id = ?, settled_at = ?, expires_at = ?
WHERE name = ? AND id = ? AND state = ?
"""
_SETTLE_RUNNING = _SETTLE + " AND epoch = ?"
_ORPHANS = f"""
{_SELECT} WHERE name = ? AND state = 'running' AND (epoch IS NULL OR epoch <> ?) ORDER BY seq
"""
_REQUEUE = """
UPDATE requests SET state = 'queued', epoch = NULL WHERE name = ? AND id = ? AND state = 'running'
"""
# Back in its place as never started: its start is not counted against the retry's.
_RELEASE = """
UPDATE requests SET state = 'queued', epoch = NULL, attempts = attempts - 1
WHERE name = ? AND id = ? AND state = 'running' AND epoch = ?
"""
_SESSION_OF = "SELECT session_id FROM sessions WHERE name = ?"
_PURGE = "DELETE FROM requests WHERE expires_at <= ?"
_PURGE_NAME = "DELETE FROM requests WHERE name = ? AND expires_at <= ?"

# A request is started at most this many times: once, and once more where its agent asks
# to retry a request whose owner died.
_MAX_ATTEMPTS = 2


class _SqlStore(SqlCalls, Protocol):
    _epochs: dict[str, int]

    @property
    def _LOCK_REQUESTS(self) -> str | None: ...


def check_ttl(result_ttl: float) -> None:
    """Refuse a retention that is not a finite number of seconds >= 0."""
    if (
        isinstance(result_ttl, bool)
        or not isinstance(result_ttl, int | float)
        or not math.isfinite(result_ttl)
        or result_ttl < 0
    ):
        raise ValueError(
            f"result_ttl must be a finite number of seconds >= 0 (how long a settled "
            f"request is kept), not {result_ttl!r}"
        )


def _check_bound(key: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{key} must be an int >= 0 (the mailbox's bound), not {value!r}")


def _request(row: Sequence[Any]) -> StoredRequest:
    name, id, prompt, key, origin, accepted_at, state, epoch, attempts = row[:9]
    outcome, answer, error, session_id, settled_at, expires_at = row[9:]
    ended = None
    if outcome is not None:
        ended = RequestOutcome(outcome=outcome, answer=answer, error=error, session_id=session_id)
    return StoredRequest(
        name=name,
        id=id,
        prompt=prompt,
        key=key,
        origin=origin,
        accepted_at=accepted_at,
        state=state,
        epoch=epoch,
        attempts=attempts,
        outcome=ended,
        settled_at=settled_at,
        expires_at=expires_at,
    )


def _settled(outcome: RequestOutcome, now: float, result_ttl: float) -> tuple[object, ...]:
    # The outcome as a stop reason is stored (redacted unless it is one); an error message
    # is redacted: it may quote what a CLI printed.
    o = outcome
    error = None if o.error is None else redact(o.error)
    return (stored_reason(o.outcome), o.answer, error, o.session_id, now, now + result_ttl)


class SqlRequests:
    """The `RequestStore` methods of a SQL store. ``_LOCK_REQUESTS`` is the statement that
    makes one enqueue of an agent wait for another's transaction where the engine's
    transaction does not already (SQLite's ``BEGIN IMMEDIATE`` does)."""

    _LOCK_REQUESTS: ClassVar[str | None] = None

    async def enqueue_request(
        self: _SqlStore,
        name: str,
        *,
        id: str,
        prompt: str,
        key: str | None,
        origin: str,
        max_pending: int,
        max_pending_bytes: int,
    ) -> str:
        _check_bound("max_pending", max_pending)
        _check_bound("max_pending_bytes", max_pending_bytes)
        size, now = len(prompt.encode()), self.clock()
        kept = _kept_id(self, name, id, key, now)
        totals, insert = self._sql(_QUEUED_TOTALS), self._sql(_INSERT)

        def work(conn: Any) -> str:
            first = kept(conn)
            if first is not None:
                return first
            queued, queued_bytes = conn.execute(totals, (name,)).fetchone()
            if queued >= max_pending:
                raise MailboxFull(name, "max_pending", max_pending, queued, queued_bytes)
            if queued_bytes + size > max_pending_bytes:
                raise MailboxFull(
                    name, "max_pending_bytes", max_pending_bytes, queued, queued_bytes
                )
            conn.execute(insert, (name, id, prompt, size, key, origin, now))
            return id

        return await self._call(work, atomic=True)

    async def start_request(
        self: _SqlStore, name: str, *, id: str, prompt: str, key: str | None, origin: str
    ) -> str | None:
        size, now, where = len(prompt.encode()), self.clock(), self._where
        kept = _kept_id(self, name, id, key, now)
        busy, insert = self._sql(_BUSY), self._sql(_INSERT_STARTED)

        def work(conn: Any) -> str | None:
            epoch = _owner_epoch(self, where, name, "start_request")
            first = kept(conn)
            if first is not None:
                return first
            if conn.execute(busy, (name,)).fetchone() is not None:
                return None
            conn.execute(insert, (name, id, prompt, size, key, origin, now, epoch))
            return id

        return await self._call(work, fence=name, atomic=True)

    async def release_request(self: _SqlStore, name: str, id: str) -> bool:
        sql, where = self._sql(_RELEASE), self._where

        def work(conn: Any) -> bool:
            epoch = _owner_epoch(self, where, name, "release_request")
            return bool(conn.execute(sql, (name, id, epoch)).rowcount == 1)

        return await self._call(work, fence=name, atomic=True)

    async def queued_requests(self: _SqlStore, name: str) -> Sequence[StoredRequest]:
        sql = self._sql(_QUEUED)
        return await self._call(lambda conn: tuple(map(_request, conn.execute(sql, (name,)))))

    async def withdraw_request(self: _SqlStore, name: str, id: str, *, result_ttl: float) -> bool:
        check_ttl(result_ttl)
        withdrawn = RequestOutcome(outcome=WITHDRAWN)
        params = (*_settled(withdrawn, self.clock(), result_ttl), name, id, "queued")
        sql = self._sql(_SETTLE)

        def work(conn: Any) -> int:
            rowcount: int = conn.execute(sql, params).rowcount
            return rowcount

        return await self._call(work, fence=name) == 1

    async def claim_request(self: _SqlStore, name: str) -> StoredRequest | None:
        after, start = self._sql(_NEXT), self._sql(_START)
        select = self._sql(f"{_SELECT} WHERE seq = ?")
        where = self._where

        def work(conn: Any) -> StoredRequest | None:
            epoch = _owner_epoch(self, where, name, "claim_request")
            # Another handle may withdraw the head between the read and the update (the
            # UPDATE sees its commit): then the next one is tried.
            while (head := conn.execute(after, (name,)).fetchone()) is not None:
                if conn.execute(start, (epoch, head[0])).rowcount == 1:
                    return _request(conn.execute(select, (head[0],)).fetchone())
            return None

        return await self._call(work, fence=name, atomic=True)

    async def settle_request(
        self: _SqlStore,
        name: str,
        id: str,
        outcome: RequestOutcome,
        *,
        result_ttl: float,
        turn: StoredTurn | None = None,
        session_id: str | None = None,
        keep: int = 1,
    ) -> bool:
        check_ttl(result_ttl)
        if turn is not None and turn.name != name:
            raise ValueError(f"turn is of agent {turn.name!r}, the request of agent {name!r}")
        record = None if turn is None else turn_writes(self, turn, session_id=session_id, keep=keep)
        now = self.clock()
        settled = _settled(outcome, now, result_ttl)
        sql, purge, where = self._sql(_SETTLE_RUNNING), self._sql(_PURGE_NAME), self._where

        def work(conn: Any) -> bool:
            epoch = _owner_epoch(self, where, name, "settle_request")
            if record is not None and not record(conn):
                # Raised inside the transaction: the settlement is rolled back with it.
                raise no_row(where, name)
            params = (*settled, name, id, "running", epoch)
            done = conn.execute(sql, params).rowcount == 1
            # The agent's expired outcomes go as each new one is kept: an owner that runs
            # for months keeps a result_ttl's worth, not every answer since it started.
            conn.execute(purge, (name, now))
            return bool(done)

        return await self._call(work, fence=name, atomic=True)

    async def end_orphaned_requests(
        self: _SqlStore, name: str, *, retry: bool, result_ttl: float
    ) -> Sequence[StoredRequest]:
        check_ttl(result_ttl)
        orphans, requeue, session = self._sql(_ORPHANS), self._sql(_REQUEUE), self._sql(_SESSION_OF)
        settle, select = self._sql(_SETTLE), self._sql(f"{_SELECT} WHERE name = ? AND id = ?")
        now, where = self.clock(), self._where

        def work(conn: Any) -> tuple[StoredRequest, ...]:
            epoch = _owner_epoch(self, where, name, "end_orphaned_requests")
            found = [_request(row) for row in conn.execute(orphans, (name, epoch)).fetchall()]
            row = conn.execute(session, (name,)).fetchone()
            session_id = None if row is None else row[0]
            for request in found:
                if retry and request.attempts < _MAX_ATTEMPTS:
                    conn.execute(requeue, (name, request.id))
                    continue
                died = RequestOutcome(
                    outcome=OWNER_DIED,
                    error=f"its owner (lease epoch {request.epoch}) ended while its turn ran",
                    session_id=session_id,
                )
                params = (*_settled(died, now, result_ttl), name, request.id, "running")
                conn.execute(settle, params)
            return tuple(
                _request(conn.execute(select, (name, request.id)).fetchone()) for request in found
            )

        return await self._call(work, fence=name, atomic=True)

    async def find_request(
        self: _SqlStore, name: str, *, id: str | None = None, key: str | None = None
    ) -> StoredRequest | None:
        if (id is None) == (key is None):
            raise ValueError("find_request takes one of id= or key=")
        column, value = ("id", id) if id is not None else ("request_key", key)
        sql = self._sql(f"{_SELECT} WHERE name = ? AND {column} = ? AND {_KEPT}")
        now = self.clock()

        def work(conn: Any) -> StoredRequest | None:
            row = conn.execute(sql, (name, value, now)).fetchone()
            return None if row is None else _request(row)

        return await self._call(work)

    async def purge_requests(self: _SqlStore) -> int:
        sql, now = self._sql(_PURGE), self.clock()

        def work(conn: Any) -> int:
            rowcount: int = conn.execute(sql, (now,)).rowcount
            return rowcount

        return await self._call(work)


def _kept_id(
    store: _SqlStore, name: str, id: str, key: str | None, now: float
) -> Callable[[Any], str | None]:
    """What storing a request begins with, in its transaction: the agent's lock (where the
    engine needs one), then the id of the request kept under ``key`` (None if none: an
    expired one's key is freed), and `StoreError` for an ``id`` the agent has already."""
    lock, where = store._LOCK_REQUESTS, store._where
    by_key, drop_key = store._sql(_BY_KEY), store._sql(_DROP_EXPIRED_KEY)
    has_id = store._sql(_HAS_ID)

    def work(conn: Any) -> str | None:
        if lock is not None:
            conn.execute(store._sql(lock), (name,))
        if key is not None:
            first = conn.execute(by_key, (name, key, now)).fetchone()
            if first is not None:
                return str(first[0])
            conn.execute(drop_key, (name, key, now))
        if conn.execute(has_id, (name, id)).fetchone() is not None:
            raise StoreError(where, f"agent {name!r} has a request with id {id!r}")
        return None

    return work


def _owner_epoch(store: _SqlStore, where: str, name: str, call: str) -> int:
    """The epoch of this handle's lease on ``name``, which an owner write needs (the fenced
    ``_call`` has checked it is still the lease's)."""
    epoch = store._epochs.get(name)
    if epoch is None:
        raise StoreError(
            where, f"{call} needs this store handle to hold the lease of agent {name!r}"
        )
    return epoch
