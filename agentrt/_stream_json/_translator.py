"""Stream-json frames -> agentrt events, for one turn: Claude Code's ``--output-format
stream-json`` and the CLIs that print the same frames (Qwen Code). What differs between
them (the init frame's field names, the wording of their failures) is a `StreamJsonDialect`;
everything below is shared.

=====================================  ==================================================
frame                                  events
=====================================  ==================================================
any frame with a new ``session_id``    `SessionEvent` first (checkpoint before going on)
``system`` / ``init``                  `InitEvent` (model, CLI version, tools, MCP
                                       servers, permission mode: the dialect's field
                                       names), after the session event above; each one
``system`` / ``api_retry`` the         terminal `ErrorEvent` AUTHENTICATION_FAILED at once
dialect calls fatal (Claude: a 401)    (the CLI would retry in vain for ~170 s)
other ``system`` subtypes              `RawEvent`
``stream_event`` text delta            `TextEvent` (main thread only)
``stream_event`` message_start /       `UsageEvent` with the calls' usage so far (each
message_delta, ``assistant`` usage     call's figures by message id, subagents' too) and
that grows a call's figures            its estimated cost (the dialect's ``price``)
other ``stream_event`` deltas          nothing (thinking, signatures, tool-input JSON, ...)
``stream_event`` message_stop with     `TextRetractedEvent` with the text streamed for the
``abandoned_blocks``                   abandoned blocks (the CLI retries the reply)
``stream_event`` of an unexpected      nothing (the typed schema below decides)
shape
``assistant`` text block               the part not already streamed, as a `TextEvent`
                                       with ``message_boundary=True`` (main thread only)
``assistant`` tool_use block           `ToolUseEvent` with the full input, once per id
``user`` tool_result block             `ToolResultEvent`; both carry the frame's
                                       ``parent_tool_use_id`` (a subagent's Task call)
``rate_limit_event``                   `RawEvent`; while the latest one says
                                       ``rejected``, an error ending the turn is
                                       RATE_LIMITED (unless it says something more precise)
``result``                             `UsageEvent`, then terminal `ResultEvent` (with
                                       ``structured_output``, ``permission_denials``), or
                                       terminal `ErrorEvent` when ``is_error`` is true or
                                       the subtype is not ``success`` (its message: the
                                       result, the ``errors``, else the API status's)
anything else (valid JSON)             `RawEvent`
=====================================  ==================================================

Several results in one process. When the model leaves a background task, ``claude -p``
prints a result, waits for the task, then prints another ``system/init`` and another
result. Every result is translated into its own terminal event; the turn keeps reading until
the process exits and the LAST terminal event decides the turn (earlier ones stay in the
event log). A terminal `ErrorEvent` (an error result, or the fatal ``api_retry`` the
translator raises mid-stream) ends the turn at once: the turn interrupts the CLI with SIGINT
and keeps the event's reason. After the fatal ``api_retry`` nothing this translator emits is
terminal either, so the result the CLI prints on that SIGINT cannot replace it.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import attrs
import msgspec

from .._events import (
    ErrorEvent,
    Event,
    InitEvent,
    McpServerStatus,
    PermissionDenial,
    RawEvent,
    ResultEvent,
    SessionEvent,
    StopReason,
    TextEvent,
    TextRetractedEvent,
    ToolResultEvent,
    ToolUseEvent,
    Usage,
    UsageEvent,
)
from .._redact import redact
from ._frames import (
    Assistant,
    AssistantMessage,
    BlockDelta,
    MessageDelta,
    MessageStart,
    StreamEvent,
    TextBlock,
    TextDelta,
    ToolResultBlock,
    ToolUseBlock,
    User,
    UserMessage,
    decode_frame,
)

_TOOL_USE_BLOCKS = ("tool_use", "server_tool_use")
_MESSAGE_LIMIT = 500


def _no_session_marker(text: str) -> str | None:
    return None


def _no_fatal_retry(status: int | None, error: str | None) -> bool:
    return False


def _no_result_fields(frame: Mapping[str, Any]) -> StopReason | None:
    return None


def _no_price(model: str | None, usage: Usage) -> float | None:
    return None


@attrs.frozen
class StreamJsonDialect:
    """What one CLI's stream-json says in its own way, for `StreamJsonTranslator`.

    ``version_field`` and ``permission_mode_field``:
    the ``system/init`` fields that carry its version (`InitEvent.cli_version`) and
    permission mode. ``classify(status, text)``: the stop reason of a failure with HTTP
    ``status`` (None if unknown) and message ``text``, or None; ``status_message(status)``:
    what a failed call's status says when the CLI says nothing; ``lost_session_id(text)``:
    the session id a "no such conversation" message names; ``is_fatal_retry(status,
    error)``: whether a ``system/api_retry`` frame is one the CLI would retry in vain (the
    turn then fails at once); ``classify_result(frame)``: the stop reason an error result's
    own fields name (a field the CLI sets for the purpose is sturdier than its wording),
    tried before ``classify``. ``retryable``: the stop reasons a caller may retry.
    ``price(model, usage)``: what one model call with ``usage`` costs at the model's list
    price (an estimate; None: no price known), for the cost of a turn that ends before
    the CLI reports it. ``running_usage(result)``: for a result whose ``usage`` does not
    count the turn, the session's running usage it reports elsewhere (Claude's
    ``modelUsage`` of ``error_max_budget_usd``), else None; the turn's usage is then that
    minus the translator's usage baseline."""

    version_field: str
    permission_mode_field: str
    classify: Callable[[int | None, str], StopReason | None]
    status_message: Callable[[int], str]
    retryable: frozenset[StopReason]
    lost_session_id: Callable[[str], str | None] = _no_session_marker
    is_fatal_retry: Callable[[int | None, str | None], bool] = _no_fatal_retry
    classify_result: Callable[[Mapping[str, Any]], StopReason | None] = _no_result_fields
    price: Callable[[str | None, Usage], float | None] = _no_price
    running_usage: Callable[[Mapping[str, Any]], Usage | None] | None = None


class _ExitStatus(Protocol):
    # agentrt.backend.ExitStatus, which this floor module cannot import (backend imports it).
    @property
    def returncode(self) -> int | None: ...

    @property
    def signal(self) -> int | None: ...


_NO_EVENTS: tuple[Event, ...] = ()
_NO_USAGE = Usage()


class StreamJsonTranslator:
    """Translates the frames of one turn of a stream-json CLI that speaks ``dialect``. Make
    a fresh one per turn. ``cost_baseline``: the session's cost before this turn (a
    result's ``total_cost_usd`` is the session's running total, across ``--resume``);
    ``usage_baseline``: its usage before this turn, for a CLI whose result's usage is the
    session's running total too (Qwen Code's; None: the result's usage is the turn's), or
    whose dialect reads a running usage beside it (Claude's)."""

    def __init__(
        self,
        dialect: StreamJsonDialect,
        *,
        cost_baseline: float = 0.0,
        usage_baseline: Usage | None = None,
    ) -> None:
        self._dialect = dialect
        self._cost_baseline = cost_baseline
        self._usage_baseline = usage_baseline
        self._session_id: str | None = None
        self._model: str | None = None
        # Text streamed per content-block index for the current main-thread message (its
        # deltas, joined only when a completed block is matched), and the indices a
        # completed assistant block has already been matched against.
        self._streamed: dict[int, list[str]] = {}
        self._matched: set[int] = set()
        self._tool_ids: set[str] = set()
        self._terminal_seen = False
        self._failed_fast = False
        # The latest rate_limit_event said the API refuses requests: a turn that then ends
        # in an error ended for that.
        self._rate_limit_rejected = False
        # The model calls the stream reported before the result, by message id: each one's
        # usage, estimated cost and model; their sums (kept as they change: no re-summing);
        # and the message the latest message_start opened (a delta names none).
        self._calls: dict[Any, tuple[Usage, float | None, str | None]] = {}
        self._call_total = _NO_USAGE
        self._call_cost: float | None = 0.0
        self._call_id: Any = None
        # The driver tries this first on each line (see agentrt.Translator); what it makes
        # is handled here.
        self.decode = decode_frame
        self._typed: dict[type, Callable[[Any], Sequence[Event]]] = {
            StreamEvent: self._stream_event,
            Assistant: self._assistant,
            User: self._user,
        }

    @property
    def session_id(self) -> str | None:
        """The latest session id the CLI reported in this turn."""
        return self._session_id

    def feed(self, frame: Any) -> Sequence[Event]:
        """Events for one decoded stdout frame. Never raises on any JSON value."""
        # This runs once per stdout line: exact type checks first (the driver decodes most
        # frames to the typed structs above, other JSON objects to dicts), the ABC check only
        # for other mappings; stream events first.
        typed = self._typed.get(type(frame))
        if typed is not None:
            sid = frame.session_id
            if sid != self._session_id and sid:
                self._session_id = sid
                return [SessionEvent(session_id=sid, model=self._model), *typed(frame)]
            return typed(frame)
        if type(frame) is not dict and not isinstance(frame, Mapping):
            return [RawEvent(data=frame, note="not a JSON object")]
        kind = frame.get("type")
        sid = frame.get("session_id")
        if sid != self._session_id and sid and type(sid) is str:
            if kind == "system" and frame.get("subtype") == "init":
                self._model = _str(frame.get("model")) or self._model
            self._session_id = sid
            return [SessionEvent(session_id=sid, model=self._model), *self._dispatch(kind, frame)]
        return self._dispatch(kind, frame)

    def _dispatch(self, kind: Any, frame: Mapping[str, Any]) -> Sequence[Event]:
        if kind == "stream_event":
            return self._stream_event_dict(frame)
        if kind == "assistant":
            return self._assistant_dict(frame)
        if kind == "user":
            return self._user_dict(frame)
        if kind == "system":
            return self._system(frame)
        if kind == "result":
            return self._result(frame)
        if kind == "rate_limit_event":
            info = frame.get("rate_limit_info")
            self._rate_limit_rejected = (
                isinstance(info, Mapping) and info.get("status") == "rejected"
            )
        return [RawEvent(data=frame)]

    def finish(self, exit_status: _ExitStatus, stderr_tail: str) -> Event | None:
        """None if a terminal event was emitted; else the classified end of the stream:
        a stderr marker's reason, else PROCESS_CRASHED (signal), else MALFORMED_OUTPUT."""
        if self._terminal_seen:
            return None
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
        reason = self._dialect.classify(None, tail)
        if reason is None:
            if exit_status.signal is not None:
                reason = StopReason.PROCESS_CRASHED
            elif self._rate_limit_rejected:
                reason = StopReason.RATE_LIMITED
                message += " (the API had rejected its requests for a rate limit)"
            else:
                reason = StopReason.MALFORMED_OUTPUT
        session = self._dialect.lost_session_id(tail) if reason is StopReason.SESSION_LOST else None
        return ErrorEvent(
            reason=reason,
            message=message,
            retryable=reason in self._dialect.retryable,
            session_id=session or self._session_id,
        )

    def _turn_cost(self, frame: Mapping[str, Any]) -> float | None:
        total = _number(frame.get("total_cost_usd"))
        # Floored at 0: a baseline from a store that missed a turn must not go negative.
        return None if total is None else max(total - self._cost_baseline, 0.0)

    def _terminal(self, event: Event) -> Event:
        if self._failed_fast:
            return RawEvent(data=getattr(event, "raw", None), note="after the turn had failed")
        self._terminal_seen = True
        return event

    def _system(self, frame: Mapping[str, Any]) -> list[Event]:
        subtype = frame.get("subtype")
        if subtype == "init":
            self._model = _str(frame.get("model")) or self._model
            return [_init(frame, self._dialect)]
        if subtype == "api_retry":
            status = _int(frame.get("error_status"))
            error = _str(frame.get("error"))
            if self._dialect.is_fatal_retry(status, error) and not self._failed_fast:
                event = self._terminal(
                    ErrorEvent(
                        reason=StopReason.AUTHENTICATION_FAILED,
                        message=(
                            f"the API rejected the credentials ({error or 'error'}, HTTP "
                            f"{status}); the CLI would keep retrying, so the turn ends now"
                        ),
                        status=status,
                        session_id=self._session_id,
                        raw=frame,
                    )
                )
                self._failed_fast = True
                return [event]
        return [RawEvent(data=frame)]

    def _stream_event(self, frame: StreamEvent) -> Sequence[Event]:
        # Most lines of a turn: text deltas are handled here without a further call.
        event = frame.event
        if type(event) is MessageStart or type(event) is MessageDelta:
            return self._call_frame(frame)
        if frame.parent_tool_use_id is not None:
            return _NO_EVENTS
        if type(event) is BlockDelta:
            delta = event.delta
            if type(delta) is TextDelta and delta.text:
                text = delta.text
                parts = self._streamed.get(event.index)
                if parts is None:
                    self._streamed[event.index] = [text]
                else:
                    parts.append(text)
                return [TextEvent(text=text)]
        if frame.abandoned_blocks is not None:
            return self._abandon(frame.abandoned_blocks.from_block_index)
        return _NO_EVENTS

    def _call_frame(self, frame: StreamEvent) -> Sequence[Event]:
        # A model call starts (its input usage) or ends (its output usage).
        event = frame.event
        if type(event) is MessageStart:
            message = event.message
            self._call_id = message.id
            model = _str(message.model)
            if frame.parent_tool_use_id is None:
                self._streamed.clear()
                self._matched.clear()
                self._model = model or self._model
            return self._call_usage(message.id, model, message.usage)
        assert type(event) is MessageDelta
        return self._call_usage(self._call_id, None, event.usage)

    def _call_usage(self, call: Any, model: str | None, reported: Any) -> Sequence[Event]:
        """A UsageEvent when what the stream says of one model call adds to its figures (a
        call's counts only grow: the largest of each is kept)."""
        usage = _usage(reported)
        if usage is None:
            return _NO_EVENTS
        before, before_cost, known_model = self._calls.get(call, (_NO_USAGE, 0.0, None))
        model = model or known_model or self._model
        now = _largest(before, usage)
        if now == before:
            return _NO_EVENTS
        cost = self._dialect.price(model, now)
        self._calls[call] = (now, cost, model)
        self._call_total = self._call_total.plus(now).minus(before)
        if cost is None or self._call_cost is None or before_cost is None:
            self._call_cost = None  # a call of a model without a price: no estimate
        else:
            self._call_cost += cost - before_cost
        return [UsageEvent(usage=self._call_total, estimated_cost_usd=self._call_cost)]

    def _abandon(self, first: int) -> Sequence[Event]:
        # The text streamed for the abandoned blocks is taken back; they no longer wait for
        # a completed block to match (the retry's answer is a new message).
        abandoned = sorted(i for i in self._streamed if i >= first and i not in self._matched)
        text = "".join("".join(self._streamed.pop(i)) for i in abandoned)
        return [TextRetractedEvent(text=text)] if text else _NO_EVENTS

    def _stream_event_dict(self, frame: Mapping[str, Any]) -> Sequence[Event]:
        # A stream event the typed decoding refused (or a dict from an in-process feeder):
        # the same schema decides, so one of any other shape is ignored like unknown ones.
        try:
            typed = msgspec.convert(frame, StreamEvent)
        except msgspec.ValidationError:
            return _NO_EVENTS
        return self._stream_event(typed)

    def _assistant(self, frame: Assistant) -> Sequence[Event]:
        # A subagent's own text is not this agent's answer (it comes back as a tool result).
        parent = frame.parent_tool_use_id
        message = frame.message
        events: list[Event] = []
        if message.usage is not None:  # without partial messages, the only usage of a call
            events.extend(self._call_usage(message.id, _str(message.model), message.usage))
        for block in message.content:
            if type(block) is TextBlock:
                if parent is None and block.text:
                    events.append(self._message_text(block.text))
            elif isinstance(block, ToolUseBlock):
                tool_use = self._tool_use(block.id, block.name, block.input, _str(parent))
                if tool_use is not None:
                    events.append(tool_use)
        return events

    def _assistant_dict(self, frame: Mapping[str, Any]) -> Sequence[Event]:
        # A frame the typed decoding refused (a field or block of another shape, or a dict
        # from an in-process feeder), made the typed frame it stands for: what the schema
        # would not accept is left out (a field of another type is None, a block of another
        # type is dropped), and `_assistant`'s rules decide.
        message = frame.get("message")
        if not isinstance(message, Mapping):
            return [RawEvent(data=frame, note="assistant frame without a message")]
        content: list[Any] = []
        for block in _blocks(message.get("content")):
            kind = block.get("type")
            if kind == "text":
                content.append(TextBlock(text=_str(block.get("text"))))
            elif kind in _TOOL_USE_BLOCKS:
                tool_id, name = _str(block.get("id")), _str(block.get("name"))
                content.append(ToolUseBlock(id=tool_id, name=name, input=block.get("input")))
        typed = Assistant(
            message=AssistantMessage(
                content=content,
                id=message.get("id"),
                model=message.get("model"),
                usage=message.get("usage"),
            ),
            parent_tool_use_id=frame.get("parent_tool_use_id"),
        )
        return self._assistant(typed)

    def _message_text(self, text: str) -> TextEvent:
        return TextEvent(text=self._unstreamed(text), message_boundary=True)

    def _tool_use(
        self, tool_id: str | None, name: str | None, tool_input: Any, parent: str | None
    ) -> Event | None:
        # A tool call is announced once, with its full input.
        if not tool_id or tool_id in self._tool_ids:
            return None
        self._tool_ids.add(tool_id)
        return ToolUseEvent(
            id=tool_id, name=name or "", input=tool_input, parent_tool_use_id=parent
        )

    def _unstreamed(self, text: str) -> str:
        # The completed block repeats what the deltas already said; only a part the stream
        # missed is new. Without partial messages nothing was streamed and all of it is new.
        for index in sorted(self._streamed):
            if index in self._matched:
                continue
            streamed = "".join(self._streamed[index])
            if text.startswith(streamed):
                self._matched.add(index)
                return text[len(streamed) :]
        return text

    def _user(self, frame: User) -> Sequence[Event]:
        parent = _str(frame.parent_tool_use_id)
        return [
            _tool_result(block.tool_use_id, block.content, block.is_error, parent)
            for block in frame.message.content
            if type(block) is ToolResultBlock
        ]

    def _user_dict(self, frame: Mapping[str, Any]) -> Sequence[Event]:
        # As `_assistant_dict`, for `_user`.
        message = frame.get("message")
        if not isinstance(message, Mapping):
            return []
        content: list[Any] = [
            ToolResultBlock(
                tool_use_id=_str(block.get("tool_use_id")),
                content=block.get("content"),
                is_error=block.get("is_error"),
            )
            for block in _blocks(message.get("content"))
            if block.get("type") == "tool_result"
        ]
        typed = User(
            message=UserMessage(content=content),
            parent_tool_use_id=frame.get("parent_tool_use_id"),
        )
        return self._user(typed)

    def _turn_usage(self, frame: Mapping[str, Any]) -> Usage | None:
        # What a result says the turn used: its usage (less the baseline, for a CLI whose
        # usage is a running total), or the session's running usage the dialect reads
        # elsewhere less the baseline.
        baseline = self._usage_baseline
        read_running = self._dialect.running_usage
        if read_running is not None and (running := read_running(frame)) is not None:
            return running if baseline is None else running.minus(baseline)
        usage = _usage(frame.get("usage"))
        if usage is not None and baseline is not None and read_running is None:
            usage = usage.minus(baseline)
        return usage

    def _result(self, frame: Mapping[str, Any]) -> list[Event]:
        raw = frame
        usage = self._turn_usage(frame)
        events: list[Event] = [] if usage is None else [UsageEvent(usage=usage)]
        session_id = _str(frame.get("session_id")) or self._session_id
        subtype = _str(frame.get("subtype")) or "unknown"
        if frame.get("is_error") is True or subtype != "success":
            status = _int(frame.get("api_error_status"))
            said = _error_message(frame, subtype, status, self._rate_limit_rejected, self._dialect)
            message = redact(said)
            dialect = self._dialect
            reason = (
                dialect.classify_result(frame)
                or dialect.classify(status, message)
                or (StopReason.RATE_LIMITED if self._rate_limit_rejected else StopReason.CLI_ERROR)
            )
            events.append(
                self._terminal(
                    ErrorEvent(
                        reason=reason,
                        message=message,
                        status=status,
                        retryable=reason in dialect.retryable,
                        session_id=(
                            dialect.lost_session_id(message) or session_id
                            if reason is StopReason.SESSION_LOST
                            else session_id
                        ),
                        cost_usd=self._turn_cost(frame),
                        usage=usage,
                        raw=raw,
                    )
                )
            )
            return events
        duration_ms = _number(frame.get("duration_ms"))
        events.append(
            self._terminal(
                ResultEvent(
                    text=_str(frame.get("result")) or "",
                    session_id=session_id,
                    cost_usd=self._turn_cost(frame),
                    duration=None if duration_ms is None else duration_ms / 1000,
                    num_turns=_int(frame.get("num_turns")),
                    model_stop_reason=_str(frame.get("stop_reason")),
                    usage=usage,
                    model=self._model,
                    structured_output=frame.get("structured_output"),
                    permission_denials=_denials(frame.get("permission_denials")),
                    raw=raw,
                )
            )
        )
        return events


def _init(frame: Mapping[str, Any], dialect: StreamJsonDialect) -> InitEvent:
    tools = frame.get("tools")
    servers = frame.get("mcp_servers")
    return InitEvent(
        model=_str(frame.get("model")),
        cli_version=_str(frame.get(dialect.version_field)),
        tools=tuple(t for t in tools if isinstance(t, str)) if isinstance(tools, list) else (),
        mcp_servers=tuple(
            McpServerStatus(name=s["name"], status=_str(s.get("status")) or "unknown")
            for s in _blocks(servers)
            if isinstance(s.get("name"), str)
        ),
        permission_mode=_str(frame.get(dialect.permission_mode_field)),
        cwd=_str(frame.get("cwd")),
        raw=frame,
    )


def _denials(value: Any) -> tuple[PermissionDenial, ...]:
    return tuple(
        PermissionDenial(
            tool_name=_str(d.get("tool_name")) or "",
            tool_use_id=_str(d.get("tool_use_id")) or "",
            input=d.get("tool_input"),
        )
        for d in _blocks(value)
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
    result = _str(frame.get("result"))
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


def _tool_result(
    tool_use_id: str | None, content: Any, is_error: Any, parent: str | None
) -> ToolResultEvent:
    return ToolResultEvent(
        tool_use_id=tool_use_id or "",
        content=content,
        is_error=is_error is True,
        parent_tool_use_id=parent,
    )


def _blocks(content: Any) -> list[Mapping[str, Any]]:
    return [b for b in content if isinstance(b, Mapping)] if isinstance(content, list) else []


def _usage(value: Any) -> Usage | None:
    if not isinstance(value, Mapping):
        return None
    return Usage(
        input_tokens=_int(value.get("input_tokens")) or 0,
        output_tokens=_int(value.get("output_tokens")) or 0,
        cache_creation_input_tokens=_int(value.get("cache_creation_input_tokens")) or 0,
        cache_read_input_tokens=_int(value.get("cache_read_input_tokens")) or 0,
    )


def _largest(a: Usage, b: Usage) -> Usage:
    return Usage(
        input_tokens=max(a.input_tokens, b.input_tokens),
        output_tokens=max(a.output_tokens, b.output_tokens),
        cache_creation_input_tokens=max(
            a.cache_creation_input_tokens, b.cache_creation_input_tokens
        ),
        cache_read_input_tokens=max(a.cache_read_input_tokens, b.cache_read_input_tokens),
    )


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
