"""The argv, environment and stdin of one headless ``qwen`` turn, and of a live process."""

from __future__ import annotations

import json
import signal

from agentrt.backend import Command, InvalidOptions, SecretFile, child_env

from ._options import QwenOptions, session_id_error
from ._settings import SETTINGS_PATH_VAR, settings_file

# The fixed protocol: one JSON object per stdout line, the prompt read from stdin (which
# makes the run headless; -p, deprecated in 0.24.4, would only append its own value to
# it); a live process reads stream-json messages there instead, one per turn.
_PREFIX = ("--output-format", "stream-json")
_LIVE_INPUT = ("--input-format", "stream-json")

# Documented switches that need no settings file: the CLI would otherwise start itself
# again as a child (the process agentrt tracks would be a launcher), and usage statistics.
_FIXED_ENV = {"QWEN_CODE_NO_RELAUNCH": "1", "QWEN_USAGE_STATISTICS_ENABLED": "false"}


def build_command(options: QwenOptions, prompt: str, *, session_id: str | None) -> Command:
    """The command for one turn. ``session_id`` (the checkpointed id) wins over the
    ``resume`` option; once either exists, ``session_id`` (a first turn's) is left out."""
    return _command(options, session_id, prompt.encode(), live=False)


def build_live_command(options: QwenOptions, *, session_id: str | None) -> Command:
    """The command of a live process: as `build_command`'s, reading its turns' messages
    and control requests as stream-json on stdin."""
    return _command(options, session_id, b"", live=True)


def _command(o: QwenOptions, session_id: str | None, stdin: bytes, *, live: bool) -> Command:
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
    elif o.session_id is not None:
        argv += ["--session-id", o.session_id]
    argv += ["--approval-mode", o.approval_mode]
    _value(argv, "--auth-type", o.auth_type)
    _value(argv, "--model", o.model)
    _value(argv, "--system-prompt", o.system_prompt)
    _value(argv, "--append-system-prompt", o.append_system_prompt)
    if o.max_session_turns is not None:
        argv += ["--max-session-turns", str(o.max_session_turns)]
    if o.allowed_tools:
        argv += ["--allowed-tools", ",".join(o.allowed_tools)]
    if o.exclude_tools:
        argv += ["--exclude-tools", ",".join(o.exclude_tools)]
    if isinstance(o.mcp_config, str):
        argv += ["--mcp-config", o.mcp_config]
    elif o.mcp_config is not None:
        # Inline JSON may hold a token: it goes by a 0600 file, never on argv.
        content = json.dumps(o.mcp_config, separators=(",", ":")).encode()
        argv += ["--mcp-config", SecretFile("mcp-config.json", content)]
    argv += o.extra_args
    return Command(
        argv=tuple(argv),
        env=cli_env(o),
        env_files={SETTINGS_PATH_VAR: settings_file(o.settings)},
        cwd=o.cwd,
        stdin=stdin,
        interrupt_signal=signal.SIGINT,
    )


def build_version_command(options: QwenOptions) -> Command:
    """``qwen --version``, with the same binary, environment and cwd as a turn."""
    return Command(argv=(options.binary, "--version"), env=cli_env(options), cwd=options.cwd)


def cli_env(o: QwenOptions) -> dict[str, str]:
    """The child's whole environment (the options' own variables win over the fixed ones)."""
    explicit = {**_FIXED_ENV, **o.env}
    if o.qwen_home is not None:
        explicit.setdefault("QWEN_HOME", o.qwen_home)
    return child_env(o.effective_env_policy, explicit)


def _value(argv: list[str | SecretFile], flag: str, value: str | None) -> None:
    if value is not None:
        argv += [flag, value]
