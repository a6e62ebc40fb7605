"""`OpencodeBackend`: the opencode CLI described as pure functions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentrt.backend import (
    BackendInfo,
    Capabilities,
    Command,
    HookKind,
    LiveProtocol,
    SessionTotals,
)

from ._command import build_command, build_version_command
from ._info import info
from ._options import OpencodeOptions, parse_options
from ._translate import OpencodeTranslator

# The opencode release whose flags, config and JSON events this backend was written and
# checked against. The real-CLI test tier pins its own copy in
# tests/realcli/OPENCODE_VERSION; a test keeps the two equal.
WRITTEN_FOR_VERSION = "1.18.33"

# Per turn `opencode run`; live (keep_alive, approve_tool) `opencode acp`, which asks
# before a tool whose permission is "ask". Neither reports opencode's version in a turn's
# own frames before its end, so it is asked.
_LIVE = Capabilities(live=True, approvals=True, version_probe=True)
# Why keep_alive and approve_tool are refused with extra_args, or without the acp extra
# (start_agent says so, InvalidOptions).
NOT_LIVE_EXTRA_ARGS = (
    "extra_args are `opencode run` flags, and keep_alive and approve_tool run `opencode acp`; "
    "leave extra_args out, or run one process per turn"
)
NOT_LIVE_NO_ACP = (
    "keep_alive and approve_tool run `opencode acp`, spoken through the acp extra: "
    "pip install 'agentrt[acp]'"
)


class OpencodeBackend:
    """Drives ``opencode run --format json`` (``--session <id>`` for later turns), the
    prompt on stdin, or one ``opencode acp`` process for many turns (``keep_alive``) or
    with ``approve_tool``; registered as ``backend="opencode"``.

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
        """One ``opencode run`` per turn; live (``keep_alive``, ``approve_tool``) one
        ``opencode acp`` process, unless ``extra_args`` are given (``run``'s flags) or the
        ``acp`` extra is not installed: then those are refused at ``start_agent``, naming
        why. The runtime asks ``opencode --version``: ``run`` does not report it."""
        if options.extra_args:
            return Capabilities(not_live=NOT_LIVE_EXTRA_ARGS, version_probe=True)
        try:
            # The live protocol and the ACP schema (the acp extra) are imported here, at
            # start_agent, not at the first live turn: the import takes seconds on a loaded
            # machine, a stall of the event loop long enough to lose a running agent's lease.
            from . import _live  # noqa: F401
        except ImportError:
            return Capabilities(not_live=NOT_LIVE_NO_ACP, version_probe=True)
        return _LIVE

    def live(
        self,
        options: OpencodeOptions,
        *,
        session_id: str | None,
        approvals: bool = False,
        hooks: frozenset[HookKind] = frozenset(),
    ) -> LiveProtocol:
        """An ``opencode acp`` process for the session ``session_id`` (None: a new one),
        spoken to as an ACP agent (`agentrt.backends.acp.AcpLive`); ``hooks`` are never
        asked for (`capabilities` declares none)."""
        # Imported here: the ACP schema is the acp extra's (`capabilities` imported it).
        from ._live import live

        return live(options, session_id=session_id, approvals=approvals)

    def version_command(self, options: OpencodeOptions) -> Command:
        """``opencode --version`` (for doctor and the flag canary)."""
        return build_version_command(options)
