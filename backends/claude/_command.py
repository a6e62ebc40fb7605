"""The argv, environment and stdin of one ``claude -p`` turn."""

from __future__ import annotations

import json
import signal
from collections.abc import Mapping
from typing import Any

import attrs

from agentrt.backend import Command, InvalidOptions, SecretFile, child_env

from ._options import ClaudeOptions, session_id_error

# Above this many bytes a system prompt goes by file: Linux caps one argv string at 128 KiB
# and argv + environment together at ARG_MAX, so a large prompt would fail the spawn itself.
SYSTEM_PROMPT_ARGV_LIMIT = 32 * 1024

# The fixed protocol: print mode, one JSON object per stdout line (stream-json requires
# --verbose in print mode), the prompt read from stdin; a live process reads stream-json
# messages there instead, one per turn.
_PREFIX = ("-p", "--output-format", "stream-json", "--verbose")
_LIVE_INPUT = ("--input-format", "stream-json")


def build_command(options: ClaudeOptions, prompt: str, *, session_id: str | None) -> Command:
    """The command for one turn. ``session_id`` (the checkpointed id) wins over the
    ``resume`` option; once either exists, the first-turn-only options are left out."""
    return _command(options, session_id, prompt.encode(), live=False)


def build_live_command(
    options: ClaudeOptions, *, session_id: str | None, approvals: bool = False
) -> Command:
    """The command of a live process (warm sessions): as `build_command`'s, reading its
    turns' messages and control requests as stream-json on stdin; with ``approvals`` the
    CLI asks over that channel before it runs a tool its settings do not allow."""
    command = _command(options, session_id, b"", live=True)
    if not approvals:
        return command
    return attrs.evolve(command, argv=(*command.argv, "--permission-prompt-tool", "stdio"))


def _command(o: ClaudeOptions, session_id: str | None, stdin: bytes, *, live: bool) -> Command:
    resume = session_id if session_id is not None else o.resume
    if session_id is not None and (why := session_id_error(session_id)):
        raise InvalidOptions("session_id", session_id, why)
    argv: list[str | SecretFile] = [o.binary, *_PREFIX]
    if live:
        argv += _LIVE_INPUT
    if o.include_partial_messages:
        argv.append("--include-partial-messages")
    if resume is not None:
        argv += ["--resume", resume]
        if o.fork_session:
            argv.append("--fork-session")
    else:
        if o.session_id is not None:
            argv += ["--session-id", o.session_id]
        if o.continue_:
            argv.append("--continue")
    _value(argv, "--model", o.model)
    _value(argv, "--fallback-model", o.fallback_model)
    _prompt(argv, "--system-prompt", o.system_prompt, "system-prompt.txt")
    _value(argv, "--system-prompt-file", o.system_prompt_file)
    _prompt(argv, "--append-system-prompt", o.append_system_prompt, "append-system-prompt.txt")
    _value(argv, "--effort", o.effort)
    _value(argv, "--max-turns", None if o.max_turns is None else str(o.max_turns))
    _value(argv, "--max-budget-usd", None if o.max_budget_usd is None else repr(o.max_budget_usd))
    _value(argv, "--json-schema", o.json_schema)
    _value(argv, "--agent", o.agent)
    if o.tools is not None:
        # An empty value is the CLI's spelling of "no built-in tools".
        argv += ["--tools", ",".join(o.tools)]
    if o.allowed_tools:
        argv += ["--allowedTools", ",".join(o.allowed_tools)]
    if o.disallowed_tools:
        argv += ["--disallowedTools", ",".join(o.disallowed_tools)]
    _value(argv, "--permission-mode", o.permission_mode)
    if o.dangerously_skip_permissions:
        argv.append("--dangerously-skip-permissions")
    for directory in o.add_dir:
        argv += ["--add-dir", directory]
    for i, config in enumerate(o.mcp_config):
        argv += ["--mcp-config", _path_or_secret(config, f"mcp-config-{i}.json")]
    if o.strict_mcp_config or o.hermetic is not None:
        argv.append("--strict-mcp-config")
    if o.settings is not None:
        argv += ["--settings", _path_or_secret(o.settings, "settings.json")]
    sources = o.setting_sources
    if sources is None and o.hermetic is not None:
        # "full" drops user, project and local settings; "project" keeps the user's own.
        sources = () if o.hermetic == "full" else ("user",)
    if sources is not None:
        argv += ["--setting-sources", ",".join(sources)]
    if o.hermetic is not None:
        argv.append("--exclude-dynamic-system-prompt-sections")
    argv += o.extra_args
    return Command(
        argv=tuple(argv),
        env=cli_env(o),
        cwd=o.cwd,
        stdin=stdin,
        # Claude Code ends a turn cleanly on SIGINT: exit 0, a final result, transcript saved.
        interrupt_signal=signal.SIGINT,
    )


def build_version_command(options: ClaudeOptions) -> Command:
    """``claude --version``, with the same binary, environment and cwd as a turn."""
    return Command(argv=(options.binary, "--version"), env=cli_env(options), cwd=options.cwd)


# Claude Code 2.1.332 reads this variable (from the environment or its settings' ``env``
# block) and then skips its background updates; ``claude update`` still works.
AUTO_UPDATE_OFF = {"DISABLE_AUTOUPDATER": "1"}


def cli_env(o: ClaudeOptions) -> dict[str, str]:
    """The child's whole environment: auto-update off unless ``auto_update`` (an explicit
    ``env`` value wins)."""
    explicit = {} if o.auto_update else dict(AUTO_UPDATE_OFF)
    explicit.update(o.env)
    if o.config_dir is not None:
        explicit.setdefault("CLAUDE_CONFIG_DIR", o.config_dir)
    return child_env(o.effective_env_policy, explicit)


def _value(argv: list[str | SecretFile], flag: str, value: str | None) -> None:
    if value is not None:
        argv += [flag, value]


def _prompt(argv: list[str | SecretFile], flag: str, text: str | None, name: str) -> None:
    if text is None:
        return
    data = text.encode()
    if len(data) > SYSTEM_PROMPT_ARGV_LIMIT:
        argv += [f"{flag}-file", SecretFile(name, data)]
    else:
        argv += [flag, text]


def _path_or_secret(value: str | Mapping[str, Any], name: str) -> str | SecretFile:
    if isinstance(value, str):
        return value
    return SecretFile(name, json.dumps(value, separators=(",", ":")).encode())
