"""`PiBackend`: the pi coding agent described as pure functions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentrt.backend import BackendInfo, Capabilities, Command, HookKind, SessionTotals

from ._command import build_command, build_version_command
from ._info import info
from ._live import PiLive
from ._options import PiOptions, parse_options
from ._translate import PiTranslator

# The pi release whose flags and JSON events this backend was written and checked against.
# The real-CLI test tier pins its own copy in tests/realcli/PI_VERSION; a test keeps the
# two equal.
WRITTEN_FOR_VERSION = "0.73.1"

# Live (keep_alive: one `pi --mode rpc` process) and steered in band, without approvals
# (pi asks none before a tool runs) or hooks; the stream does not report pi's version, so
# it is asked.
_LIVE = Capabilities(live=True, version_probe=True, calls=frozenset(("steer",)))


class PiBackend:
    """Drives ``pi --mode json -p`` (``--session <id>`` for later turns), the prompt on
    stdin, or one live ``pi --mode rpc`` process per conversation (``keep_alive``);
    registered as ``backend="pi"``.

    pi has no approvals: every tool it offers runs when the model calls it (its default
    tools read, bash, edit and write). The ``tools`` option narrows what it offers."""

    name = "pi"
    written_for_version = WRITTEN_FOR_VERSION

    def parse_options(self, raw: Mapping[str, Any]) -> PiOptions:
        """Validate options up front; raise `agentrt.InvalidOptions` naming key and value."""
        return parse_options(raw)

    def command(self, options: PiOptions, prompt: str, *, session_id: str | None) -> Command:
        """The command for one turn; ``--session session_id`` when a session id is given.
        With a ``pi_home`` and ``models``, its models.json comes with it
        (``Command.config_files``)."""
        return build_command(options, prompt, session_id=session_id)

    def translator(
        self, options: PiOptions, *, baseline: SessionTotals | None = None
    ) -> PiTranslator:
        """A fresh translator for one turn. Usage is per model call, so the turn's own
        (``baseline`` is not needed)."""
        return PiTranslator(model=options.model)

    def info(self) -> BackendInfo:
        """How to install and log in the CLI, the version this backend was written for,
        the options of a quiet turn (``agentrt doctor``, ``agentrt demo``)."""
        return info(WRITTEN_FOR_VERSION)

    def capabilities(self, options: PiOptions) -> Capabilities:
        """Live with any options (``--mode rpc``), which takes ``steer``; no approvals, no
        hooks. The stream does
        not report pi's version, so the runtime asks ``pi --version``."""
        return _LIVE

    def live(
        self,
        options: PiOptions,
        *,
        session_id: str | None,
        approvals: bool = False,
        hooks: frozenset[HookKind] = frozenset(),
    ) -> PiLive:
        """A live ``pi --mode rpc`` process (warm sessions). ``approvals`` and ``hooks``
        are never asked for (`capabilities` declares neither)."""
        return PiLive(options, session_id=session_id)

    def version_command(self, options: PiOptions) -> Command:
        """``pi --version`` (for doctor and the flag canary)."""
        return build_version_command(options)
