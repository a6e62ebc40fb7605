"""Events of a turn, the Response a turn ends with, and the reasons a turn stops."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any, Literal

import attrs
import msgspec


class StopReason(enum.StrEnum):
    """Why a turn ended. ``COMPLETE`` is the only success."""

    COMPLETE = "complete"
    INTERRUPTED = "interrupted"
    CANCELLED = "cancelled"
    STARTUP_TIMEOUT = "startup_timeout"
    FIRST_EVENT_TIMEOUT = "first_event_timeout"
    IDLE_TIMEOUT = "idle_timeout"
    TOTAL_TIMEOUT = "total_timeout"
    MALFORMED_OUTPUT = "malformed_output"
    PROCESS_CRASHED = "process_crashed"
    OUTPUT_LINE_TOO_LONG = "output_line_too_long"
    SPAWN_FAILED = "spawn_failed"
    AUTHENTICATION_FAILED = "authentication_failed"
    RATE_LIMITED = "rate_limited"
    OVERLOADED = "overloaded"
    CLI_ERROR = "cli_error"
    EVENT_CAPTURE_OVERFLOW = "event_capture_overflow"
    SESSION_LOST = "session_lost"
    INVALID_OPTIONS = "invalid_options"
    # A Python exception escaped the backend or its translator mid-turn (a bug, not the CLI).
    TURN_CRASHED = "turn_crashed"


class Usage(msgspec.Struct, frozen=True, kw_only=True):
    """Token counts of one turn (or of one model call, inside a usage event)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0

    def plus(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_creation_input_tokens=self.cache_creation_input_tokens
            + other.cache_creation_input_tokens,
            cache_read_input_tokens=self.cache_read_input_tokens + other.cache_read_input_tokens,
        )


class SessionTotals(msgspec.Struct, frozen=True, kw_only=True):
    """What the turns of one CLI session have reported so far, summed (each turn's own
    figures). Backends whose CLI reports running totals per session subtract it."""

    usage: Usage = Usage()
    cost_usd: float = 0.0

    def add(self, usage: Usage | None, cost_usd: float | None) -> SessionTotals:
        return SessionTotals(
            usage=self.usage if usage is None else self.usage.plus(usage),
            cost_usd=self.cost_usd + (cost_usd or 0.0),
        )


# A new session's totals (immutable, so one object serves every agent).
NO_TOTALS = SessionTotals()


class Event(msgspec.Struct, frozen=True, kw_only=True, tag_field="kind"):
    """Base of every event. ``kind`` is the tag; ``timestamp`` is ``trio.current_time()``.

    Backends make events of the classes below, not of subclasses of them: the turn tells
    events apart by their exact class (the events of one stream are handled at the rate
    the CLI prints them)."""

    timestamp: float = 0.0

    @property
    def kind(self) -> str:
        tag = self.__struct_config__.tag
        assert isinstance(tag, str)
        return tag

    @property
    def is_terminal(self) -> bool:
        return False


class SessionEvent(Event, frozen=True, kw_only=True, tag="session"):
    """The CLI announced its conversation id (checkpointed before the turn goes on)."""

    session_id: str
    model: str | None = None


class TextEvent(Event, frozen=True, kw_only=True, tag="text"):
    """A piece of assistant text; ``message_boundary`` marks the end of one message."""

    text: str
    message_boundary: bool = False


class TextRetractedEvent(Event, frozen=True, kw_only=True, tag="text_retracted"):
    """The CLI abandoned text it had already streamed: ``text``, the end of the current
    message's streamed text, is not part of the answer (Claude Code retries a model reply
    cut mid-stream, and the retry's answer comes as new text). Consumers that showed the
    text should take it back; ``Response.text`` and ``final_message`` leave it out."""

    text: str


class ToolUseEvent(Event, frozen=True, kw_only=True, tag="tool_use"):
    id: str
    name: str
    input: Any = None


class ToolResultEvent(Event, frozen=True, kw_only=True, tag="tool_result"):
    tool_use_id: str
    content: Any = None
    is_error: bool = False


class UsageEvent(Event, frozen=True, kw_only=True, tag="usage"):
    usage: Usage


class SessionLostEvent(Event, frozen=True, kw_only=True, tag="session_lost"):
    """The CLI no longer knows the session id we asked it to resume."""

    session_id: str


class ResultEvent(Event, frozen=True, kw_only=True, tag="result"):
    """Terminal success."""

    text: str = ""
    session_id: str | None = None
    cost_usd: float | None = None
    duration: float | None = None
    num_turns: int | None = None
    model_stop_reason: str | None = None
    usage: Usage | None = None
    model: str | None = None
    raw: Any = None

    @property
    def is_terminal(self) -> bool:
        return True


class ErrorEvent(Event, frozen=True, kw_only=True, tag="error"):
    """Terminal failure, as the backend classified it."""

    reason: StopReason
    message: str = ""
    status: int | None = None
    retryable: bool = False
    session_id: str | None = None
    raw: Any = None

    @property
    def is_terminal(self) -> bool:
        return True


class RawEvent(Event, frozen=True, kw_only=True, tag="raw"):
    """A frame no translation covers (unknown type, invalid JSON, invalid UTF-8)."""

    data: Any = None
    note: str | None = None


AnyEvent = (
    SessionEvent
    | TextEvent
    | TextRetractedEvent
    | ToolUseEvent
    | ToolResultEvent
    | UsageEvent
    | SessionLostEvent
    | ResultEvent
    | ErrorEvent
    | RawEvent
)

_encoder = msgspec.json.Encoder()


def event_size(event: Event) -> int:
    """Bytes an event counts against ``max_event_bytes``: its JSON encoding."""
    return len(_encoder.encode(event))


@attrs.frozen
class Omission:
    """The first event retention left out, and which limit it crossed."""

    index: int
    kind: str
    size: int
    limit: Literal["max_events", "max_event_bytes"]


@attrs.frozen
class EventCoverage:
    """How much of a turn's event stream ``Response.events`` holds."""

    mode: Literal["compact", "lossless"]
    observed: int
    retained: int
    omitted: int
    retained_bytes: int
    first_omission: Omission | None = None

    @property
    def complete(self) -> bool:
        return self.omitted == 0


@attrs.frozen
class Response:
    """What a successful turn returns.

    ``events`` is an immutable sequence of the retained events (see ``event_coverage``),
    kept compact and decoded on access; it compares equal to the tuple of its events."""

    text: str
    final_message: str
    events: Sequence[Event]
    terminal: Event
    event_coverage: EventCoverage
    usage: Usage | None
    cost_usd: float | None
    duration: float
    num_turns: int | None
    session_id: str | None
    model: str | None
    stop_reason: StopReason
    raw: Any = None
