"""How a Qwen Code failure is classified: the API status it quotes, then its own wording.

Qwen Code reports a failed API call as text, ``[API Error: 401 {...the API's body...}]``,
in an assistant message and in its error result's ``error.message``; no ``api_error_status``
field, so the status is read from that text (only in that form: a model quoting "429"
classifies nothing).
"""

from __future__ import annotations

import re

from agentrt.backend import StopReason

_BY_STATUS = {
    401: StopReason.AUTHENTICATION_FAILED,
    403: StopReason.AUTHENTICATION_FAILED,
    429: StopReason.RATE_LIMITED,
    529: StopReason.OVERLOADED,
}

_STATUS_WORDING = {
    401: "the API rejected the credentials",
    403: "the API refused the credentials",
    429: "the API's rate limit was reached",
    529: "the API is overloaded",
}

_API_ERROR = re.compile(r"\[API Error: (\d{3})\b")

# Checked in order; the session marker is the most specific. The first four say more than
# the status they come with (a 401 that is an expired token, a 400 that is a full context,
# a 429 that is the day's quota) and are checked before it: the API's own words, quoted in
# the CLI's "[API Error: ...]", and Qwen Code's for its OAuth quota (0.24.4; no reset
# time said).
_MARKERS: tuple[tuple[StopReason, re.Pattern[str]], ...] = (
    (StopReason.SESSION_LOST, re.compile(r"no saved session found", re.IGNORECASE)),
    (
        StopReason.CREDENTIAL_EXPIRED,
        re.compile(r"token has expired|token_expired|token is expired", re.IGNORECASE),
    ),
    (
        StopReason.CONTEXT_EXHAUSTED,
        re.compile(
            r"prompt is too long|context_length_exceeded|maximum context length", re.IGNORECASE
        ),
    ),
    (
        StopReason.USAGE_LIMIT,
        re.compile(r"Qwen OAuth quota exceeded|free allocated quota exceeded", re.IGNORECASE),
    ),
    (
        StopReason.AUTHENTICATION_FAILED,
        re.compile(r"authentication_error|invalid api key|incorrect api key", re.IGNORECASE),
    ),
    (StopReason.RATE_LIMITED, re.compile(r"rate_limit_error", re.IGNORECASE)),
    (StopReason.OVERLOADED, re.compile(r"overloaded_error", re.IGNORECASE)),
)

_PRECISE = 4

_LOST_ID = re.compile(r'no saved session found with title "([^"\s]+)"', re.IGNORECASE)

RETRYABLE = frozenset({StopReason.RATE_LIMITED, StopReason.OVERLOADED})


def classify(status: int | None, text: str) -> StopReason | None:
    """The typed reason for a failure with HTTP ``status`` and message ``text``, if known."""
    for reason, pattern in _MARKERS[:_PRECISE]:
        if pattern.search(text):
            return reason
    if status is None and (quoted := _API_ERROR.search(text)):
        status = int(quoted.group(1))
    if status in _BY_STATUS:
        return _BY_STATUS[status]
    for reason, pattern in _MARKERS[_PRECISE:]:
        if pattern.search(text):
            return reason
    return None


def status_message(status: int) -> str:
    """What a failed API call with HTTP ``status`` means, for a result that says nothing."""
    return f"{_STATUS_WORDING.get(status, 'the API call failed')} (HTTP {status})"


def lost_session_id(text: str) -> str | None:
    """The id named in a 'No saved session found with title "…"' message."""
    match = _LOST_ID.search(text)
    return match.group(1) if match else None
