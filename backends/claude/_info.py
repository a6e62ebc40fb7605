"""What ``agentrt doctor`` and ``agentrt demo`` need to know about Claude Code."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

from agentrt.backend import BackendInfo, Credential

# Claude Code's order: cloud routing, then bearer token, API key, headless OAuth token, and
# last the login that `claude` + /login stores. A variable is named only when it is set.
_VARIABLES = (
    ("CLAUDE_CODE_USE_BEDROCK", "Amazon Bedrock (cloud credentials not checked)"),
    ("CLAUDE_CODE_USE_VERTEX", "Google Vertex AI (cloud credentials not checked)"),
    ("ANTHROPIC_AUTH_TOKEN", "bearer token"),
    ("ANTHROPIC_API_KEY", "API key, billed to the API account"),
    ("CLAUDE_CODE_OAUTH_TOKEN", "headless subscription token"),
)


def credentials(env: Mapping[str, str]) -> list[Credential]:
    """What the CLI would authenticate with in the child environment ``env``."""
    found = [Credential(name, name, note) for name, note in _VARIABLES if env.get(name)]
    config = env.get("CLAUDE_CONFIG_DIR")
    folder = Path(config) if config else Path(env.get("HOME") or Path.home()) / ".claude"
    login = folder / ".credentials.json"
    if login.is_file():
        found.append(Credential(f"login file {login}", note="from the CLI's login"))
    elif sys.platform == "darwin":
        found.append(Credential("the macOS Keychain login", note="not checked"))
    return found


def info(written_for: str) -> BackendInfo:
    return BackendInfo(
        install="install Claude Code (npm install -g @anthropic-ai/claude-code) or set "
        "CLAUDE_CLI to the binary",
        login="run `claude`, then /login; or `claude setup-token` and set CLAUDE_CODE_OAUTH_TOKEN",
        written_for=written_for,
        quiet_options={"tools": [], "max_turns": 1},
        # Only these commands run without asking, and only the Bash tool is offered.
        shell_options={"tools": ["Bash"], "allowed_tools": ["Bash(echo:*)", "Bash(sleep:*)"]},
        credentials=credentials,
    )
