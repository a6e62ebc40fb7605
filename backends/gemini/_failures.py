"""Gemini CLI's failed results and early exits -> terminal `ErrorEvent`s.

A failed API call ends the turn with a ``result`` frame whose error says
``[API Error: <message>]``: the message is Google's error body as JSON for some statuses
(``{"error": {"code": 401, ..., "status": "UNAUTHENTICATED"}}``) and the bare message for
others (429, 503); the HTTP status is then only on stderr (``status: 503``). Exits without
a result: the CLI's fatal errors have codes of their own (41 authentication, 42 input,
52 configuration, 55 an untrusted folder, 130 cancelled).
"""

from __future__ import annotations

import re
import signal
import time

from agentrt.backend import ErrorEvent, ExitStatus, StopReason, Usage, redact

MESSAGE_LIMIT = 500

_CODE = re.compile(r'"code"\s*:\s*(\d{3})\b')
_STDERR_STATUS = re.compile(r"^\s*status: (\d{3})\b", re.MULTILINE)
_BY_STATUS = {
    401: StopReason.AUTHENTICATION_FAILED,
    403: StopReason.AUTHENTICATION_FAILED,
    429: StopReason.RATE_LIMITED,
    500: StopReason.OVERLOADED,
    502: StopReason.OVERLOADED,
    503: StopReason.OVERLOADED,
    504: StopReason.OVERLOADED,
}
# Google's own words, for a message that carries no status: the real API answers a wrong
# key with 400 INVALID_ARGUMENT "API key not valid" (reason API_KEY_INVALID).
_MARKERS: tuple[tuple[StopReason, re.Pattern[str]], ...] = (
    (
        StopReason.AUTHENTICATION_FAILED,
        re.compile(r"API key not valid|API_KEY_INVALID|UNAUTHENTICATED|PERMISSION_DENIED"),
    ),
    (StopReason.RATE_LIMITED, re.compile(r"RESOURCE_EXHAUSTED|quota", re.IGNORECASE)),
    (StopReason.OVERLOADED, re.compile(r"UNAVAILABLE|overloaded", re.IGNORECASE)),
)
_RETRYABLE = frozenset({StopReason.RATE_LIMITED, StopReason.OVERLOADED})
# A quota the API says comes back only after longer than the CLI retries for (0.61.0's
# MAX_RETRYABLE_DELAY_SECONDS: it then gives up at once) is the credential's usage limit.
_RETRY_IN = re.compile(r"Please retry in ([0-9.]+)(ms|s)\b")
_LONGEST_RETRY = 300
# The API's 400 for a request over the model's window, and the CLI's own check before it.
_CONTEXT = re.compile(
    r"exceeds the maximum number of tokens allowed|Context window will overflow", re.IGNORECASE
)
# "Invalid session identifier "<id>"", or, where the project has no session at all,
# "No previous sessions found for this project."
_LOST = re.compile(r'Error resuming session: (?:Invalid session identifier "([^"]+)"|No previous)')
# The CLI's fatal exit codes that say what was wrong with the run itself.
_FATAL = {
    41: StopReason.AUTHENTICATION_FAILED,
    42: StopReason.INVALID_OPTIONS,
    52: StopReason.INVALID_OPTIONS,
    55: StopReason.CLI_ERROR,
    130: StopReason.INTERRUPTED,
}


def status_of(message: str, stderr_tail: str) -> int | None:
    """The HTTP status of a failed call: from the error body in ``message``, else stderr."""
    found = _CODE.search(message) or _STDERR_STATUS.search(stderr_tail)
    return int(found.group(1)) if found else None


def retry_in(message: str) -> float | None:
    """The seconds after which the API said a spent quota comes back, if it said."""
    found = _RETRY_IN.search(message)
    if found is None:
        return None
    return float(found.group(1)) / (1000 if found.group(2) == "ms" else 1)


def classify(status: int | None, message: str) -> StopReason:
    """The stop reason of a failure with HTTP ``status`` (None if unknown) and ``message``."""
    if _CONTEXT.search(message):
        return StopReason.CONTEXT_EXHAUSTED
    if (wait := retry_in(message)) is not None and wait > _LONGEST_RETRY:
        return StopReason.USAGE_LIMIT
    for reason, pattern in _MARKERS:
        if reason is StopReason.AUTHENTICATION_FAILED and pattern.search(message):
            return reason
    if status in _BY_STATUS:
        return _BY_STATUS[status]
    for reason, pattern in _MARKERS:
        if pattern.search(message):
            return reason
    return StopReason.CLI_ERROR


def error_event(
    message: str, session_id: str | None, usage: Usage | None = None, *, stderr_tail: str = ""
) -> ErrorEvent:
    """The terminal event of a turn the CLI reported as failed with ``message`` (a
    result's error: its status is in the message or nowhere, for the result comes before
    stderr is read; or the last error frame, with the stderr tail)."""
    message = redact(message)
    status = status_of(message, redact(stderr_tail))
    reason = classify(status, message)
    wait = retry_in(message) if reason is StopReason.USAGE_LIMIT else None
    return ErrorEvent(
        reason=reason,
        message=message[:MESSAGE_LIMIT],
        status=status,
        retryable=reason in _RETRYABLE,
        session_id=session_id,
        usage=usage,
        # The API says how long from now; the result comes as soon as it answers.
        resets_at=None if wait is None else time.time() + wait,
    )


def ended_early(
    exit_status: ExitStatus, stderr_tail: str, session_id: str | None, notice: str | None
) -> ErrorEvent:
    """The terminal event of a CLI that ended without a result: a signal
    (PROCESS_CRASHED), a session the CLI cannot find (SESSION_LOST), a fatal exit code, the
    last error frame, else MALFORMED_OUTPUT."""
    tail = redact(stderr_tail)
    if exit_status.signal is not None:
        return ErrorEvent(
            reason=StopReason.PROCESS_CRASHED,
            message=f"gemini was killed by {_signal_name(exit_status.signal)}",
            session_id=session_id,
        )
    lost = _LOST.search(tail)
    if lost:
        lost_id = lost.group(1) or session_id
        return ErrorEvent(
            reason=StopReason.SESSION_LOST,
            message=f"gemini has no saved session {lost_id or ''}".rstrip(),
            session_id=lost_id,
        )
    lines = [line.strip() for line in tail.splitlines() if line.strip()]
    last = next((line for line in reversed(lines) if not line.startswith("at ")), "")
    code = exit_status.returncode
    how = f"gemini exited with code {code} before the turn ended"
    if code in _FATAL:
        return ErrorEvent(
            reason=_FATAL[code],
            message=f"{how}: {last[:MESSAGE_LIMIT]}" if last else how,
            session_id=session_id,
        )
    if notice:
        return error_event(notice, session_id, stderr_tail=tail)
    return ErrorEvent(
        reason=StopReason.MALFORMED_OUTPUT,
        message=f"{how}: {last[:MESSAGE_LIMIT]}" if last else how,
        session_id=session_id,
    )


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
