"""What budgets have spent, from the store alone: the rule by which the runtime counts a
budget (the stored totals of every agent name it covers), for the readers that have no
runtime of their own (`agentrt status`, the console) and for the runtime's `Budget`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ._events import Usage
from ._records import SessionRecord, StoredBudget


def counted_tokens(usage: Usage | None) -> int:
    """The tokens a budget counts: input, output and cache writes. Cache reads (the cheap
    re-reading of a cached prefix, which every turn of a long conversation repeats) are
    left out; what they cost is in the USD figure."""
    if usage is None:
        return 0
    return usage.input_tokens + usage.output_tokens + usage.cache_creation_input_tokens


def spent_by_key(
    budgets: Iterable[tuple[str, tuple[StoredBudget, ...]]], records: Mapping[str, SessionRecord]
) -> dict[str, tuple[float, int]]:
    """What each stored budget (by key) has spent, as the runtime counts it: the stored
    totals of every agent name stored with it (USD, counted tokens)."""
    spent: dict[str, tuple[float, int]] = {}
    for name, chain in budgets:
        if (record := records.get(name)) is None:
            continue  # no turn yet: nothing spent
        usd, tokens = record.cost_usd, counted_tokens(record.usage)
        for budget in chain:
            so_far = spent.get(budget.key, (0.0, 0))
            spent[budget.key] = (so_far[0] + usd, so_far[1] + tokens)
    return spent


def budgets_data(
    chain: tuple[StoredBudget, ...], spent: Mapping[str, tuple[float, int]]
) -> list[dict[str, Any]]:
    """Every budget of an agent's stored ``chain`` (`BudgetStore`) as ``agentrt status``
    and the console show it: its limits, what its agents spent (``spent``, from
    `spent_by_key`) and what is left; ``binding`` marks the one that binds."""
    budgets = []
    for budget in chain:
        usd, tokens = spent.get(budget.key, (0.0, 0))
        budgets.append(
            {
                "scope": budget.scope,
                "usd": budget.usd,
                "tokens": budget.tokens,
                # Rounded as the runtime rounds what it gives the CLI: no float sums' noise.
                "spent_usd": round(usd, 10),
                "spent_tokens": tokens,
                "left_usd": None if budget.usd is None else round(max(0.0, budget.usd - usd), 10),
                "left_tokens": None if budget.tokens is None else max(0, budget.tokens - tokens),
                "binding": False,
            }
        )
    if (binding := _binding(budgets)) is not None:
        budgets[binding]["binding"] = True
    return budgets


def _binding(budgets: list[dict[str, Any]]) -> int | None:
    """The budget that binds, as the runtime applies them: the first spent one (the one a
    request is refused for), else the least USD left (the limit a turn gets), else the
    fewest tokens left."""
    for i, budget in enumerate(budgets):
        if budget["left_usd"] == 0 or budget["left_tokens"] == 0:
            return i
    for key in ("left_usd", "left_tokens"):
        left = [(budget[key], i) for i, budget in enumerate(budgets) if budget[key] is not None]
        if left:
            return min(left)[1]
    return None
