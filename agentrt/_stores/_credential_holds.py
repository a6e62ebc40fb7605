"""What holds each credential's agents, in a SQL store (`CredentialStore`): one row per
credential group that a usage limit parked or an expired login halted, and one per agent
naming the group it uses, so a restarted program and ``agentrt status`` read them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._records import StoredCredential
from ._sql import SqlCalls

# DOUBLE PRECISION: one statement for both engines (SQLite reads it as REAL).
CREATE_CREDENTIALS = (
    """
    CREATE TABLE credential_holds (
        credential TEXT PRIMARY KEY NOT NULL,
        label TEXT NOT NULL,
        parked_until DOUBLE PRECISION,
        park_reason TEXT,
        halt_reason TEXT,
        halted_since DOUBLE PRECISION
    )
    """,
    """
    CREATE TABLE agent_credentials (
        name TEXT PRIMARY KEY NOT NULL,
        credential TEXT NOT NULL
    )
    """,
)

_COLUMNS = "credential, label, parked_until, park_reason, halt_reason, halted_since"
_SAVE = f"""
INSERT INTO credential_holds ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (credential) DO UPDATE SET label = excluded.label,
    parked_until = excluded.parked_until, park_reason = excluded.park_reason,
    halt_reason = excluded.halt_reason, halted_since = excluded.halted_since
"""
_USE = """
INSERT INTO agent_credentials (name, credential) VALUES (?, ?)
ON CONFLICT (name) DO UPDATE SET credential = excluded.credential
"""
_SELECT_ONE = f"SELECT {_COLUMNS} FROM credential_holds WHERE credential = ?"
_SELECT = f"SELECT {_COLUMNS} FROM credential_holds ORDER BY credential"
_SELECT_AGENTS = "SELECT name, credential FROM agent_credentials ORDER BY name"


class SqlCredentials:
    """The credential methods of a SQL store (over its ``_call``); unfenced, as a
    credential is every agent's of it."""

    async def save_credential(self: SqlCalls, credential: StoredCredential) -> None:
        """Store what holds ``credential.key``, replacing what was stored."""
        c, sql = credential, self._sql(_SAVE)
        params = (c.key, c.label, c.parked_until, c.park_reason, c.halt_reason, c.halted_since)
        await self._call(lambda conn: conn.execute(sql, params))

    async def use_credential(self: SqlCalls, name: str, key: str) -> None:
        """Agent ``name`` uses the credential ``key``."""
        sql = self._sql(_USE)
        await self._call(lambda conn: conn.execute(sql, (name, key)))

    async def credential(self: SqlCalls, key: str) -> StoredCredential | None:
        """What is stored of credential ``key``, or None."""
        sql = self._sql(_SELECT_ONE)

        def work(conn: Any) -> StoredCredential | None:
            row = conn.execute(sql, (key,)).fetchone()
            return None if row is None else _credential(row, ())

        return await self._call(work)

    async def credentials(self: SqlCalls) -> Sequence[StoredCredential]:
        """Every stored credential, by key, with the agents stored as using it."""

        def work(conn: Any) -> tuple[StoredCredential, ...]:
            agents: dict[str, tuple[str, ...]] = {}
            for name, key in conn.execute(_SELECT_AGENTS):
                agents[key] = (*agents.get(key, ()), name)
            rows = conn.execute(_SELECT).fetchall()
            return tuple(_credential(row, agents.get(row[0], ())) for row in rows)

        return await self._call(work, atomic=True)


def _credential(row: Sequence[Any], agents: tuple[str, ...]) -> StoredCredential:
    key, label, parked_until, park_reason, halt_reason, halted_since = row
    return StoredCredential(
        key=key,
        label=label,
        parked_until=parked_until,
        park_reason=park_reason,
        halt_reason=halt_reason,
        halted_since=halted_since,
        agents=agents,
    )
