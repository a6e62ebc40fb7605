"""codex's error messages and early ends -> terminal `ErrorEvent`s (both output modes)."""

from __future__ import annotations

import datetime as dt
import re
import signal
import time

from agentrt.backend import ErrorEvent, ExitStatus, StopReason, Usage, redact

_STATUS = re.compile(r"(?:unexpected status|last status:) (\d{3})\b")
_OVERLOADED = frozenset({500, 502, 503, 504, 529})
MESSAGE_LIMIT = 500

# codex's own sentences (0.171.0) for the three conditions a fleet parks, renews or compacts
# on: a spent plan (the API's 429 usage_limit_reached), a login that no longer refreshes
# (the API's 401 token_expired, a refresh token expired or revoked), a full context window
# (the API's context_length_exceeded).
_USAGE_LIMIT = re.compile(r"hit your usage limit", re.IGNORECASE)
_EXPIRED = re.compile(
    r"authentication token is expired|token_expired|could not be refreshed"
    r"|refresh token (?:has expired|was revoked|was rejected)",
    re.IGNORECASE,
)
_CONTEXT = re.compile(r"ran out of room in the model's context window", re.IGNORECASE)
# "Try again at 5:06 AM." (today) or "Try again at Dec 8th, 2026 5:06 AM.", in the local
# time of the machine codex runs on (this one).
_TRY_AGAIN = re.compile(
    r"try again at (?:(?P<month>[A-Z][a-z]{2}) (?P<day>\d{1,2})(?:st|nd|rd|th)?, "
    r"(?P<year>\d{4}) )?(?P<hour>\d{1,2}):(?P<minute>\d{2}) (?P<half>AM|PM)",
    re.IGNORECASE,
)


# A time of day said at most this long ago (seconds) is the reset just past, not tomorrow's:
# codex cuts the time to its minute, and at the reset the API's clock may lag this one's.
JUST_PAST = 120.0


def resets_at(message: str, now: float | None = None) -> float | None:
    """When the usage limit in a codex ``message`` resets (epoch seconds): the time it
    names, in local time (where it names no date, the first such time after ``now``, or
    one at most `JUST_PAST` before it), or None."""
    match = _TRY_AGAIN.search(message)
    if match is None:
        return None
    hour = int(match["hour"]) % 12 + (12 if match["half"].upper() == "PM" else 0)
    current = dt.datetime.fromtimestamp(time.time() if now is None else now).astimezone()
    try:
        at = current.replace(hour=hour, minute=int(match["minute"]), second=0, microsecond=0)
        if match["month"] is not None:
            date = dt.datetime.strptime(
                f"{match['month']} {match['day']} {match['year']}", "%b %d %Y"
            )
            return at.replace(year=date.year, month=date.month, day=date.day).timestamp()
    except ValueError:  # a minute, month or day that is none
        return None
    if at < current - dt.timedelta(seconds=JUST_PAST):
        at += dt.timedelta(days=1)
    return at.timestamp()


def classify(message: str) -> tuple[StopReason, int | None, bool]:
    """The stop reason, HTTP status and retryability of a codex error message."""
    match = _STATUS.search(message)
    status = int(match.group(1)) if match else None
    if _USAGE_LIMIT.search(message):
        return StopReason.USAGE_LIMIT, status or 429, False
    if _EXPIRED.search(message):
        return StopReason.CREDENTIAL_EXPIRED, status, False
    if _CONTEXT.search(message):
        return StopReason.CONTEXT_EXHAUSTED, status, False
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
        resets_at=resets_at(message) if reason is StopReason.USAGE_LIMIT else None,
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
