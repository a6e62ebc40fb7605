"""Running the pinned real ``pi`` binary through the public API against the fake
Anthropic API.

Every agent gets a fresh HOME and pi home (PI_CODING_AGENT_DIR) and the test's process
marker; the fake is a custom provider in the home's models.json (the ``models`` option),
its key in the environment, never on argv.
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


def pi_version() -> str:
    """The pinned version: $AGENTRT_PI_VERSION, else tests/realcli/PI_VERSION."""
    return pinned_version("pi")


def pi_binary() -> Path | None:
    """The pi that `make pi-cli` installed for the pinned version, if it did."""
    return pinned_binary("pi")


@attrs.frozen
class Pi:
    """One test's pinned binary, fake API and directories (HOME, pi home, project)."""

    binary: Path
    api: FakeAnthropic
    home: Path
    project: Path
    marker: str

    @property
    def pi_home(self) -> Path:
        return self.home / ".pi" / "agent"

    def models(self) -> dict[str, Any]:
        """The models file naming the fake as provider ``fake`` (the key by its variable)."""
        provider = {
            "baseUrl": self.api.base_url,
            "api": "anthropic-messages",
            "apiKey": KEY_VAR,
            "models": [{"id": MODEL}],
        }
        return {"providers": {PROVIDER: provider}}

    def agent_options(self, env: Mapping[str, str] | None = None, **options: Any) -> dict[str, Any]:
        """``start_agent`` keywords for a pi agent on this binary, in the project, against
        this fake and nothing else (``env_policy="isolated"``)."""
        base = {
            "HOME": str(self.home),
            MARKER_VAR: self.marker,
            "NO_PROXY": "127.0.0.1",
            KEY_VAR: "sk-ant-fake-00000000000000000000",
        }
        return {
            "binary": str(self.binary),
            "cwd": str(self.project),
            "pi_home": str(self.pi_home),
            "models": self.models(),
            "provider": PROVIDER,
            "model": MODEL,
            "env_policy": "isolated",
            "env": {**base, **(env or {})},
            **options,
        }
