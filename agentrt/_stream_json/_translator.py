"""Stream-json frames -> agentrt events, for one turn: Claude Code's ``--output-format
stream-json`` and the CLIs that print the same frames (Qwen Code). What differs between
them (the init frame's field names, the wording of their failures) is a `StreamJsonDialect`
(`_dialect.py`); everything below is shared. The result frame and a stream without one end
the turn in `_turn_end.py`; frames the typed decoding refused are made typed in
`_untyped.py`; the per-line path stays here (a text delta is handled without a further call).

=====================================  ==================================================
frame                                  events
=====================================  ==================================================
any frame with a new ``session_id``    `SessionEvent` first (checkpoint before going on)
``system`` / ``init``                  `InitEvent` (model, CLI version, tools, MCP
                                       servers, permission mode: the dialect's field
                                       names), after the session event above; each one
``system`` / ``api_retry`` the         terminal `ErrorEvent` AUTHENTICATION_FAILED at once
dialect calls fatal (Claude: a 401)    (the CLI would retry in vain for ~170 s);
                                       CREDENTIAL_EXPIRED once a model call of the turn
                                       or of the session's earlier turns was answered
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
                                       USAGE_LIMIT with its ``resetsAt`` (unless it says
                                       something more precise)
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

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .._events import (
    ErrorEvent,
    Event,
    InitEvent,
    McpServerStatus,
    RawEvent,
    SessionEvent,
    StopReason,
    TextEvent,
    TextRetractedEvent,
    ToolResultEvent,
    ToolUseEvent,
    Usage,
    UsageEvent,
)
from ._dialect import StreamJsonDialect
from ._fields import int_field, mappings, str_field, usage_field
from ._frames import (
    Assistant,
    BlockDelta,
    MessageDelta,
    MessageStart,
    StreamEvent,
    TextBlock,
    TextDelta,
    ToolResultBlock,
    ToolUseBlock,
    User,
    decode_frame,
)
from ._turn_end import (
    ExitStatus,
    ended_without_result,
    limit_info_resets_at,
    result_event,
    turn_usage,
)
from ._untyped import assistant_of, stream_event_of, user_of

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
        self._limit_resets_at: float | None = None
        # A model call was answered before this turn (the session's usage) or in it: a
        # credential the fatal api_retry says was rejected (it says no more; a result's own
        # words decide for themselves) then expired, rather than never worked.
        self._login_worked = usage_baseline is not None and (
            usage_baseline.input_tokens + usage_baseline.output_tokens > 0
        )
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
                self._model = str_field(frame.get("model")) or self._model
            self._session_id = sid
            return [SessionEvent(session_id=sid, model=self._model), *self._dispatch(kind, frame)]
        return self._dispatch(kind, frame)

    def _dispatch(self, kind: Any, frame: Mapping[str, Any]) -> Sequence[Event]:
        # A frame the typed decoding refused (see `_untyped`) is made the typed frame it
        # stands for, so that the same rules decide.
        if kind == "stream_event":
            stream_event = stream_event_of(frame)
            return _NO_EVENTS if stream_event is None else self._stream_event(stream_event)
        if kind == "assistant":
            assistant = assistant_of(frame)
            if assistant is None:
                return [RawEvent(data=frame, note="assistant frame without a message")]
            return self._assistant(assistant)
        if kind == "user":
            user = user_of(frame)
            return [] if user is None else self._user(user)
        if kind == "system":
            return self._system(frame)
        if kind == "result":
            return self._result(frame)
        if kind == "rate_limit_event":
            info = frame.get("rate_limit_info")
            self._rate_limit_rejected = (
                isinstance(info, Mapping) and info.get("status") == "rejected"
            )
            self._limit_resets_at = limit_info_resets_at(info)
        return [RawEvent(data=frame)]

    def finish(self, exit_status: ExitStatus, stderr_tail: str) -> Event | None:
        """None if a terminal event was emitted; else the classified end of the stream:
        a stderr marker's reason, else PROCESS_CRASHED (signal), else MALFORMED_OUTPUT."""
        if self._terminal_seen:
            return None
        return ended_without_result(
            exit_status,
            stderr_tail,
            self._dialect,
            session_id=self._session_id,
            rate_limit_rejected=self._rate_limit_rejected,
            limit_resets_at=self._limit_resets_at,
        )

    def _terminal(self, event: Event) -> Event:
        if self._failed_fast:
            return RawEvent(data=getattr(event, "raw", None), note="after the turn had failed")
        self._terminal_seen = True
        return event

    def _system(self, frame: Mapping[str, Any]) -> list[Event]:
        subtype = frame.get("subtype")
        if subtype == "init":
            self._model = str_field(frame.get("model")) or self._model
            return [_init(frame, self._dialect)]
        if subtype == "api_retry":
            status = int_field(frame.get("error_status"))
            error = str_field(frame.get("error"))
            if self._dialect.is_fatal_retry(status, error) and not self._failed_fast:
                expired = self._login_worked or bool(self._calls)
                event = self._terminal(
                    ErrorEvent(
                        reason=(
                            StopReason.CREDENTIAL_EXPIRED
                            if expired
                            else StopReason.AUTHENTICATION_FAILED
                        ),
                        message=(
                            f"the API rejected the credentials ({error or 'error'}, HTTP "
                            f"{status}){' after it had accepted them' if expired else ''}; "
                            f"the CLI would keep retrying, so the turn ends now"
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
            model = str_field(message.model)
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
        usage = usage_field(reported)
        if usage is None:
            return _NO_EVENTS
        before, before_cost, known_model = self._calls.get(call, (_NO_USAGE, 0.0, None))
        now = _largest(before, usage)
        if now is before:
            return _NO_EVENTS
        model = model or known_model or self._model
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

    def _assistant(self, frame: Assistant) -> Sequence[Event]:
        # A subagent's own text is not this agent's answer (it comes back as a tool result).
        parent = frame.parent_tool_use_id
        message = frame.message
        events: list[Event] = []
        if message.usage is not None:  # without partial messages, the only usage of a call
            events.extend(self._call_usage(message.id, str_field(message.model), message.usage))
        for block in message.content:
            if type(block) is TextBlock:
                if parent is None and block.text:
                    events.append(self._message_text(block.text))
            elif isinstance(block, ToolUseBlock):
                tool_use = self._tool_use(block.id, block.name, block.input, str_field(parent))
                if tool_use is not None:
                    events.append(tool_use)
        return events

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
        parent = str_field(frame.parent_tool_use_id)
        return [
            _tool_result(block.tool_use_id, block.content, block.is_error, parent)
            for block in frame.message.content
            if type(block) is ToolResultBlock
        ]

    def _result(self, frame: Mapping[str, Any]) -> list[Event]:
        usage = turn_usage(frame, self._dialect, self._usage_baseline)
        event = self._terminal(
            result_event(
                frame,
                self._dialect,
                usage=usage,
                cost_baseline=self._cost_baseline,
                session_id=self._session_id,
                model=self._model,
                rate_limit_rejected=self._rate_limit_rejected,
                limit_resets_at=self._limit_resets_at,
            )
        )
        return [event] if usage is None else [UsageEvent(usage=usage), event]


def _init(frame: Mapping[str, Any], dialect: StreamJsonDialect) -> InitEvent:
    tools = frame.get("tools")
    servers = frame.get("mcp_servers")
    return InitEvent(
        model=str_field(frame.get("model")),
        cli_version=str_field(frame.get(dialect.version_field)),
        tools=tuple(t for t in tools if isinstance(t, str)) if isinstance(tools, list) else (),
        mcp_servers=tuple(
            McpServerStatus(name=s["name"], status=str_field(s.get("status")) or "unknown")
            for s in mappings(servers)
            if isinstance(s.get("name"), str)
        ),
        permission_mode=str_field(frame.get(dialect.permission_mode_field)),
        cwd=str_field(frame.get("cwd")),
        raw=frame,
    )


def _tool_result(
    tool_use_id: str | None, content: Any, is_error: Any, parent: str | None
) -> ToolResultEvent:
    return ToolResultEvent(
        tool_use_id=tool_use_id or "",
        content=content,
        is_error=is_error is True,
        parent_tool_use_id=parent,
    )


def _largest(a: Usage, b: Usage) -> Usage:
    """Each count the larger of the two; ``a`` itself where ``b`` adds to none (the common
    repeat: a call's assistant message reports what its message_start did)."""
    if (
        b.input_tokens <= a.input_tokens
        and b.output_tokens <= a.output_tokens
        and b.cache_creation_input_tokens <= a.cache_creation_input_tokens
        and b.cache_read_input_tokens <= a.cache_read_input_tokens
    ):
        return a
    return Usage(
        input_tokens=max(a.input_tokens, b.input_tokens),
        output_tokens=max(a.output_tokens, b.output_tokens),
        cache_creation_input_tokens=max(
            a.cache_creation_input_tokens, b.cache_creation_input_tokens
        ),
        cache_read_input_tokens=max(a.cache_read_input_tokens, b.cache_read_input_tokens),
    )
