"""Tool calls waiting for a person, as the console lists and decides them (through the
store's `ApprovalStore` methods, so any node's request is answered from any console)."""

from __future__ import annotations

import json
from typing import Any

from .._errors import AgentRTError
from .._records import OperatorDecision
from .._stores._protocols import ApprovalStore
from ._shown import shown

# Who the decisions made here are by, in the turn's ToolDecisionEvent.
DECIDED_BY = "console"


class ApprovalGone(AgentRTError):
    """The request was decided already, or its bound denied it before the decision."""


async def pending(store: ApprovalStore | None) -> list[dict[str, Any]] | None:
    """The requests waiting, oldest first; None on a store that keeps none (``store``: its
    `StoreCapabilities.approvals`)."""
    if store is None:
        return None
    return [
        {
            "id": a.id,
            "name": a.name,
            "tool": shown(a.tool_name),
            "input": shown(a.input),
            "reason": shown(a.reason),
            "request": a.request,
            "requested_at": a.requested_at,
            "expires_at": a.expires_at,
        }
        for a in await store.pending_approvals()
    ]


async def decide(store: ApprovalStore | None, request: dict[str, Any]) -> None:
    """Decide the request ``request["id"]``: ``allowed``, with ``updated_input`` (JSON
    text) or ``message``. `ValueError` for a malformed one, `ApprovalGone` when too late."""
    if store is None:
        raise ValueError("this console's store keeps no approvals")
    id, allowed = request.get("id"), request.get("allowed")
    if not isinstance(id, str) or not isinstance(allowed, bool):
        raise ValueError("a decision needs the request's id and allowed: true or false")
    message, updated = request.get("message"), request.get("updated_input")
    if updated is not None:
        if not isinstance(updated, str) or not allowed:
            raise ValueError("updated_input is the JSON text an allowed tool runs with")
        json.loads(updated)  # ValueError, saying where, for what is not JSON
    if message is not None and not isinstance(message, str):
        raise ValueError("message must be a str")
    decision = OperatorDecision(
        allowed=allowed,
        message=None if allowed else (message or "the operator denied it"),
        updated_input=updated,
        decided_by=DECIDED_BY,
    )
    if not await store.decide_approval(id, decision):
        raise ApprovalGone(
            f"request {id} was decided already, or approval_timeout denied it meanwhile"
        )
