"""Agents' budgets in the store: one row per budget that applies to an agent name, in the
order the runtime checks them, written when the agent starts (`BudgetStore`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from .._records import StoredBudget

_T = TypeVar("_T")

# DOUBLE PRECISION and BIGINT: one statement for both engines (SQLite reads them as REAL
# and INTEGER).
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

_DROP = "DELETE FROM agent_budgets WHERE name = ?"
_INSERT = """
INSERT INTO agent_budgets (name, place, scope, budget_key, usd, tokens) VALUES (?, ?, ?, ?, ?, ?)
"""
_SELECT = """
SELECT name, scope, budget_key, usd, tokens FROM agent_budgets ORDER BY name, place
"""


class _SqlStore(Protocol):
    def _sql(self, statement: str) -> str: ...

    async def _call(
        self, work: Callable[[Any], _T], *, fence: str | None = None, atomic: bool = False
    ) -> _T: ...


class SqlBudgets:
    """The budget methods of a SQL store (over its ``_call``; fenced by the agent's lease
    as every other write)."""

    async def save_budgets(self: _SqlStore, name: str, budgets: Sequence[StoredBudget]) -> None:
        """Store the budgets of ``name`` in their order, replacing what was stored."""
        drop, insert = self._sql(_DROP), self._sql(_INSERT)
        rows = [(name, i, b.scope, b.key, b.usd, b.tokens) for i, b in enumerate(budgets)]

        def work(conn: Any) -> None:
            conn.execute(drop, (name,))
            for row in rows:
                conn.execute(insert, row)

        await self._call(work, fence=name, atomic=True)

    async def budgets(self: _SqlStore) -> Sequence[tuple[str, tuple[StoredBudget, ...]]]:
        """Every name's stored budgets, by name."""

        def work(conn: Any) -> dict[str, tuple[StoredBudget, ...]]:
            stored: dict[str, tuple[StoredBudget, ...]] = {}
            for name, scope, key, usd, tokens in conn.execute(_SELECT):
                budget = StoredBudget(scope=scope, key=key, usd=usd, tokens=tokens)
                stored[name] = (*stored.get(name, ()), budget)
            return stored

        return tuple((await self._call(work)).items())
