"""How a Claude Code failure is classified: HTTP statuses, then the CLI's own wording."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from agentrt.backend import StopReason

# Statuses the CLI reports as `api_error_status` / `error_status`.
_BY_STATUS = {
    401: StopReason.AUTHENTICATION_FAILED,
    429: StopReason.RATE_LIMITED,
    529: StopReason.OVERLOADED,
}

# What a status says when the CLI's result says nothing (an empty result, no errors).
_STATUS_WORDING = {
    401: "the API rejected the credentials",
    429: "the API's rate limit was reached",
    529: "the API is overloaded",
}

# Phrases the CLI itself prints (never bare numbers: a model quoting "429" or a line number
# must not classify a run). Checked in order; the session marker is the most specific.
_MARKERS: tuple[tuple[StopReason, re.Pattern[str]], ...] = (
    (StopReason.SESSION_LOST, re.compile(r"no conversation found", re.IGNORECASE)),
    (
        StopReason.AUTHENTICATION_FAILED,
        re.compile(
            r"invalid api key|please run /login|not logged in|oauth token (?:has )?expired"
            r"|oauth token has been revoked|login (?:has )?expired"
            r"|authentication_error|authentication_failed",
            re.IGNORECASE,
        ),
    ),
    (
        StopReason.RATE_LIMITED,
        re.compile(
            r"usage limit reached|rate_limit_error|hit your [^\n]{0,40}?limit", re.IGNORECASE
        ),
    ),
    (StopReason.OVERLOADED, re.compile(r"overloaded_error", re.IGNORECASE)),
)

_LOST_ID = re.compile(r"no conversation found with session id:?\s*([A-Za-z0-9._:-]+)", re.I)

RETRYABLE = frozenset({StopReason.RATE_LIMITED, StopReason.OVERLOADED, StopReason.REQUEST_TIMEOUT})

# What an error result's own fields say (Claude Code 2.1.337 and later; 2.1.332 has neither
# field, and its results are classified by their wording alone): field -> value -> reason.
_RESULT_FIELDS: dict[str, dict[str, StopReason]] = {
    "api_error": {"request_timeout": StopReason.REQUEST_TIMEOUT},
    "startup_failure_reason": {"resume_target_not_found": StopReason.SESSION_LOST},
}


def classify_result(frame: Mapping[str, Any]) -> StopReason | None:
    """The stop reason an error result's ``api_error`` or ``startup_failure_reason`` names."""
    for field, reasons in _RESULT_FIELDS.items():
        value = frame.get(field)
        if isinstance(value, str) and value in reasons:
            return reasons[value]
    return None


def classify(status: int | None, text: str) -> StopReason | None:
    """The typed reason for a failure with HTTP ``status`` and message ``text``, if known."""
    for reason, pattern in _MARKERS:
        if reason is StopReason.SESSION_LOST and pattern.search(text):
            return reason
    if status in _BY_STATUS:
        return _BY_STATUS[status]
    for reason, pattern in _MARKERS:
        if pattern.search(text):
            return reason
    return None


def status_message(status: int) -> str:
    """What a failed API call with HTTP ``status`` means, for a result that says nothing."""
    return f"{_STATUS_WORDING.get(status, 'the API call failed')} (HTTP {status})"


def lost_session_id(text: str) -> str | None:
    """The id named in a "No conversation found with session ID: …" message."""
    match = _LOST_ID.search(text)
    return match.group(1) if match else None


def is_fatal_retry(status: int | None, error: str | None) -> bool:
    """Whether an ``api_retry`` is one the CLI would retry for minutes in vain: a rejected
    credential does not start working on the tenth attempt."""
    return status == 401 or error == "authentication_failed"
