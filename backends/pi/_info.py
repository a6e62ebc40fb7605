"""What ``agentrt doctor`` and ``agentrt demo`` need to know about pi."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from agentrt.backend import BackendInfo, Credential

# A few of the keys pi reads (``pi --help`` lists them all); a variable is named only when
# set.
_VARIABLES = (
    ("ANTHROPIC_API_KEY", "API key (provider anthropic)"),
    ("ANTHROPIC_OAUTH_TOKEN", "OAuth token (provider anthropic)"),
    ("OPENAI_API_KEY", "API key (provider openai)"),
    ("GEMINI_API_KEY", "API key (provider google)"),
    ("OPENROUTER_API_KEY", "API key (provider openrouter)"),
)


def credentials(env: Mapping[str, str]) -> list[Credential]:
    """What pi would authenticate with in the child environment ``env``."""
    found = [Credential(name, name, note) for name, note in _VARIABLES if env.get(name)]
    home = env.get("PI_CODING_AGENT_DIR")
    folder = Path(home) if home else Path(env.get("HOME") or Path.home()) / ".pi" / "agent"
    for name, note in (("auth.json", "keys and logins from /login"), ("models.json", "")):
        if (folder / name).is_file():
            found.append(Credential(f"file {folder / name}", note=note or "custom providers"))
    return found


def info(written_for: str) -> BackendInfo:
    return BackendInfo(
        install="install pi (npm install -g @mariozechner/pi-coding-agent) or set PI_CLI to "
        "the binary",
        login="set a provider's key (ANTHROPIC_API_KEY, OPENAI_API_KEY, ...) or run `pi` and "
        "/login",
        written_for=written_for,
        # Read-only tools: a quiet turn edits nothing and runs no shell.
        quiet_options={"tools": ["read", "grep", "find", "ls"]},
        credentials=credentials,
    )
