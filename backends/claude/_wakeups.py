"""The wake-ups the model schedules through Claude Code's ``ScheduleWakeup`` tool, read from a
turn's events. The CLI keeps such a wake-up in its own process only: headless, nobody fires
it (a per-turn CLI has ended by then), so agentrt stores it and runs it (`WakeupBackend`)."""

from __future__ import annotations

from collections.abc import Sequence

from agentrt.backend import Event, ToolResultEvent, ToolUseEvent, WakeupRequested

TOOL = "ScheduleWakeup"


def wakeups(events: Sequence[Event]) -> Sequence[WakeupRequested]:
    """Each ``ScheduleWakeup`` call of the main thread the CLI answered without an error (a
    call it refused, or whose input it found wrong, schedules nothing)."""
    accepted = {
        event.tool_use_id
        for event in events
        if isinstance(event, ToolResultEvent) and not event.is_error
    }
    found: list[WakeupRequested] = []
    for event in events:
        if not (
            isinstance(event, ToolUseEvent)
            and event.name == TOOL
            and event.parent_tool_use_id is None
            and event.id in accepted
            and isinstance(event.input, dict)
        ):
            continue
        delay, prompt, reason = (event.input.get(k) for k in ("delaySeconds", "prompt", "reason"))
        if isinstance(delay, bool) or not isinstance(delay, int | float):
            continue
        if not isinstance(prompt, str):
            continue
        kept_reason = reason if isinstance(reason, str) else None
        found.append(WakeupRequested(due_in=float(delay), prompt=prompt, reason=kept_reason))
    return found
