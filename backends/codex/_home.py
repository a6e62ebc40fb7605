"""Where Codex keeps its home, login and rollouts (for portable sessions)."""

from __future__ import annotations

import os
from collections.abc import Mapping

import attrs

from ._command import codex_env
from ._options import CodexOptions


def cli_home(options: CodexOptions, environ: Mapping[str, str] | None) -> str:
    """``CODEX_HOME`` as the child gets it, else ``$HOME/.codex``."""
    env = codex_env(options, environ)
    configured = env.get("CODEX_HOME")
    if configured:
        return os.path.abspath(configured)
    return os.path.join(env.get("HOME") or os.path.expanduser("~"), ".codex")


def with_cli_home(options: CodexOptions, home: str) -> CodexOptions:
    # codex_home and env["CODEX_HOME"] may not both be given; a named home would change the
    # default env policy: keep the one in force.
    env = {k: v for k, v in options.env.items() if k != "CODEX_HOME"}
    return attrs.evolve(options, codex_home=home, env=env, env_policy=options.effective_env_policy)


def login_files(options: CodexOptions, environ: Mapping[str, str] | None) -> dict[str, str]:
    """The login (``auth.json``) and the settings (``config.toml``: model providers,
    features) of the CODEX_HOME these options use."""
    home = cli_home(options, environ)
    return {name: os.path.join(home, name) for name in ("auth.json", "config.toml")}


def transcript_pattern(session_id: str) -> str:
    # sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl
    return f"sessions/*/*/*/rollout-*-{session_id}.jsonl"
