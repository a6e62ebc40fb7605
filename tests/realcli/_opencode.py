"""Running the pinned real ``opencode`` binary through the public API against the fake
Anthropic API.

Every agent gets a fresh HOME (opencode keeps its sessions under it) and the test's process
marker; the fake is a custom provider in the ``config`` option (Anthropic's SDK with the
fake's base URL, the key by its variable), and what opencode would fetch at start-up (the
models catalogue, LSP servers, default plugins) is switched off: the CLI talks to the fake
and nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
from npm_clis import pinned_binary, pinned_version

from agentrt.testing import FakeAnthropic

from ._claude import MARKER_VAR

MODEL = "claude-fake"
PROVIDER = "fake"
KEY_VAR = "AGENTRT_FAKE_KEY"
OFFLINE = {
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
}


def opencode_version() -> str:
    """The pinned version: $AGENTRT_OPENCODE_VERSION, else tests/realcli/OPENCODE_VERSION."""
    return pinned_version("opencode")


def opencode_binary() -> Path | None:
    """The opencode that `make opencode-cli` installed for the pinned version, if it did."""
    return pinned_binary("opencode")


@attrs.frozen
class Opencode:
    """One test's pinned binary, fake API and directories (HOME, project)."""

    binary: Path
    api: FakeAnthropic
    home: Path
    project: Path
    marker: str

    def config(self) -> dict[str, Any]:
        """The config naming the fake as provider ``fake``."""
        provider = {
            "npm": "@ai-sdk/anthropic",
            "name": PROVIDER,
            "options": {"baseURL": f"{self.api.base_url}/v1", "apiKey": f"{{env:{KEY_VAR}}}"},
            "models": {MODEL: {"name": MODEL}},
        }
        return {"autoupdate": False, "share": "disabled", "provider": {PROVIDER: provider}}

    def agent_options(self, env: Mapping[str, str] | None = None, **options: Any) -> dict[str, Any]:
        """``start_agent`` keywords for an opencode agent on this binary, in the project,
        against this fake and nothing else (``env_policy="isolated"``)."""
        base = {
            "HOME": str(self.home),
            MARKER_VAR: self.marker,
            "NO_PROXY": "127.0.0.1",
            KEY_VAR: "sk-ant-fake-00000000000000000000",
            **OFFLINE,
        }
        return {
            "binary": str(self.binary),
            "cwd": str(self.project),
            "config": self.config(),
            "model": f"{PROVIDER}/{MODEL}",
            "env_policy": "isolated",
            "env": {**base, **(env or {})},
            **options,
        }
