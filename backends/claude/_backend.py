"""`ClaudeBackend`: the Claude Code CLI described as pure functions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from agentrt.backend import (
    AppToolServer,
    BackendInfo,
    Capabilities,
    ChannelCall,
    Command,
    CronDeleted,
    CronRequested,
    Event,
    HookKind,
    SessionTotals,
    WakeupRequested,
    bypass_proxy,
)

from ._command import build_command, build_version_command
from ._crons import crons
from ._home import cli_home, login_files, transcript_path, transcript_pattern, with_cli_home
from ._info import info
from ._live import ClaudeLive
from ._options import ClaudeOptions, parse_options
from ._translate import ClaudeTranslator, claude_translator
from ._wakeups import wakeups

# The Claude Code release whose flags and stream-json this backend was written and checked
# against (``agentrt doctor`` compares the installed CLI with it). The real-CLI test tier
# pins its own copy in tests/realcli/CLAUDE_VERSION; a test keeps the two equal.
WRITTEN_FOR_VERSION = "2.1.332"

# The runtime's requests a warm claude takes (Runtime.set_model, ..., Runtime.steer).
_CALLS: frozenset[ChannelCall] = frozenset(
    ("set_model", "set_permission_mode", "context_usage", "stop_task", "steer")
)
# system/init lists each configured MCP server's status (measured on 2.1.332: a server
# whose command exits at once, is missing, or whose URL refuses is "failed").
_LIVE = Capabilities(live=True, approvals=True, hooks=True, calls=_CALLS, mcp_status=True)


class ClaudeBackend:
    """Drives ``claude -p --output-format stream-json``; registered as ``backend="claude"``."""

    name = "claude"
    written_for_version = WRITTEN_FOR_VERSION

    def parse_options(self, raw: Mapping[str, Any]) -> ClaudeOptions:
        """Validate options up front; raise `agentrt.InvalidOptions` naming key and value."""
        return parse_options(raw)

    def command(self, options: ClaudeOptions, prompt: str, *, session_id: str | None) -> Command:
        """The command for one turn; ``--resume session_id`` when a session id is given."""
        return build_command(options, prompt, session_id=session_id)

    def translator(
        self, options: ClaudeOptions, *, baseline: SessionTotals | None = None
    ) -> ClaudeTranslator:
        """A fresh translator for one turn. A result's ``total_cost_usd`` and ``modelUsage``
        are the session's running totals: the turn reports them minus ``baseline``'s."""
        return claude_translator(baseline)

    def capabilities(self, options: ClaudeOptions) -> Capabilities:
        """Live with any options: ``--input-format stream-json``, with the control
        protocol's approvals (``--permission-prompt-tool stdio``) and hooks."""
        return _LIVE

    def live(
        self,
        options: ClaudeOptions,
        *,
        session_id: str | None,
        approvals: bool = False,
        hooks: frozenset[HookKind] = frozenset(),
    ) -> ClaudeLive:
        """A live process (warm sessions, approvals, hooks): stream-json in and out."""
        return ClaudeLive(options, session_id=session_id, approvals=approvals, hooks=hooks)

    def info(self) -> BackendInfo:
        """How to install and log in the CLI, the version this backend was written for,
        the options of a quiet turn (``agentrt doctor``, ``agentrt demo``)."""
        return info(WRITTEN_FOR_VERSION)

    def version_command(self, options: ClaudeOptions) -> Command:
        """``claude --version`` (for doctor and the flag canary)."""
        return build_version_command(options)

    def cli_home(self, options: ClaudeOptions) -> str:
        """``CLAUDE_CONFIG_DIR`` as the child gets it, else ``$HOME/.claude``."""
        return cli_home(options)

    def with_cli_home(self, options: ClaudeOptions, home: str) -> ClaudeOptions:
        """The options with ``home`` as the CLI's config dir."""
        return with_cli_home(options, home)

    def login_files(self, options: ClaudeOptions) -> dict[str, str]:
        """``.credentials.json`` and ``.claude.json`` where these options' CLI reads them."""
        return login_files(options)

    def transcript_pattern(self, session_id: str) -> str:
        """``projects/*/<session id>.jsonl``."""
        return transcript_pattern(session_id)

    def with_fork(self, options: ClaudeOptions) -> ClaudeOptions:
        """``--fork-session`` beside the ``--resume``."""
        return attrs.evolve(options, fork_session=True)

    def transcript_path(self, options: ClaudeOptions, session_id: str, cwd: str) -> str:
        """``<CLI home>/projects/<cwd, each non-alphanumeric as "-">/<session id>.jsonl``."""
        return transcript_path(options, session_id, cwd)

    def with_run_budget(self, options: ClaudeOptions, usd: float) -> ClaudeOptions:
        """``--max-budget-usd``: the lower of ``usd`` and the options' own."""
        own = options.max_budget_usd
        return attrs.evolve(options, max_budget_usd=usd if own is None else min(own, usd))

    def wakeups(self, events: Sequence[Event]) -> Sequence[WakeupRequested]:
        """The turn's accepted ``ScheduleWakeup`` calls."""
        return wakeups(events)

    def crons(self, events: Sequence[Event]) -> Sequence[CronRequested | CronDeleted]:
        """The turn's ``CronCreate`` calls the CLI accepted and its ``CronDelete`` calls."""
        return crons(events)

    def with_app_tools(self, options: ClaudeOptions, server: AppToolServer) -> ClaudeOptions:
        """One more ``--mcp-config`` (inline, so it goes by a 0600 file: it holds the token)
        naming the HTTP server with its ``Authorization`` header, its tools allowed
        (``mcp__<name>``: in print mode a tool nobody allowed is denied), and its host in
        ``NO_PROXY`` (the CLI would send even a loopback request, token and all, to a
        proxy)."""
        config = {
            "mcpServers": {
                server.name: {
                    "type": "http",
                    "url": server.url,
                    "headers": {"Authorization": f"Bearer {server.token}"},
                }
            }
        }
        return attrs.evolve(
            options,
            mcp_config=(*options.mcp_config, config),
            allowed_tools=(*options.allowed_tools, f"mcp__{server.name}"),
            env={**options.env, **bypass_proxy(server.host, options.env)},
        )
