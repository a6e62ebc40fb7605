"""Fixtures of the `agentrt` command tests: the command as a subprocess, the pinned claude
binary, a fake model API, and a check that the command left no process behind."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from realcli._claude import MARKER_VAR, claude_binary, kill_marked, npm_available

from agentrt.testing import FakeAnthropic, open_fake_anthropic


@pytest.fixture(scope="session")
def claude_bin() -> Path:
    """The pinned claude binary (`make claude-cli`); a skip only when npm is absent."""
    binary = claude_binary()
    if binary.exists():
        return binary
    if not npm_available():
        pytest.skip("npm not found, so the pinned claude is not installed")
    pytest.fail(f"the pinned claude is not installed at {binary}: run `make claude-cli`")


@pytest.fixture
async def marker() -> AsyncIterator[str]:
    """AGENTRT_TEST_MARKER for the command's processes; none may outlive the test."""
    value = uuid.uuid4().hex
    yield value
    leftovers = await kill_marked(value)
    assert not leftovers, f"processes left behind (now killed): {leftovers}"


@pytest.fixture
def base_env(tmp_path: Path, marker: str) -> Iterator[dict[str, str]]:
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
        **{MARKER_VAR: marker},
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
