"""The fence guard program on its own: it kills the turn processes of its runtime (by their
marker) once a deadline passes unrenewed or its stdin ends, and nothing after ``exit``."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator

import pytest
import trio
from proc_helpers import running, wait_until

from agentrt._driver import _fence_guard
from agentrt._driver._proctree import MARKER_ENV

# Not a live pid's prefix (above the kernel's largest pid), and this test process's own: only
# the processes these tests mark carry it, not those of tests in other worker processes.
RUNTIME = str(5_000_000 + os.getpid())


@pytest.fixture
async def turn() -> AsyncIterator[trio.Process]:
    """A process marked as a turn of runtime RUNTIME."""
    env = {**os.environ, MARKER_ENV: f"{RUNTIME}.abc"}
    process = await trio.lowlevel.open_process(
        [sys.executable, "-c", "import time; time.sleep(60)"], env=env
    )
    try:
        yield process
    finally:
        process.kill()
        await process.wait()


async def guard() -> trio.Process:
    argv = [sys.executable, "-I", "-S", _fence_guard.__file__, RUNTIME]
    return await trio.lowlevel.open_process(argv, stdin=subprocess.PIPE)


async def say(process: trio.Process, line: bytes) -> None:
    assert process.stdin is not None
    await process.stdin.send_all(line)


async def test_a_missed_deadline_kills_the_runtimes_turns(turn: trio.Process) -> None:
    watcher = await guard()
    await say(watcher, b"60\n")
    await trio.sleep(0.3)
    assert running(turn.pid)  # within its deadline
    await say(watcher, b"0.2\n")
    await wait_until(lambda: not running(turn.pid), bound=10)
    await say(watcher, b"exit\n")
    with trio.fail_after(10):
        assert await watcher.wait() == 0


async def test_the_end_of_stdin_kills_them_and_exit_does_not(turn: trio.Process) -> None:
    polite = await guard()
    await say(polite, b"inf\nexit\n")
    with trio.fail_after(10):
        await polite.wait()
    assert running(turn.pid)
    orphaned = await guard()
    await say(orphaned, b"inf\n")
    assert orphaned.stdin is not None
    await orphaned.stdin.aclose()  # as when the runtime dies
    await wait_until(lambda: not running(turn.pid), bound=10)
    with trio.fail_after(10):
        await orphaned.wait()
