"""`SQLiteStore`: the default SessionStore, one SQLite file written durably; where it lives."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Iterable, Sequence, Set
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self, TypeVar

import attrs
import trio

from .._errors import StoreError
from .._records import Lease, LeaseOwner
from .._redact import redact
from ._approvals import SqlApprovals
from ._credential_holds import SqlCredentials
from ._history import SqlTurnHistory
from ._protocols import Router, check_fence, granted_epoch, lease_owner
from ._requests import SqlRequests
from ._schedules import SqlSchedules
from ._sql import SqlSessions
from ._sqlite_schema import prepare
from ._transcripts import SqlTranscripts
from ._turns import Turns
from ._workspaces import SqlWorkspaces

if TYPE_CHECKING:
    # Imported where a SQLiteStore opens (~1 MiB of memory a MemoryStore runtime never uses).
    import sqlite3

_T = TypeVar("_T")


def default_store_path() -> Path:
    """Where ``SQLiteStore()`` keeps its file when given no path.

    ``$AGENTRT_STORE`` if set; else ``$XDG_STATE_HOME/agentrt/sessions.sqlite3`` (an XDG
    variable only counts when absolute, as the spec says); else
    ``~/.local/state/agentrt/sessions.sqlite3``. It reads the environment only: it makes
    no directory and raises nothing, unless there is no home directory to fall back on
    (`RuntimeError`, from `pathlib.Path.home`).
    """
    override = os.environ.get("AGENTRT_STORE")
    if override:
        return Path(override).expanduser()
    return state_directory() / "sessions.sqlite3"


def state_directory() -> Path:
    """agentrt's directory of the user's state: ``$XDG_STATE_HOME/agentrt`` (an absolute
    XDG_STATE_HOME only), else ``~/.local/state/agentrt``."""
    state_home = os.environ.get("XDG_STATE_HOME", "")
    base = Path(state_home) if os.path.isabs(state_home) else Path.home() / ".local" / "state"
    return base / "agentrt"


def missing_directory(path: Path) -> StoreError | None:
    """The error of opening a store at ``path`` whose directory is missing, or None.

    Only the directories of the default location (:func:`default_store_path`) are created:
    a missing directory in a path someone passed is more likely a typo than a wish for new
    directories at the root.
    """
    parent = path.parent
    if parent.is_dir():
        return None
    default = default_store_path()
    if path == default:
        return None
    why = "is not a directory" if parent.exists() else "does not exist"
    return StoreError(
        str(path),
        f"its directory {parent} {why} (only the default location's directories are "
        f"created, {default})",
    )


_LEASE_COLUMNS = "name, epoch, node, pid, start_time, runtime_id, clock, renewed_at, expires_at"

_GRANT_LEASE = f"""
INSERT OR REPLACE INTO leases ({_LEASE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
"""

_RENEW_LEASE = """
UPDATE leases SET clock = ?, renewed_at = ?, expires_at = ?
WHERE name = ? AND epoch = ? AND runtime_id IS NOT NULL
"""

_RELEASE_LEASE = """
UPDATE leases SET node = NULL, pid = NULL, start_time = NULL, runtime_id = NULL
WHERE name = ? AND epoch = ?
"""

# See `LeaseStore.release_leases`: a name's first lease, given
# back before any session row was made, goes with its row.
_DROP_FIRST_LEASE = """
DELETE FROM leases
WHERE name = ? AND epoch = ? AND epoch = 1
    AND NOT EXISTS (SELECT 1 FROM sessions WHERE sessions.name = leases.name)
"""

_UPSERT_SESSION = """
INSERT INTO sessions (name, backend, session_id, cwd, created_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (name) DO UPDATE SET
    backend = excluded.backend, session_id = excluded.session_id, cwd = excluded.cwd,
    updated_at = excluded.updated_at,
    session_cost_usd = IIF(session_id IS excluded.session_id, session_cost_usd, 0),
    session_input_tokens = IIF(session_id IS excluded.session_id, session_input_tokens, 0),
    session_output_tokens = IIF(session_id IS excluded.session_id, session_output_tokens, 0),
    session_cache_creation_input_tokens = IIF(
        session_id IS excluded.session_id, session_cache_creation_input_tokens, 0),
    session_cache_read_input_tokens = IIF(
        session_id IS excluded.session_id, session_cache_read_input_tokens, 0),
    session_turns = IIF(session_id IS excluded.session_id, session_turns, 0)
"""


def _as_path(path: str | os.PathLike[str]) -> Path:
    return Path(path)


def boot_id() -> str:
    """This boot of the machine (Linux's random boot id): CLOCK_MONOTONIC starts again at
    each boot, so a lease time is only comparable within one."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as file:
            return file.read().strip()
    except OSError:
        return "unknown"


def _transaction(conn: sqlite3.Connection, work: Callable[[], _T]) -> _T:
    # IMMEDIATE: the write lock first, so what is read in the transaction stays true.
    conn.execute("BEGIN IMMEDIATE")
    try:
        result = work()
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return result


def _lease_transaction(conn: sqlite3.Connection, work: Callable[[], _T]) -> _T:
    # A lease write is not fsynced: a lease of an earlier boot counts as expired, so only
    # the death of this process matters to it, and a WAL commit outlives that once written.
    # (A later fsynced commit makes it durable too: the log is synced in order.)
    conn.execute("PRAGMA synchronous = NORMAL")
    try:
        return _transaction(conn, work)
    finally:
        conn.execute("PRAGMA synchronous = FULL")


@attrs.define(eq=False)
class SQLiteStore(
    SqlCredentials,
    SqlSchedules,
    SqlRequests,
    SqlTurnHistory,
    SqlWorkspaces,
    SqlApprovals,
    SqlTranscripts,
    SqlSessions,
):
    """The default :class:`SessionStore`: one SQLite file, written durably.

    ``path`` defaults to :func:`default_store_path`. A new file is created 0600, since rows
    hold working directories and agent state; its directory must exist, except at the
    default location, whose directories are created (0700).
    ``clock`` gives the records' timestamps (``time.time`` unless a test passes its own).

    Leases are timed on ``lease_clock``, by default ``time.monotonic``: CLOCK_MONOTONIC,
    one clock for every process of the machine, which NTP or a changed wall clock never
    steps, and the very clock trio times each runtime's renewals and fencing deadline
    with. A lease written in an earlier boot of the machine (its boot id differs) counts
    as expired: every process of that boot is gone.

    Opening checks the file before changing anything: a file that is not SQLite, is
    corrupt (``PRAGMA quick_check``), belongs to another application, or has a schema newer
    than this agentrt raises :class:`StoreError` naming the file and is left untouched.
    An older schema is migrated step by step, each step in its own transaction.

    The file is in WAL mode with ``synchronous=FULL``: every write is its own transaction
    and is fsynced before the call returns. NORMAL would already survive the death of this
    process (a commit is in the OS's page cache once ``write`` returns), but it may lose
    the last commits on power loss or a kernel crash; a session id is written a few times
    per turn, so FULL's one fsync per write costs nothing next to a model call and the
    checkpoint also survives a machine crash. Lease writes (grants, renewals, releases) are
    the exception, written with NORMAL: a lease of an earlier boot has expired anyway, so
    durability past this process's death is all a lease needs (and what an fsync per
    agent cost showed at thousands of agents starting or stopping).

    Every call first checks that the path still names the file the store opened (one
    ``stat``): SQLite would go on writing to a file deleted (with its directory, say) or
    replaced meanwhile, and those writes would be gone when the store is next opened. Such
    a call raises :class:`StoreError` instead, and so does every later one.

    One connection serves the store; calls run in a worker thread one at a time
    (``trio.to_thread.run_sync`` with a limiter of one). Other processes may use the same
    file: ``busy_timeout`` seconds bound the wait for their write lock.

    Cancellation: waiting for the connection is cancellable; a statement that has started
    runs to the end and commits (it is short: at most ``busy_timeout`` of lock waiting),
    and the cancellation arrives at the caller's next checkpoint.

    Runtimes of programs sharing the file reach each other's agents (a `RoutingStore`):
    over a Unix socket per runtime in the directory ``FILE-routes`` beside the file (mode
    0700; see ``router``).
    """

    path: Path = attrs.field(factory=default_store_path, converter=_as_path)
    busy_timeout: float = 5.0
    clock: Callable[[], float] = time.time
    lease_clock: Callable[[], float] = time.monotonic
    _conn: sqlite3.Connection | None = attrs.field(default=None, init=False, repr=False)
    _opening: bool = attrs.field(default=False, init=False, repr=False)
    _limiter: trio.CapacityLimiter | None = attrs.field(default=None, init=False, repr=False)
    # The calls' turns on the connection: a lease renewal goes before the queued writes.
    _turns: Turns = attrs.field(factory=Turns, init=False, repr=False)
    # (st_dev, st_ino) of the file the connection opened: SQLite goes on writing to a file
    # that was deleted or replaced, and those writes would be lost without a word.
    _identity: tuple[int, int] | None = attrs.field(default=None, init=False, repr=False)
    _boot: str = attrs.field(factory=boot_id, init=False, repr=False)
    # The epoch of each lease this handle acquired, which its writes for that name carry
    # (used on the worker thread only, one call at a time).
    _epochs: dict[str, int] = attrs.field(factory=dict, init=False, repr=False)

    _UPSERT_SESSION = _UPSERT_SESSION

    @property
    def _where(self) -> str:
        return str(self.path)

    @property
    def shared_between_programs(self) -> bool:
        """True: any program may open the same file."""
        return True

    async def __aenter__(self) -> Self:
        if self._conn is not None or self._opening:
            raise StoreError(str(self.path), "already open")
        if self._limiter is None:
            self._limiter = trio.CapacityLimiter(1)
        self._opening = True
        self._epochs.clear()
        try:
            self._conn = await trio.to_thread.run_sync(self._connect, limiter=self._limiter)
        finally:
            self._opening = False
        return self

    async def aclose(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            await trio.lowlevel.checkpoint()
            return
        # Closing waits for a statement in flight; past the bound the close is left to the
        # worker thread (abandoned), and nothing here uses the connection again.
        with trio.move_on_after(self.busy_timeout + 5.0, shield=True):
            await trio.to_thread.run_sync(conn.close, limiter=self._limiter, abandon_on_cancel=True)

    def _connect(self) -> sqlite3.Connection:
        import sqlite3

        path = str(self.path)
        missing = missing_directory(self.path)
        if missing is not None:
            raise missing
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            why = f"cannot create its directory {exc.filename or self.path.parent}"
            raise StoreError(path, f"{why}: {exc.strerror or exc}") from exc
        try:
            # Created here, not by SQLite, to get mode 0600 (SQLite gives its -wal and -shm
            # files the same mode). O_RDWR also makes an unwritable file fail here, clearly.
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                opened = os.fstat(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise StoreError(path, f"cannot open: {exc.strerror or exc}") from exc
        try:
            conn = sqlite3.connect(
                path, timeout=self.busy_timeout, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise StoreError(path, f"cannot open: {exc}") from exc
        self._identity = (opened.st_dev, opened.st_ino)
        try:
            self._check_file()
            prepare(conn, str(self.path), busy_timeout=self.busy_timeout)
        except BaseException as exc:
            conn.close()
            if isinstance(exc, sqlite3.Error):
                raise StoreError(path, redact(f"cannot use this file: {exc}")) from exc
            raise
        return conn

    def _check_file(self) -> None:
        """Refuse to go on when the path no longer names the file the store opened."""
        try:
            now = os.stat(self.path)
        except OSError as exc:
            found = f"it is gone: {exc.strerror or exc}"
        else:
            if (now.st_dev, now.st_ino) == self._identity:
                return
            found = "another file is there now"
        raise StoreError(
            str(self.path),
            f"the file this store opened was deleted or replaced ({found}); writes to it "
            "would be lost, so none is made: reopen the store",
        )

    async def _call(
        self,
        work: Callable[[sqlite3.Connection], _T],
        *,
        fence: str | None = None,
        atomic: bool = False,
        urgent: bool = False,
    ) -> _T:
        """Run ``work`` on the connection; a write for the agent ``fence`` runs in one
        transaction with the check of this handle's lease epoch, if it holds one, and an
        ``atomic`` one in one transaction in any case. An ``urgent`` call goes before the
        calls waiting (`Turns`)."""
        conn = self._conn
        path = str(self.path)
        if conn is None:
            raise StoreError(path, "store is not open")

        import sqlite3

        def run() -> _T:
            # aclose() may have run while this call waited for the limiter.
            if self._conn is not conn:
                raise StoreError(path, "store is not open")
            self._check_file()
            try:
                epoch = None if fence is None else self._epochs.get(fence)
                if fence is None or epoch is None:
                    return _transaction(conn, lambda: work(conn)) if atomic else work(conn)

                def fenced() -> _T:
                    check_fence(path, fence, epoch, self._lease_in(conn, fence))
                    return work(conn)

                return _transaction(conn, fenced)
            except sqlite3.Error as exc:
                raise StoreError(path, redact(str(exc))) from exc

        async with self._turns.turn(urgent=urgent):
            return await trio.to_thread.run_sync(run, limiter=self._limiter)

    def _lease_in(self, conn: sqlite3.Connection, name: str) -> Lease | None:
        sql = f"SELECT {_LEASE_COLUMNS} FROM leases WHERE name = ?"
        row = conn.execute(sql, (name,)).fetchone()
        return None if row is None else self._lease(row, self.lease_clock())

    def _lease(self, row: tuple[Any, ...], now: float) -> Lease:
        name, epoch, node, pid, start_time, runtime_id, clock, renewed_at, expires_at = row
        owner = lease_owner(node, pid, start_time, runtime_id)
        if clock != self._boot:  # timed on an earlier boot's clock: long expired
            return Lease(name=name, epoch=epoch, owner=owner, age=math.inf, remaining=-math.inf)
        return Lease(
            name=name, epoch=epoch, owner=owner, age=now - renewed_at, remaining=expires_at - now
        )

    async def acquire_lease(
        self, name: str, owner: LeaseOwner, *, ttl: float, replacing: int | None = None
    ) -> Lease:
        def grant(conn: sqlite3.Connection) -> Lease:
            epoch = granted_epoch(name, self._lease_in(conn, name), replacing)
            now = self.lease_clock()
            params = (name, epoch, owner.node, owner.pid, owner.start_time, owner.runtime_id)
            conn.execute(_GRANT_LEASE, (*params, self._boot, now, now + ttl))
            return Lease(name=name, epoch=epoch, owner=owner, age=0.0, remaining=ttl)

        def work(conn: sqlite3.Connection) -> Lease:
            lease = _lease_transaction(conn, lambda: grant(conn))
            self._epochs[name] = lease.epoch
            return lease

        return await self._call(work)

    async def renew_leases(self, *, ttl: float) -> Set[str]:
        def renew(conn: sqlite3.Connection) -> frozenset[str]:
            now = self.lease_clock()
            rows = [
                (self._boot, now, now + ttl, name, epoch) for name, epoch in self._epochs.items()
            ]
            # One statement for all of them (a loop of execute calls was a third of a second
            # per renewal at 20k leases); only when some lease is gone, which one.
            if conn.executemany(_RENEW_LEASE, rows).rowcount == len(rows):
                return frozenset()
            return frozenset(
                row[3] for row in rows if conn.execute(_RENEW_LEASE, row).rowcount == 0
            )

        # One transaction for all of this handle's leases, before the agents' queued
        # writes: the fence does not wait for them.
        return await self._call(
            lambda conn: _lease_transaction(conn, lambda: renew(conn)), urgent=True
        )

    async def release_leases(self, names: Iterable[str]) -> None:
        wanted = list(names)

        def work(conn: sqlite3.Connection) -> None:
            rows = [
                (name, epoch)
                for name in wanted
                if (epoch := self._epochs.pop(name, None)) is not None
            ]

            # One transaction for all of them: a runtime closing with 20k agents made 20k
            # (8 s of its shutdown).
            def release() -> None:
                conn.executemany(_DROP_FIRST_LEASE, rows)
                conn.executemany(_RELEASE_LEASE, rows)

            if rows:
                _lease_transaction(conn, release)

        await self._call(work)

    def router(self, owner: LeaseOwner, *, ended: Callable[[LeaseOwner], bool]) -> Router:
        """The router of the runtime ``owner``: calls for agents that runtimes of other
        programs on this machine own go to them over Unix sockets in the directory
        ``FILE-routes`` beside the file (see `SQLiteRouter`)."""
        from ._sqlite_router import SQLiteRouter, routes_directory

        return SQLiteRouter(routes_directory(self.path.resolve()), self._lease_of, owner, ended)

    async def _lease_of(self, name: str) -> Lease | None:
        return await self._call(lambda conn: self._lease_in(conn, name))

    async def leases(self) -> Sequence[Lease]:
        sql = f"SELECT {_LEASE_COLUMNS} FROM leases ORDER BY name"

        def work(conn: sqlite3.Connection) -> tuple[Lease, ...]:
            now = self.lease_clock()
            return tuple(self._lease(row, now) for row in conn.execute(sql))

        return await self._call(work)
