"""Tool calls waiting for a person (`ApprovalStore`) in the two SQL stores: one table, the
statements written once with ``?`` placeholders, over each store's own ``_call``. The
decision is one conditional UPDATE and the removal one DELETE ... RETURNING, so a decision
either reaches its turn or is refused, whichever connection makes it. A request past its
``expires_at`` is neither listed nor decided: its turn stopped waiting (or its program died
waiting, leaving the row), so a decision would reach nobody."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._errors import StoreError
from .._records import OperatorDecision, PendingApproval
from ._sql import SqlCalls

CREATE_APPROVALS = """
CREATE TABLE approvals (
    id TEXT PRIMARY KEY NOT NULL,
    name TEXT NOT NULL,
    tool_name TEXT NOT NULL,
    tool_use_id TEXT NOT NULL,
    input TEXT NOT NULL,
    reason TEXT NOT NULL,
    runtime_id TEXT NOT NULL,
    request BIGINT,
    requested_at DOUBLE PRECISION NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL,
    decided_by TEXT,
    allowed BOOLEAN,
    message TEXT,
    updated_input TEXT
)
"""

_COLUMNS = (
    "id, name, tool_name, tool_use_id, input, reason, runtime_id, request, requested_at, expires_at"
)
_DECISION = "decided_by, allowed, message, updated_input"
_PUT = f"INSERT INTO approvals ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
_PENDING = f"""
SELECT {_COLUMNS} FROM approvals WHERE decided_by IS NULL AND expires_at > ?
ORDER BY requested_at, id
"""
_DECIDE = """
UPDATE approvals SET decided_by = ?, allowed = ?, message = ?, updated_input = ?
WHERE id = ? AND decided_by IS NULL AND expires_at > ?
"""
_DECISION_OF = f"SELECT {_DECISION} FROM approvals WHERE id = ?"
_REMOVE = f"DELETE FROM approvals WHERE id = ? RETURNING {_DECISION}"


def _decision(row: Sequence[Any] | None) -> OperatorDecision | None:
    if row is None or row[0] is None:
        return None
    by, allowed, message, updated_input = row
    return OperatorDecision(
        allowed=bool(allowed), message=message, updated_input=updated_input, decided_by=by
    )


class SqlApprovals:
    """The `ApprovalStore` methods of a SQL store."""

    async def put_approval(self: SqlCalls, approval: PendingApproval) -> None:
        a = approval
        params = (
            *(a.id, a.name, a.tool_name, a.tool_use_id, a.input, a.reason, a.runtime_id),
            *(a.request, a.requested_at, a.expires_at),
        )
        sql, exists = self._sql(_PUT), self._sql("SELECT 1 FROM approvals WHERE id = ?")

        def work(conn: Any) -> bool:
            if conn.execute(exists, (a.id,)).fetchone() is not None:
                return False
            conn.execute(sql, params)
            return True

        if not await self._call(work):
            raise StoreError(self._where, f"an approval with id {a.id!r} exists")

    async def pending_approvals(self: SqlCalls) -> Sequence[PendingApproval]:
        sql, now = self._sql(_PENDING), self.clock()

        def work(conn: Any) -> tuple[PendingApproval, ...]:
            names = _COLUMNS.split(", ")
            rows = conn.execute(sql, (now,)).fetchall()
            return tuple(PendingApproval(**dict(zip(names, row, strict=True))) for row in rows)

        return await self._call(work)

    async def decide_approval(self: SqlCalls, id: str, decision: OperatorDecision) -> bool:
        d = decision
        params = (d.decided_by, d.allowed, d.message, d.updated_input, id, self.clock())
        sql = self._sql(_DECIDE)

        def work(conn: Any) -> int:
            rowcount: int = conn.execute(sql, params).rowcount
            return rowcount

        return await self._call(work) == 1

    async def decision_of(self: SqlCalls, id: str) -> OperatorDecision | None:
        sql = self._sql(_DECISION_OF)
        return await self._call(lambda conn: _decision(conn.execute(sql, (id,)).fetchone()))

    async def remove_approval(self: SqlCalls, id: str) -> OperatorDecision | None:
        sql = self._sql(_REMOVE)
        return await self._call(lambda conn: _decision(conn.execute(sql, (id,)).fetchone()))
