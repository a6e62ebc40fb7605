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
totals minus ``usage_baseline``, each count floored at 0. The baseline is what the runtime
has already reported for this thread: the sum of the usage of the thread's earlier turns
(`agentrt.backend.Backend.translator`). That sum equals codex's totals after the previous
turn, so each turn gets exactly its own calls, and the runtime keeps a plain sum per session:

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
import signal
from collections.abc import Mapping, Sequence
from typing import Any

from agentrt import (
    ErrorEvent,
    Event,
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
from agentrt.backend import ExitStatus, redact

_STATUS = re.compile(r"(?:unexpected status|last status:) (\d{3})\b")
_NO_ROLLOUT = re.compile(r"no rollout found for thread id (\S+)")
_OVERLOADED = frozenset({500, 502, 503, 504, 529})
_TOOL_ITEMS = frozenset({"command_execution", "file_change", "mcp_tool_call", "web_search"})
_MESSAGE_LIMIT = 500


def classify(message: str) -> tuple[StopReason, int | None, bool]:
    """The stop reason, HTTP status and retryability of a codex error message."""
    match = _STATUS.search(message)
    status = int(match.group(1)) if match else None
    if status == 401 or message.startswith("Missing environment variable"):
        return StopReason.AUTHENTICATION_FAILED, status, False
    if message.startswith("Quota exceeded"):
        return StopReason.RATE_LIMITED, status or 429, False
    if status == 429:
        return StopReason.RATE_LIMITED, status, True
    # codex words a 500 as "We're currently experiencing high demand, ..." with no status.
    if status in _OVERLOADED or "high demand" in message:
        return StopReason.OVERLOADED, status, True
    retryable = message.startswith("stream disconnected before completion")
    return StopReason.CLI_ERROR, status, retryable


class CodexTranslator:
    """Translates the frames of one codex turn. Make a fresh one per turn; see the module
    docstring for ``usage_baseline``."""

    def __init__(self, *, model: str | None = None, usage_baseline: Usage | None = None) -> None:
        self._model = model
        self._baseline = usage_baseline
        self._session_id: str | None = None
        self._final_text = ""
        self._tool_ids: set[str] = set()
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
        if kind == "item.started" and isinstance(item, Mapping) and _tool_name(item):
            return self._tool_use(item)
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
            return [self._error(str(message or "turn failed"))]
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
        if exit_status.signal is not None:
            return ErrorEvent(
                reason=StopReason.PROCESS_CRASHED,
                message=f"codex was killed by {_signal_name(exit_status.signal)}",
                session_id=self._session_id,
            )
        if self._notice:
            return self._error(self._notice)
        error_line = next(
            (ln.strip() for ln in tail.splitlines() if ln.lower().startswith("error")), ""
        )
        reason = (
            StopReason.INVALID_OPTIONS
            if exit_status.returncode == 2 and "unexpected argument" in error_line
            else StopReason.MALFORMED_OUTPUT
        )
        how = f"exited with code {exit_status.returncode}"
        return ErrorEvent(
            reason=reason,
            message=f"codex {how} before the turn ended"
            + (f": {error_line[:_MESSAGE_LIMIT]}" if error_line else ""),
            session_id=self._session_id,
        )

    def _tool_use(self, item: Mapping[str, Any]) -> list[Event]:
        item_id = str(item.get("id"))
        if item_id in self._tool_ids:
            return []
        self._tool_ids.add(item_id)
        kind = item.get("type")
        if kind == "command_execution":
            tool_input: Any = {"command": item.get("command")}
        elif kind == "file_change":
            tool_input = {"changes": item.get("changes")}
        elif kind == "mcp_tool_call":
            tool_input = item.get("arguments")
        else:
            tool_input = {"query": item.get("query"), "action": item.get("action")}
        return [ToolUseEvent(id=item_id, name=_tool_name(item), input=tool_input)]

    def _completed(self, item: Mapping[str, Any]) -> list[Event]:
        kind = item.get("type")
        if kind == "agent_message":
            self._final_text = str(item.get("text") or "")
            return [TextEvent(text=self._final_text, message_boundary=True)]
        if kind == "reasoning":
            return []
        if not _tool_name(item):
            return [RawEvent(data=dict(item), note=f"item.completed {kind}")]
        status = item.get("status")
        if kind == "command_execution":
            content: Any = {
                "output": item.get("aggregated_output"),
                "exit_code": item.get("exit_code"),
                "status": status,
            }
        elif kind == "file_change":
            content = {"changes": item.get("changes"), "status": status}
        elif kind == "mcp_tool_call":
            content = item.get("error") or item.get("result")
        else:
            content = {"query": item.get("query"), "action": item.get("action")}
        is_error = status not in (None, "completed")
        result = ToolResultEvent(
            tool_use_id=str(item.get("id")), content=content, is_error=is_error
        )
        return [*self._tool_use(item), result]

    def _turn_completed(self, frame: Mapping[str, Any]) -> list[Event]:
        self._terminal_seen = True
        usage = self._turn_usage(frame.get("usage"))
        result = ResultEvent(
            text=self._final_text,
            session_id=self._session_id,
            usage=usage,
            model=self._model,
            raw=dict(frame),
        )
        return [UsageEvent(usage=usage), result] if usage is not None else [result]

    def _turn_usage(self, raw: Any) -> Usage | None:
        if not isinstance(raw, Mapping):
            return None

        def count(name: str) -> int:
            value = raw.get(name)
            return value if isinstance(value, int) and not isinstance(value, bool) else 0

        cached = count("cached_input_tokens")
        totals = Usage(
            input_tokens=max(count("input_tokens") - cached, 0),
            output_tokens=count("output_tokens"),
            cache_creation_input_tokens=count("cache_write_input_tokens"),
            cache_read_input_tokens=cached,
        )
        base = self._baseline
        if base is None:
            return totals
        return Usage(
            input_tokens=max(totals.input_tokens - base.input_tokens, 0),
            output_tokens=max(totals.output_tokens - base.output_tokens, 0),
            cache_creation_input_tokens=max(
                totals.cache_creation_input_tokens - base.cache_creation_input_tokens, 0
            ),
            cache_read_input_tokens=max(
                totals.cache_read_input_tokens - base.cache_read_input_tokens, 0
            ),
        )

    def _error(self, message: str) -> ErrorEvent:
        message = redact(message)
        reason, status, retryable = classify(message)
        return ErrorEvent(
            reason=reason,
            message=message[:_MESSAGE_LIMIT],
            status=status,
            retryable=retryable,
            session_id=self._session_id,
        )


def _tool_name(item: Mapping[str, Any]) -> str:
    kind = item.get("type")
    if kind == "mcp_tool_call":
        return f"mcp__{item.get('server')}__{item.get('tool')}"
    return kind if isinstance(kind, str) and kind in _TOOL_ITEMS else ""


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
