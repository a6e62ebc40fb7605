"""What the console shows of an agent, made safe to show: every text redacted, large
values cut, nothing of an event that is not needed to follow a turn (no raw frames)."""

from __future__ import annotations

import json
from typing import Any

import attrs

from .._events import (
    ErrorEvent,
    Event,
    InitEvent,
    ResultEvent,
    TextEvent,
    TextRetractedEvent,
    ToolDecisionEvent,
    ToolResultEvent,
    ToolUseEvent,
    UsageEvent,
)
from .._records import SessionRecord
from .._redact import redact
from .._status import AgentStatus

# A page is for reading: a larger value is cut, saying so.
MAX_SHOWN = 20_000


def shown(text: str) -> str:
    text = redact(text)
    if len(text) > MAX_SHOWN:
        return f"{text[:MAX_SHOWN]}... [{len(text) - MAX_SHOWN} more characters]"
    return text


def shown_value(value: Any) -> str:
    if isinstance(value, str):
        return shown(value)
    try:
        return shown(json.dumps(value, ensure_ascii=False, default=str))
    except ValueError:  # a circular structure
        return shown(repr(value))


def event_data(event: Event) -> dict[str, Any]:
    """One event of a running turn as the page shows it."""
    data: dict[str, Any] = {"kind": event.__struct_config__.tag}
    if isinstance(event, TextEvent):
        # Where a message ends: the page starts the next one on a line of its own.
        data |= {"text": shown(event.text), "boundary": event.message_boundary}
    elif isinstance(event, TextRetractedEvent):
        data["text"] = shown(event.text)
    elif isinstance(event, ToolUseEvent):
        data |= {"tool": shown(event.name), "input": shown_value(event.input)}
    elif isinstance(event, ToolResultEvent):
        data |= {"content": shown_value(event.content), "is_error": event.is_error}
    elif isinstance(event, ToolDecisionEvent):
        data |= {
            "tool": shown(event.tool_name),
            "allowed": event.allowed,
            "decided_by": shown(event.decided_by),
            "message": None if event.message is None else shown(event.message),
        }
    elif isinstance(event, ResultEvent):
        data |= {"text": shown(event.text), "cost_usd": event.cost_usd}
    elif isinstance(event, ErrorEvent):
        data |= {"reason": str(event.reason), "message": shown(event.message)}
    elif isinstance(event, InitEvent):
        data["model"] = None if event.model is None else shown(event.model)
    elif isinstance(event, UsageEvent):
        data |= {"input": event.usage.input_tokens, "output": event.usage.output_tokens}
    return data


def status_data(status: AgentStatus | None) -> dict[str, Any] | None:
    if status is None:
        return None
    data = attrs.asdict(status, recurse=False)
    current = status.current
    data["current"] = (
        None
        if current is None
        else {
            "ref": str(current.ref.id),
            "origin": str(current.origin),
            "elapsed": current.elapsed,
            "waiting_for_process": current.waiting_for_process,
        }
    )
    return data


def record_data(record: SessionRecord | None) -> dict[str, Any] | None:
    """A stored record without its agent-state blob (by size only) or process details."""
    if record is None:
        return None
    usage = record.usage
    return {
        "backend": record.backend,
        "session_id": record.session_id,
        "cwd": None if record.cwd is None else shown(record.cwd),
        "turns": record.turns,
        "cost_usd": record.cost_usd,
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "last_stop_reason": None
        if record.last_stop_reason is None
        else shown(record.last_stop_reason),
        "updated_at": record.updated_at,
        "state_bytes": None if record.state is None else len(record.state),
    }
