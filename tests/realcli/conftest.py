"""Fixtures of the real-CLI tier: a Claude harness per test (the pinned binary and the
process marker are shared fixtures, in tests/conftest.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agentrt.testing import open_fake_anthropic

from ._claude import Claude, claude_version, npm_available
from ._opencode import Opencode, opencode_binary, opencode_version
from ._pi import Pi, pi_binary, pi_version
from ._qwen import Qwen, qwen_binary, qwen_version


@pytest.fixture
async def claude(claude_bin: Path, tmp_path: Path, process_marker: str) -> AsyncIterator[Claude]:
    home = tmp_path / "home"
    project = tmp_path / "project"
    home.mkdir()
    project.mkdir()
    async with open_fake_anthropic() as api:
        yield Claude(claude_bin, claude_version(), api, home, project, process_marker)


@pytest.fixture
def qwen_bin() -> Path:
    """The pinned qwen binary (`make qwen-cli`); a skip only when npm is absent."""
    binary = qwen_binary()
    if binary is not None:
        return binary
    if not npm_available():
        pytest.skip(f"npm not found, so qwen {qwen_version()} is not installed")
    pytest.fail(f"qwen {qwen_version()} is not installed: run `make qwen-cli`")


@pytest.fixture
async def qwen(qwen_bin: Path, tmp_path: Path, process_marker: str) -> AsyncIterator[Qwen]:
    home = tmp_path / "home"
    project = tmp_path / "project"
    home.mkdir()
    project.mkdir()
    async with open_fake_anthropic() as api:
        yield Qwen(qwen_bin, api, home, project, process_marker)


@pytest.fixture
def pi_bin() -> Path:
    """The pinned pi binary (`make pi-cli`); a skip only when npm is absent."""
    binary = pi_binary()
    if binary is not None:
        return binary
    if not npm_available():
        pytest.skip(f"npm not found, so pi {pi_version()} is not installed")
    pytest.fail(f"pi {pi_version()} is not installed: run `make pi-cli`")


@pytest.fixture
async def pi(pi_bin: Path, tmp_path: Path, process_marker: str) -> AsyncIterator[Pi]:
    home = tmp_path / "home"
    project = tmp_path / "project"
    home.mkdir()
    project.mkdir()
    async with open_fake_anthropic() as api:
        yield Pi(pi_bin, api, home, project, process_marker)


@pytest.fixture
def opencode_bin() -> Path:
    """The pinned opencode binary (`make opencode-cli`); a skip only when npm is absent."""
    binary = opencode_binary()
    if binary is not None:
        return binary
    if not npm_available():
        pytest.skip(f"npm not found, so opencode {opencode_version()} is not installed")
    pytest.fail(f"opencode {opencode_version()} is not installed: run `make opencode-cli`")


@pytest.fixture
async def opencode(
    opencode_bin: Path, tmp_path: Path, process_marker: str
) -> AsyncIterator[Opencode]:
    home = tmp_path / "home"
    project = tmp_path / "project"
    home.mkdir()
    project.mkdir()
    async with open_fake_anthropic() as api:
        yield Opencode(opencode_bin, api, home, project, process_marker)
