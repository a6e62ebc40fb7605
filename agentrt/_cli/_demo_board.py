"""``agentrt demo``'s board: a row per agent and a log, printed as it happens or redrawn
live on a terminal, and the summary it ends with. `agentrt._cli._demo` runs the story
and tells the board what happened."""

from __future__ import annotations

import collections
import time
from collections.abc import Mapping
from typing import Any

import attrs

from .._errors import AgentNotFound, TurnFailed
from .._events import Event, Response, StopReason, TextEvent, ToolUseEvent
from .._records import SessionRecord
from .._runtime import Runtime
from ._demo_model import FakeClaude
from ._render import Output, money, plain_table, rich_table, seconds, short


@attrs.frozen
class TurnRecord:
    stop_reason: str
    tokens: int
    session_id: str | None
    seconds: float


@attrs.define
class Row:
    """One agent on the board."""

    name: str
    role: str
    task: str | None = None
    activity: str = ""
    turns: list[TurnRecord] = attrs.field(factory=list)
    restarts: int = 0

    @property
    def tokens(self) -> int:
        return sum(t.tokens for t in self.turns)


@attrs.define(eq=False)
class Board:
    """What the demo shows: a row per agent and a log, printed as it happens off a
    terminal and redrawn live on one."""

    out: Output
    # Redrawn live (on a terminal) or printed line by line (elsewhere, and with --debug,
    # where the runtime's log goes between the lines).
    live: bool
    rows: dict[str, Row] = attrs.field(factory=dict)
    log: list[tuple[float, str, str]] = attrs.field(factory=list)
    fakes: dict[str, FakeClaude] = attrs.field(factory=dict)
    started: float = attrs.field(factory=time.monotonic)

    def add(self, name: str, role: str) -> None:
        self.rows[name] = Row(name, role)

    def note(self, text: str, style: str = "") -> None:
        at = time.monotonic() - self.started
        self.log.append((at, text, style))
        if not self.live and not self.out.json_mode:
            self.out.say(f"[{at:5.1f}s] {text}")

    def turn_started(self, name: str, prompt: str) -> None:
        row = self.rows[name]
        row.task, row.activity = prompt, "thinking"
        if name in self.fakes:
            self.fakes[name].prepare(prompt)
        self.note(f"{name} took {short(prompt, 60)!r}")

    def stream_event(self, name: str, event: Event) -> None:
        if isinstance(event, ToolUseEvent):
            self.rows[name].activity = f"⚙ {event.name}"
        elif isinstance(event, TextEvent):
            self.rows[name].activity = "answering"

    def turn_ended(self, name: str, outcome: Response | TurnFailed) -> None:
        row = self.rows[name]
        if isinstance(outcome, Response):
            usage, reason, session = outcome.usage, "complete", outcome.session_id
            took = outcome.duration
        else:
            usage, reason, session = outcome.usage, outcome.reason.value, outcome.session_id
            took = 0.0
        tokens = 0 if usage is None else usage.input_tokens + usage.output_tokens
        row.turns.append(TurnRecord(reason, tokens, session, took))
        task = short(row.task or "", 40)
        row.task, row.activity = None, ""
        if isinstance(outcome, Response):
            answer = short(outcome.final_message, 50)
            self.note(
                f"{name} finished {task!r}: {answer!r} ({seconds(took)}, {tokens} tokens)", "green"
            )
        elif outcome.reason is StopReason.TOTAL_TIMEOUT:
            self.note(
                f"{name}: the watchdog fired (total_timeout); the CLI was stopped, "
                f"its session {short(session or '-', 13)} kept",
                "yellow",
            )
        else:
            self.note(f"{name}: the turn failed with {reason}: {short(outcome.message, 70)}", "red")


async def _live_view(board: Board, rt: Runtime) -> Any:
    from rich.console import Group
    from rich.text import Text

    rows = []
    for row in board.rows.values():
        try:
            status = await rt.status(row.name)
        except AgentNotFound:
            state, queued, elapsed, restarts = "down", "-", "", str(row.restarts)
        else:
            current = status.current
            if current is None:
                state = status.state
            elif current.waiting_for_process:
                state = "waiting for a slot"
            else:
                state = row.activity or "working"
            queued, restarts = str(status.queued), str(status.restarts)
            elapsed = seconds(current.elapsed) if current else ""
        last = row.turns[-1].stop_reason if row.turns else "-"
        rows.append(
            [
                row.name,
                state,
                queued,
                short(row.task or "", 44),
                elapsed,
                str(len(row.turns)),
                str(row.tokens),
                last,
                restarts,
            ]
        )
    headers = ["AGENT", "STATE", "QUEUED", "WORKING ON", "TIME", "TURNS", "TOKENS", "LAST STOP"]
    table = rich_table([*headers, "RESTARTS"], rows)
    log = Text()
    for at, text, style in board.log[-10:]:
        log.append(f"{at:5.1f}s ", style="dim")
        log.append(text + "\n", style=style)
    return Group(table, log)


def _summary_rows(board: Board, records: Mapping[str, SessionRecord]) -> list[dict[str, Any]]:
    rows = []
    for row in board.rows.values():
        record = records.get(row.name)
        reasons = collections.Counter(t.stop_reason for t in row.turns)
        rows.append(
            {
                "name": row.name,
                "role": row.role,
                "turns": len(row.turns),
                "stop_reasons": dict(reasons),
                "tokens": row.tokens,
                "cost_usd": None if record is None else record.cost_usd,
                "session_id": None if record is None else record.session_id,
                "restarts": row.restarts,
            }
        )
    return rows


def _print_summary(
    out: Output,
    summary: list[dict[str, Any]],
    checks: Mapping[str, bool],
    why: Mapping[str, str],
    took: float,
) -> None:
    rows = [
        [
            a["name"],
            a["role"],
            str(a["turns"]),
            ", ".join(f"{r} ({n})" if n > 1 else r for r, n in a["stop_reasons"].items()) or "-",
            str(a["tokens"]),
            money(a["cost_usd"]),
            a["session_id"] or "-",
            str(a["restarts"]),
        ]
        for a in summary
    ]
    headers = ["AGENT", "ROLE", "TURNS", "STOP REASONS", "TOKENS", "COST", "SESSION", "RESTARTS"]
    out.say()
    if out.fancy:
        out.console.print(rich_table(headers, rows, title=f"Summary ({seconds(took)})"))
    else:
        out.say(f"Summary ({seconds(took)})")
        out.say(plain_table(headers, rows))
    out.say()
    for check, passed in checks.items():
        line = (
            f"  ✓ {check}"
            if passed
            else f"  ✗ {check}" + (f": {why[check]}" if check in why else "")
        )
        out.say(line, style="green" if passed else "bold red")
