"""Claude Code's stream-json, translated by agentrt's shared `StreamJsonTranslator` (its
frame table is there): what Claude Code says in its own way is its `StreamJsonDialect`.

Claude Code's own part of a result's figures: ``usage`` is the turn's own (its calls
summed) for every subtype but one. A turn its ``--max-budget-usd`` ended
(``error_max_budget_usd``) reports ``usage`` all zeros, or a single call's, while
``modelUsage`` holds the counts (2.1.332): per model, every call of the session, a running
total across ``--resume`` and the turns of a warm process, as ``total_cost_usd`` is. Such a
turn's usage is ``modelUsage`` summed, less what the session reported before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentrt.backend import SessionTotals, StreamJsonDialect, StreamJsonTranslator, Usage

from ._failures import (
    RETRYABLE,
    classify,
    classify_result,
    is_fatal_retry,
    lost_session_id,
    resets_at,
    status_message,
)
from ._prices import call_price

# modelUsage's per-model fields, as Usage names them.
_MODEL_USAGE_FIELDS = (
    ("inputTokens", "input_tokens"),
    ("outputTokens", "output_tokens"),
    ("cacheCreationInputTokens", "cache_creation_input_tokens"),
    ("cacheReadInputTokens", "cache_read_input_tokens"),
)


def model_usage(result: Mapping[str, Any]) -> Usage | None:
    """For a result whose ``usage`` does not count the turn (``error_max_budget_usd``): its
    ``modelUsage`` summed over its models, the session's running usage. None for any other
    result, or where ``modelUsage`` is missing or empty."""
    if result.get("subtype") != "error_max_budget_usd":
        return None
    models = result.get("modelUsage")
    if not isinstance(models, Mapping) or not models:
        return None
    sums = dict.fromkeys((name for _, name in _MODEL_USAGE_FIELDS), 0)
    for counts in models.values():
        if isinstance(counts, Mapping):
            for field, name in _MODEL_USAGE_FIELDS:
                value = counts.get(field)
                if isinstance(value, int) and not isinstance(value, bool):
                    sums[name] += value
    return Usage(**sums)


CLAUDE_DIALECT = StreamJsonDialect(
    version_field="claude_code_version",
    permission_mode_field="permissionMode",
    classify=classify,
    status_message=status_message,
    retryable=RETRYABLE,
    lost_session_id=lost_session_id,
    is_fatal_retry=is_fatal_retry,
    classify_result=classify_result,
    price=call_price,
    running_usage=model_usage,
    resets_at=resets_at,
)


class ClaudeTranslator(StreamJsonTranslator):
    """Translates the frames of one Claude Code turn. Make a fresh one per turn.
    ``cost_baseline`` and ``usage_baseline``: what the session's earlier turns reported,
    subtracted from a result's running totals (``total_cost_usd``, ``modelUsage``)."""

    def __init__(self, *, cost_baseline: float = 0.0, usage_baseline: Usage | None = None) -> None:
        super().__init__(CLAUDE_DIALECT, cost_baseline=cost_baseline, usage_baseline=usage_baseline)


def claude_translator(baseline: SessionTotals | None) -> ClaudeTranslator:
    """The translator of a turn on a session whose earlier turns reported ``baseline``."""
    if baseline is None:
        return ClaudeTranslator()
    return ClaudeTranslator(cost_baseline=baseline.cost_usd, usage_baseline=baseline.usage)
