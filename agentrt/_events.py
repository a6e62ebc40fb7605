"""Events of a turn, the Response a turn ends with, and the reasons a turn stops."""

from __future__ import annotations

import enum
import sys
from collections.abc import Sequence
from typing import Any, Literal, final

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
    # The model API did not answer within the CLI's own request timeout (Claude Code's
    # ``API_TIMEOUT_MS``), as the CLI reports it (Claude Code 2.1.337 and later).
    REQUEST_TIMEOUT = "request_timeout"
    CLI_ERROR = "cli_error"
    EVENT_CAPTURE_OVERFLOW = "event_capture_overflow"
    SESSION_LOST = "session_lost"
    INVALID_OPTIONS = "invalid_options"
    # A Python exception escaped the backend or its translator mid-turn (a bug, not the CLI).
    TURN_CRASHED = "turn_crashed"
    # The session store could not checkpoint the turn's session id (StoreError): the
    # conversation would not survive a restart, so the turn does not go on as if it would.
    # Also a portable agent's turn whose transcript the store could not give back: it does
    # not start (its TurnFailed.detail["retryable"] says whether asking again may work).
    STORE_FAILED = "store_failed"
    # The CLI reported a version the agent's ``cli_versions`` does not accept (or none).
    CLI_VERSION_MISMATCH = "cli_version_mismatch"
    # The turn's streamed cost (an estimate: `UsageEvent.estimated_cost_usd`) reached what
    # its budgets had left when it started, where the CLI's own per-run limit does not hold
    # (a CLI without one, or a warm one that keeps the limit it started with).
    BUDGET_EXCEEDED = "budget_exceeded"
    # The kernel's OOM killer killed a process of the turn's cgroup, over the agent's
    # ``limits`` memory (the whole tree is killed with it); the agent lives on.
    OOM_KILLED = "oom_killed"
    # The model repeated itself (the same tool call with the same result, or the same error,
    # ``stuck_repeats`` / ``stuck_errors`` times in a row): the turn ended before it burnt
    # the budget.
    STUCK = "stuck"
    # The credential's usage allowance is spent (a subscription's 5-hour or weekly window,
    # a plan's quota) until ``resets_at`` (`ErrorEvent.resets_at`, TurnFailed.detail
    # "resets_at": epoch seconds, None where the CLI does not say): asking again before then
    # fails the same way. A transient 429 is RATE_LIMITED, a 529 OVERLOADED.
    USAGE_LIMIT = "usage_limit"
    # A login that worked no longer does (an OAuth session expired and was not refreshed, a
    # 401 after the session's calls had been answered): renew the login, not the options.
    CREDENTIAL_EXPIRED = "credential_expired"
    # The conversation no longer fits the model's context window ("Prompt is too long", a
    # compaction that failed): compact it or go on in a fresh session.
    CONTEXT_EXHAUSTED = "context_exhausted"
    # An MCP server the agent's ``required_mcp`` names failed to start or connect, needs
    # authentication, or is not configured, as the CLI reported its servers at its start:
    # the turn ends there rather than go on without the server's tools (TurnFailed.detail
    # "server", "status").
    MCP_UNAVAILABLE = "mcp_unavailable"


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

    def minus(self, other: Usage) -> Usage:
        """The share of these counts (a running total) that ``other`` has not reported yet,
        each count floored at 0 (a baseline from a store that missed a turn is too big)."""
        return Usage(
            input_tokens=max(self.input_tokens - other.input_tokens, 0),
            output_tokens=max(self.output_tokens - other.output_tokens, 0),
            cache_creation_input_tokens=max(
                self.cache_creation_input_tokens - other.cache_creation_input_tokens, 0
            ),
            cache_read_input_tokens=max(
                self.cache_read_input_tokens - other.cache_read_input_tokens, 0
            ),
        )


class SessionTotals(msgspec.Struct, frozen=True, kw_only=True):
    """What the turns of one CLI session have reported so far, summed (each turn's own
    figures). Backends whose CLI reports running totals per session subtract it."""

    usage: Usage = Usage()
    cost_usd: float = 0.0
    turns: int = 0  # the turns of this session, failed ones too

    def add(self, usage: Usage | None, cost_usd: float | None) -> SessionTotals:
        """These totals with one more turn's figures."""
        return SessionTotals(
            usage=self.usage if usage is None else self.usage.plus(usage),
            cost_usd=self.cost_usd + (cost_usd or 0.0),
            turns=self.turns + 1,
        )


# A new session's totals (immutable, so one object serves every agent).
NO_TOTALS = SessionTotals()


class Event(msgspec.Struct, frozen=True, kw_only=True, tag_field="kind"):
    """Base of every event. ``kind`` is the tag; ``timestamp`` is ``trio.current_time()``.

    The kinds are the classes below and no others: defining a subclass of one (or a new
    kind) elsewhere raises TypeError. The turn tells events apart by their exact class
    (the events of one stream are handled at the rate the CLI prints them), and retention
    decodes what it kept as one of these, so a subclass would be handled as none of them;
    data no kind covers goes in a `RawEvent`."""

    timestamp: float = 0.0

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__module__ != __name__:
            base = next(b for b in cls.__mro__[1:] if issubclass(b, Event))
            raise TypeError(
                f"{cls.__qualname__} subclasses agentrt's {base.__name__}: the event kinds are "
                f"closed (the turn tells them apart by exact class, so a subclass would lose "
                f"what it carries); make a {base.__name__} itself, or a RawEvent for data no "
                f"kind covers"
            )

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


class McpServerStatus(msgspec.Struct, frozen=True, kw_only=True):
    """An MCP server as the CLI reported it when it started: ``status`` is the CLI's word
    (Claude Code: connected, failed, needs-auth, pending, disabled)."""

    name: str
    status: str


class InitEvent(Event, frozen=True, kw_only=True, tag="init"):
    """What the CLI says it started with, each time it says it (Claude Code's
    ``system/init``: at the start, and again after a background task). ``cli_version`` is
    the CLI's own version as it reports it (None when it reports none). ``raw`` is the
    frame, with what the fields leave out (agents, slash commands, ...)."""

    model: str | None = None
    cli_version: str | None = None
    tools: tuple[str, ...] = ()
    mcp_servers: tuple[McpServerStatus, ...] = ()
    permission_mode: str | None = None
    cwd: str | None = None
    raw: Any = None


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
    """A tool call. ``parent_tool_use_id`` is the id of the tool call (Claude's Task) whose
    subagent made it; None on the main thread."""

    id: str
    name: str
    input: Any = None
    parent_tool_use_id: str | None = None


class ToolResultEvent(Event, frozen=True, kw_only=True, tag="tool_result"):
    """A tool call's result; ``parent_tool_use_id`` as in `ToolUseEvent`."""

    tool_use_id: str
    content: Any = None
    is_error: bool = False
    parent_tool_use_id: str | None = None


class UsageEvent(Event, frozen=True, kw_only=True, tag="usage"):
    """What the turn has used so far. Before its result, the model calls the stream has
    reported, summed, with ``estimated_cost_usd``: those calls priced by the backend's own
    table of list prices (an estimate; None where the backend has no price for the model).
    The one before the terminal event is the CLI's own count of the turn, without an
    estimate (the terminal event carries the CLI's cost)."""

    usage: Usage
    estimated_cost_usd: float | None = None


class SessionLostEvent(Event, frozen=True, kw_only=True, tag="session_lost"):
    """The CLI no longer knows the session id we asked it to resume."""

    session_id: str


class PermissionDenial(msgspec.Struct, frozen=True, kw_only=True):
    """A tool call the CLI's permission settings refused; the turn may still succeed."""

    tool_name: str
    tool_use_id: str
    input: Any = None


class ResultEvent(Event, frozen=True, kw_only=True, tag="result"):
    """Terminal success. ``structured_output`` is the answer as JSON when the turn was
    asked for a schema (Claude's ``json_schema``), else None."""

    text: str = ""
    session_id: str | None = None
    cost_usd: float | None = None
    duration: float | None = None
    num_turns: int | None = None
    model_stop_reason: str | None = None
    usage: Usage | None = None
    model: str | None = None
    structured_output: Any = None
    permission_denials: tuple[PermissionDenial, ...] = ()
    raw: Any = None

    @property
    def is_terminal(self) -> bool:
        return True


class ErrorEvent(Event, frozen=True, kw_only=True, tag="error"):
    """Terminal failure, as the backend classified it. ``cost_usd`` and ``usage`` are what
    the failed turn spent, where the CLI reported it (a failed turn is billed too).
    ``resets_at``: for USAGE_LIMIT, when the allowance comes back (epoch seconds), where
    the CLI says."""

    reason: StopReason
    message: str = ""
    status: int | None = None
    retryable: bool = False
    session_id: str | None = None
    cost_usd: float | None = None
    usage: Usage | None = None
    raw: Any = None
    resets_at: float | None = None

    @property
    def is_terminal(self) -> bool:
        return True


class ToolDecisionEvent(Event, frozen=True, kw_only=True, tag="tool_decision"):
    """The agent's answer to a tool approval (``Agent.approve_tool``): ``decided_by`` is
    ``"approve_tool"``, or ``"timeout"`` / ``"error"`` when the callback did not answer in
    time or raised (the tool is then denied); for a request handed to a person, who
    decided (``"console"``), or ``"default"`` when nobody did in time and `AskOperator`
    named a default. An `Answers` to `UserQuestions` is ``allowed``, its
    ``updated_input`` ``{"answers": ...}``."""

    tool_use_id: str
    tool_name: str
    allowed: bool
    message: str | None = None
    updated_input: Any = None
    decided_by: str = "approve_tool"


class RawEvent(Event, frozen=True, kw_only=True, tag="raw"):
    """A frame no translation covers (unknown type, invalid JSON, invalid UTF-8)."""

    data: Any = None
    note: str | None = None


# The reset times a usage limit is taken at: those a date can show (from 1970 to the year
# 9999). A CLI passes on what the API's header says, so a later one (milliseconds read as
# seconds, an overflow) is said as well, and is no time: the reset is then unsaid.
_LAST_RESET = 253402300800.0  # 10000-01-01 00:00 UTC


def error_detail(event: ErrorEvent) -> dict[str, Any]:
    """What `TurnFailed.detail` carries of a terminal ErrorEvent: its HTTP ``status``,
    whether it is ``retryable``, and ``resets_at`` where the event has one that is a time."""
    detail: dict[str, Any] = {"status": event.status, "retryable": event.retryable}
    resets_at = event.resets_at
    if resets_at is not None and 0.0 <= resets_at < _LAST_RESET:  # NaN is neither
        detail["resets_at"] = resets_at
    return detail


AnyEvent = (
    SessionEvent
    | InitEvent
    | TextEvent
    | TextRetractedEvent
    | ToolUseEvent
    | ToolResultEvent
    | UsageEvent
    | SessionLostEvent
    | ResultEvent
    | ErrorEvent
    | ToolDecisionEvent
    | RawEvent
)


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


# The codec of text kept as UTF-8: a CLI's text may hold lone surrogates (JSON escapes), and
# they must come back as they went in.
TEXT_CODEC = ("utf-8", "surrogatepass")


@final
class _Utf8:
    """A Response's text as the UTF-8 a turn built it from, until it is first read."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled (and copied) as the str it stands for.
        return (bytes.decode, (self.data, *TEXT_CODEC))


def _as_str(text: str | _Utf8) -> str:
    return text.data.decode(*TEXT_CODEC) if type(text) is _Utf8 else text


# Who started a turn (`Response.origin`).
TurnOrigin = Literal["user", "task", "schedule", "wakeup", "cron"]


@attrs.frozen(repr=False)
class Response:
    """What a successful turn returns.

    ``events`` is an immutable sequence of the retained events (see ``event_coverage``),
    kept compact and decoded on access; it compares equal to the tuple of its events.
    ``text`` is the answer's every message, a blank line between two; ``final_message`` the
    last of them (or the CLI's result text). ``text`` is a str; a turn's Response may keep
    it as UTF-8 until it is first read (equality and hash compare the str). Its repr is one
    line: the stop reason, the text's length and start, the session, the counts.
    ``transcript_stored``, for a portable agent (``portable=True``), says whether the store
    holds the CLI's transcript with this turn (False: a runtime that takes the agent over
    may resume the conversation without it); None for any other agent."""

    # The str, or the UTF-8 a turn built it from when that is smaller (see `text`).
    _text: str | _Utf8 = attrs.field(alias="text", eq=_as_str)
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
    # The turn's latest InitEvent (what the CLI started with), if its CLI reports one.
    init: InitEvent | None = None
    # The terminal ResultEvent's: the answer as JSON when a schema was asked for (else
    # None), and the tool calls the CLI refused.
    structured_output: Any = None
    permission_denials: tuple[PermissionDenial, ...] = ()
    # The version of the turn's CLI: as it reported it (its InitEvent), else as its
    # ``version_command`` printed it (a backend whose Capabilities say version_probe).
    cli_version: str | None = None
    # A portable agent's (``portable=True``): whether the store holds the transcript with
    # this turn. False: the store could not take it within ``transcript_wait``, so a
    # runtime that takes the agent over before this one stores it resumes the conversation
    # without this turn. None: not a portable agent.
    transcript_stored: bool | None = None
    # Who started the turn: "user" (the application's prompt, or one the agent chained),
    # "task" (the agent's warm CLI, by itself: a background task ended), "schedule" (a
    # fire of one of the agent's schedules, `Runtime.schedule`), "wakeup" (a wake-up the
    # agent's CLI scheduled, stored and fired by agentrt), "cron" (a fire of a cron job
    # the agent's CLI made, stored and fired by agentrt).
    origin: TurnOrigin = "user"

    @property
    def text(self) -> str:
        """The answer's text. Kept as UTF-8 it is decoded on first read, and the str kept: a
        str of non-ASCII text takes 2 or 4 bytes a character, and a runtime may keep
        hundreds of Responses nobody reads the text of."""
        text = self._text
        if type(text) is _Utf8:
            text = text.data.decode(*TEXT_CODEC)
            object.__setattr__(self, "_text", text)  # frozen: a cache, not a change
        return text

    def __repr__(self) -> str:
        text = _as_str(self._text)  # not kept: a repr does not make the text take more room
        start = repr(text[:_REPR_TEXT]) + ("..." if len(text) > _REPR_TEXT else "")
        cost = "" if self.cost_usd is None else f", ${self.cost_usd:.4f}"
        return (
            f"<agentrt.Response {self.stop_reason.value}: {len(text)} chars {start}, "
            f"session {self.session_id!r}, {len(self.events)} of "
            f"{self.event_coverage.observed} events kept, {self.duration:.2f} s{cost}>"
        )


# Characters of its text a Response's repr shows.
_REPR_TEXT = 40


# What a text kept as UTF-8 costs besides its bytes: the holder and the bytes object's header.
_UTF8_OVERHEAD = sys.getsizeof(_Utf8(b"")) + sys.getsizeof(b"")


def response_text(text: str | bytes) -> str | _Utf8:
    """What a Response keeps of ``text``, which may be UTF-8 (lone surrogates passed
    through): ``Response(text=response_text(text), ...)``. The Response keeps whichever
    form is smaller: a str takes 1, 2 or 4 bytes a character by its widest one, so
    mostly-ASCII text with a few wider characters (an arrow, an emoji: the common case)
    takes about half as UTF-8, while text mostly made of CJK characters is smaller as a
    str. Kept as UTF-8, it is decoded when read."""
    if isinstance(text, str):
        return text
    decoded = text.decode(*TEXT_CODEC)  # cheap next to the text's life (bench/README.md)
    if sys.getsizeof(decoded) <= len(text) + _UTF8_OVERHEAD:
        return decoded
    return _Utf8(text)


def response_with_text(text: str | bytes, **fields: Any) -> Response:
    """``Response(text=text, **fields)``, except that ``text`` may be UTF-8
    (`response_text`)."""
    return Response(text=response_text(text), **fields)


def text_size(response: Response) -> int:
    """``len(response.text.encode("utf-8", "surrogatepass"))``, without decoding a text not
    read yet."""
    text = response._text
    return len(text.data) if type(text) is _Utf8 else len(text.encode(*TEXT_CODEC))
