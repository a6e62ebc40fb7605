"""Helpers shared by the Claude backend tests: recorded streams and event summaries."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import msgspec

from agentrt import (
    ErrorEvent,
    Event,
    InitEvent,
    RawEvent,
    ResultEvent,
    SessionEvent,
    TextEvent,
    TextRetractedEvent,
    ToolResultEvent,
    ToolUseEvent,
    UsageEvent,
)
from agentrt.backend import ExitStatus
from agentrt.backends.claude import ClaudeTranslator

FIXTURES = Path(__file__).parent / "fixtures" / "claude"
SID = "5f0c9a7e-3b1d-4c2a-9e8f-1a2b3c4d5e6f"
MODEL = "claude-sonnet-4-5-20250929"
_decoder = msgspec.json.Decoder()


def frames(name: str) -> list[Any]:
    """A recorded stream, decoded line by line as the process driver decodes stdout."""
    return [_decoder.decode(line) for line in (FIXTURES / name).read_bytes().splitlines()]


def translate(stream: Iterable[Any], translator: ClaudeTranslator | None = None) -> list[Event]:
    t = translator or ClaudeTranslator()
    return [event for frame in stream for event in t.feed(frame)]


CLEAN_EXIT = ExitStatus(0)


def run(
    stream: Iterable[Any], exit_status: ExitStatus = CLEAN_EXIT, stderr: str = ""
) -> tuple[list[Event], Event | None]:
    """All events of a stream, and what ``finish`` adds when the process has ended."""
    t = ClaudeTranslator()
    events = translate(stream, t)
    return events, t.finish(exit_status, stderr)


def summary(event: Event) -> tuple[Any, ...]:
    """The fields a test pins, without the bulky raw frames."""
    match event:
        case SessionEvent():
            return ("session", event.session_id, event.model)
        case InitEvent():
            return ("init", event.model, event.permission_mode)
        case TextEvent():
            return ("text", event.text, event.message_boundary)
        case TextRetractedEvent():
            return ("text_retracted", event.text)
        case ToolUseEvent():
            return ("tool_use", event.id, event.name, event.input)
        case ToolResultEvent():
            return ("tool_result", event.tool_use_id, event.content, event.is_error)
        case UsageEvent():
            u = event.usage
            return (
                "usage",
                u.input_tokens,
                u.output_tokens,
                u.cache_creation_input_tokens,
                u.cache_read_input_tokens,
            )
        case ResultEvent():
            return (
                "result",
                event.text,
                event.session_id,
                event.cost_usd,
                event.duration,
                event.num_turns,
                event.model_stop_reason,
                event.model,
            )
        case ErrorEvent():
            return (
                "error",
                event.reason,
                event.message,
                event.status,
                event.retryable,
                event.session_id,
            )
        case RawEvent():
            data = event.data
            kind = (data.get("type"), data.get("subtype")) if isinstance(data, dict) else data
            return ("raw", kind, event.note)
    raise AssertionError(event)


def summaries(events: Sequence[Event]) -> list[tuple[Any, ...]]:
    """The summaries of ``events`` but the usage the stream reports call by call (see
    `streamed_usage`): the CLI's own count, just before the terminal event, stays."""
    streamed = {id(e) for e in streamed_usage(events)}
    return [summary(e) for e in events if id(e) not in streamed]


def streamed_usage(events: Sequence[Event]) -> list[UsageEvent]:
    """The usage events of the model calls the stream reported, not the result's."""
    return [
        e
        for e, after in zip(events, [*events[1:], None], strict=True)
        if type(e) is UsageEvent and not _is_result(after)
    ]


def _is_result(event: Event | None) -> bool:
    # A result, terminal or not (after a turn that had failed it is a RawEvent).
    if isinstance(event, RawEvent):
        return isinstance(event.data, dict) and event.data.get("type") == "result"
    return event is not None and event.is_terminal


def text_of(events: Iterable[Event]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextEvent))
