"""``gemini --output-format stream-json`` frames -> agentrt events, for one turn.

===============================  ========================================================
frame                            events
===============================  ========================================================
``init``                         `SessionEvent` (its ``session_id``), then `InitEvent`
                                 (the model; ``cli_version`` None: the stream does not
                                 report the CLI's version)
``message`` of the user          nothing (the prompt, echoed)
``message`` of the assistant     `TextEvent` (a delta)
``tool_use``                     `TextEvent` ending the message before it (if any), then
                                 `ToolUseEvent` (``tool_id``, ``tool_name``,
                                 ``parameters``)
``tool_result``                  `ToolResultEvent`: content ``output`` (or the error's
                                 message), ``is_error`` unless ``status`` is success
``error``                        `RawEvent`: a notice, not the end (the CLI goes on); if
                                 the stream ends with no result it becomes the error
``result`` success               `UsageEvent`, then terminal `ResultEvent`
``result`` error                 terminal `ErrorEvent`, classified (see ``_failures``)
a second ``result``              `RawEvent`
anything else                    `RawEvent`
===============================  ========================================================

Usage. A result's ``stats`` count this process's model calls alone (a resumed turn's start
at 0), so they are the turn's own: ``input_tokens`` is the prompt's tokens, ``cached``
the part served from the cache. They map onto agentrt's (Anthropic-shaped) `Usage` as
input without its cached part, cached input as cache reads, output as output. The CLI
reports no cost.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentrt.backend import (
    Event,
    ExitStatus,
    InitEvent,
    RawEvent,
    ResultEvent,
    SessionEvent,
    TextEvent,
    ToolResultEvent,
    ToolUseEvent,
    Usage,
    UsageEvent,
    redact,
)

from ._failures import ended_early, error_event


class GeminiTranslator:
    """Translates one turn's frames (see the module's table). Pure; one per turn."""

    def __init__(self, *, model: str | None = None) -> None:
        self._model = model
        self._session_id: str | None = None
        self._message: list[str] = []  # the open assistant message's deltas
        self._last_message = ""
        self._notice: str | None = None
        self._terminal_seen = False

    # A few frames a turn, each decoded generically (see Translator.decode).
    decode = None

    @property
    def session_id(self) -> str | None:
        """The session id the CLI reported in this turn."""
        return self._session_id

    def feed(self, frame: Any) -> Sequence[Event]:
        """Events for one decoded stdout frame. Never raises on any JSON value."""
        if not isinstance(frame, Mapping):
            return [RawEvent(data=frame, note="not a JSON object")]
        kind = frame.get("type")
        if kind == "init" and isinstance(session_id := frame.get("session_id"), str):
            return self._init(frame, session_id)
        if kind == "message":
            return self._text(frame)
        if kind == "tool_use":
            return [*self._end_message(), self._tool_use(frame)]
        if kind == "tool_result":
            return [self._tool_result(frame)]
        if kind == "error":
            self._notice = redact(str(frame.get("message") or ""))
            return [RawEvent(data={**frame, "message": self._notice}, note="gemini notice")]
        if kind == "result" and self._terminal_seen:
            return [RawEvent(data=frame, note="after the turn ended")]
        if kind == "result":
            return self._result(frame)
        return [RawEvent(data=frame)]

    def finish(self, exit_status: ExitStatus, stderr_tail: str) -> Event | None:
        """None if a terminal event was emitted; else the classified end of the stream."""
        if self._terminal_seen:
            return None
        return ended_early(exit_status, stderr_tail, self._session_id, self._notice)

    def _init(self, frame: Mapping[str, Any], session_id: str) -> list[Event]:
        model = frame.get("model")
        if isinstance(model, str) and model:
            self._model = model
        events: list[Event] = []
        if session_id != self._session_id:
            self._session_id = session_id
            events.append(SessionEvent(session_id=session_id, model=self._model))
        events.append(InitEvent(model=self._model, raw=dict(frame)))
        return events

    def _text(self, frame: Mapping[str, Any]) -> list[Event]:
        content = frame.get("content")
        if frame.get("role") != "assistant":
            return []
        if not isinstance(content, str):
            return [RawEvent(data=frame, note="assistant message without text")]
        if not content:
            return []
        self._message.append(content)
        return [TextEvent(text=content)]

    def _end_message(self) -> list[Event]:
        if not self._message:
            return []
        self._last_message = "".join(self._message)
        self._message.clear()
        return [TextEvent(text="", message_boundary=True)]

    def _tool_use(self, frame: Mapping[str, Any]) -> Event:
        return ToolUseEvent(
            id=str(frame.get("tool_id")),
            name=str(frame.get("tool_name")),
            input=frame.get("parameters"),
        )

    def _tool_result(self, frame: Mapping[str, Any]) -> Event:
        error = frame.get("error")
        is_error = frame.get("status") != "success"
        content = frame.get("output")
        if is_error and isinstance(error, Mapping) and content is None:
            content = error.get("message")
        return ToolResultEvent(
            tool_use_id=str(frame.get("tool_id")), content=content, is_error=is_error
        )

    def _result(self, frame: Mapping[str, Any]) -> list[Event]:
        self._terminal_seen = True
        stats = frame.get("stats")
        usage = _usage(stats)
        error = frame.get("error")
        if frame.get("status") != "success":
            message = error.get("message") if isinstance(error, Mapping) else None
            return [error_event(str(message or "the turn failed"), self._session_id, usage)]
        self._end_message()
        duration = stats.get("duration_ms") if isinstance(stats, Mapping) else None
        result = ResultEvent(
            text=self._last_message,
            session_id=self._session_id,
            duration=duration / 1000 if isinstance(duration, int | float) else None,
            usage=usage,
            model=self._model,
            raw=dict(frame),
        )
        return [UsageEvent(usage=usage), result] if usage is not None else [result]


def _usage(stats: Any) -> Usage | None:
    if not isinstance(stats, Mapping):
        return None

    def count(name: str) -> int:
        value = stats.get(name)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    cached = count("cached")
    return Usage(
        input_tokens=max(count("input_tokens") - cached, 0),
        output_tokens=count("output_tokens"),
        cache_read_input_tokens=cached,
    )
