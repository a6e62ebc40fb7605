"""`AcpBackend`: any agent that speaks the Agent Client Protocol, as pure functions."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from agentrt.backend import BackendInfo, Capabilities, Command, HookKind, SessionTotals

from ._live import AcpLive, agent_command
from ._options import COMMAND_VAR, AcpOptions, parse_options
from ._translate import AcpTranslator

# An ACP agent takes its prompts over its live channel alone (the session id a prompt names
# comes in answer to session/new), and asks before its tools run (session/request_permission).
_CAPABILITIES = Capabilities(live=True, approvals=True, per_turn=False)


class AcpBackend:
    """Drives an ACP agent (``command``: ``["gemini", "--acp"]``, ``["qwen", "--acp"]``,
    ...); registered as ``backend="acp"``. Every turn runs on a live process of the agent
    (see `agentrt.backends.acp._live`): one per turn, or one for many with ``keep_alive``.
    ``environ`` stands in for ``os.environ`` (for tests)."""

    name = "acp"

    def __init__(self, *, environ: Mapping[str, str] | None = None) -> None:
        self._environ = environ

    def parse_options(self, raw: Mapping[str, Any]) -> AcpOptions:
        """Validate options up front; raise `agentrt.InvalidOptions` naming key and value
        (``command`` when neither the options nor ``$AGENTRT_ACP_COMMAND`` name the agent)."""
        return parse_options(raw, os.environ if self._environ is None else self._environ)

    def capabilities(self, options: AcpOptions) -> Capabilities:
        """Live, with approvals, and no per-turn process (``per_turn=False``): without
        ``keep_alive`` each turn has a live process of its own. No hooks."""
        return _CAPABILITIES

    def live(
        self,
        options: AcpOptions,
        *,
        session_id: str | None,
        approvals: bool = False,
        hooks: frozenset[HookKind] = frozenset(),
    ) -> AcpLive:
        """The agent's process for the session ``session_id`` (None: a new one)."""
        return AcpLive(
            agent_command(options, self._environ),
            session_id=session_id,
            session_cwd=options.session_cwd,
            auth_method=options.auth_method,
            approvals=approvals,
        )

    def command(self, options: AcpOptions, prompt: str, *, session_id: str | None) -> Command:
        """The agent's process. An ACP turn runs only on the live channel (`live`), which
        the runtime always uses for this backend; this is its command, for tools that show
        what a backend runs."""
        return agent_command(options, self._environ)

    def translator(
        self, options: AcpOptions, *, baseline: SessionTotals | None = None
    ) -> AcpTranslator:
        """Never used: a turn's translator comes from its live process (`AcpLive`), which
        knows the session and the prompt it answers."""
        raise NotImplementedError("an ACP turn's translator comes from AcpBackend.live()")

    def version_command(self, options: AcpOptions) -> Command:
        """The agent's binary with ``--version`` (for doctor); an agent also reports its
        version in its ``initialize`` answer, which every turn records."""
        command = agent_command(options, self._environ)
        return Command(argv=(options.command[0], "--version"), env=command.env)

    def info(self) -> BackendInfo:
        """How to name the agent; no version it was written for (any ACP agent)."""
        return BackendInfo(
            install=(
                "install an ACP agent (Gemini CLI: gemini --acp; Qwen Code: qwen --acp) and "
                f"give agents its command (command=[...]) or set {COMMAND_VAR}"
            ),
            login="log the agent in as it documents (its own settings or environment)",
            binary_option="command",
        )
