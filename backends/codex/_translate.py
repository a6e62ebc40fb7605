"""``codex exec --json`` frames -> agentrt events, for one turn.

=================================  ======================================================
frame                              events
=================================  ======================================================
``thread.started``                 `SessionEvent` (the thread id is the session id)
``turn.started``                   nothing
``item.started`` of a tool item    `ToolUseEvent` (once per item id)
``item.completed``:
  ``agent_message``                `TextEvent` with ``message_boundary=True``
  ``reasoning``                    nothing
  ``command_execution``            `ToolUseEvent` (unless already sent), `ToolResultEvent`
  ``file_change``                  with content ``{"output", "exit_code", "status"}``,
  ``mcp_tool_call``                ``{"changes", "status"}``, the MCP result or error,
  ``web_search``                   ``{"query", "action"}``; ``is_error`` unless completed
  anything else                    `RawEvent` (todo lists, plans, warnings, ...)
``error``                          `RawEvent`: a notice, not the end. codex also prints
                                   its retries ("Reconnecting... 1/5") this way; the turn
                                   goes on. If the stream ends with no ``turn.*`` verdict,
                                   the last notice becomes the terminal error.
``turn.completed``                 `UsageEvent`, then terminal `ResultEvent`
``turn.failed``                    terminal `ErrorEvent`, classified from the message
a second ``turn.*`` verdict        `RawEvent` (one exec runs one turn)
anything else                      `RawEvent`
=================================  ======================================================

Usage. codex's ``turn.completed`` usage is the THREAD's running total, not the turn's: the
sum of every model call since the thread began, across ``exec resume`` processes (measured
with 0.171.0, see tests/realcli/CODEX.md). The translator reports the turn's own share: the
totals minus ``usage_baseline``, each count floored at 0 (see ``_usage``). The baseline is
what the runtime has already reported for this thread: the sum of the usage of the
thread's earlier turns (`agentrt.backend.Backend.translator`). That sum equals codex's
totals after the previous turn, so each turn gets exactly its own calls, and the runtime
keeps a plain sum per session:

- Without a baseline (a new thread) the totals are the turn's own usage.
- A turn that ends without ``turn.completed`` reports no usage. After SIGINT (the
  interrupt) codex keeps the tokens of its calls, and the next completed turn reports them;
  after SIGTERM or SIGKILL codex loses them, and nobody reports them.
- A turn whose usage the runtime never recorded (it crashed first) is counted in the next
  turn, which sees a smaller baseline.
- A count never goes negative: where codex's total is below the baseline (not seen; it
  would take codex losing a completed turn's tokens) the turn reports 0, and the sum over
  the thread stays codex's highest total, never counting a token twice.

``ResultEvent.raw`` is the ``turn.completed`` frame, running totals included.

Counts are mapped onto agentrt's (Anthropic-shaped) `Usage`: ``input_tokens`` is codex's
input minus its cached input, ``cache_read_input_tokens`` the cached input,
``cache_creation_input_tokens`` codex's ``cache_write_input_tokens``, ``output_tokens``
codex's output (reasoning tokens included).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from agentrt.backend import (
    ErrorEvent,
    Event,
    ExitStatus,
    RawEvent,
    ResultEvent,
    SessionEvent,
    StopReason,
    TextEvent,
    Usage,
    UsageEvent,
    redact,
)

from ._failures import ended_early, error_event
from ._items import ToolItems, tool_name
from ._usage import EXEC_KEYS, since, totals

_NO_ROLLOUT = re.compile(r"no rollout found for thread id (\S+)")


class CodexTranslator:
    """Translates the frames of one codex turn. Make a fresh one per turn; see the module
    docstring for ``usage_baseline``."""

    def __init__(self, *, model: str | None = None, usage_baseline: Usage | None = None) -> None:
        self._model = model
        self._baseline = usage_baseline
        self._session_id: str | None = None
        self._final_text = ""
        self._tools = ToolItems()
        self._notice: str | None = None
        self._terminal_seen = False

    # Codex prints few lines a turn: each is decoded generically (see Translator.decode).
    decode = None

    @property
    def session_id(self) -> str | None:
        """The thread id codex reported in this turn."""
        return self._session_id

    def feed(self, frame: Any) -> Sequence[Event]:
        """Events for one decoded stdout frame. Never raises on any JSON value."""
        if not isinstance(frame, Mapping):
            return [RawEvent(data=frame, note="not a JSON object")]
        kind = frame.get("type")
        item = frame.get("item")
        if kind == "thread.started" and isinstance(thread_id := frame.get("thread_id"), str):
            self._session_id = thread_id
            return [SessionEvent(session_id=thread_id, model=self._model)]
        if kind == "turn.started":
            return []
        if kind == "item.started" and isinstance(item, Mapping) and tool_name(item):
            return self._tools.started(item)
        if kind == "item.completed" and isinstance(item, Mapping):
            return self._completed(item)
        if kind in ("turn.completed", "turn.failed") and self._terminal_seen:
            # One exec runs one turn; a second verdict would be a second terminal event.
            return [RawEvent(data=frame, note="after the turn ended")]
        if kind == "turn.completed":
            return self._turn_completed(frame)
        if kind == "turn.failed":
            error = frame.get("error")
            message = error.get("message") if isinstance(error, Mapping) else None
            self._terminal_seen = True
            return [error_event(str(message or "turn failed"), self._session_id)]
        if kind == "error":
            self._notice = redact(str(frame.get("message") or ""))
            return [RawEvent(data={"type": "error", "message": self._notice}, note="codex notice")]
        return [RawEvent(data=frame)]

    def finish(self, exit_status: ExitStatus, stderr_tail: str) -> Event | None:
        """None if a terminal event was emitted; else the classified end of the stream: an
        unknown thread id (SESSION_LOST), a signal (PROCESS_CRASHED), the last error notice,
        a rejected flag (INVALID_OPTIONS), else MALFORMED_OUTPUT."""
        if self._terminal_seen:
            return None
        tail = redact(stderr_tail)
        lost = _NO_ROLLOUT.search(tail)
        if lost:
            return ErrorEvent(
                reason=StopReason.SESSION_LOST,
                message=f"codex has no saved thread {lost.group(1)}",
                session_id=lost.group(1),
            )
        return ended_early(exit_status, tail, self._session_id, self._notice)

    def _completed(self, item: Mapping[str, Any]) -> list[Event]:
        kind = item.get("type")
        if kind == "agent_message":
            self._final_text = str(item.get("text") or "")
            return [TextEvent(text=self._final_text, message_boundary=True)]
        if kind == "reasoning":
            return []
        if not tool_name(item):
            return [RawEvent(data=dict(item), note=f"item.completed {kind}")]
        return self._tools.completed(item)

    def _turn_completed(self, frame: Mapping[str, Any]) -> list[Event]:
        self._terminal_seen = True
        running = totals(frame.get("usage"), EXEC_KEYS)
        usage = None if running is None else since(running, self._baseline)
        result = ResultEvent(
            text=self._final_text,
            session_id=self._session_id,
            usage=usage,
            model=self._model,
            raw=dict(frame),
        )
        return [UsageEvent(usage=usage), result] if usage is not None else [result]
