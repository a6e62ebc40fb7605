"""`GeminiBackend`: Google's Gemini CLI described as pure functions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentrt.backend import Capabilities, Command, SessionTotals

from ._command import build_command, build_version_command
from ._options import GeminiOptions, parse_options
from ._translate import GeminiTranslator

# The Gemini CLI release whose flags, settings and stream-json this backend was written and
# checked against. The real-CLI test tier pins its own copy in tests/realcli/GEMINI_VERSION;
# a test keeps the two equal.
WRITTEN_FOR_VERSION = "0.61.0"

# Why keep_alive and approve_tool are refused (start_agent says so, InvalidOptions).
NOT_LIVE = (
    "Gemini CLI's live channel is its ACP mode (gemini --acp), whose session/load cannot "
    "reopen a saved session in 0.61.0, so a warm agent could not continue its conversation "
    "after a restart; each turn is one headless gemini process (docs/gemini.md)"
)


class GeminiBackend:
    """Drives headless ``gemini -p "" --output-format stream-json`` (``--resume <id>`` for
    later turns), the prompt on stdin; registered as ``backend="gemini"``.

    Approval mode: every turn runs with ``--approval-mode default`` unless the
    ``approval_mode`` option says otherwise, given on argv so that the user's settings
    cannot change it. Headless, nobody can answer the CLI's questions, so in ``default``
    mode the CLI offers the model only the tools that need no approval (reading, listing,
    searching): its shell and file edits are left out, and nothing runs that the agent's
    owner did not allow. ``auto_edit`` adds the edit tools, ``yolo`` every tool (the shell
    included), ``plan`` keeps it read-only. The CLI asks nothing per tool in any mode, so
    there are no approvals to answer (``approve_tool``) and no live process
    (``keep_alive``): see `capabilities`.

    ``environ`` stands in for ``os.environ`` (for tests)."""

    name = "gemini"
    written_for_version = WRITTEN_FOR_VERSION

    def __init__(self, *, environ: Mapping[str, str] | None = None) -> None:
        self._environ = environ

    def parse_options(self, raw: Mapping[str, Any]) -> GeminiOptions:
        """Validate options up front; raise `agentrt.InvalidOptions` naming key and value."""
        return parse_options(raw)

    def command(self, options: GeminiOptions, prompt: str, *, session_id: str | None) -> Command:
        """The command for one turn; ``--resume session_id`` when a session id is given. With
        a ``gemini_home`` its settings file comes with it (``Command.config_files``)."""
        return build_command(options, prompt, session_id=session_id, environ=self._environ)

    def translator(
        self, options: GeminiOptions, *, baseline: SessionTotals | None = None
    ) -> GeminiTranslator:
        """A fresh translator for one turn. The CLI's stats are the process's own, so the
        turn's (``baseline`` is not needed)."""
        return GeminiTranslator(model=options.model)

    def capabilities(self, options: GeminiOptions) -> Capabilities:
        """One process per turn for any options: ``keep_alive`` and ``approve_tool`` are
        refused at ``start_agent``, naming why (`NOT_LIVE`)."""
        return Capabilities(not_live=NOT_LIVE)

    def version_command(self, options: GeminiOptions) -> Command:
        """``gemini --version`` (for doctor and the flag canary)."""
        return build_version_command(options, environ=self._environ)
