"""Qwen Code's stream-json, translated by agentrt's shared `StreamJsonTranslator` (its
frame table is there): what Qwen Code says in its own way is its `StreamJsonDialect`.

Besides the dialect, one difference in numbers: a result's ``usage`` is the session's
running total (across ``--resume`` and across the turns of a live process), so a turn
reports it minus what the session's earlier turns reported. Qwen Code prints no cost.
"""

from __future__ import annotations

from agentrt.backend import SessionTotals, StreamJsonDialect, StreamJsonTranslator

from ._failures import RETRYABLE, classify, lost_session_id, status_message

QWEN_DIALECT = StreamJsonDialect(
    version_field="qwen_code_version",
    permission_mode_field="permission_mode",
    classify=classify,
    status_message=status_message,
    retryable=RETRYABLE,
    lost_session_id=lost_session_id,
)


class QwenTranslator(StreamJsonTranslator):
    """Translates the frames of one Qwen Code turn. Make a fresh one per turn;
    ``baseline``: what the session's earlier turns reported (None for a new session)."""

    def __init__(self, *, baseline: SessionTotals | None = None) -> None:
        super().__init__(QWEN_DIALECT, usage_baseline=None if baseline is None else baseline.usage)
