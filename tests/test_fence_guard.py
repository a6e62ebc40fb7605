"""The fence guard program on its own: it kills the turn processes of its runtime (by their
marker) once a deadline passes unrenewed or its stdin ends, and nothing after ``exit``; and
beside a runtime killed in the middle of a spawn, the child waiting at its gate."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio
from proc_helpers import fence_guards, running, store_programs, wait_until
from test_isolation import needs_cgroups

import agentrt
from agentrt._driver import _fence_guard
from agentrt._driver._proctree import MARKER_ENV
from agentrt.testing import fake_cli_executable

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


# -- a runtime killed while its spawn's child waits at the gate ---------------------------------

GATE_HOST = Path(__file__).parent / "gate_host.py"


@needs_cgroups  # the gate holds a child only while it is moved into its cgroup
async def test_a_runtime_killed_during_a_spawn_leaves_neither_the_child_nor_its_guard(
    postgres_dsn: str, tmp_path: Path
) -> None:
    # The child waits at the gate with every signal blocked; it held the runtime's
    # descriptors, the guard's stdin among them, so neither ever ended.
    binary = fake_cli_executable(str(tmp_path), ["live", {"turns": [[["answer"]]]}], name="claude")
    work, homes = tmp_path / "work", tmp_path / "homes"
    work.mkdir()
    # A long lease: the guard must act on the runtime's death, not on a missed deadline.
    args = ["60", binary, binary, str(work), str(homes), "w:warm"]
    async with (
        store_programs(GATE_HOST, postgres_dsn) as start,
        agentrt.open_runtime(store=agentrt.PostgresStore(postgres_dsn), node="driver") as rt,
    ):
        host = await start("hold", "node-a", *args)
        assert await host.line(bound=60) == "READY"
        guards: list[int] = []
        child = 0
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_ask_quietly, rt, "first")
                gate = await host.line(bound=60)
                assert gate.startswith("GATE "), gate
                child = int(gate.split()[1])
                [guard] = guards = fence_guards(host.pid)
                await wait_until(lambda: _fence_guard.gate_of(child) is not None, bound=10)
                await host.kill()
                nursery.cancel_scope.cancel()
            await wait_until(lambda: not running(child) and not running(guard), bound=10)
        finally:
            for pid in [child, *guards]:
                if pid and running(pid):
                    os.kill(pid, signal.SIGKILL)


async def _ask_quietly(rt: agentrt.Runtime, prompt: str) -> None:
    with contextlib.suppress(agentrt.AgentRTError):
        await rt.ask("w", prompt)
