"""codex's tool items -> `ToolUseEvent` / `ToolResultEvent` (both output modes).

Items come in ``codex exec --json``'s shape (``command_execution`` with
``aggregated_output``, ...); the app-server translator renames its camelCase items first.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentrt.backend import Event, ToolResultEvent, ToolUseEvent

TOOL_ITEMS = frozenset({"command_execution", "file_change", "mcp_tool_call", "web_search"})


def tool_name(item: Mapping[str, Any]) -> str:
    """The tool an item calls ("" for an item that is not a tool call)."""
    kind = item.get("type")
    if kind == "mcp_tool_call":
        return f"mcp__{item.get('server')}__{item.get('tool')}"
    return kind if isinstance(kind, str) and kind in TOOL_ITEMS else ""


class ToolItems:
    """The tool events of one turn: each call's `ToolUseEvent` once, however many times
    its item is reported."""

    def __init__(self) -> None:
        self._ids: set[str] = set()

    def started(self, item: Mapping[str, Any]) -> list[Event]:
        """The `ToolUseEvent` of a tool item, unless already sent."""
        item_id = str(item.get("id"))
        if item_id in self._ids:
            return []
        self._ids.add(item_id)
        kind = item.get("type")
        if kind == "command_execution":
            tool_input: Any = {"command": item.get("command")}
        elif kind == "file_change":
            tool_input = {"changes": item.get("changes")}
        elif kind == "mcp_tool_call":
            tool_input = item.get("arguments")
        else:
            tool_input = {"query": item.get("query"), "action": item.get("action")}
        return [ToolUseEvent(id=item_id, name=tool_name(item), input=tool_input)]

    def completed(self, item: Mapping[str, Any]) -> list[Event]:
        """The `ToolUseEvent` (unless already sent) and `ToolResultEvent` of a finished
        tool item; ``is_error`` unless its status is completed."""
        kind = item.get("type")
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
        return [*self.started(item), result]
