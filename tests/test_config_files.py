"""`Command.config_files`: settings a CLI reads from a fixed path, written by the driver
before the spawn (directories made, the file replaced whole, 0600) and kept after it."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

import pytest
from proc_helpers import Frames

from agentrt.backend import Command, ConfigFile, StopReason
from agentrt.lowlevel import ProcessFailure, open_cli_process

READ = "import json, sys; print(json.dumps({'seen': open(sys.argv[1]).read()}))"


def reader(path: Path, content: bytes) -> Command:
    return Command(
        argv=(sys.executable, "-c", READ, str(path)),
        config_files=(ConfigFile(str(path), content),),
    )


async def test_the_file_is_in_place_before_the_cli_runs_and_stays(tmp_path: Path) -> None:
    path = tmp_path / "home" / ".cli" / "settings.json"
    async with open_cli_process(reader(path, b'{"a": 1}')) as proc:
        frames = [frame async for frame in Frames(proc)]
    assert frames == [{"seen": '{"a": 1}'}]
    assert path.read_bytes() == b'{"a": 1}'
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    # The next turn's content replaces it whole; nothing else is left in the directory.
    async with open_cli_process(reader(path, b"{}")) as proc:
        frames = [frame async for frame in Frames(proc)]
    assert frames == [{"seen": "{}"}] and [p.name for p in path.parent.iterdir()] == [path.name]


async def test_a_file_that_cannot_be_written_fails_the_spawn_naming_it(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    with pytest.raises(ProcessFailure) as caught:
        async with open_cli_process(reader(blocker / "settings.json", b"{}")):
            pass
    assert caught.value.reason is StopReason.SPAWN_FAILED
    assert "not-a-dir" in str(caught.value)
