"""An SQLite file made, and kept, an agentrt session store: its mark, its journal mode, its
schema and the migrations from each older version; a foreign, corrupt or newer file is
refused as it is."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from .._errors import StoreError
from .._redact import redact
from ._approvals import CREATE_APPROVALS
from ._credential_holds import ADD_AGENT_HOLDS, CREATE_CREDENTIALS
from ._history import CREATE_TURN_HISTORY
from ._requests import CREATE_REQUESTS
from ._schedules import CREATE_SCHEDULES
from ._sql import CREATE_AGENT_SPECS, CREATE_BUDGETS
from ._transcripts import CREATE_TRANSCRIPTS
from ._workspaces import CREATE_WORKSPACES

if TYPE_CHECKING:
    import sqlite3

# "AGRT": marks a SQLite file as ours, so a foreign database is refused rather than altered.
APPLICATION_ID = 0x41475254

CREATE_SESSIONS = """
CREATE TABLE sessions (
    name TEXT PRIMARY KEY NOT NULL,
    backend TEXT NOT NULL,
    session_id TEXT,
    cwd TEXT,
    turns INTEGER NOT NULL DEFAULT 0,
    cost_usd REAL NOT NULL DEFAULT 0.0,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    cache_creation_input_tokens INTEGER NOT NULL DEFAULT 0,
    cache_read_input_tokens INTEGER NOT NULL DEFAULT 0,
    last_stop_reason TEXT,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    live_pgid INTEGER,
    live_pid INTEGER,
    live_start_time INTEGER,
    runtime_id TEXT,
    state BLOB
)
"""

# One row per agent name ever leased; the owner columns are NULL once released. The epoch
# stays, so a later grant gets a larger one. ``clock`` names the boot whose CLOCK_MONOTONIC
# ``renewed_at`` / ``expires_at`` are on.
CREATE_LEASES = """
CREATE TABLE leases (
    name TEXT PRIMARY KEY NOT NULL,
    epoch INTEGER NOT NULL,
    node TEXT,
    pid INTEGER,
    start_time INTEGER,
    runtime_id TEXT,
    clock TEXT NOT NULL,
    renewed_at REAL NOT NULL,
    expires_at REAL NOT NULL
)
"""

# MIGRATIONS[v] takes a file from schema version v (PRAGMA user_version) to v + 1; version 0
# is an empty file. Each step runs in one transaction with its version bump. The upgrade
# tests go back to a version by undoing the later steps' CREATE TABLE / CREATE INDEX / ADD
# COLUMN statements (tests/schema_steps.py): a statement of another kind needs its undoing
# written there.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (CREATE_SESSIONS,),
    # 2: the env marker of a live turn, so the reaper finds setsid'd orphans of a dead leader.
    ("ALTER TABLE sessions ADD COLUMN live_marker TEXT",),
    # 3: the current session's own totals, for CLIs that report running session totals.
    tuple(
        f"ALTER TABLE sessions ADD COLUMN session_{column} NOT NULL DEFAULT 0"
        for column in (
            "cost_usd REAL",
            "input_tokens INTEGER",
            "output_tokens INTEGER",
            "cache_creation_input_tokens INTEGER",
            "cache_read_input_tokens INTEGER",
        )
    ),
    # 4: which runtime owns each agent name.
    (CREATE_LEASES,),
    # 5: the CLI's transcripts, chunk by chunk (portable sessions).
    (CREATE_TRANSCRIPTS.replace("BYTES", "BLOB"),),
    # 6: the agents' supervisor specs, for failover.
    (CREATE_AGENT_SPECS,),
    # 7: whether a live process is a warm CLI idling between turns; the current session's
    # turns.
    (
        "ALTER TABLE sessions ADD COLUMN live_idle INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE sessions ADD COLUMN session_turns INTEGER NOT NULL DEFAULT 0",
    ),
    # 8: tool calls waiting for a person (AskOperator), any node's console answers them.
    (CREATE_APPROVALS,),
    # 9: the git worktree each agent's record owns.
    (CREATE_WORKSPACES,),
    # 10: each agent's finished turns, the newest kept (the console's history).
    tuple(s.replace("ID_COLUMN", "INTEGER PRIMARY KEY") for s in CREATE_TURN_HISTORY),
    # 11: the budgets that apply to each agent (agentrt status).
    (CREATE_BUDGETS,),
    # 12: each agent's durable requests: queued, running, settled (kept for result_ttl).
    tuple(s.replace("ID_COLUMN", "INTEGER PRIMARY KEY") for s in CREATE_REQUESTS),
    # 13: what holds each credential's agents (a usage limit's park, an expired login's
    # halt), and the credential each agent uses.
    CREATE_CREDENTIALS,
    # 14: each agent's scheduled prompts.
    CREATE_SCHEDULES,
    # 15: whether a credential's halt and park hold each of its agents.
    ADD_AGENT_HOLDS,
)


def prepare(conn: sqlite3.Connection, path: str, *, busy_timeout: float) -> None:
    """Make the file at ``path`` (opened as ``conn``) an agentrt store of the current
    schema, or refuse it: a foreign, corrupt or newer file is left as it is."""
    # Its three reads in one snapshot: another process may be creating the store meanwhile,
    # and a schema made between them read as a file with "other tables".
    conn.execute("BEGIN")
    try:
        _check_identity(conn, path)
    finally:
        conn.execute("COMMIT")
    problems = [row[0] for row in conn.execute("PRAGMA quick_check")]
    if problems != ["ok"]:
        raise StoreError(path, "corrupt: " + redact("; ".join(map(str, problems[:5]))))
    mode = _switch_to_wal(conn, busy_timeout)
    if mode != "wal":
        raise StoreError(path, f"cannot switch to WAL journal mode (got {mode!r})")
    conn.execute("PRAGMA synchronous = FULL")
    # IMMEDIATE takes the write lock first, so two processes opening a new file at once
    # cannot both migrate it; the identity is checked again under the lock.
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = _check_identity(conn, path)
        if version == 0:
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        for target in range(version + 1, len(MIGRATIONS) + 1):
            for statement in MIGRATIONS[target - 1]:
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {target}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def _switch_to_wal(conn: sqlite3.Connection, busy_timeout: float) -> str:
    """``PRAGMA journal_mode = WAL``, tried again until ``busy_timeout``: SQLite answers
    "database is locked" at once, without its busy handler, to a process that switches
    a new file while another process does (and then finds it switched)."""
    import sqlite3

    deadline = time.monotonic() + busy_timeout
    while True:
        try:
            (mode,) = conn.execute("PRAGMA journal_mode = WAL").fetchone()
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode != sqlite3.SQLITE_BUSY or time.monotonic() > deadline:
                raise
            time.sleep(0.005)
        else:
            assert isinstance(mode, str)
            return mode


def _check_identity(conn: sqlite3.Connection, path: str) -> int:
    """The file's schema version, after refusing files that are not ours or too new."""
    (app_id,) = conn.execute("PRAGMA application_id").fetchone()
    (version,) = conn.execute("PRAGMA user_version").fetchone()
    if app_id == 0 and version == 0:
        (objects,) = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        if objects:
            raise StoreError(path, "not an agentrt session store (it has other tables)")
    elif app_id != APPLICATION_ID:
        raise StoreError(path, f"not an agentrt session store (application_id {app_id:#x})")
    if version > len(MIGRATIONS):
        raise StoreError(
            path,
            f"schema version {version} is newer than this agentrt supports "
            f"({len(MIGRATIONS)}); use a newer agentrt or another store file",
        )
    assert isinstance(version, int)
    return version
