"""What ``agentrt doctor`` and ``agentrt demo`` need to know about opencode."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from agentrt.backend import BackendInfo, Credential

# A few of the keys opencode's providers read; a variable is named only when set.
_VARIABLES = (
    ("ANTHROPIC_API_KEY", "API key (provider anthropic)"),
    ("OPENAI_API_KEY", "API key (provider openai)"),
    ("OPENROUTER_API_KEY", "API key (provider openrouter)"),
    ("OPENCODE_API_KEY", "API key (OpenCode Zen)"),
)


def credentials(env: Mapping[str, str]) -> list[Credential]:
    """What opencode would authenticate with in the child environment ``env``."""
    found = [Credential(name, name, note) for name, note in _VARIABLES if env.get(name)]
    data = env.get("XDG_DATA_HOME")
    folder = Path(data) if data else Path(env.get("HOME") or Path.home()) / ".local" / "share"
    login = folder / "opencode" / "auth.json"
    if login.is_file():
        found.append(Credential(f"login file {login}", note="from `opencode auth login`"))
    return found


def info(written_for: str) -> BackendInfo:
    return BackendInfo(
        install="install opencode (npm install -g opencode-ai) or set OPENCODE_CLI to the binary",
        login="run `opencode auth login`, or set a provider's key (ANTHROPIC_API_KEY, ...)",
        written_for=written_for,
        # The built-in "plan" agent edits nothing: a quiet turn changes no file.
        quiet_options={"agent": "plan"},
        credentials=credentials,
    )
