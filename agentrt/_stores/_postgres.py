"""`PostgresStore`: the SessionStore on PostgreSQL, shared by runtimes on many hosts."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence, Set
from typing import TYPE_CHECKING, Any, Self, TypeVar

import attrs
import trio

from .._errors import StoreError
from .._records import Lease, LeaseOwner
from .._redact import redact
from ._approvals import CREATE_APPROVALS, SqlApprovals
from ._credential_holds import ADD_AGENT_HOLDS, CREATE_CREDENTIALS, SqlCredentials
from ._history import CREATE_TURN_HISTORY, SqlTurnHistory
from ._protocols import ClosedOnExit, Router, check_fence, granted_epoch, lease_owner
from ._requests import CREATE_REQUESTS, SqlRequests
from ._schedules import CREATE_SCHEDULES, SqlSchedules
from ._sql import CREATE_AGENT_SPECS, CREATE_BUDGETS, SqlSessions
from ._transcripts import CREATE_TRANSCRIPTS, SqlTranscripts
from ._turns import Turns
from ._workspaces import CREATE_WORKSPACES, SqlWorkspaces

if TYPE_CHECKING:
    import psycopg

_T = TypeVar("_T")

# Every table lives in this schema, so agentrt's tables never meet an application's.
SCHEMA = "agentrt"
# pg_advisory_xact_lock key ("AGRT"): openers of one database migrate it one at a time.
_MIGRATION_LOCK = 0x41475254

_CREATE_SESSIONS = """
CREATE TABLE sessions (
    name TEXT PRIMARY KEY,
    backend TEXT NOT NULL,
    session_id TEXT,
    cwd TEXT,
    turns BIGINT NOT NULL DEFAULT 0,
    cost_usd DOUBLE PRECISION NOT NULL DEFAULT 0,
    input_tokens BIGINT NOT NULL DEFAULT 0,
    output_tokens BIGINT NOT NULL DEFAULT 0,
    cache_creation_input_tokens BIGINT NOT NULL DEFAULT 0,
    cache_read_input_tokens BIGINT NOT NULL DEFAULT 0,
    last_stop_reason TEXT,
    created_at DOUBLE PRECISION NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL,
    live_pgid BIGINT,
    live_pid BIGINT,
    live_start_time BIGINT,
    runtime_id TEXT,
    state BYTEA,
    live_marker TEXT,
    session_cost_usd DOUBLE PRECISION NOT NULL DEFAULT 0,
    session_input_tokens BIGINT NOT NULL DEFAULT 0,
    session_output_tokens BIGINT NOT NULL DEFAULT 0,
    session_cache_creation_input_tokens BIGINT NOT NULL DEFAULT 0,
    session_cache_read_input_tokens BIGINT NOT NULL DEFAULT 0
)
"""

# One row per agent name ever leased; the owner columns are NULL once released. Times are
# the database server's (clock_timestamp()), the one clock every node's lease is read on.
_CREATE_LEASES = """
CREATE TABLE leases (
    name TEXT PRIMARY KEY,
    epoch BIGINT NOT NULL,
    node TEXT,
    pid BIGINT,
    start_time BIGINT,
    runtime_id TEXT,
    renewed_at TIMESTAMPTZ NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL
)
"""

# Calls routed to the runtime that owns an agent (`_routing`): ``target`` and ``caller``
# are runtime ids; a row is queued until its target takes it, and answered (``answer``)
# until its caller reads and deletes it (an answer nobody read is pruned).
_CREATE_ROUTED = (
    """
    CREATE TABLE routed (
        id TEXT PRIMARY KEY,
        seq BIGSERIAL NOT NULL,
        target TEXT NOT NULL,
        caller TEXT NOT NULL,
        name TEXT NOT NULL,
        call TEXT NOT NULL,
        arguments BYTEA NOT NULL,
        taken BOOLEAN NOT NULL DEFAULT false,
        answer BYTEA,
        answered_at TIMESTAMPTZ,
        created_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp()
    )
    """,
    "CREATE INDEX routed_queued ON routed (target, seq) WHERE NOT taken",
)

# _MIGRATIONS[v] takes a database from schema version v to v + 1 (version 0: no schema),
# each step in one transaction with its version bump. The upgrade tests undo the steps after
# a version (tests/schema_steps.py), as on SQLite.
_MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}",
        "CREATE TABLE schema_version (version INTEGER NOT NULL)",
        "INSERT INTO schema_version VALUES (0)",
        _CREATE_SESSIONS,
        _CREATE_LEASES,
    ),
    # 2: calls routed to the runtime that owns an agent.
    _CREATE_ROUTED,
    # 3: the CLI's transcripts, chunk by chunk (portable sessions).
    (CREATE_TRANSCRIPTS.replace("BYTES", "BYTEA").replace("INTEGER", "BIGINT"),),
    # 4: the agents' supervisor specs, for failover.
    (CREATE_AGENT_SPECS,),
    # 5: whether a live process is a warm CLI idling between turns; the current session's
    # turns.
    (
        "ALTER TABLE sessions ADD COLUMN live_idle BOOLEAN NOT NULL DEFAULT FALSE",
        "ALTER TABLE sessions ADD COLUMN session_turns BIGINT NOT NULL DEFAULT 0",
    ),
    # 6: tool calls waiting for a person (AskOperator), any node's console answers them.
    (CREATE_APPROVALS,),
    # 7: the git worktree each agent's record owns.
    (CREATE_WORKSPACES,),
    # 8: each agent's finished turns, the newest kept (the console's history).
    tuple(s.replace("ID_COLUMN", "BIGSERIAL PRIMARY KEY") for s in CREATE_TURN_HISTORY),
    # 9: the budgets that apply to each agent (agentrt status).
    (CREATE_BUDGETS,),
    # 10: each agent's durable requests: queued, running, settled (kept for result_ttl).
    tuple(s.replace("ID_COLUMN", "BIGSERIAL PRIMARY KEY") for s in CREATE_REQUESTS),
    # 11: what holds each credential's agents (a usage limit's park, an expired login's
    # halt), and the credential each agent uses.
    CREATE_CREDENTIALS,
    # 12: each agent's scheduled prompts.
    CREATE_SCHEDULES,
    # 13: whether a credential's halt and park hold each of its agents.
    ADD_AGENT_HOLDS,
)

_UPSERT_SESSION = """
INSERT INTO sessions AS s (name, backend, session_id, cwd, created_at, updated_at)
VALUES (%s, %s, %s, %s, %s, %s)
ON CONFLICT (name) DO UPDATE SET
    backend = excluded.backend, session_id = excluded.session_id, cwd = excluded.cwd,
    updated_at = excluded.updated_at,
    session_cost_usd = CASE WHEN same THEN s.session_cost_usd ELSE 0 END,
    session_input_tokens = CASE WHEN same THEN s.session_input_tokens ELSE 0 END,
    session_output_tokens = CASE WHEN same THEN s.session_output_tokens ELSE 0 END,
    session_cache_creation_input_tokens = CASE WHEN same
        THEN s.session_cache_creation_input_tokens ELSE 0 END,
    session_cache_read_input_tokens = CASE WHEN same
        THEN s.session_cache_read_input_tokens ELSE 0 END,
    session_turns = CASE WHEN same THEN s.session_turns ELSE 0 END
""".replace("same", "s.session_id IS NOT DISTINCT FROM excluded.session_id")

# Age and time left on the server's clock, in seconds.
_LEASE_SELECT = """
SELECT name, epoch, node, pid, start_time, runtime_id,
    EXTRACT(EPOCH FROM clock_timestamp() - renewed_at)::float8,
    EXTRACT(EPOCH FROM expires_at - clock_timestamp())::float8
FROM leases
"""

# A first grant of a name needs a row to lock: two first grants at once then wait on one
# another's row instead of both inserting epoch 1.
_LEASE_ROW = """
INSERT INTO leases (name, epoch, renewed_at, expires_at)
VALUES (%s, 0, clock_timestamp(), clock_timestamp())
ON CONFLICT (name) DO NOTHING
"""

_GRANT_LEASE = """
UPDATE leases SET epoch = %s, node = %s, pid = %s, start_time = %s, runtime_id = %s,
    renewed_at = clock_timestamp(), expires_at = clock_timestamp() + make_interval(secs => %s)
WHERE name = %s
"""

_RENEW_LEASES = """
UPDATE leases SET renewed_at = clock_timestamp(),
    expires_at = clock_timestamp() + make_interval(secs => %s)
FROM unnest(%s::text[], %s::bigint[]) AS mine(name, epoch)
WHERE leases.name = mine.name AND leases.epoch = mine.epoch AND runtime_id IS NOT NULL
RETURNING leases.name
"""

_RELEASE_LEASES = """
UPDATE leases SET node = NULL, pid = NULL, start_time = NULL, runtime_id = NULL
FROM unnest(%s::text[], %s::bigint[]) AS mine(name, epoch)
WHERE leases.name = mine.name AND leases.epoch = mine.epoch
"""

# See `LeaseStore.release_leases`: a name's first lease, given
# back before any session row was made, goes with its row.
_DROP_FIRST_LEASES = """
DELETE FROM leases USING unnest(%s::text[], %s::bigint[]) AS mine(name, epoch)
WHERE leases.name = mine.name AND leases.epoch = mine.epoch AND leases.epoch = 1
    AND NOT EXISTS (SELECT 1 FROM sessions WHERE sessions.name = leases.name)
"""


def _lease(row: Sequence[Any]) -> Lease:
    name, epoch, node, pid, start_time, runtime_id, age, remaining = row
    owner = lease_owner(node, pid, start_time, runtime_id)
    return Lease(name=name, epoch=epoch, owner=owner, age=age, remaining=remaining)


def _usable(conn: psycopg.Connection[Any]) -> bool:
    """Whether the connection still works, found without sending anything: a server that
    restarted or ended the session has said so on the socket (read here), so a call
    goes to a new connection rather than failing half sent."""
    import psycopg
    from psycopg.pq import ConnStatus

    if conn.broken or conn.closed:
        return False
    try:
        # The first read takes what the server said (its FATAL message); the second
        # finds the end of the stream after it. A live idle socket has nothing to read.
        conn.pgconn.consume_input()
        conn.pgconn.consume_input()
    except psycopg.OperationalError:
        return False
    return conn.pgconn.status == ConnStatus.OK


@attrs.define(eq=False)
class PostgresStore(
    SqlCredentials,
    SqlSchedules,
    SqlRequests,
    SqlTurnHistory,
    SqlWorkspaces,
    SqlApprovals,
    SqlTranscripts,
    SqlSessions,
):
    """A store on PostgreSQL (``pip install 'agentrt[postgres]'``), for runtimes on many
    hosts sharing one database; it has every capability of `agentrt.store`, routing too.

    ``dsn`` is a libpq connection string or URI (``"host=db dbname=agents"``,
    ``"postgresql://agentrt@db/agents"``); a password belongs in ``PGPASSWORD`` or
    ``~/.pgpass`` rather than in it (error messages redact what looks like one).
    The tables live in the schema ``agentrt``, created and migrated step by step when a
    store opens (each step one transaction, under an advisory lock, so several hosts
    opening at once migrate once); a schema newer than this agentrt is refused, untouched.

    Leases are timed on the database server's clock (``clock_timestamp()``): every node
    reads the same clock, and no node's wall clock is compared with another's. The
    runtime's fence rests on its own monotonic clock running at the server's rate (up
    to drift far below the half lease it keeps in hand).

    One connection (autocommit; each fenced write one transaction) serves the store,
    used from a worker thread one call at a time, as ``SQLiteStore`` uses sqlite3 (the
    synchronous psycopg 3 driver: its async API needs asyncio). Before each call the
    connection is checked without sending anything (a server that restarted has closed it
    by then), and a closed one is replaced, so a restart between calls costs nothing. A
    connection that breaks during a call (the server went down under it, the network
    failed) makes that call raise `StoreError`: such a write may or may not have been
    made, so it is never retried blind; the next call connects again.
    ``connect_timeout`` bounds connecting and ``statement_timeout`` every statement
    (seconds), so no call hangs on a dead server for long; TCP keepalives find a silent
    one.

    Cancellation: waiting for the connection is cancellable; a statement that has started
    runs to its end (at most ``statement_timeout``), and the cancellation arrives at the
    caller's next checkpoint.
    """

    dsn: str
    connect_timeout: float = 5.0
    statement_timeout: float = 10.0
    clock: Callable[[], float] = time.time
    _conn: psycopg.Connection[Any] | None = attrs.field(default=None, init=False, repr=False)
    _open: bool = attrs.field(default=False, init=False, repr=False)
    _limiter: trio.CapacityLimiter = attrs.field(
        factory=lambda: trio.CapacityLimiter(1), init=False, repr=False
    )
    # The calls' turns on the connection: a lease renewal goes before the queued writes.
    _turns: Turns = attrs.field(factory=Turns, init=False, repr=False)
    # The epoch of each lease this handle acquired (used on the worker thread only).
    _epochs: dict[str, int] = attrs.field(factory=dict, init=False, repr=False)

    _UPSERT_SESSION = _UPSERT_SESSION
    _PLACEHOLDER = "%s"
    _LENGTH = "OCTET_LENGTH"
    # READ COMMITTED lets two transactions both find no holder of a branch and both
    # insert; this mode conflicts with itself (and with writes), not with readers.
    _LOCK_WORKSPACES = "LOCK TABLE workspaces IN SHARE ROW EXCLUSIVE MODE"
    # Likewise for an agent's queue: its bounds and keys are checked, then written, under
    # a transaction lock of the agent's name (enqueues of other agents do not wait).
    _LOCK_REQUESTS = "SELECT pg_advisory_xact_lock(hashtext('agentrt.requests'), hashtext(?))"

    @property
    def _where(self) -> str:
        # What error messages name: the DSN without anything that looks like a secret.
        return redact(f"postgresql {self.dsn}")

    @property
    def shared_between_programs(self) -> bool:
        """True: runtimes on many hosts share the database."""
        return True

    async def __aenter__(self) -> Self:
        if self._open:
            raise StoreError(self._where, "already open")
        self._epochs.clear()
        await trio.to_thread.run_sync(self._connect, limiter=self._limiter)
        self._open = True
        return self

    async def aclose(self) -> None:
        self._open = False
        with trio.move_on_after(self.statement_timeout + 5.0, shield=True):
            await trio.to_thread.run_sync(
                self._disconnect, limiter=self._limiter, abandon_on_cancel=True
            )

    def _disconnect(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def _connect(self) -> psycopg.Connection[Any]:
        try:
            import psycopg
        except ImportError as exc:
            raise StoreError(
                self._where, "needs psycopg 3: pip install 'agentrt[postgres]'"
            ) from exc
        try:
            conn = psycopg.connect(
                self.dsn,
                autocommit=True,
                connect_timeout=max(1, round(self.connect_timeout)),
                options=f"-c statement_timeout={int(self.statement_timeout * 1000)}",
                keepalives=1,
                keepalives_idle=5,
                keepalives_interval=2,
                keepalives_count=3,
                application_name="agentrt",
            )
        except psycopg.Error as exc:
            raise StoreError(self._where, redact(f"cannot connect: {exc}")) from exc
        try:
            self._migrate(conn)
            conn.execute(f"SET search_path TO {SCHEMA}")
        except BaseException as exc:
            conn.close()
            if isinstance(exc, psycopg.Error):
                raise StoreError(self._where, redact(f"cannot use this database: {exc}")) from exc
            raise
        self._conn = conn
        return conn

    def _migrate(self, conn: psycopg.Connection[Any]) -> None:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            found = conn.execute(
                "SELECT to_regclass(%s) IS NOT NULL", (f"{SCHEMA}.schema_version",)
            ).fetchone()
            version = 0
            if found and found[0]:
                row = conn.execute(f"SELECT version FROM {SCHEMA}.schema_version").fetchone()
                version = row[0] if row else 0
            if version > len(_MIGRATIONS):
                raise StoreError(
                    self._where,
                    f"schema version {version} is newer than this agentrt supports "
                    f"({len(_MIGRATIONS)}); use a newer agentrt or another database",
                )
            conn.execute(f"SET LOCAL search_path TO {SCHEMA}")
            for target in range(version + 1, len(_MIGRATIONS) + 1):
                with conn.transaction():
                    for statement in _MIGRATIONS[target - 1]:
                        conn.execute(statement)
                    conn.execute(f"UPDATE {SCHEMA}.schema_version SET version = %s", (target,))

    async def _call(
        self,
        work: Callable[[psycopg.Connection[Any]], _T],
        *,
        fence: str | None = None,
        atomic: bool = False,
        urgent: bool = False,
    ) -> _T:
        """Run ``work`` on the connection (connecting again if it broke); a write for the
        agent ``fence`` runs in one transaction with the check of this handle's lease
        epoch, if it holds one, with the lease row locked, and an ``atomic`` one in one
        transaction in any case. An ``urgent`` call goes before the calls waiting (`Turns`)."""
        if not self._open:
            raise StoreError(self._where, "store is not open")
        import psycopg

        def run() -> _T:
            if not self._open:
                raise StoreError(self._where, "store is not open")
            conn = self._conn
            if conn is None or not _usable(conn):
                self._disconnect()
                conn = self._connect()
            try:
                epoch = None if fence is None else self._epochs.get(fence)
                if fence is None or epoch is None:
                    if not atomic:
                        return work(conn)
                    with conn.transaction():
                        return work(conn)
                with conn.transaction():
                    current = conn.execute(
                        _LEASE_SELECT + " WHERE name = %s FOR UPDATE", (fence,)
                    ).fetchone()
                    check_fence(
                        self._where, fence, epoch, None if current is None else _lease(current)
                    )
                    return work(conn)
            except psycopg.Error as exc:
                if conn.broken:
                    self._disconnect()
                    why = f"the connection broke, so this call may or may not have been made: {exc}"
                    raise StoreError(self._where, redact(why)) from exc
                raise StoreError(self._where, redact(str(exc))) from exc

        async with self._turns.turn(urgent=urgent):
            return await trio.to_thread.run_sync(run, limiter=self._limiter)

    async def acquire_lease(
        self, name: str, owner: LeaseOwner, *, ttl: float, replacing: int | None = None
    ) -> Lease:
        def work(conn: psycopg.Connection[Any]) -> Lease:
            with conn.transaction():
                conn.execute(_LEASE_ROW, (name,))
                row = conn.execute(
                    _LEASE_SELECT + " WHERE name = %s FOR UPDATE", (name,)
                ).fetchone()
                assert row is not None
                epoch = granted_epoch(name, _lease(row), replacing)
                identity = (owner.node, owner.pid, owner.start_time, owner.runtime_id)
                conn.execute(_GRANT_LEASE, (epoch, *identity, ttl, name))
            self._epochs[name] = epoch
            return Lease(name=name, epoch=epoch, owner=owner, age=0.0, remaining=ttl)

        return await self._call(work)

    async def renew_leases(self, *, ttl: float) -> Set[str]:
        def work(conn: psycopg.Connection[Any]) -> frozenset[str]:
            mine = dict(self._epochs)
            if not mine:
                return frozenset()
            params = (ttl, list(mine), list(mine.values()))
            renewed = {row[0] for row in conn.execute(_RENEW_LEASES, params)}
            return frozenset(mine.keys() - renewed)

        # Before the agents' queued writes: the fence does not wait for them.
        return await self._call(work, urgent=True)

    async def release_leases(self, names: Iterable[str]) -> None:
        wanted = list(names)

        def work(conn: psycopg.Connection[Any]) -> None:
            mine = {
                name: epoch
                for name in wanted
                if (epoch := self._epochs.pop(name, None)) is not None
            }
            if mine:  # one transaction for all of them
                params = (list(mine), list(mine.values()))
                with conn.transaction():
                    conn.execute(_DROP_FIRST_LEASES, params)
                    conn.execute(_RELEASE_LEASES, params)

        await self._call(work)

    def router(self, owner: LeaseOwner, *, ended: Callable[[LeaseOwner], bool]) -> Router:
        """The router of the runtime ``owner``: calls for agents other runtimes own go to
        them through this database (see `PostgresRouter`); it opens connections of its own
        with this store's settings."""
        from ._postgres_router import PostgresRouter

        return PostgresRouter(self._routing_connection, owner, ended)

    def _routing_connection(self) -> RouterDatabase:
        # Not opened: the router opens it (and reconnects it) as a store of its own.
        return RouterDatabase(
            PostgresStore(
                self.dsn,
                connect_timeout=self.connect_timeout,
                statement_timeout=self.statement_timeout,
            )
        )

    async def leases(self) -> Sequence[Lease]:
        def work(conn: psycopg.Connection[Any]) -> tuple[Lease, ...]:
            return tuple(_lease(row) for row in conn.execute(_LEASE_SELECT + " ORDER BY name"))

        return await self._call(work)


@attrs.frozen
class RouterDatabase(ClosedOnExit):
    """What `PostgresRouter` uses of a `PostgresStore` of its own: the store's reconnecting
    calls, a fresh connection to ``LISTEN`` on, and the name its errors give; the router
    reaches into none of the store's internals, and the store shows it no public method."""

    _store: PostgresStore

    @property
    def where(self) -> str:
        """The database as errors name it (nothing that looks like a secret)."""
        return self._store._where

    async def __aenter__(self) -> Self:
        await self._store.__aenter__()
        return self

    async def aclose(self) -> None:
        await self._store.aclose()

    def connect(self) -> psycopg.Connection[Any]:
        """A new connection, set up like the store's (blocking: run it in a thread); the
        caller closes it."""
        return self._store._connect()

    async def call(self, work: Callable[[psycopg.Connection[Any]], _T]) -> _T:
        """Run ``work`` on the store's connection, connecting again if it broke."""
        return await self._store._call(work)
