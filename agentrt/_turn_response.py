"""A turn's outcome (`agentrt._turn.Turn`): the Response of a turn that completed with a
result, or the TurnFailed (and the terminal ErrorEvent) of one that did not, assembled
from what the turn folded from its events; and the content-free log line of either."""

from __future__ import annotations

import logging
from typing import Any

import attrs
import msgspec

from ._errors import CliVersionMismatch, TurnFailed
from ._events import (
    TEXT_CODEC,
    ErrorEvent,
    Event,
    InitEvent,
    PermissionDenial,
    Response,
    ResultEvent,
    StopReason,
    Usage,
    error_detail,
    response_text,
)
from ._redact import redact
from ._retention import EventLog
from .backend import ExitStatus

logger = logging.getLogger("agentrt")


@attrs.define
class Failure:
    """Why a turn failed, as a stop or a crash recorded it."""

    reason: StopReason
    message: str
    detail: dict[str, Any] | None = None
    cause: BaseException | None = None


# What a user can do when the CLI no longer has the stored session (the runtime keeps its
# id, so that nothing is started afresh without being asked).
_SESSION_LOST_WAYS_OUT = (
    "The CLI no longer has this session (its transcript is in another HOME, or gone). "
    "To start a new one: rt.reset_session(name), start_agent(..., resume=False), "
    '`agentrt ask/chat --new`, or on_session_lost="fresh" to do so by itself.'
)


def _with_denials(
    reported: tuple[PermissionDenial, ...], denials: list[PermissionDenial]
) -> tuple[PermissionDenial, ...]:
    # What the CLI reported, and the agent's own denials it did not.
    if not denials:  # the agent denied nothing (most turns): no set to build
        return reported
    known = {d.tool_use_id for d in reported}
    return (*reported, *(d for d in denials if d.tool_use_id not in known))


def completed(
    terminal: ResultEvent,
    log: EventLog,
    *,
    terminal_index: int | None,
    text: bytes,
    message: str,
    usage: Usage | None,
    model: str | None,
    duration: float,
    session_id: str | None,
    init: InitEvent | None,
    cli_version: str | None,
    denials: list[PermissionDenial],
) -> Response:
    """The Response of a turn that ended with ``terminal``: ``text`` and ``message`` are
    its segment's (what the result closed), ``terminal_index`` where it sits in ``log``."""
    answer: str | bytes = text
    if not answer or answer == terminal.text.encode(*TEXT_CODEC):
        # The result's own text (a one-message answer): the same str, not a copy.
        answer = terminal.text
    # Made here, not through response_with_text: every turn's, whose fields would go
    # through one more dict (its ``**fields``, merged into the call's keywords).
    return Response(
        text=response_text(answer),
        final_message=terminal.text or message,
        events=log.events(None if terminal_index is None else {terminal_index: terminal}),
        terminal=terminal,
        event_coverage=log.coverage(),
        usage=terminal.usage or usage,
        cost_usd=terminal.cost_usd,
        duration=duration,
        num_turns=terminal.num_turns,
        session_id=session_id,
        model=terminal.model or model,
        stop_reason=StopReason.COMPLETE,
        raw=terminal.raw,
        init=init,
        cli_version=cli_version,
        structured_output=terminal.structured_output,
        permission_denials=_with_denials(terminal.permission_denials, denials),
    )


def failed(
    failure: Failure | None,
    terminal: Event | None,
    *,
    now: float,
    status: ExitStatus | None,
    stderr_tail: str,
    session_id: str | None,
    cost: float | None,
    estimate: float | None,
    usage: Usage | None,
    cli_version: str | None,
    accepted: str | None,
) -> tuple[ErrorEvent, TurnFailed]:
    """The final event and the error of a turn that failed: by ``failure``, else (None) by
    its terminal ErrorEvent. ``cost`` is what the latest terminal event said the turn cost,
    ``estimate`` the stream's own, ``accepted`` the agent's cli_versions."""
    detail: dict[str, Any] | None = None
    # Killed before the CLI's bill (a bound, an interrupt, a crash): what the stream
    # reported, priced by the backend.
    estimated = cost is None and estimate is not None
    if estimated:
        cost = estimate
    final: ErrorEvent
    if failure is None:
        assert isinstance(terminal, ErrorEvent)
        if terminal.reason is StopReason.SESSION_LOST:
            lost = f"{terminal.message.rstrip('. ')}. {_SESSION_LOST_WAYS_OUT}"
            terminal = msgspec.structs.replace(terminal, message=lost)
        # A bill printed after it, or usage only a UsageEvent reported.
        if (terminal.cost_usd, terminal.usage) != (cost, usage):
            terminal = msgspec.structs.replace(terminal, cost_usd=cost, usage=usage)
        final = terminal
        failure = Failure(terminal.reason, redact(terminal.message))
        detail = error_detail(terminal)
    else:
        detail = failure.detail
        final = ErrorEvent(
            timestamp=now,
            reason=failure.reason,
            message=failure.message,
            session_id=session_id,
            cost_usd=cost,
            usage=usage,
        )
    if estimated:
        detail = {**(detail or {}), "cost_estimated": True}
    error: TurnFailed
    if failure.reason is StopReason.CLI_VERSION_MISMATCH and accepted is not None:
        error = CliVersionMismatch(
            accepted,
            cli_version,
            exit_status=status,
            stderr_tail=stderr_tail,
            session_id=session_id,
            usage=usage,
            cost_usd=cost,
        )
    else:
        error = TurnFailed(
            failure.reason,
            failure.message,
            exit_status=status,
            stderr_tail=stderr_tail,
            session_id=session_id,
            usage=usage,
            cost_usd=cost,
            detail=detail,
        )
    error.__cause__ = failure.cause
    return final, error


# Failures whose message agentrt writes itself (a bound, a stop, a spawn, the store); the
# others carry what the CLI printed, which may quote the model or the prompt.
_OWN_MESSAGES = frozenset(
    (
        StopReason.INTERRUPTED,
        StopReason.CANCELLED,
        StopReason.STARTUP_TIMEOUT,
        StopReason.FIRST_EVENT_TIMEOUT,
        StopReason.IDLE_TIMEOUT,
        StopReason.TOTAL_TIMEOUT,
        StopReason.OUTPUT_LINE_TOO_LONG,
        StopReason.SPAWN_FAILED,
        StopReason.EVENT_CAPTURE_OVERFLOW,
        StopReason.STORE_FAILED,
    )
)


def log_turn_end(agent: str, outcome: Response | TurnFailed) -> None:
    """Log (at debug) how ``agent``'s turn ended: content-free, the outcome's reason and
    figures, never the prompt or the answer."""
    if isinstance(outcome, Response):
        reason, detail = outcome.stop_reason.value, f"{outcome.duration:.2f} s"
    elif outcome.reason in _OWN_MESSAGES:
        reason, detail = outcome.reason.value, outcome.message
    else:
        reason, detail = outcome.reason.value, "the CLI's message is not logged"
    logger.debug(
        "agent %r: turn ended, %s (%s), session %s",
        agent,
        reason,
        detail,
        outcome.session_id,
        extra={"agent": agent, "session_id": outcome.session_id, "outcome": reason},
    )
