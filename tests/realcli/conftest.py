"""Fixtures of the real-CLI tier: a Claude harness per test (the pinned binary and the
process marker are shared fixtures, in tests/conftest.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agentrt.testing import open_fake_anthropic

from ._claude import Claude, claude_version


@pytest.fixture
async def claude(claude_bin: Path, tmp_path: Path, process_marker: str) -> AsyncIterator[Claude]:
    home = tmp_path / "home"
    project = tmp_path / "project"
    home.mkdir()
    project.mkdir()
    async with open_fake_anthropic() as api:
        yield Claude(claude_bin, claude_version(), api, home, project, process_marker)
