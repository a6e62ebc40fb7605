"""Frames the typed decoding refused (a field or block of another shape, or a dict from an
in-process feeder), made the typed frames they stand for, so that the typed frames' rules
decide: what the schema would not accept is left out (a field of another type is None, a
block of another type is dropped)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from ._fields import mappings, str_field
from ._frames import (
    Assistant,
    AssistantMessage,
    StreamEvent,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    User,
    UserMessage,
)

_TOOL_USE_BLOCKS = ("tool_use", "server_tool_use")


def stream_event_of(frame: Mapping[str, Any]) -> StreamEvent | None:
    """The typed stream event, or None for one of any other shape (ignored like unknown
    ones: the same schema decides)."""
    try:
        return msgspec.convert(frame, StreamEvent)
    except msgspec.ValidationError:
        return None


def assistant_of(frame: Mapping[str, Any]) -> Assistant | None:
    """The typed assistant frame, or None if it has no message."""
    message = frame.get("message")
    if not isinstance(message, Mapping):
        return None
    content: list[Any] = []
    for block in mappings(message.get("content")):
        kind = block.get("type")
        if kind == "text":
            content.append(TextBlock(text=str_field(block.get("text"))))
        elif kind in _TOOL_USE_BLOCKS:
            tool_id, name = str_field(block.get("id")), str_field(block.get("name"))
            content.append(ToolUseBlock(id=tool_id, name=name, input=block.get("input")))
    return Assistant(
        message=AssistantMessage(
            content=content,
            id=message.get("id"),
            model=message.get("model"),
            usage=message.get("usage"),
        ),
        parent_tool_use_id=frame.get("parent_tool_use_id"),
    )


def user_of(frame: Mapping[str, Any]) -> User | None:
    """The typed user frame (its tool results), or None if it has no message."""
    message = frame.get("message")
    if not isinstance(message, Mapping):
        return None
    content: list[Any] = [
        ToolResultBlock(
            tool_use_id=str_field(block.get("tool_use_id")),
            content=block.get("content"),
            is_error=block.get("is_error"),
        )
        for block in mappings(message.get("content"))
        if block.get("type") == "tool_result"
    ]
    return User(
        message=UserMessage(content=content),
        parent_tool_use_id=frame.get("parent_tool_use_id"),
    )
