"""What ``agentrt doctor`` and ``agentrt demo`` need to know about Qwen Code."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from agentrt.backend import BackendInfo, Credential

# The keys of the auth types a headless run can use; a variable is named only when set.
_VARIABLES = (
    ("OPENAI_API_KEY", "API key (--auth-type openai or openai-responses)"),
    ("ANTHROPIC_API_KEY", "API key (--auth-type anthropic)"),
    ("GEMINI_API_KEY", "API key (--auth-type gemini)"),
)


def credentials(env: Mapping[str, str]) -> list[Credential]:
    """What qwen would authenticate with in the child environment ``env``."""
    found = [Credential(name, name, note) for name, note in _VARIABLES if env.get(name)]
    config = env.get("QWEN_HOME")
    folder = Path(config) if config else Path(env.get("HOME") or Path.home()) / ".qwen"
    if (folder / ".env").is_file():
        found.append(Credential(f"key file {folder / '.env'}", note="keys the CLI loads"))
    login = folder / "oauth_creds.json"
    if login.is_file():
        found.append(Credential(f"login file {login}", note="Qwen OAuth, from the CLI's login"))
    return found


def info(written_for: str) -> BackendInfo:
    return BackendInfo(
        install="install Qwen Code (npm install -g @qwen-code/qwen-code) or set QWEN_CLI to "
        "the binary",
        login="run `qwen` and choose an auth type, or set OPENAI_API_KEY or ANTHROPIC_API_KEY",
        written_for=written_for,
        # Headless in the default approval mode the CLI offers only tools that need no
        # approval (reading, listing): no shell, no edits.
        quiet_options={"approval_mode": "default"},
        credentials=credentials,
    )
