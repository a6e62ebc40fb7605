"""Running the pinned real ``qwen`` binary through the public API against the fake APIs.

Every agent gets a fresh HOME and QWEN_HOME (its private CLI home) and the test's process
marker; the fake Anthropic API is reached through Qwen Code's Anthropic auth
(``ANTHROPIC_BASE_URL``), the fake OpenAI API through its OpenAI Responses auth.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
from npm_clis import pinned_binary, pinned_version

from agentrt.testing import FakeAnthropic, FakeOpenAI, RecordedRequest

from ._claude import MARKER_VAR

MODEL = "claude-fake"


def qwen_version() -> str:
    """The pinned version: $AGENTRT_QWEN_VERSION, else tests/realcli/QWEN_VERSION."""
    return pinned_version("qwen")


def qwen_binary() -> Path | None:
    """The qwen that `make qwen-cli` installed for the pinned version, if it did."""
    return pinned_binary("qwen")


def user_prompts(request: RecordedRequest) -> list[str]:
    """The user's own prompts in a model call (Qwen Code adds system reminders as user
    text blocks; a prompt is sent with a blank line after it)."""
    return [
        t.strip() for t in request.texts("user") if not t.lstrip().startswith("<system-reminder>")
    ]


@attrs.frozen
class Qwen:
    """One test's pinned binary, fake API and directories (HOME, QWEN_HOME, project)."""

    binary: Path
    api: FakeAnthropic | FakeOpenAI
    home: Path
    project: Path
    marker: str

    @property
    def qwen_home(self) -> Path:
        return self.home / ".qwen"

    def agent_options(self, env: Mapping[str, str] | None = None, **options: Any) -> dict[str, Any]:
        """``start_agent`` keywords for a qwen agent on this binary, in the project, against
        this fake and nothing else (``env_policy="isolated"``; the key in the environment,
        never on argv)."""
        base = {"HOME": str(self.home), MARKER_VAR: self.marker, "NO_PROXY": "127.0.0.1"}
        if isinstance(self.api, FakeOpenAI):
            auth = "openai-responses"
            base |= {"OPENAI_BASE_URL": self.api.base_url, "OPENAI_API_KEY": "sk-fake-0000"}
        else:
            auth = "anthropic"
            base |= {
                "ANTHROPIC_BASE_URL": self.api.base_url,
                "ANTHROPIC_API_KEY": "sk-ant-fake-00000000000000000000",
            }
        return {
            "binary": str(self.binary),
            "cwd": str(self.project),
            "qwen_home": str(self.qwen_home),
            "auth_type": auth,
            "model": MODEL,
            "env_policy": "isolated",
            "env": {**base, **(env or {})},
            **options,
        }
