"""Agents' workspaces in the store: the git worktree each agent's record owns (one row per
agent name, apart from the session rows, so a worktree is remembered before the agent's
first turn and after its session is forgotten)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Protocol

from .._errors import BranchInUse
from .._records import StoredWorkspace
from ._sql import SqlCalls

CREATE_WORKSPACES = """
CREATE TABLE workspaces (
    name TEXT PRIMARY KEY NOT NULL,
    repo TEXT NOT NULL,
    path TEXT NOT NULL,
    branch TEXT NOT NULL,
    base TEXT,
    node TEXT NOT NULL
)
"""

_COLUMNS = "name, repo, path, branch, base, node"
_SAVE = f"""
INSERT INTO workspaces ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (name) DO UPDATE SET repo = excluded.repo, path = excluded.path,
    branch = excluded.branch, base = excluded.base, node = excluded.node
"""
# Another agent's record of the same branch: the claim a save is refused for.
_HOLDER = "SELECT name FROM workspaces WHERE repo = ? AND branch = ? AND name <> ? LIMIT 1"
_DROP = "DELETE FROM workspaces WHERE name = ?"
_SELECT = f"SELECT {_COLUMNS} FROM workspaces ORDER BY name"


def _row(workspace: StoredWorkspace) -> tuple[str | None, ...]:
    w = workspace
    return (w.name, w.repo, w.path, w.branch, w.base, w.node)


class _SqlStore(SqlCalls, Protocol):
    @property
    def _LOCK_WORKSPACES(self) -> str | None: ...


class SqlWorkspaces:
    """The workspace methods of a SQL store (over its ``_call``; fenced by the agent's
    lease as every other write). ``_LOCK_WORKSPACES`` is the statement that makes one
    save wait for another's transaction where the engine's transaction does not already
    (SQLite's ``BEGIN IMMEDIATE`` does)."""

    _LOCK_WORKSPACES: ClassVar[str | None] = None

    async def save_workspace(self: _SqlStore, workspace: StoredWorkspace) -> None:
        """Store (or replace) the workspace of ``workspace.name``; `BranchInUse` when
        another agent's stored workspace is on the same branch of the same repository.
        The check and the write are one transaction, serialized with every other save: of
        saves racing for one branch, from any handle, exactly one is stored."""
        w = workspace
        sql, params, holder = self._sql(_SAVE), _row(w), self._sql(_HOLDER)
        lock = self._LOCK_WORKSPACES

        def work(conn: Any) -> None:
            if lock is not None:
                conn.execute(lock)
            other = conn.execute(holder, (w.repo, w.branch, w.name)).fetchone()
            if other is not None:
                raise BranchInUse(w.repo, w.branch, f"agent {other[0]!r}")
            conn.execute(sql, params)

        await self._call(work, fence=w.name, atomic=True)

    async def drop_workspace(self: _SqlStore, name: str) -> bool:
        """Forget the workspace of ``name``; whether there was one."""
        sql = self._sql(_DROP)

        def work(conn: Any) -> int:
            rowcount: int = conn.execute(sql, (name,)).rowcount
            return rowcount

        return await self._call(work, fence=name) > 0

    async def workspaces(self: _SqlStore) -> Sequence[StoredWorkspace]:
        """Every stored workspace, by name."""

        def work(conn: Any) -> tuple[StoredWorkspace, ...]:
            return tuple(_workspace(row) for row in conn.execute(_SELECT))

        return await self._call(work)


def _workspace(row: Sequence[Any]) -> StoredWorkspace:
    name, repo, path, branch, base, node = row
    return StoredWorkspace(name=name, repo=repo, path=path, branch=branch, base=base, node=node)
