"""What holds each credential's agents, in a SQL store (`CredentialStore`): one row per
credential group that a usage limit parked or an expired login halted, and one per agent
naming the group it uses and whether its halt and its park hold the agent, so a restarted
program and ``agentrt status`` read them."""

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

# Whether a credential's halt and park hold the agent (its on_credential_expired and
# on_usage_limit), added to the table above in a later schema.
ADD_AGENT_HOLDS = tuple(
    f"ALTER TABLE agent_credentials ADD COLUMN {column} BOOLEAN NOT NULL DEFAULT TRUE"
    for column in ("halts", "parks")
)

_COLUMNS = "credential, label, parked_until, park_reason, halt_reason, halted_since"
_SAVE = f"""
INSERT INTO credential_holds ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (credential) DO UPDATE SET label = excluded.label,
    parked_until = excluded.parked_until, park_reason = excluded.park_reason,
    halt_reason = excluded.halt_reason, halted_since = excluded.halted_since
"""
_USE = """
INSERT INTO agent_credentials (name, credential, halts, parks) VALUES (?, ?, ?, ?)
ON CONFLICT (name) DO UPDATE SET credential = excluded.credential,
    halts = excluded.halts, parks = excluded.parks
"""
_SELECT_ONE = f"SELECT {_COLUMNS} FROM credential_holds WHERE credential = ?"
_SELECT = f"SELECT {_COLUMNS} FROM credential_holds ORDER BY credential"
_SELECT_AGENTS = "SELECT name, credential, halts, parks FROM agent_credentials ORDER BY name"


class SqlCredentials:
    """The credential methods of a SQL store (over its ``_call``); unfenced, as a
    credential is every agent's of it."""

    async def save_credential(self: SqlCalls, credential: StoredCredential) -> None:
        """Store what holds ``credential.key``, replacing what was stored."""
        c, sql = credential, self._sql(_SAVE)
        params = (c.key, c.label, c.parked_until, c.park_reason, c.halt_reason, c.halted_since)
        await self._call(lambda conn: conn.execute(sql, params))

    async def use_credential(
        self: SqlCalls, name: str, key: str, *, halts: bool = True, parks: bool = True
    ) -> None:
        """Agent ``name`` uses the credential ``key``; its halt and park hold the agent
        where ``halts`` and ``parks``."""
        sql = self._sql(_USE)
        await self._call(lambda conn: conn.execute(sql, (name, key, halts, parks)))

    async def credential(self: SqlCalls, key: str) -> StoredCredential | None:
        """What is stored of credential ``key``, or None."""
        sql = self._sql(_SELECT_ONE)

        def work(conn: Any) -> StoredCredential | None:
            row = conn.execute(sql, (key,)).fetchone()
            return None if row is None else _credential(row, [])

        return await self._call(work)

    async def credentials(self: SqlCalls) -> Sequence[StoredCredential]:
        """Every stored credential, by key, with the agents stored as using it."""

        def work(conn: Any) -> tuple[StoredCredential, ...]:
            agents: dict[str, list[tuple[str, bool, bool]]] = {}
            for name, key, halts, parks in conn.execute(_SELECT_AGENTS):
                agents.setdefault(key, []).append((name, bool(halts), bool(parks)))
            rows = conn.execute(_SELECT).fetchall()
            return tuple(_credential(row, agents.get(row[0], [])) for row in rows)

        return await self._call(work, atomic=True)


def _credential(row: Sequence[Any], agents: Sequence[tuple[str, bool, bool]]) -> StoredCredential:
    key, label, parked_until, park_reason, halt_reason, halted_since = row
    return StoredCredential(
        key=key,
        label=label,
        parked_until=parked_until,
        park_reason=park_reason,
        halt_reason=halt_reason,
        halted_since=halted_since,
        agents=tuple(name for name, _, _ in agents),
        ignore_halt=tuple(name for name, halts, _ in agents if not halts),
        ignore_park=tuple(name for name, _, parks in agents if not parks),
    )
