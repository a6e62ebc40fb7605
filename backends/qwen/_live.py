"""`QwenLive`: one live ``qwen -p --input-format stream-json`` process, as pure state.

The control protocol is agentrt's shared `StreamJsonLive` (Claude Code's): ``initialize``,
one ``user`` message per turn, ``interrupt``, ``can_use_tool``. Qwen Code's differences:
it has no ``hook_callback`` (its ``initialize`` answer says ``can_handle_hook_callback:
false``), so the opening names no hooks; it asks ``can_use_tool`` whenever its approval
mode wants an answer, with no flag like Claude's ``--permission-prompt-tool stdio``, so
without ``approve_tool`` each ask is denied here (what headless mode would not run).
"""

from __future__ import annotations

from agentrt.backend import Command, SessionTotals, StreamJsonLive

from ._command import build_live_command
from ._options import QwenOptions
from ._translate import QWEN_DIALECT, QwenTranslator


class QwenLive(StreamJsonLive):
    """The `agentrt.backend.LiveProtocol` of one live Qwen Code process."""

    def __init__(
        self, options: QwenOptions, *, session_id: str | None, approvals: bool = False
    ) -> None:
        super().__init__(QWEN_DIALECT, approvals=approvals)
        self.command: Command = build_live_command(options, session_id=session_id)

    def translator(self, *, baseline: SessionTotals | None = None) -> QwenTranslator:
        return QwenTranslator(baseline=baseline)
