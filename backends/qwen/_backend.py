"""`QwenBackend`: the Qwen Code CLI described as pure functions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from agentrt.backend import (
    AppToolServer,
    Capabilities,
    Command,
    HookKind,
    SessionTotals,
    bypass_proxy,
)

from ._command import build_command, build_version_command
from ._home import cli_home, login_files, transcript_pattern, with_cli_home
from ._live import QwenLive
from ._options import QwenOptions, parse_options
from ._translate import QwenTranslator

# The Qwen Code release whose flags and stream-json this backend was written and checked
# against (``agentrt doctor`` compares the installed CLI with it). The real-CLI test tier
# pins its own copy in tests/realcli/QWEN_VERSION; a test keeps the two equal.
WRITTEN_FOR_VERSION = "0.24.4"

# Live, with approvals (``can_use_tool``); no hooks: Qwen Code sends no ``hook_callback``.
_LIVE = Capabilities(live=True, approvals=True)


class QwenBackend:
    """Drives ``qwen -p --output-format stream-json`` (``--resume`` for later turns), or
    one live ``--input-format stream-json`` process per conversation; registered as
    ``backend="qwen"``."""

    name = "qwen"
    written_for_version = WRITTEN_FOR_VERSION

    def parse_options(self, raw: Mapping[str, Any]) -> QwenOptions:
        """Validate options up front; raise `agentrt.InvalidOptions` naming key and value."""
        return parse_options(raw)

    def command(self, options: QwenOptions, prompt: str, *, session_id: str | None) -> Command:
        """The command for one turn; ``--resume session_id`` when a session id is given."""
        return build_command(options, prompt, session_id=session_id)

    def translator(
        self, options: QwenOptions, *, baseline: SessionTotals | None = None
    ) -> QwenTranslator:
        """A fresh translator for one turn. A result's usage is the session's running
        total: the turn reports it minus ``baseline.usage``."""
        return QwenTranslator(baseline=baseline)

    def capabilities(self, options: QwenOptions) -> Capabilities:
        """Live with any options (``--input-format stream-json``), with approvals; no
        hooks."""
        return _LIVE

    def live(
        self,
        options: QwenOptions,
        *,
        session_id: str | None,
        approvals: bool = False,
        hooks: frozenset[HookKind] = frozenset(),
    ) -> QwenLive:
        """A live process (warm sessions, approvals): stream-json in and out. ``hooks`` is
        never asked for (`capabilities` declares none)."""
        return QwenLive(options, session_id=session_id, approvals=approvals)

    def version_command(self, options: QwenOptions) -> Command:
        """``qwen --version`` (for doctor and the flag canary)."""
        return build_version_command(options)

    def cli_home(self, options: QwenOptions) -> str:
        """``QWEN_HOME`` as the child gets it, else ``$HOME/.qwen``."""
        return cli_home(options)

    def with_cli_home(self, options: QwenOptions, home: str) -> QwenOptions:
        """The options with ``home`` as the CLI's home."""
        return with_cli_home(options, home)

    def login_files(self, options: QwenOptions) -> dict[str, str]:
        """``settings.json``, ``.env`` and ``oauth_creds.json`` where these options' CLI
        reads them."""
        return login_files(options)

    def transcript_pattern(self, session_id: str) -> str:
        """``projects/*/chats/<session id>.jsonl``."""
        return transcript_pattern(session_id)

    def with_app_tools(self, options: QwenOptions, server: AppToolServer) -> QwenOptions:
        """One more MCP server in the settings file (a 0600 file: it holds the token):
        streamable HTTP with its ``Authorization`` header, trusted (its calls need no
        approval), and its host in ``NO_PROXY``."""
        servers = dict(options.settings.get("mcpServers", {}))
        servers[server.name] = {
            "httpUrl": server.url,
            "headers": {"Authorization": f"Bearer {server.token}"},
            "trust": True,
        }
        return attrs.evolve(
            options,
            settings={**options.settings, "mcpServers": servers},
            env={**options.env, **bypass_proxy(server.host, options.env)},
        )
