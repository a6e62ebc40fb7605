"""``pi --mode json`` frames -> agentrt events, for one turn.

==================================  =====================================================
frame                               events
==================================  =====================================================
``session``                         `SessionEvent` (its ``id``), then `InitEvent` (the
                                    model asked for, the session's cwd)
``message_update`` ``text_delta``   `TextEvent` (the delta); every other update (thinking,
                                    tool-call arguments) nothing: each also carries the
                                    whole message so far
``message_end`` of the assistant    `TextEvent` ending its text (if it had any); its usage
                                    and cost are added to the turn's
``tool_execution_start``            `ToolUseEvent` (``toolCallId``, ``toolName``, ``args``)
``tool_execution_end``              `ToolResultEvent` (the result's text, ``isError``)
``agent_end``, the run answered     `UsageEvent`, then terminal `ResultEvent`
``agent_end``, the run failed       nothing yet: pi may retry (``auto_retry_start``); the
                                    failure is the turn's end if the stream ends after it
``auto_retry_*``, ``queue_update``, `RawEvent`
``compaction_*``, anything unknown
the lifecycle frames (``agent_start``,  nothing
``turn_*``, ``message_start``, the
user's messages, tool updates)
==================================  =====================================================

Usage. Each assistant message carries its model call's ``usage`` (``input`` without the
cached part, ``output``, ``cacheRead``, ``cacheWrite``, ``cost.total`` in dollars); the
turn's is their sum.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentrt.backend import (
    ErrorEvent,
    Event,
    ExitStatus,
    InitEvent,
    RawEvent,
    ResultEvent,
    SessionEvent,
    StopReason,
    TextEvent,
    ToolResultEvent,
    ToolUseEvent,
    Usage,
    UsageEvent,
)

from ._failures import ended_early, error_event

# Frames that say nothing the events above do not.
_QUIET = frozenset(
    {"agent_start", "turn_start", "turn_end", "message_start", "tool_execution_update"}
)
_FAILED = frozenset({"error", "aborted"})


class PiTranslator:
    """Translates one turn's frames (see the module's table). Pure; one per turn."""

    def __init__(self, *, model: str | None = None, session_id: str | None = None) -> None:
        self._model = model
        # A live process's session, named before its turns (the first frame announces it).
        self._announce = session_id
        # Live, pi does not retry (the opening turned it off): a failed run is the end.
        self._live = session_id is not None
        self._session_id: str | None = session_id
        self._usage = Usage()
        self._cost = 0.0
        self._calls = 0
        self._text = ""  # the last assistant message's text
        self._streamed = False  # text deltas of the open message were sent
        self._failure: str | None = None  # the last failed run's message
        self._aborted = False  # the last run was aborted (a live process's interrupt)
        self._terminal_seen = False

    # A few frames a turn, each decoded generically (see Translator.decode).
    decode = None

    @property
    def session_id(self) -> str | None:
        """The session id the CLI reported in this turn."""
        return self._session_id

    def feed(self, frame: Any) -> Sequence[Event]:
        """Events for one decoded stdout frame. Never raises on any JSON value."""
        announced: list[Event] = []
        if self._announce is not None:
            announced = [SessionEvent(session_id=self._announce, model=self._model)]
            self._announce = None
        return [*announced, *self._feed(frame)]

    def _feed(self, frame: Any) -> Sequence[Event]:
        if not isinstance(frame, Mapping):
            return [RawEvent(data=frame, note="not a JSON object")]
        kind = frame.get("type")
        if kind in _QUIET:
            return []
        if self._terminal_seen:
            return [RawEvent(data={"type": kind}, note="after the turn ended")]
        if kind == "session" and isinstance(session_id := frame.get("id"), str):
            return self._session(frame, session_id)
        if kind == "message_update":
            return self._update(frame.get("assistantMessageEvent"))
        if kind == "message_end":
            return self._message_end(frame.get("message"))
        if kind == "tool_execution_start":
            return [
                ToolUseEvent(
                    id=str(frame.get("toolCallId")),
                    name=str(frame.get("toolName")),
                    input=frame.get("args"),
                )
            ]
        if kind == "tool_execution_end":
            return [self._tool_result(frame)]
        if kind == "agent_end":
            return self._agent_end()
        if kind == "auto_retry_start":
            self._failure = None
        return [RawEvent(data=frame)]

    def finish(self, exit_status: ExitStatus, stderr_tail: str) -> Event | None:
        """None if a terminal event was emitted; else the run's failure, or the classified
        end of the stream."""
        if self._terminal_seen:
            return None
        if self._failure is not None and exit_status.signal is None:
            return error_event(self._failure, self._session_id, self._turn_usage())
        return ended_early(exit_status, stderr_tail, self._session_id)

    def _session(self, frame: Mapping[str, Any], session_id: str) -> list[Event]:
        self._session_id = session_id
        cwd = frame.get("cwd")
        return [
            SessionEvent(session_id=session_id, model=self._model),
            InitEvent(
                model=self._model,
                cwd=cwd if isinstance(cwd, str) else None,
                raw=dict(frame),
            ),
        ]

    def _update(self, update: Any) -> list[Event]:
        if not isinstance(update, Mapping) or update.get("type") != "text_delta":
            return []
        delta = update.get("delta")
        if not isinstance(delta, str) or not delta:
            return []
        self._streamed = True
        return [TextEvent(text=delta)]

    def _message_end(self, message: Any) -> list[Event]:
        if not isinstance(message, Mapping) or message.get("role") != "assistant":
            return []
        self._calls += 1
        self._add_usage(message.get("usage"))
        model = message.get("model")
        if isinstance(model, str) and model:
            self._model = model
        self._aborted = message.get("stopReason") == "aborted"
        if message.get("stopReason") in _FAILED:
            self._failure = str(message.get("errorMessage") or "the model call failed")
        else:
            self._failure = None
        texts = [
            block.get("text", "")
            for block in message.get("content") or ()
            if isinstance(block, Mapping) and block.get("type") == "text"
        ]
        text = "".join(t for t in texts if isinstance(t, str))
        if not text:
            return []
        self._text = text
        streamed, self._streamed = self._streamed, False
        # A message whose deltas were not streamed comes whole.
        events: list[Event] = [] if streamed else [TextEvent(text=text)]
        return [*events, TextEvent(text="", message_boundary=True)]

    def _tool_result(self, frame: Mapping[str, Any]) -> Event:
        result = frame.get("result")
        content: Any = result
        if isinstance(result, Mapping) and isinstance(blocks := result.get("content"), list):
            texts = [b.get("text") for b in blocks if isinstance(b, Mapping)]
            content = "".join(t for t in texts if isinstance(t, str))
        return ToolResultEvent(
            tool_use_id=str(frame.get("toolCallId")),
            content=content,
            is_error=frame.get("isError") is True,
        )

    def _agent_end(self) -> list[Event]:
        if self._live and (self._failure is not None or self._aborted):
            self._terminal_seen = True
            if self._aborted:
                return [
                    ErrorEvent(
                        reason=StopReason.INTERRUPTED,
                        message="pi aborted the turn",
                        session_id=self._session_id,
                        usage=self._turn_usage(),
                    )
                ]
            assert self._failure is not None
            return [error_event(self._failure, self._session_id, self._turn_usage())]
        if self._failure is not None or self._calls == 0:
            return []
        self._terminal_seen = True
        usage = self._usage
        result = ResultEvent(
            text=self._text,
            session_id=self._session_id,
            cost_usd=self._cost,
            num_turns=self._calls,
            usage=usage,
            model=self._model,
        )
        return [UsageEvent(usage=usage), result]

    def _add_usage(self, usage: Any) -> None:
        if not isinstance(usage, Mapping):
            return

        def count(name: str) -> int:
            value = usage.get(name)
            return value if isinstance(value, int) and not isinstance(value, bool) else 0

        self._usage = Usage(
            input_tokens=self._usage.input_tokens + count("input"),
            output_tokens=self._usage.output_tokens + count("output"),
            cache_read_input_tokens=self._usage.cache_read_input_tokens + count("cacheRead"),
            cache_creation_input_tokens=self._usage.cache_creation_input_tokens
            + count("cacheWrite"),
        )
        cost = usage.get("cost")
        total = cost.get("total") if isinstance(cost, Mapping) else None
        if isinstance(total, int | float) and not isinstance(total, bool):
            self._cost += float(total)

    def _turn_usage(self) -> Usage | None:
        return self._usage if self._calls else None
