"""How a Claude Code failure is classified: HTTP statuses, then the CLI's own wording."""

from __future__ import annotations

import datetime as dt
import re
import time
import zoneinfo
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
# must not classify a run). The precise ones say more than the HTTP status (a 429 that is
# the plan's usage limit, a 401 that is an expired login, a 400 that is a full context) and
# are checked before it, in order; the general ones after it.
_PRECISE: tuple[tuple[StopReason, re.Pattern[str]], ...] = (
    (StopReason.SESSION_LOST, re.compile(r"no conversation found", re.IGNORECASE)),
    (
        StopReason.CREDENTIAL_EXPIRED,
        re.compile(
            r"oauth token (?:has )?expired|login (?:has )?expired|session (?:has )?expired"
            r"|could not be refreshed",
            re.IGNORECASE,
        ),
    ),
    (
        StopReason.USAGE_LIMIT,
        re.compile(r"usage limit reached|hit your [^\n]{0,40}?limit", re.IGNORECASE),
    ),
    (
        StopReason.CONTEXT_EXHAUSTED,
        # 2.1.332's: "Prompt is too long · automatic compaction failed: ...", "Error during
        # compaction: ...", "Autocompact is thrashing: ...", "Conversation too long. ...".
        re.compile(
            r"prompt is too long|conversation too long|compaction failed"
            r"|error during compaction|autocompact is thrashing",
            re.IGNORECASE,
        ),
    ),
)
_GENERAL: tuple[tuple[StopReason, re.Pattern[str]], ...] = (
    (
        StopReason.AUTHENTICATION_FAILED,
        re.compile(
            r"invalid api key|please run /login|not logged in|oauth token has been revoked"
            r"|authentication_error|authentication_failed",
            re.IGNORECASE,
        ),
    ),
    (StopReason.RATE_LIMITED, re.compile(r"rate_limit_error", re.IGNORECASE)),
    (StopReason.OVERLOADED, re.compile(r"overloaded_error", re.IGNORECASE)),
)

_LOST_ID = re.compile(r"no conversation found with session id:?\s*([A-Za-z0-9._:-]+)", re.I)

RETRYABLE = frozenset({StopReason.RATE_LIMITED, StopReason.OVERLOADED, StopReason.REQUEST_TIMEOUT})

# What an error result's own fields say (Claude Code 2.1.337 and later; 2.1.332 has neither
# field, and its results are classified by their wording alone): field -> value -> reason.
# 2.1.332 has two: a usage limit's api_error and a full context's terminal_reason.
_RESULT_FIELDS: dict[str, dict[str, StopReason]] = {
    "api_error": {
        "request_timeout": StopReason.REQUEST_TIMEOUT,
        "usage_limit_reached": StopReason.USAGE_LIMIT,
    },
    "startup_failure_reason": {"resume_target_not_found": StopReason.SESSION_LOST},
    "terminal_reason": {"prompt_too_long": StopReason.CONTEXT_EXHAUSTED},
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
    for reason, pattern in _PRECISE:
        if pattern.search(text):
            return reason
    if status in _BY_STATUS:
        return _BY_STATUS[status]
    for reason, pattern in _GENERAL:
        if pattern.search(text):
            return reason
    return None


# "You've hit your 5-hour limit · resets 4:47am (UTC)" (2.1.332); a later day, as the CLI
# words it, "resets Mon 9am" or "resets Dec 8, 3pm"; the zone, where named, is the user's.
# Older CLIs: "Claude AI usage limit reached|<epoch seconds>".
_RESETS = re.compile(
    r"hit your [^\n]{0,40}?limit\b[^\n]*?\bresets (?:(?P<weekday>[A-Z][a-z]{2}) |"
    r"(?P<month>[A-Z][a-z]{2}) (?P<day>\d{1,2}),? (?:at )?)?"
    r"(?P<hour>\d{1,2})(?::(?P<minute>\d{2}))?\s?(?P<half>am|pm)"
    r"(?: \((?P<zone>[A-Za-z0-9_+/-]+)\))?",
    re.IGNORECASE,
)
_RESETS_EPOCH = re.compile(r"usage limit reached\|(\d{10})\b", re.IGNORECASE)
# A time of day said at most this long ago (seconds) is the reset just past, not tomorrow's:
# the CLI cuts the time to its minute, and at the reset the API's clock may lag this one's.
JUST_PAST = 120.0
_WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")


def resets_at(text: str, now: float | None = None) -> float | None:
    """When the usage limit ``text`` reports resets (epoch seconds): the first such time
    after ``now`` (default: the clock) in the zone it names (UTC where it names none or
    one this machine does not know), or a time of day at most `JUST_PAST` before it; None
    where it says no time."""
    if epoch := _RESETS_EPOCH.search(text):
        return float(epoch.group(1))
    match = _RESETS.search(text)
    if match is None:
        return None
    try:
        zone: dt.tzinfo = zoneinfo.ZoneInfo(match["zone"] or "UTC")
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        zone = dt.UTC
    hour = int(match["hour"]) % 12 + (12 if match["half"].lower() == "pm" else 0)
    minute = int(match["minute"] or 0)
    current = dt.datetime.fromtimestamp(time.time() if now is None else now, zone)
    try:
        at = current.replace(hour=hour, minute=minute, second=0, microsecond=0)
        if match["month"] is not None:
            month = _MONTHS.index(match["month"].lower()) + 1
            at = at.replace(month=month, day=int(match["day"]))
            if at <= current:  # a date past this year's is next year's (Dec -> Jan)
                at = at.replace(year=at.year + 1)
            return at.timestamp()
        days = 0
        if match["weekday"] is not None:
            days = (_WEEKDAYS.index(match["weekday"].lower()) - at.weekday()) % 7
        at += dt.timedelta(days=days)
        just_past = match["weekday"] is None and current - at <= dt.timedelta(seconds=JUST_PAST)
        if at <= current and not just_past:
            at += dt.timedelta(days=7 if match["weekday"] else 1)
    except ValueError:  # an hour, minute, month or weekday that is none
        return None
    return at.timestamp()


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
