"""The fence guard program on its own: it kills the turn processes of its runtime (by their
marker) once a deadline passes unrenewed or its stdin ends, and nothing after ``exit``; and
beside a runtime killed in the middle of a spawn, the child waiting at its gate. Beside two
runtimes of one process, the guard of one that stops answering or closes without a word
spares the other's warm CLI."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import threading
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


async def guard(turns: str = RUNTIME) -> trio.Process:
    argv = [sys.executable, "-I", "-S", _fence_guard.__file__, turns]
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


async def test_the_guard_of_one_runtime_spares_another_runtimes_turns_in_its_process(
    turn: trio.Process,
) -> None:
    # `turn` is a turn of the runtime RUNTIME.abc; this one's is RUNTIME.other.
    other = await guard(f"{RUNTIME}.other")
    await say(other, b"inf\n")
    assert other.stdin is not None
    await other.stdin.aclose()
    with trio.fail_after(10):
        await other.wait()  # it has killed what it kills
    assert running(turn.pid)


# -- two runtimes in one process ------------------------------------------------------------


async def start_warm(rt: agentrt.Runtime, tmp_path: Path, name: str) -> int:
    """Start a warm agent ``name`` on the fake CLI, ask it once; its CLI's pid."""
    binary = fake_cli_executable(str(tmp_path), ["live", {"session_id": "s-1"}], name=name)
    await rt.start_agent(
        agentrt.Agent, name=name, backend="claude", binary=binary, keep_alive=60, kill_grace=0.3
    )
    assert (await rt.ask(name, "one")).text == "1: one"
    pid = (await rt.status(name)).cli_pid
    assert pid is not None
    return pid


async def assert_still_warm(rt: agentrt.Runtime, name: str, pid: int) -> None:
    """The warm CLI ``pid`` of ``name`` lives and answers the next ask (a killed one fails
    it with process_crashed, or a new process answers it)."""
    assert running(pid)
    assert (await rt.ask(name, "two")).text == "2: two"
    assert (await rt.status(name)).cli_pid == pid


async def test_a_frozen_runtimes_guard_spares_the_warm_cli_of_another_in_its_process(
    tmp_path: Path,
) -> None:
    # Runtime A runs in a thread of its own (as the asyncio and sync faces' runtimes do) and
    # stops answering while B, in this thread, does not: A's guard must kill A's CLI only.
    store = tmp_path / "shared.sqlite3"
    a_cli: list[int] = []
    started, thaw = threading.Event(), threading.Event()

    async def runtime_a() -> None:
        async with agentrt.open_runtime(
            store=agentrt.SQLiteStore(store), lease_ttl=4, kill_grace=0.3
        ) as rt:
            a_cli.append(await start_warm(rt, tmp_path, "a"))
            started.set()
            thaw.wait()  # blocking: A's whole event loop stops, its guard's beats with it
        # Awake again, A has found its lease lost and stopped its agent.

    async with agentrt.open_runtime(store=agentrt.SQLiteStore(store)) as b:
        b_cli = await start_warm(b, tmp_path, "b")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.to_thread.run_sync, trio.run, runtime_a)
            try:
                await trio.to_thread.run_sync(started.wait, abandon_on_cancel=True)
                # A's guard fires: A's CLI is killed...
                await wait_until(lambda: not running(a_cli[0]), bound=30)
            finally:
                thaw.set()
        # ... and B's lives on.
        await assert_still_warm(b, "b", b_cli)


async def test_a_runtime_closed_past_its_release_bound_spares_another_runtimes_warm_cli(
    tmp_path: Path,
) -> None:
    # A's store is locked by another program as A closes: giving its leases back takes
    # longer than the runtime's bound on it (10 s), which cancels the rest of the close. A's
    # guard must still be told ``exit``; a guard that finds its stdin closed without it
    # kills, and must kill A's turns at most.
    store_a, store_b = tmp_path / "a.sqlite3", tmp_path / "b.sqlite3"
    async with agentrt.open_runtime(store=agentrt.SQLiteStore(store_b)) as b:
        b_cli = await start_warm(b, tmp_path, "b")
        lock = sqlite3.connect(store_a, isolation_level=None)
        try:
            async with agentrt.open_runtime(
                store=agentrt.SQLiteStore(store_a, busy_timeout=10.5), lease_ttl=60
            ) as a:
                # Its guard starts with the lease of its first agent that runs a CLI.
                binary = fake_cli_executable(str(tmp_path), ["live", {}], name="a")
                await a.start_agent(agentrt.Agent, name="a", backend="claude", binary=binary)
                lock.execute("BEGIN EXCLUSIVE")
        finally:
            lock.close()
        await assert_still_warm(b, "b", b_cli)


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
