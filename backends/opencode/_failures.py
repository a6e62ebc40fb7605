"""opencode's failed turns and early exits -> terminal `ErrorEvent`s.

A failed model call (once opencode's own retries are spent) comes as an ``error`` frame,
``{"error": {"name": "APIError", "data": {"message", "statusCode", "isRetryable",
"responseBody"}}}``, and the run exits 1. A ``--session`` it cannot find ends it with exit
1 and ``Error: Session not found`` on stderr, before any frame.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Mapping
from typing import Any

from agentrt.backend import ErrorEvent, ExitStatus, StopReason, Usage, redact

MESSAGE_LIMIT = 500

_BY_STATUS = {
    401: StopReason.AUTHENTICATION_FAILED,
    403: StopReason.AUTHENTICATION_FAILED,
    429: StopReason.RATE_LIMITED,
    500: StopReason.OVERLOADED,
    502: StopReason.OVERLOADED,
    503: StopReason.OVERLOADED,
    529: StopReason.OVERLOADED,
}
# The API's own words (in the response body), which say more than their status.
_MARKERS: tuple[tuple[StopReason, re.Pattern[str]], ...] = (
    (
        StopReason.CONTEXT_EXHAUSTED,
        re.compile(r"prompt is too long|context_length_exceeded", re.IGNORECASE),
    ),
    (StopReason.CREDENTIAL_EXPIRED, re.compile(r"token has expired|token_expired", re.I)),
)
_RETRYABLE = frozenset({StopReason.RATE_LIMITED, StopReason.OVERLOADED})
_LOST = re.compile(r"Session not found")
# opencode colours its stderr even into a pipe.
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def error_event(error: Any, session_id: str | None, usage: Usage | None) -> ErrorEvent:
    """The terminal event of an ``error`` frame's ``error``."""
    data = error.get("data") if isinstance(error, Mapping) else None
    data = data if isinstance(data, Mapping) else {}
    name = error.get("name") if isinstance(error, Mapping) else None
    message = redact(str(data.get("message") or name or "the turn failed"))
    status = data.get("statusCode")
    status = status if isinstance(status, int) and not isinstance(status, bool) else None
    body = redact(str(data.get("responseBody") or ""))
    reason = _BY_STATUS.get(status or 0, StopReason.CLI_ERROR)
    for marked, pattern in _MARKERS:
        if pattern.search(message) or pattern.search(body):
            reason = marked
    return ErrorEvent(
        reason=reason,
        message=message[:MESSAGE_LIMIT],
        status=status,
        retryable=reason in _RETRYABLE,
        session_id=session_id,
        usage=usage,
        raw={"name": name, "status": status},
    )


def ended_early(exit_status: ExitStatus, stderr_tail: str, session_id: str | None) -> ErrorEvent:
    """The terminal event of an opencode that ended with no error frame and no clean exit:
    a signal (PROCESS_CRASHED), a session it cannot find (SESSION_LOST), else stderr's
    last line."""
    tail = _ANSI.sub("", redact(stderr_tail))
    if exit_status.signal is not None:
        try:
            name = signal.Signals(exit_status.signal).name
        except ValueError:
            name = f"signal {exit_status.signal}"
        return ErrorEvent(
            reason=StopReason.PROCESS_CRASHED,
            message=f"opencode was killed by {name}",
            session_id=session_id,
        )
    if _LOST.search(tail):
        return ErrorEvent(
            reason=StopReason.SESSION_LOST,
            message=f"opencode has no saved session {session_id or ''}".rstrip(),
            session_id=session_id,
        )
    lines = [line.strip() for line in tail.splitlines() if line.strip()]
    message = lines[-1] if lines else f"opencode exited with {exit_status.returncode}"
    return ErrorEvent(
        reason=StopReason.CLI_ERROR, message=message[:MESSAGE_LIMIT], session_id=session_id
    )
