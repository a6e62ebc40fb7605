"""Where Qwen Code keeps its home, login and transcripts (for portable sessions)."""

from __future__ import annotations

import os

import attrs

from ._command import cli_env
from ._options import QwenOptions


def cli_home(options: QwenOptions) -> str:
    """``QWEN_HOME`` as the child gets it, else ``$HOME/.qwen``."""
    env = cli_env(options)
    configured = env.get("QWEN_HOME")
    if configured:
        return os.path.abspath(configured)
    return os.path.join(env.get("HOME") or os.path.expanduser("~"), ".qwen")


def with_cli_home(options: QwenOptions, home: str) -> QwenOptions:
    # A named home would change the default env policy: keep the one in force.
    env = {k: v for k, v in options.env.items() if k != "QWEN_HOME"}
    return attrs.evolve(options, qwen_home=home, env=env, env_policy=options.effective_env_policy)


def login_files(options: QwenOptions) -> dict[str, str]:
    """The user's settings (``settings.json``: model providers, the selected auth), its
    ``.env`` (API keys) and the Qwen OAuth login (``oauth_creds.json``) of the home these
    options use."""
    home = cli_home(options)
    return {
        name: os.path.join(home, name) for name in ("settings.json", ".env", "oauth_creds.json")
    }


def transcript_pattern(session_id: str) -> str:
    # projects/<the cwd, each non-alphanumeric as "-">/chats/<session id>.jsonl
    return f"projects/*/chats/{session_id}.jsonl"
