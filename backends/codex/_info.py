"""What ``agentrt doctor`` and ``agentrt demo`` need to know about Codex."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from agentrt.backend import BackendInfo, Credential

_VARIABLES = (("CODEX_API_KEY", "API key"), ("OPENAI_API_KEY", "API key"))


def credentials(env: Mapping[str, str]) -> list[Credential]:
    """What codex would authenticate with in the child environment ``env``."""
    found = [Credential(name, name, note) for name, note in _VARIABLES if env.get(name)]
    config = env.get("CODEX_HOME")
    folder = Path(config) if config else Path(env.get("HOME") or Path.home()) / ".codex"
    login = folder / "auth.json"
    if login.is_file():
        found.append(Credential(f"login file {login}", note="from the CLI's login"))
    return found


def info(written_for: str) -> BackendInfo:
    return BackendInfo(
        install="install codex (npm install -g @openai/codex) or set CODEX_CLI to the binary",
        login="run `codex login`",
        written_for=written_for,
        # codex's read-only sandbox runs read-only commands without asking (exec never asks).
        quiet_options={"sandbox": "read-only"},
        shell_options={"sandbox": "read-only"},
        credentials=credentials,
    )
