"""A store's schema as of an earlier version, for the tests of its upgrades: read from the
store's own schema steps (``_MIGRATIONS``, step v taking version v to v + 1), so a new step
needs no test edited. `back_to_sqlite` / `back_to_postgres` undo the steps after a version
(drop the tables they made, the columns they added, their indexes on older tables) and
set the file's or database's version to it; `tables` names the tables of a version."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any

from agentrt._stores import _postgres, _sqlite_schema

SQLITE_STEPS: Sequence[tuple[str, ...]] = _sqlite_schema.MIGRATIONS
POSTGRES_STEPS: Sequence[tuple[str, ...]] = _postgres._MIGRATIONS
# The version a store upgrades a file or database to.
SQLITE_VERSION = len(SQLITE_STEPS)
POSTGRES_VERSION = len(POSTGRES_STEPS)

_TABLE = re.compile(r"\s*CREATE TABLE (?:IF NOT EXISTS )?(\w+)", re.IGNORECASE)
_INDEX = re.compile(r"\s*CREATE (?:UNIQUE )?INDEX (\w+) ON (\w+)", re.IGNORECASE)
_COLUMN = re.compile(r"\s*ALTER TABLE (\w+) ADD COLUMN (\w+)", re.IGNORECASE)
# What the first step makes besides tables, which no version but 0 lacks.
_FIRST = re.compile(r"\s*(CREATE SCHEMA|INSERT INTO schema_version)", re.IGNORECASE)


def tables(steps: Sequence[tuple[str, ...]], version: int) -> set[str]:
    """The tables a database of schema ``version`` has, as ``steps`` make them."""
    return {m[1] for step in steps[:version] for s in step if (m := _TABLE.match(s))}


def _undoing(steps: Sequence[tuple[str, ...]], version: int, schema: str) -> Iterator[str]:
    """The statements that take a database from the last of ``steps`` back to ``version``,
    newest first; ``schema``: the prefix of its names (``"agentrt."``, or none)."""
    if version < 1:
        raise ValueError(f"version {version}: no schema is version 0, nothing to go back to")
    dropped = tables(steps, len(steps)) - tables(steps, version)
    for step in reversed(steps[version:]):
        for statement in reversed(step):
            if m := _TABLE.match(statement):
                yield f"DROP TABLE {schema}{m[1]}"
            elif m := _INDEX.match(statement):
                if m[2] not in dropped:  # an index a later step put on an older table
                    yield f"DROP INDEX {schema}{m[1]}"
            elif m := _COLUMN.match(statement):
                if m[1] not in dropped:
                    yield f"ALTER TABLE {schema}{m[1]} DROP COLUMN {m[2]}"
            elif not _FIRST.match(statement):
                raise ValueError(f"no way back written for the schema step {statement!r}")


def back_to_sqlite(path: Any, version: int) -> None:
    """Take the SQLite store file at ``path`` back to schema ``version``."""
    conn = sqlite3.connect(path)
    try:
        for statement in _undoing(SQLITE_STEPS, version, ""):
            conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {version}")
        conn.commit()
    finally:
        conn.close()


def back_to_postgres(dsn: str, version: int) -> None:
    """Take the PostgreSQL store database of ``dsn`` back to schema ``version``."""
    import psycopg

    schema = f"{_postgres.SCHEMA}."
    with psycopg.connect(dsn, autocommit=True) as conn, conn.transaction():
        for statement in _undoing(POSTGRES_STEPS, version, schema):
            conn.execute(statement)
        conn.execute(f"UPDATE {schema}schema_version SET version = %s", (version,))
