"""What ``agentrt doctor`` and ``agentrt demo`` need to know about Gemini CLI."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from agentrt.backend import BackendInfo, Credential

# The variables of the auth types a headless run accepts; one is named only when set.
_VARIABLES = (
    ("GEMINI_API_KEY", "API key (auth_type gemini-api-key)"),
    ("GOOGLE_API_KEY", "API key (auth_type vertex-ai)"),
    ("GOOGLE_APPLICATION_CREDENTIALS", "service account file (vertex-ai; not checked)"),
)


def credentials(env: Mapping[str, str]) -> list[Credential]:
    """What gemini would authenticate with in the child environment ``env``."""
    found = [Credential(name, name, note) for name, note in _VARIABLES if env.get(name)]
    config = env.get("GEMINI_CLI_HOME")
    folder = Path(config) if config else Path(env.get("HOME") or Path.home())
    login = folder / ".gemini" / "oauth_creds.json"
    if login.is_file():
        found.append(Credential(f"login file {login}", note="auth_type oauth-personal"))
    return found


def info(written_for: str) -> BackendInfo:
    return BackendInfo(
        install="install Gemini CLI (npm install -g @google/gemini-cli) or set GEMINI_CLI to "
        "the binary",
        login="set GEMINI_API_KEY, or run `gemini` and sign in with Google "
        '(then auth_type="oauth-personal")',
        written_for=written_for,
        # The default approval mode offers headless only the tools that need no approval.
        quiet_options={"approval_mode": "default"},
        credentials=credentials,
    )
