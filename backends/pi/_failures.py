"""pi's failed turns and early exits -> terminal `ErrorEvent`s.

pi reports a failed model call in the assistant message that ends the run
(``stopReason`` ``error``, ``errorMessage`` ``"<status> <the API's body>"``, for
Anthropic-shaped APIs ``401 {"type":"error","error":{"type":"authentication_error",...}}``)
and exits 0. It retries some failures itself (``auto_retry_start``, then the run again), so
a failed run is the turn's end only when no retry follows it: the end of the stream. A
``--session`` it cannot find ends it with exit 1 and ``No session found matching '<id>'``
on stderr.
"""

from __future__ import annotations

import re
import signal

from agentrt.backend import ErrorEvent, ExitStatus, StopReason, Usage, redact

MESSAGE_LIMIT = 500

_STATUS = re.compile(r"^(\d{3})\b")
_BY_STATUS = {
    401: StopReason.AUTHENTICATION_FAILED,
    403: StopReason.AUTHENTICATION_FAILED,
    429: StopReason.RATE_LIMITED,
    500: StopReason.OVERLOADED,
    502: StopReason.OVERLOADED,
    503: StopReason.OVERLOADED,
    529: StopReason.OVERLOADED,
}
# The API's own words, which say more than the status they come with (a 400 that is a
# full context window, a 401 that is an expired token).
_MARKERS: tuple[tuple[StopReason, re.Pattern[str]], ...] = (
    (
        StopReason.CONTEXT_EXHAUSTED,
        re.compile(r"prompt is too long|context_length_exceeded|context window", re.IGNORECASE),
    ),
    (StopReason.CREDENTIAL_EXPIRED, re.compile(r"token has expired|token_expired", re.I)),
    (StopReason.AUTHENTICATION_FAILED, re.compile(r"authentication_error|invalid.api.key", re.I)),
    (StopReason.RATE_LIMITED, re.compile(r"rate_limit_error", re.IGNORECASE)),
    (StopReason.OVERLOADED, re.compile(r"overloaded_error", re.IGNORECASE)),
)
_RETRYABLE = frozenset({StopReason.RATE_LIMITED, StopReason.OVERLOADED})
_LOST = re.compile(r"No session found matching '([^']*)'")


def status_of(message: str) -> int | None:
    """The HTTP status pi puts before the API's body, if any."""
    found = _STATUS.match(message)
    return int(found.group(1)) if found else None


def classify(status: int | None, message: str) -> StopReason:
    """The stop reason of a failed model call with HTTP ``status`` and ``message``."""
    for reason, pattern in _MARKERS:
        if pattern.search(message):
            return reason
    return _BY_STATUS.get(status or 0, StopReason.CLI_ERROR)


def error_event(message: str, session_id: str | None, usage: Usage | None) -> ErrorEvent:
    """The terminal event of a run pi reported as failed with ``message``."""
    message = redact(message)
    status = status_of(message)
    reason = classify(status, message)
    return ErrorEvent(
        reason=reason,
        message=message[:MESSAGE_LIMIT],
        status=status,
        retryable=reason in _RETRYABLE,
        session_id=session_id,
        usage=usage,
    )


def ended_early(exit_status: ExitStatus, stderr_tail: str, session_id: str | None) -> ErrorEvent:
    """The terminal event of a pi that ended without finishing its run: a signal
    (PROCESS_CRASHED), a session it cannot find (SESSION_LOST), else what stderr says."""
    tail = redact(stderr_tail)
    if exit_status.signal is not None:
        try:
            name = signal.Signals(exit_status.signal).name
        except ValueError:
            name = f"signal {exit_status.signal}"
        return ErrorEvent(
            reason=StopReason.PROCESS_CRASHED,
            message=f"pi was killed by {name}",
            session_id=session_id,
        )
    lost = _LOST.search(tail)
    if lost:
        return ErrorEvent(
            reason=StopReason.SESSION_LOST,
            message=f"pi has no saved session {lost.group(1)}",
            session_id=lost.group(1),
        )
    lines = [line.strip() for line in tail.splitlines() if line.strip()]
    if exit_status.returncode == 0:
        reason, message = StopReason.MALFORMED_OUTPUT, "pi exited without finishing its run"
    else:
        reason = StopReason.CLI_ERROR
        message = lines[-1] if lines else f"pi exited with {exit_status.returncode}"
    return ErrorEvent(reason=reason, message=message[:MESSAGE_LIMIT], session_id=session_id)
