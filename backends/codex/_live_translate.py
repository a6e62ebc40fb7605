"""``codex app-server`` notifications of one turn -> agentrt events (warm sessions).

The same event kinds, usage and stop reasons as the ``codex exec --json`` translator
(`agentrt.backends.codex._translate`), from the JSON-RPC notifications of one turn on a
live app-server (checked against codex 0.171.0; tests/realcli/CODEX.md):

==================================  =====================================================
notification                        events
==================================  =====================================================
the turn's first frame              `SessionEvent` first (the thread id), as exec prints
                                    ``thread.started`` in every turn
``item/agentMessage/delta``         `TextEvent` (the streamed piece)
``item/started`` of a tool item     `ToolUseEvent` (once per item id)
``item/completed``:
  ``agentMessage``                  `TextEvent` with ``message_boundary=True``: the part
                                    of the text the deltas did not stream
  ``userMessage``, ``reasoning``    nothing (the prompt's echo; reasoning summaries)
  tool items                        as exec's: ``commandExecution``, ``fileChange``,
                                    ``mcpToolCall``, ``webSearch`` (``declined`` is an
                                    error too)
  anything else                     `RawEvent`
``thread/tokenUsage/updated``       nothing; its ``total`` is the thread's running total
``error``                           `RawEvent`: a notice (``willRetry``), not the end
``turn/completed``, by its status:
  ``completed``                     `UsageEvent`, then terminal `ResultEvent`
  ``failed``                        `UsageEvent`, then terminal `ErrorEvent`, classified
                                    from ``turn.error.message`` as exec's ``turn.failed``
  ``interrupted``                   `UsageEvent`, then terminal `ErrorEvent` INTERRUPTED
``turn/started``, status changes,   nothing
rate limits, resolved requests
anything else                       `RawEvent`
==================================  =====================================================

Usage is the turn's own: the last running total minus the baseline (see ``_usage``).
Unlike exec, app-server reports an interrupted or failed turn's tokens at once, so those
turns carry their usage too, and the next turn's baseline includes it.
"""

from __future__ import annotations

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
from ._usage import APP_SERVER_KEYS, since, totals

# app-server's item types and fields under the names ``codex exec --json`` gives them.
_EXEC_TYPES = {
    "commandExecution": "command_execution",
    "fileChange": "file_change",
    "mcpToolCall": "mcp_tool_call",
    "webSearch": "web_search",
}
_EXEC_FIELDS = {"aggregatedOutput": "aggregated_output", "exitCode": "exit_code"}
_QUIET = frozenset(
    {
        "turn/started",
        "thread/status/changed",
        "account/rateLimits/updated",
        "serverRequest/resolved",
    }
)


def exec_item(item: Mapping[str, Any]) -> dict[str, Any]:
    """An app-server item in ``codex exec --json``'s shape (types and fields renamed)."""
    renamed = {_EXEC_FIELDS.get(key, key): value for key, value in item.items()}
    kind = item.get("type")
    renamed["type"] = _EXEC_TYPES.get(kind, kind) if isinstance(kind, str) else kind
    return renamed


class CodexLiveTranslator:
    """Translates the notifications of one turn on a live ``codex app-server``. Make a
    fresh one per turn; ``session_id`` is the thread's id, ``usage_baseline`` as for
    `CodexTranslator`."""

    def __init__(
        self,
        *,
        session_id: str | None,
        model: str | None = None,
        usage_baseline: Usage | None = None,
    ) -> None:
        self._session_id = session_id
        self._model = model
        self._baseline = usage_baseline
        self._announced = session_id is None
        self._streamed: dict[str, str] = {}
        self._final_text = ""
        self._tools = ToolItems()
        self._running: Usage | None = None
        self._notice: str | None = None
        self._terminal_seen = False

    decode = None

    def feed(self, frame: Any) -> Sequence[Event]:
        """Events for one notification of the turn. Never raises on any JSON value."""
        events = self._translate(frame)
        if self._announced:
            return events
        self._announced = True
        assert self._session_id is not None
        return [SessionEvent(session_id=self._session_id, model=self._model), *events]

    def finish(self, exit_status: ExitStatus, stderr_tail: str) -> Event | None:
        """None if the turn ended; else how the process ended before it (as exec's)."""
        if self._terminal_seen:
            return None
        return ended_early(exit_status, redact(stderr_tail), self._session_id, self._notice)

    def _translate(self, frame: Any) -> list[Event]:
        if not isinstance(frame, Mapping):
            return [RawEvent(data=frame, note="not a JSON object")]
        method = frame.get("method")
        params = frame.get("params")
        if not isinstance(params, Mapping) or method in _QUIET:
            return [] if method in _QUIET else [RawEvent(data=dict(frame))]
        item = params.get("item")
        if method == "item/agentMessage/delta":
            return self._delta(params)
        if method == "item/started" and isinstance(item, Mapping):
            exec_shaped = exec_item(item)
            return self._tools.started(exec_shaped) if tool_name(exec_shaped) else []
        if method == "item/completed" and isinstance(item, Mapping):
            return self._completed(item)
        if method == "thread/tokenUsage/updated":
            usage = params.get("tokenUsage")
            self._running = totals(
                usage.get("total") if isinstance(usage, Mapping) else None, APP_SERVER_KEYS
            )
            return []
        if method == "error":
            error = params.get("error")
            message = error.get("message") if isinstance(error, Mapping) else None
            self._notice = redact(str(message or ""))
            data = {
                "method": "error",
                "message": self._notice,
                "willRetry": params.get("willRetry"),
            }
            return [RawEvent(data=data, note="codex notice")]
        if method == "turn/completed" and not self._terminal_seen:
            return self._turn_completed(params.get("turn"))
        return [RawEvent(data=dict(frame))]

    def _delta(self, params: Mapping[str, Any]) -> list[Event]:
        delta = params.get("delta")
        if not isinstance(delta, str) or not delta:
            return []
        item_id = str(params.get("itemId"))
        self._streamed[item_id] = self._streamed.get(item_id, "") + delta
        return [TextEvent(text=delta)]

    def _completed(self, item: Mapping[str, Any]) -> list[Event]:
        kind = item.get("type")
        if kind == "agentMessage":
            text = str(item.get("text") or "")
            self._final_text = text
            streamed = self._streamed.pop(str(item.get("id")), "")
            # The completed item repeats what the deltas said; only a part they missed is new.
            rest = text[len(streamed) :] if text.startswith(streamed) else text
            return [TextEvent(text=rest, message_boundary=True)]
        if kind in ("userMessage", "reasoning"):
            return []
        exec_shaped = exec_item(item)
        if not tool_name(exec_shaped):
            return [RawEvent(data=dict(item), note=f"item/completed {kind}")]
        return self._tools.completed(exec_shaped)

    def _turn_completed(self, turn: Any) -> list[Event]:
        self._terminal_seen = True
        turn = turn if isinstance(turn, Mapping) else {}
        usage = None if self._running is None else since(self._running, self._baseline)
        status = turn.get("status")
        terminal: Event
        if status == "completed":
            terminal = ResultEvent(
                text=self._final_text,
                session_id=self._session_id,
                usage=usage,
                model=self._model,
                raw=dict(turn),
            )
        elif status == "interrupted":
            terminal = ErrorEvent(
                reason=StopReason.INTERRUPTED,
                message="codex interrupted the turn",
                session_id=self._session_id,
                usage=usage,
            )
        else:
            error = turn.get("error")
            message = error.get("message") if isinstance(error, Mapping) else None
            text = str(message or self._notice or f"turn ended with status {status!r}")
            terminal = error_event(text, self._session_id, usage)
        return [UsageEvent(usage=usage), terminal] if usage is not None else [terminal]
