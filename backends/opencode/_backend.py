"""`OpencodeBackend`: the opencode CLI described as pure functions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentrt.backend import BackendInfo, Capabilities, Command, SessionTotals

from ._command import build_command, build_version_command
from ._info import info
from ._options import OpencodeOptions, parse_options
from ._translate import OpencodeTranslator

# The opencode release whose flags, config and JSON events this backend was written and
# checked against. The real-CLI test tier pins its own copy in
# tests/realcli/OPENCODE_VERSION; a test keeps the two equal.
WRITTEN_FOR_VERSION = "1.18.33"

# Why keep_alive and approve_tool are refused (start_agent says so, InvalidOptions).
NOT_LIVE = (
    "this backend runs one `opencode run` process per turn; opencode's long-lived mode "
    "(opencode serve) is not driven yet (docs/opencode.md)"
)


class OpencodeBackend:
    """Drives ``opencode run --format json`` (``--session <id>`` for later turns), the
    prompt on stdin; registered as ``backend="opencode"``.

    Permissions: opencode's own (its config's ``permission``) decide; a tool whose
    permission is "ask" is refused, since nobody can answer a headless run, unless
    ``auto`` is set (then it runs). The ``config`` option carries providers (a base URL,
    the key's variable) and permissions to the CLI in a 0600 file."""

    name = "opencode"
    written_for_version = WRITTEN_FOR_VERSION

    def parse_options(self, raw: Mapping[str, Any]) -> OpencodeOptions:
        """Validate options up front; raise `agentrt.InvalidOptions` naming key and value."""
        return parse_options(raw)

    def command(self, options: OpencodeOptions, prompt: str, *, session_id: str | None) -> Command:
        """The command for one turn; ``--session session_id`` when a session id is given."""
        return build_command(options, prompt, session_id=session_id)

    def translator(
        self, options: OpencodeOptions, *, baseline: SessionTotals | None = None
    ) -> OpencodeTranslator:
        """A fresh translator for one turn. Usage is per model call, so the turn's own
        (``baseline`` is not needed)."""
        return OpencodeTranslator(model=options.model)

    def info(self) -> BackendInfo:
        """How to install and log in the CLI, the version this backend was written for,
        the options of a quiet turn (``agentrt doctor``, ``agentrt demo``)."""
        return info(WRITTEN_FOR_VERSION)

    def capabilities(self, options: OpencodeOptions) -> Capabilities:
        """One process per turn for any options: ``keep_alive`` and ``approve_tool`` are
        refused at ``start_agent``, naming why (`NOT_LIVE`). The stream does not report
        opencode's version, so the runtime asks ``opencode --version``."""
        return Capabilities(not_live=NOT_LIVE, version_probe=True)

    def version_command(self, options: OpencodeOptions) -> Command:
        """``opencode --version`` (for doctor and the flag canary)."""
        return build_version_command(options)
