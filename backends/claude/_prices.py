"""List prices of the Claude models, for an estimate of what a turn cost when the CLI
never reported it (a turn killed before its result) or has not yet (a running turn held
against a budget). The CLI's own figure (``total_cost_usd``) replaces the estimate
wherever it comes.

US dollars per million tokens: input, output, cache writes (5 minutes), cache reads; as
the pinned Claude Code (2.1.332) prices them. A model is found by the longest id in the
table its name starts with (``claude-sonnet-4-5-20250929`` is ``claude-sonnet-4-5``);
one that matches none has no estimate.
"""

from __future__ import annotations

import functools

from agentrt.backend import Usage

_PER_TOKEN = 1e-6

# (input, output, cache write, cache read)
_TIERS: dict[str, tuple[float, float, float, float]] = {
    "haiku_35": (0.8, 4.0, 1.0, 0.08),
    "haiku_45": (1.0, 5.0, 1.25, 0.1),
    "3_15": (3.0, 15.0, 3.75, 0.3),
    "2_10": (2.0, 10.0, 2.5, 0.2),
    "2_10_cache_read_0_10": (2.0, 10.0, 2.5, 0.1),
    "15_75": (15.0, 75.0, 18.75, 1.5),
    "5_25": (5.0, 25.0, 6.25, 0.5),
    "4_20_cache_read_0_20": (4.0, 20.0, 5.0, 0.2),
    "10_50": (10.0, 50.0, 12.5, 1.0),
    "10_50_cache_read_0_25": (10.0, 50.0, 12.5, 0.25),
    "8_40_cache_read_0_20": (8.0, 40.0, 10.0, 0.2),
}

_MODELS: dict[str, str] = {
    "claude-3-5-haiku": "haiku_35",
    "claude-haiku-4-5": "haiku_45",
    "claude-3-5-sonnet": "3_15",
    "claude-3-7-sonnet": "3_15",
    "claude-sonnet-4": "3_15",
    "claude-sonnet-5": "2_10",
    "claude-sonnet-5-5": "2_10_cache_read_0_10",
    "claude-opus-4": "15_75",
    "claude-opus-4-5": "5_25",
    "claude-opus-4-6": "5_25",
    "claude-opus-4-7": "5_25",
    "claude-opus-4-8": "5_25",
    "claude-opus-5": "5_25",
    "claude-opus-5-5": "4_20_cache_read_0_20",
    "claude-fable-5": "10_50",
    "claude-fable-5-1": "10_50_cache_read_0_25",
    "claude-fable-5-2": "8_40_cache_read_0_20",
    "claude-mythos-5": "10_50",
    "claude-mythos-5-1": "10_50_cache_read_0_25",
    "claude-mythos-5-2": "8_40_cache_read_0_20",
}

# Longest first: the first prefix a name starts with is its model.
_BY_LENGTH = sorted(_MODELS, key=len, reverse=True)


def call_price(model: str | None, usage: Usage) -> float | None:
    """What one call of ``model`` with ``usage`` costs at list price (None: not a model
    of the table)."""
    if model is None:
        return None
    tier = _tier(model)
    if tier is None:
        return None
    per_input, per_output, per_write, per_read = tier
    return _PER_TOKEN * (
        usage.input_tokens * per_input
        + usage.output_tokens * per_output
        + usage.cache_creation_input_tokens * per_write
        + usage.cache_read_input_tokens * per_read
    )


# A turn prices each of its model calls as its usage grows (a few hundred a turn, nearly
# all of one model): the scan of the table runs once per model name, not per call.
@functools.lru_cache(maxsize=64)
def _tier(model: str) -> tuple[float, float, float, float] | None:
    known = next((m for m in _BY_LENGTH if model.startswith(m)), None)
    return None if known is None else _TIERS[_MODELS[known]]
