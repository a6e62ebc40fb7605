"""The argv, environment, stdin and settings file of one headless ``gemini`` turn.

``gemini -p "" --output-format stream-json --approval-mode <mode> [--resume <id>]
[options]``, the prompt on stdin (``-p`` appends its value to stdin's, and an empty one
adds nothing). Checked against Gemini CLI 0.61.0.
"""

from __future__ import annotations

import json
import os
import signal
import uuid
from collections.abc import Mapping
from typing import Any

from agentrt.backend import Command, ConfigFile, InvalidOptions, SecretFile, child_env

from ._options import GeminiOptions

_PREFIX = ("-p", "", "--output-format", "stream-json")

# Set for every child. NO_RELAUNCH: without it the CLI starts a second node process of
# itself (for a larger heap), and the first one ignores SIGINT, SIGTERM and SIGHUP, so an
# interrupt would reach only the parent. TRUST_WORKSPACE: headless, an untrusted folder is
# refused (exit 55), and the agent's cwd is where its owner sent it.
FIXED_ENV = {"GEMINI_CLI_NO_RELAUNCH": "true", "GEMINI_CLI_TRUST_WORKSPACE": "true"}


def build_command(
    options: GeminiOptions,
    prompt: str,
    *,
    session_id: str | None,
    environ: Mapping[str, str] | None = None,
) -> Command:
    """The command for one turn; ``--resume <session_id>`` when a session id is given.

    Raises `agentrt.InvalidOptions` for a session id that is not a UUID (the CLI would
    read ``latest`` or a number as an index into its list of sessions)."""
    o = options
    argv: list[str | SecretFile] = [o.binary, *_PREFIX, "--approval-mode", approval_mode(o)]
    if session_id is not None:
        try:
            uuid.UUID(session_id)
        except ValueError:
            raise InvalidOptions(
                "session_id", session_id, "not a Gemini CLI session id (a UUID)"
            ) from None
        argv += ["--resume", session_id]
    if o.model:
        # A pinned model also spares the CLI's routing call (an unpinned "auto" model asks
        # a small model which model should answer, before every turn).
        argv += ["--model", o.model]
    if o.include_directories:
        argv += ["--include-directories", ",".join(o.include_directories)]
    argv += o.extra_args
    return Command(
        argv=tuple(argv),
        env=gemini_env(o, environ),
        cwd=o.cwd,
        stdin=prompt.encode(),
        # SIGINT ends a headless turn at once (exit 130); the session file keeps what the
        # turn said so far, so the next turn resumes it.
        interrupt_signal=signal.SIGINT,
        config_files=settings_files(o),
    )


def build_version_command(
    options: GeminiOptions, *, environ: Mapping[str, str] | None = None
) -> Command:
    """``gemini --version``, which prints ``X.Y.Z``."""
    return Command(argv=(options.binary, "--version"), env=gemini_env(options, environ))


def approval_mode(o: GeminiOptions) -> str:
    """The ``--approval-mode`` of every turn: the option, else ``default``; always given,
    so that a ``general.defaultApprovalMode`` in the user's settings changes nothing."""
    return o.approval_mode or "default"


def gemini_env(o: GeminiOptions, environ: Mapping[str, str] | None) -> dict[str, str]:
    """The child environment: the env policy's, GEMINI_CLI_HOME, the fixed variables, then
    the explicit ``env``."""
    explicit = {"GEMINI_CLI_HOME": o.gemini_home} if o.gemini_home else {}
    return child_env(o.effective_env_policy, {**explicit, **FIXED_ENV, **o.env}, environ=environ)


def settings(o: GeminiOptions) -> dict[str, Any]:
    """The settings.json of a CLI home the backend owns: the API key auth selected (a base
    URL alone selects a gateway auth that headless mode refuses, exit 41), usage
    statistics and update checks off (with statistics on, the CLI reports to
    play.googleapis.com), ``max_attempts``; then the ``settings`` option, merged over."""
    general: dict[str, Any] = {"enableAutoUpdate": False, "enableAutoUpdateNotification": False}
    if o.max_attempts is not None:
        general["maxAttempts"] = o.max_attempts
    ours = {
        "security": {"auth": {"selectedType": o.auth_type}},
        "privacy": {"usageStatisticsEnabled": False},
        "general": general,
    }
    return _merged(ours, o.settings)


def settings_files(o: GeminiOptions) -> tuple[ConfigFile, ...]:
    """The settings file of a named CLI home; none for the user's own."""
    if o.gemini_home is None:
        return ()
    path = os.path.join(o.gemini_home, ".gemini", "settings.json")
    content = json.dumps(settings(o), indent=2, sort_keys=True).encode() + b"\n"
    return (ConfigFile(path, content),)


def _merged(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in over.items():
        below = merged.get(key)
        if isinstance(below, Mapping) and isinstance(value, Mapping):
            merged[key] = _merged(below, value)
        else:
            merged[key] = value
    return merged
