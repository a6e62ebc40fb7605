"""Where the Claude CLI keeps its home, login and transcripts (for portable sessions)."""

from __future__ import annotations

import os
import re

import attrs

from ._command import cli_env
from ._options import ClaudeOptions


def cli_home(options: ClaudeOptions) -> str:
    """``CLAUDE_CONFIG_DIR`` as the child gets it, else ``$HOME/.claude``."""
    env = cli_env(options)
    configured = env.get("CLAUDE_CONFIG_DIR")
    if configured:
        return os.path.abspath(configured)
    return os.path.join(env.get("HOME") or os.path.expanduser("~"), ".claude")


def with_cli_home(options: ClaudeOptions, home: str) -> ClaudeOptions:
    # A named config dir would change the default env policy: keep the one in force.
    return attrs.evolve(
        options,
        config_dir=home,
        env={**options.env, "CLAUDE_CONFIG_DIR": home},
        env_policy=options.effective_env_policy,
    )


def login_files(options: ClaudeOptions) -> dict[str, str]:
    """The OAuth login (``.credentials.json``, in the config dir) and the global config
    (``.claude.json``: the account, onboarding state; in the config dir when one is named,
    else in HOME), which the CLI reads from the config dir it is given."""
    env = cli_env(options)
    home = cli_home(options)
    config_home = home if env.get("CLAUDE_CONFIG_DIR") else os.path.dirname(home)
    return {
        ".credentials.json": os.path.join(home, ".credentials.json"),
        ".claude.json": os.path.join(config_home, ".claude.json"),
    }


def transcript_path(options: ClaudeOptions, session_id: str, cwd: str) -> str:
    folder = re.sub(r"[^A-Za-z0-9]", "-", cwd)
    return os.path.join(cli_home(options), "projects", folder, f"{session_id}.jsonl")


def transcript_pattern(session_id: str) -> str:
    # projects/<the cwd, each non-alphanumeric as "-">/<session id>.jsonl; the id alone
    # is unique.
    return f"projects/*/{session_id}.jsonl"
