"""The cron jobs the model makes and deletes through Claude Code's ``CronCreate`` and
``CronDelete`` tools, read from a turn's events. The CLI fires a job from its own process
only (2.1.332 answers "Session-only (not written to disk, dies when Claude exits)"; a CLI
that resumes the session knows the job again, but fires nothing after its turn, as it ends
then): headless, nobody fires it, so agentrt stores it and runs it (`CronBackend`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from agentrt.backend import CronDeleted, CronRequested, Event, ToolResultEvent, ToolUseEvent

CREATE = "CronCreate"
DELETE = "CronDelete"

# The job's id is only in the answer's text (the structured ``tool_use_result`` is not
# kept): "Scheduled recurring job 2cdf7cb9 (Every 5 minutes). ..." or "Scheduled one-shot
# task 2cdf7cb9 (...)".
_SCHEDULED = re.compile(r"Scheduled (?:recurring job|one-shot task) (\S+) \(")


def crons(events: Sequence[Event]) -> Sequence[CronRequested | CronDeleted]:
    """Each ``CronCreate`` call of the main thread the CLI answered with a job, and each
    ``CronDelete`` call naming an id, in the order of the calls. A delete counts whatever
    the CLI answered: one that no longer knows the job (it answers "No scheduled job with
    id", after a session was lost, say) has not fired it either, and the model wants it
    gone."""
    results = {event.tool_use_id: event for event in events if isinstance(event, ToolResultEvent)}
    found: list[CronRequested | CronDeleted] = []
    for event in events:
        if not (
            isinstance(event, ToolUseEvent)
            and event.parent_tool_use_id is None
            and event.id in results
            and isinstance(event.input, dict)
        ):
            continue
        result = results[event.id]
        if event.name == DELETE:
            cron_id = event.input.get("id")
            if isinstance(cron_id, str):
                found.append(CronDeleted(cron_id))
        elif event.name == CREATE and not result.is_error:
            made = _made(event.input, _text(result.content))
            if made is not None:
                found.append(made)
    return found


def _made(given: dict[str, Any], answer: str) -> CronRequested | None:
    cron, prompt, recurring = (given.get(k) for k in ("cron", "prompt", "recurring"))
    scheduled = _SCHEDULED.search(answer)
    if scheduled is None or not isinstance(cron, str) or not isinstance(prompt, str):
        return None
    # The tool's default is recurring.
    return CronRequested(scheduled[1], cron, prompt, recurring=recurring is not False)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            block["text"]
            for block in content
            if isinstance(block, dict) and isinstance(block.get("text"), str)
        )
    return ""
