"""`CodexBackend`: OpenAI's codex CLI described as pure functions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from agentrt.backend import (
    AppToolServer,
    BackendInfo,
    Capabilities,
    Command,
    HookKind,
    SessionTotals,
    bypass_proxy,
)

from ._command import build_command, build_version_command
from ._home import cli_home, login_files, transcript_pattern, with_cli_home
from ._info import info
from ._live import CodexLive, exec_only
from ._options import CodexOptions, parse_options
from ._translate import CodexTranslator

# The codex release whose flags and JSONL this backend was written and checked against
# (``agentrt doctor`` compares the installed CLI with it). The real-CLI test tier pins its
# own copy in tests/realcli/CODEX_VERSION; a test keeps the two equal.
WRITTEN_FOR_VERSION = "0.171.0"

# The runtime's requests a warm codex takes: a message for the running turn (turn/steer).
_LIVE = Capabilities(live=True, approvals=True, version_probe=True, calls=frozenset(("steer",)))

# The child's variable that holds the application tools' bearer token (codex reads it by
# ``bearer_token_env_var``; a token in ``-c`` would be on argv).
APP_TOOLS_TOKEN_VAR = "AGENTRT_APP_TOOLS_TOKEN"


class CodexBackend:
    """Drives ``codex exec --json`` (``exec resume`` for later turns), or one live
    ``codex app-server`` per conversation (`live`, where `capabilities` says so);
    registered as ``backend="codex"``.
    ``environ`` stands in for ``os.environ`` (for tests)."""

    name = "codex"
    written_for_version = WRITTEN_FOR_VERSION

    def __init__(self, *, environ: Mapping[str, str] | None = None) -> None:
        self._environ = environ

    def parse_options(self, raw: Mapping[str, Any]) -> CodexOptions:
        """Validate options up front; raise `agentrt.InvalidOptions` naming key and value."""
        return parse_options(raw)

    def command(self, options: CodexOptions, prompt: str, *, session_id: str | None) -> Command:
        """The command for one turn; ``exec resume session_id`` when a session id is given."""
        return build_command(options, prompt, session_id=session_id, environ=self._environ)

    def translator(
        self, options: CodexOptions, *, baseline: SessionTotals | None = None
    ) -> CodexTranslator:
        """A fresh translator for one turn. codex prints the thread's running usage totals;
        the turn reports them minus ``baseline.usage``, what the thread's earlier turns
        reported (see `agentrt.backends.codex._translate`)."""
        usage = None if baseline is None else baseline.usage
        return CodexTranslator(model=options.model, usage_baseline=usage)

    def capabilities(self, options: CodexOptions) -> Capabilities:
        """A live ``codex app-server`` (``keep_alive``, approvals) for any options but
        those only ``codex exec`` takes (``approval="approve-for-me"``, ``profile``,
        ``images``, ``output_schema``, ``extra_args``): such an agent runs one process per
        turn. Codex has no hooks. ``codex exec --json`` prints no version of its own (the
        app-server's thread carries one, exec's ``thread.started`` does not), so the
        runtime asks ``codex --version`` once per executable (``version_probe``)."""
        why = exec_only(options)
        if why is not None:
            return Capabilities(not_live=why, version_probe=True)
        return _LIVE

    def live(
        self,
        options: CodexOptions,
        *,
        session_id: str | None,
        approvals: bool = False,
        hooks: frozenset[HookKind] = frozenset(),
    ) -> CodexLive:
        """A live ``codex app-server`` for the thread ``session_id`` (None: a new thread),
        for options whose `capabilities` say live (``hooks`` is never asked for). See
        `agentrt.backends.codex._live`."""
        why = exec_only(options)
        if why is not None:
            raise ValueError(f"no live codex for these options: {why}")
        return CodexLive(options, session_id=session_id, environ=self._environ, approvals=approvals)

    def info(self) -> BackendInfo:
        """How to install and log in the CLI, the version this backend was written for,
        the options of a quiet turn (``agentrt doctor``, ``agentrt demo``)."""
        return info(WRITTEN_FOR_VERSION)

    def version_command(self, options: CodexOptions) -> Command:
        """``codex --version`` (for doctor and the flag canary)."""
        return build_version_command(options, environ=self._environ)

    def cli_home(self, options: CodexOptions) -> str:
        """``CODEX_HOME`` as the child gets it, else ``$HOME/.codex``."""
        return cli_home(options, self._environ)

    def with_cli_home(self, options: CodexOptions, home: str) -> CodexOptions:
        """The options with ``home`` as the CLI's ``CODEX_HOME``."""
        return with_cli_home(options, home)

    def login_files(self, options: CodexOptions) -> dict[str, str]:
        """``auth.json`` and ``config.toml`` of the CODEX_HOME these options use."""
        return login_files(options, self._environ)

    def transcript_pattern(self, session_id: str) -> str:
        """``sessions/*/*/*/rollout-*-<thread id>.jsonl``."""
        return transcript_pattern(session_id)

    def with_fork(self, options: CodexOptions) -> CodexOptions:
        """``exec fork <thread>`` where a turn would ``exec resume`` it."""
        return attrs.evolve(options, fork_session=True)

    def transcript_path(self, options: CodexOptions, session_id: str, cwd: str) -> None:
        """None: codex finds a thread by its id alone, wherever it runs."""
        return None

    def with_app_tools(self, options: CodexOptions, server: AppToolServer) -> CodexOptions:
        """The server as ``mcp_servers.<name>`` (streamable HTTP) in the ``-c`` overrides,
        its token in the child's environment, its host in ``NO_PROXY``, and its tools
        approved: ``exec`` never asks, so a tool that needs approval would fail."""
        table = f"mcp_servers.{server.name}"
        config = {
            **options.config,
            f"{table}.url": server.url,
            f"{table}.bearer_token_env_var": APP_TOOLS_TOKEN_VAR,
            f"{table}.default_tools_approval_mode": "approve",
        }
        bypass = bypass_proxy(server.host, options.env, environ=self._environ)
        env = {**options.env, **bypass, APP_TOOLS_TOKEN_VAR: server.token}
        return attrs.evolve(options, config=config, env=env)
