"""What a router does with a routed call whatever carries it (database rows on PostgreSQL,
a Unix socket on SQLite): the owner's side, from a call's encoded arguments to its encoded
answer, and the caller's word for an owner that ended before answering."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable

from .._errors import AgentRTError, AgentStopped, RoutingError
from .._records import LeaseOwner
from ._protocols import Serve
from ._route_codec import decode_call, encode_answer, encode_error
from ._route_values import RowRefused, shown

logger = logging.getLogger("agentrt")


def start_call(
    serve: Serve, caller: str, name: str, call: str, row: bytes
) -> bytes | Awaitable[object]:
    """Start serving the call ``row`` from the runtime ``caller``: its answer at once (a
    synchronous call, a failure, or a row refused: not decoding, or of another protocol),
    or the awaitable of an async call (its answer is `finish_call`'s). Never raises."""
    try:
        arguments = decode_call(call, row)
    except RowRefused as exc:
        why = shown(str(exc))
        logger.warning(
            "a routed %s for agent %r from runtime %s was refused: %s",
            shown(call),
            shown(name),
            shown(caller),
            why,
        )
        return encode_error(RoutingError(shown(name), shown(call), why))
    try:
        made = serve(call, name, arguments)  # a synchronous call runs now
        if inspect.isawaitable(made):
            return made
        return encode_answer(name, call, made)
    except Exception as exc:
        return encode_error(failure(name, call, exc))


async def finish_call(name: str, call: str, pending: Awaitable[object]) -> bytes:
    """The answer of an async call `start_call` started. Never raises but a cancellation."""
    try:
        return encode_answer(name, call, await pending)
    except Exception as exc:
        return encode_error(failure(name, call, exc))


def failure(name: str, call: str, exc: Exception) -> AgentRTError:
    """The error a call that raised answers with: its own, or (a bug, which must not end
    the runtime's routing) one saying so."""
    if isinstance(exc, AgentRTError):
        return exc
    logger.error("agent %r: a routed %s failed", name, call, exc_info=exc)
    return AgentRTError(f"the owner failed to run the routed {call}: {exc!r}")


def owner_stopped(name: str, owner: LeaseOwner, call: str) -> AgentStopped:
    """What a caller raises when ``owner`` ended, or gave ``name`` up, before answering."""
    return AgentStopped(
        name,
        f"its owner (node {owner.node!r}, pid {owner.pid}) ended or gave it up "
        f"before answering the routed {call}",
    )
