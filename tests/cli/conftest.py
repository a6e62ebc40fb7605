"""Fixtures of the `agentrt` command tests: an environment for the command as a subprocess
(its processes marked: none may outlive the test), a fake model API, the pinned claude."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from realcli._claude import MARKER_VAR

from agentrt.testing import FakeAnthropic, open_fake_anthropic


@pytest.fixture
def base_env(tmp_path: Path, process_marker: str) -> Iterator[dict[str, str]]:
    """An environment without ambient credentials, with a private HOME, TMPDIR and store."""
    home = tmp_path / "home"
    (home / "tmp").mkdir(parents=True)
    skip = {"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"}
    skip |= {"OPENAI_API_KEY", "CODEX_API_KEY", "CODEX_HOME", "CLAUDE_CONFIG_DIR", "XDG_STATE_HOME"}
    env = {k: v for k, v in os.environ.items() if k not in skip and not k.startswith("CLAUDE")}
    env.update(
        HOME=str(home),
        TMPDIR=str(home / "tmp"),
        AGENTRT_STORE=str(tmp_path / "sessions.sqlite3"),
        TERM="dumb",
        **{MARKER_VAR: process_marker},
    )
    yield env


@pytest.fixture
async def api() -> AsyncIterator[FakeAnthropic]:
    async with open_fake_anthropic() as fake:
        yield fake


@pytest.fixture
def claude_env(base_env: dict[str, str], api: FakeAnthropic, claude_bin: Path) -> dict[str, str]:
    """`base_env` with the pinned claude pointed at the fake API (the default env policy,
    inherit, passes all of it to the CLI)."""
    return {**base_env, **api.claude_env(base_env["HOME"]), "CLAUDE_CLI": str(claude_bin)}
