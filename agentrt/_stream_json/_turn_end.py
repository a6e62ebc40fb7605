"""How a stream-json turn ends: the terminal event a ``result`` frame makes (its usage and
cost for this turn alone, its error's message and stop reason), or the classified end of a
stream that printed no result."""

from __future__ import annotations

import signal
from collections.abc import Mapping
from typing import Any, Protocol

from .._events import ErrorEvent, Event, PermissionDenial, ResultEvent, StopReason, Usage
from .._redact import redact
from ._dialect import StreamJsonDialect
from ._fields import int_field, mappings, number_field, str_field, usage_field

_MESSAGE_LIMIT = 500


class ExitStatus(Protocol):
    # agentrt.backend.ExitStatus, which this floor module cannot import (backend imports it).
    @property
    def returncode(self) -> int | None: ...

    @property
    def signal(self) -> int | None: ...


def turn_usage(
    frame: Mapping[str, Any], dialect: StreamJsonDialect, baseline: Usage | None
) -> Usage | None:
    """What a result says the turn used: its usage (less the baseline, for a CLI whose usage
    is a running total), or the session's running usage the dialect reads elsewhere less the
    baseline."""
    read_running = dialect.running_usage
    if read_running is not None and (running := read_running(frame)) is not None:
        return running if baseline is None else running.minus(baseline)
    usage = usage_field(frame.get("usage"))
    if usage is not None and baseline is not None and read_running is None:
        usage = usage.minus(baseline)
    return usage


def result_event(
    frame: Mapping[str, Any],
    dialect: StreamJsonDialect,
    *,
    usage: Usage | None,
    cost_baseline: float,
    session_id: str | None,
    model: str | None,
    rate_limit_rejected: bool,
    limit_resets_at: float | None = None,
) -> Event:
    """The terminal event of a ``result`` frame: an `ErrorEvent` when ``is_error`` is true
    or the subtype is not ``success``, else a `ResultEvent`. ``session_id``, ``model``: the
    turn's, for a result that names none. ``rate_limit_rejected``: the latest
    ``rate_limit_event`` said the API refuses the credential (a rate-limit error is then its
    usage limit), ``limit_resets_at`` its reset time."""
    # The field readers (`._fields`) inlined: one result a turn, each read a call. A decoded
    # JSON value's type is exactly str, int (bool apart), float: compared by identity.
    get = frame.get
    value = get("session_id")
    session_id = (value if type(value) is str else None) or session_id
    value = get("subtype")
    subtype = (value if type(value) is str else None) or "unknown"
    value = get("total_cost_usd")
    total = float(value) if type(value) is float or type(value) is int else None
    # Floored at 0: a baseline from a store that missed a turn must not go negative.
    cost = None if total is None else max(total - cost_baseline, 0.0)
    if frame.get("is_error") is True or subtype != "success":
        status = int_field(frame.get("api_error_status"))
        message = redact(_error_message(frame, subtype, status, rate_limit_rejected, dialect))
        reason = (
            dialect.classify_result(frame)
            or dialect.classify(status, message)
            or StopReason.CLI_ERROR
        )
        if rate_limit_rejected and reason in _LIMIT_UNSAID:
            reason = StopReason.USAGE_LIMIT
        return ErrorEvent(
            reason=reason,
            message=message,
            status=status,
            retryable=reason in dialect.retryable,
            session_id=(
                dialect.lost_session_id(message) or session_id
                if reason is StopReason.SESSION_LOST
                else session_id
            ),
            cost_usd=cost,
            usage=usage,
            raw=frame,
            resets_at=(
                _resets_at(frame, message, dialect, limit_resets_at)
                if reason is StopReason.USAGE_LIMIT
                else None
            ),
        )
    duration_ms, text = get("duration_ms"), get("result")
    num_turns, stop_reason = get("num_turns"), get("stop_reason")
    return ResultEvent(
        text=text if type(text) is str else "",
        session_id=session_id,
        cost_usd=cost,
        duration=(
            duration_ms / 1000 if type(duration_ms) is float or type(duration_ms) is int else None
        ),
        num_turns=num_turns if type(num_turns) is int else None,
        model_stop_reason=stop_reason if type(stop_reason) is str else None,
        usage=usage,
        model=model,
        structured_output=frame.get("structured_output"),
        permission_denials=_denials(frame.get("permission_denials")),
        raw=frame,
    )


def ended_without_result(
    exit_status: ExitStatus,
    stderr_tail: str,
    dialect: StreamJsonDialect,
    *,
    session_id: str | None,
    rate_limit_rejected: bool,
    limit_resets_at: float | None = None,
) -> ErrorEvent:
    """The classified end of a stream without a terminal event: a stderr marker's reason,
    else PROCESS_CRASHED (signal), else USAGE_LIMIT after a rejected ``rate_limit_event``
    (reset at ``limit_resets_at``), else MALFORMED_OUTPUT."""
    tail = redact(stderr_tail)
    if exit_status.signal is not None:
        how = f"was killed by {_signal_name(exit_status.signal)}"
    elif exit_status.returncode is None:
        how = "ended"
    else:
        how = f"exited with code {exit_status.returncode}"
    last_line = next((ln.strip() for ln in reversed(tail.splitlines()) if ln.strip()), "")
    message = f"the CLI {how} without printing its result" + (
        f": {last_line[-_MESSAGE_LIMIT:]}" if last_line else ""
    )
    reason = dialect.classify(None, tail)
    if reason is None:
        if exit_status.signal is not None:
            reason = StopReason.PROCESS_CRASHED
        elif rate_limit_rejected:
            reason = StopReason.USAGE_LIMIT
            message += " (the API had rejected its requests: the credential's usage limit)"
        else:
            reason = StopReason.MALFORMED_OUTPUT
    session = dialect.lost_session_id(tail) if reason is StopReason.SESSION_LOST else None
    return ErrorEvent(
        reason=reason,
        message=message,
        retryable=reason in dialect.retryable,
        session_id=session or session_id,
        resets_at=(
            dialect.resets_at(tail) or limit_resets_at if reason is StopReason.USAGE_LIMIT else None
        ),
    )


# What an error that came after a rejected rate_limit_event is, unless it says more: the
# rejection was the credential's usage limit.
_LIMIT_UNSAID = frozenset({StopReason.RATE_LIMITED, StopReason.CLI_ERROR})


def limit_info_resets_at(info: Any) -> float | None:
    """The ``resetsAt`` (epoch seconds) of a ``rate_limit_info`` object, if it has one."""
    if isinstance(info, Mapping):
        return number_field(info.get("resetsAt"))
    return None


def _resets_at(
    frame: Mapping[str, Any],
    message: str,
    dialect: StreamJsonDialect,
    limit_resets_at: float | None,
) -> float | None:
    # The exact time a field gives (the result's own copy of the rejected limit, Claude
    # Code's api_error_params; else the rate_limit_event's), before the minute the text says.
    params = frame.get("api_error_params")
    info = params.get("rate_limit_info") if isinstance(params, Mapping) else None
    return limit_info_resets_at(info) or limit_resets_at or dialect.resets_at(message)


def _denials(value: Any) -> tuple[PermissionDenial, ...]:
    return tuple(
        PermissionDenial(
            tool_name=str_field(d.get("tool_name")) or "",
            tool_use_id=str_field(d.get("tool_use_id")) or "",
            input=d.get("tool_input"),
        )
        for d in mappings(value)
    )


def _error_message(
    frame: Mapping[str, Any],
    subtype: str,
    status: int | None,
    rate_limit_rejected: bool,
    dialect: StreamJsonDialect,
) -> str:
    # What the CLI said, else what the API status or a rejected rate limit says: an empty
    # result with subtype "success" is not one.
    result = str_field(frame.get("result"))
    if result and not result.isspace():
        return result
    errors = frame.get("errors")
    if isinstance(errors, list):
        said = [str(e) for e in errors if e is not None and str(e).strip()]
        if said:
            return "; ".join(said)
    error = frame.get("error")
    if isinstance(error, Mapping):  # Qwen Code's {"message": ...}
        error = error.get("message")
    if isinstance(error, str) and error and not error.isspace():
        return error
    if status is not None:
        return dialect.status_message(status)
    if rate_limit_rejected:
        return "the API rejected the request for a rate limit"
    if subtype == "success":
        return "the CLI reported an error without a message"
    return f"the CLI reported {subtype}"


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
