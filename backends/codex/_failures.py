"""codex's error messages and early ends -> terminal `ErrorEvent`s (both output modes)."""

from __future__ import annotations

import re
import signal

from agentrt.backend import ErrorEvent, ExitStatus, StopReason, Usage, redact

_STATUS = re.compile(r"(?:unexpected status|last status:) (\d{3})\b")
_OVERLOADED = frozenset({500, 502, 503, 504, 529})
MESSAGE_LIMIT = 500


def classify(message: str) -> tuple[StopReason, int | None, bool]:
    """The stop reason, HTTP status and retryability of a codex error message."""
    match = _STATUS.search(message)
    status = int(match.group(1)) if match else None
    if status == 401 or message.startswith("Missing environment variable"):
        return StopReason.AUTHENTICATION_FAILED, status, False
    if message.startswith("Quota exceeded"):
        return StopReason.RATE_LIMITED, status or 429, False
    if status == 429:
        return StopReason.RATE_LIMITED, status, True
    # codex words a 500 as "We're currently experiencing high demand, ..." with no status.
    if status in _OVERLOADED or "high demand" in message:
        return StopReason.OVERLOADED, status, True
    retryable = message.startswith("stream disconnected before completion")
    return StopReason.CLI_ERROR, status, retryable


def error_event(message: str, session_id: str | None, usage: Usage | None = None) -> ErrorEvent:
    """The terminal event of a turn codex reported as failed with ``message``."""
    message = redact(message)
    reason, status, retryable = classify(message)
    return ErrorEvent(
        reason=reason,
        message=message[:MESSAGE_LIMIT],
        status=status,
        retryable=retryable,
        session_id=session_id,
        usage=usage,
    )


def ended_early(
    exit_status: ExitStatus, tail: str, session_id: str | None, notice: str | None
) -> ErrorEvent:
    """The terminal event of a codex that ended before its turn's verdict (``tail`` is the
    redacted stderr tail): a signal (PROCESS_CRASHED), the last error notice, a rejected
    flag (INVALID_OPTIONS), else MALFORMED_OUTPUT."""
    if exit_status.signal is not None:
        return ErrorEvent(
            reason=StopReason.PROCESS_CRASHED,
            message=f"codex was killed by {_signal_name(exit_status.signal)}",
            session_id=session_id,
        )
    if notice:
        return error_event(notice, session_id)
    lines = (line.strip() for line in tail.splitlines())
    error_line = next((line for line in lines if line.lower().startswith("error")), "")
    reason = (
        StopReason.INVALID_OPTIONS
        if exit_status.returncode == 2 and "unexpected argument" in error_line
        else StopReason.MALFORMED_OUTPUT
    )
    how = f"exited with code {exit_status.returncode}"
    return ErrorEvent(
        reason=reason,
        message=f"codex {how} before the turn ended"
        + (f": {error_line[:MESSAGE_LIMIT]}" if error_line else ""),
        session_id=session_id,
    )


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
