"""Claude Code's stream-json, translated by agentrt's shared `StreamJsonTranslator` (its
frame table is there): what Claude Code says in its own way is its `StreamJsonDialect`."""

from __future__ import annotations

from agentrt.backend import StreamJsonDialect, StreamJsonTranslator

from ._failures import (
    RETRYABLE,
    classify,
    classify_result,
    is_fatal_retry,
    lost_session_id,
    status_message,
)

CLAUDE_DIALECT = StreamJsonDialect(
    version_field="claude_code_version",
    permission_mode_field="permissionMode",
    classify=classify,
    status_message=status_message,
    retryable=RETRYABLE,
    lost_session_id=lost_session_id,
    is_fatal_retry=is_fatal_retry,
    classify_result=classify_result,
)


class ClaudeTranslator(StreamJsonTranslator):
    """Translates the frames of one Claude Code turn. Make a fresh one per turn."""

    def __init__(self, *, cost_baseline: float = 0.0) -> None:
        super().__init__(CLAUDE_DIALECT, cost_baseline=cost_baseline)
