"""Fixtures of the real-CLI tier: the pinned claude binary, a fake API, process hygiene."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agentrt.testing import open_fake_anthropic

from ._claude import Claude, claude_binary, claude_version, kill_marked, npm_available


@pytest.fixture(scope="session")
def claude_bin() -> Path:
    """The pinned binary that `make clis` installed; a skip only when npm is absent."""
    version = claude_version()
    binary = claude_binary(version)
    if binary.exists():
        return binary
    if not npm_available():
        pytest.skip(f"npm not found, so claude {version} is not installed: real-CLI tier skipped")
    pytest.fail(f"claude {version} is not installed at {binary}: run `make clis`")


@pytest.fixture
async def process_marker() -> AsyncIterator[str]:
    """A value for AGENTRT_TEST_MARKER; after the test, no process carrying it may be alive."""
    marker = uuid.uuid4().hex
    yield marker
    leftovers = await kill_marked(marker)
    assert not leftovers, f"processes left behind (now killed): {leftovers}"


@pytest.fixture
async def claude(claude_bin: Path, tmp_path: Path, process_marker: str) -> AsyncIterator[Claude]:
    home = tmp_path / "home"
    project = tmp_path / "project"
    home.mkdir()
    project.mkdir()
    async with open_fake_anthropic() as api:
        yield Claude(claude_bin, claude_version(), api, home, project, process_marker)
