"""The turn history as the console shows it: one agent's finished turns from the store
(`TurnHistoryStore`), newest first a page at a time, and the points the charts are drawn
from (an agent's, or the whole fleet's), every text shown redacted."""

from __future__ import annotations

from typing import Any

from .._records import StoredTurn
from .._stores._protocols import TurnHistoryStore
from ._shown import shown

# Entries of one page of an agent's history.
PAGE = 20
# The newest turns a chart is drawn from (an agent's history keeps 1000 by default).
CHART_TURNS = 1000
NO_HISTORY = "the store keeps no turn history"


def _entry(turn: StoredTurn) -> dict[str, Any]:
    return {
        "node": shown(turn.node),
        "started_at": turn.started_at,
        "ended_at": turn.ended_at,
        "duration": turn.duration,
        "outcome": shown(turn.outcome),
        "cost_usd": turn.cost_usd,
        "input_tokens": turn.usage.input_tokens,
        "output_tokens": turn.usage.output_tokens,
        "prompt": None if turn.prompt is None else shown(turn.prompt),
        "answer": None if turn.answer is None else shown(turn.answer),
    }


async def history(store: TurnHistoryStore | None, name: str | None, offset: int) -> dict[str, Any]:
    """The page of ``name``'s history ``offset`` entries from the newest (None: no page,
    the fleet's chart only) and the chart points, oldest first: ``[ended_at, cost_usd,
    duration, outcome]`` of the newest `CHART_TURNS` turns. ``store``: the store's
    `StoreCapabilities.turn_history` (None: it keeps none)."""
    if store is None:
        return {"why": NO_HISTORY, "turns": None, "chart": None}
    data: dict[str, Any] = {"why": None, "turns": None, "offset": offset, "page": PAGE}
    if name is not None:
        turns = await store.turn_history(name, limit=PAGE + 1, offset=offset)
        data["turns"] = [_entry(turn) for turn in turns[:PAGE]]
        data["more"] = len(turns) > PAGE
    newest = await store.turn_history(name, limit=CHART_TURNS)
    data["chart"] = [
        [turn.ended_at, turn.cost_usd or 0.0, turn.duration, shown(turn.outcome)]
        for turn in reversed(newest)
    ]
    return data
