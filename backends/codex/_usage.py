"""codex's running token totals -> the `Usage` of one turn (both output modes).

codex reports the THREAD's running total, not the turn's (tests/realcli/CODEX.md): the sum
of every model call since the thread began, across processes. A turn reports the totals
minus ``baseline``, what the runtime has already reported for the thread (see
`agentrt.backend.Backend.translator`), each count floored at 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentrt.backend import Usage

# The count names of ``codex exec --json`` and of ``codex app-server``, in the order
# input (cached included), cached input, cache writes, output (reasoning included).
EXEC_KEYS = ("input_tokens", "cached_input_tokens", "cache_write_input_tokens", "output_tokens")
APP_SERVER_KEYS = ("inputTokens", "cachedInputTokens", "cacheWriteInputTokens", "outputTokens")


def totals(raw: Any, keys: tuple[str, str, str, str]) -> Usage | None:
    """codex's counts mapped onto agentrt's (Anthropic-shaped) `Usage`: input without its
    cached part, cached input as cache reads; None when ``raw`` is not a mapping."""
    if not isinstance(raw, Mapping):
        return None

    def count(name: str) -> int:
        value = raw.get(name)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    input_key, cached_key, write_key, output_key = keys
    cached = count(cached_key)
    return Usage(
        input_tokens=max(count(input_key) - cached, 0),
        output_tokens=count(output_key),
        cache_creation_input_tokens=count(write_key),
        cache_read_input_tokens=cached,
    )


def since(running: Usage, baseline: Usage | None) -> Usage:
    """The share of ``running`` that ``baseline`` has not reported yet."""
    return running if baseline is None else running.minus(baseline)
