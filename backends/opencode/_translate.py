"""``opencode run --format json`` frames -> agentrt events, for one turn.

Every frame carries the ``sessionID``; the run prints no frame before the model's first
answer starts (so a turn's session id is known only then), and none at its end: a clean
exit (0) after the last ``step_finish`` is the turn's result.

================  ==========================================================================
frame             events
================  ==========================================================================
the first one     `SessionEvent` (its ``sessionID``) before its own events
``step_start``    `InitEvent` (the model asked for), on the turn's first step only
``text``          `TextEvent` (the part's whole text: ``run`` prints a part once it ends),
                  then one ending the message
``tool_use``      `ToolUseEvent` (``callID``, ``tool``, the input), then `ToolResultEvent`
                  (the output, or the error, ``is_error`` unless ``completed``): ``run``
                  prints a tool part once it has finished
``step_finish``   `UsageEvent`: its tokens and cost added to the turn's
``error``         terminal `ErrorEvent`, classified (see ``_failures``)
anything else     `RawEvent` (``reasoning`` parts among them)
the exit          0 with no error: `UsageEvent`, then terminal `ResultEvent` (the last
                  assistant message's text); else the classified end
================  ==========================================================================

Usage. Each ``step_finish`` carries its model call's ``tokens`` (``input`` without the
cached part, ``output``, ``cache.read``, ``cache.write``) and ``cost`` in dollars; the
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


class OpencodeTranslator:
    """Translates one turn's frames (see the module's table). Pure; one per turn."""

    def __init__(self, *, model: str | None = None) -> None:
        self._model = model
        self._session_id: str | None = None
        self._started = False
        self._usage = Usage()
        self._cost = 0.0
        self._steps = 0
        self._message_id: str | None = None  # the last message that said something
        self._texts: list[str] = []  # its text parts
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
        if self._terminal_seen:
            return [RawEvent(data=frame, note="after the turn ended")]
        events: list[Event] = []
        session_id = frame.get("sessionID")
        if isinstance(session_id, str) and session_id != self._session_id:
            self._session_id = session_id
            events.append(SessionEvent(session_id=session_id, model=self._model))
        kind = frame.get("type")
        part = frame.get("part")
        part = part if isinstance(part, Mapping) else {}
        if kind == "step_start":
            if not self._started:
                self._started = True
                events.append(InitEvent(model=self._model, raw=dict(frame)))
        elif kind == "text":
            events += self._text(part)
        elif kind == "tool_use":
            events += self._tool(part)
        elif kind == "step_finish":
            self._add_step(part)
            events.append(UsageEvent(usage=self._usage, estimated_cost_usd=self._cost))
        elif kind == "error":
            self._terminal_seen = True
            events.append(error_event(frame.get("error"), self._session_id, self._turn_usage()))
        else:
            events.append(RawEvent(data=frame))
        return events

    def finish(self, exit_status: ExitStatus, stderr_tail: str) -> Event | None:
        """None if a terminal event was emitted; the result on a clean exit after a step;
        else the classified end of the stream."""
        if self._terminal_seen:
            return None
        if exit_status.returncode == 0 and self._steps:
            return ResultEvent(
                text="".join(self._texts),
                session_id=self._session_id,
                cost_usd=self._cost,
                num_turns=self._steps,
                usage=self._usage,
                model=self._model,
            )
        if exit_status.returncode == 0 and self._started:
            # Measured on 1.18.33: it exits with output still unwritten to a pipe its reader
            # is behind on (a reply near a MiB, a loaded machine) and drops it.
            return ErrorEvent(
                reason=StopReason.CLI_ERROR,
                message="opencode exited 0 before printing its turn's end: it drops output "
                "not yet written to its stdout pipe when it exits",
                session_id=self._session_id,
                usage=self._turn_usage(),
            )
        return ended_early(exit_status, stderr_tail, self._session_id)

    def _text(self, part: Mapping[str, Any]) -> list[Event]:
        text = part.get("text")
        if not isinstance(text, str) or not text:
            return []
        message_id = part.get("messageID")
        if message_id != self._message_id:
            self._message_id = message_id if isinstance(message_id, str) else None
            self._texts = []
        self._texts.append(text)
        return [TextEvent(text=text), TextEvent(text="", message_boundary=True)]

    def _tool(self, part: Mapping[str, Any]) -> list[Event]:
        call_id = str(part.get("callID"))
        state = part.get("state")
        state = state if isinstance(state, Mapping) else {}
        status = state.get("status")
        content = state.get("output") if status == "completed" else state.get("error")
        return [
            ToolUseEvent(id=call_id, name=str(part.get("tool")), input=state.get("input")),
            ToolResultEvent(tool_use_id=call_id, content=content, is_error=status != "completed"),
        ]

    def _add_step(self, part: Mapping[str, Any]) -> None:
        self._steps += 1
        tokens = part.get("tokens")
        tokens = tokens if isinstance(tokens, Mapping) else {}
        cache = tokens.get("cache")
        cache = cache if isinstance(cache, Mapping) else {}
        self._usage = Usage(
            input_tokens=self._usage.input_tokens + _count(tokens, "input"),
            output_tokens=self._usage.output_tokens + _count(tokens, "output"),
            cache_read_input_tokens=self._usage.cache_read_input_tokens + _count(cache, "read"),
            cache_creation_input_tokens=self._usage.cache_creation_input_tokens
            + _count(cache, "write"),
        )
        cost = part.get("cost")
        if isinstance(cost, int | float) and not isinstance(cost, bool):
            self._cost += float(cost)

    def _turn_usage(self) -> Usage | None:
        return self._usage if self._steps else None


def _count(values: Mapping[str, Any], name: str) -> int:
    value = values.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
