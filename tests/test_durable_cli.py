"""Durable sessions with real processes: the claude backend on a fake CLI, a real SQLite
store. Live process records, which session a turn resumes, and the reaper after a SIGKILL
of a whole runtime."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from cli_programs import SID, FakeClaude
from proc_helpers import fence_guards, kill_marked, turn_processes, wait_until

from agentrt import (
    Agent,
    Event,
    Failed,
    SessionEvent,
    SQLiteStore,
    StopReason,
    TurnFailed,
    open_runtime,
)
from agentrt.lowlevel import TURN_MARKER_ENV as MARKER_ENV

CHILD = Path(__file__).parent / "crash_child.py"
FAST = {"kill_grace": 0.3}


class Coder(Agent):
    def __init__(self, **init: Any) -> None:
        self.session_seen = trio.Event()
        self.init = init

    def init_agent(self, **options: Any) -> dict[str, Any]:
        return {**options, **self.init}

    def handle_stream_event(self, event: Event) -> None:
        if isinstance(event, SessionEvent):
            self.session_seen.set()


async def test_a_running_turn_is_recorded_with_its_process_and_cleared(tmp_path: Path) -> None:
    cli = FakeClaude(tmp_path / "cli")
    agent = Coder()
    async with open_runtime(store=SQLiteStore(tmp_path / "s.sqlite3")) as rt:
        await rt.start_agent(agent, name="coder", backend="claude", binary=cli.binary, **FAST)
        ref = await rt.tell("coder", "long job")
        with trio.fail_after(10):
            await agent.session_seen.wait()
        [live] = await rt.store.live_processes()
        assert live.name == "coder" and live.runtime_id == rt.runtime_id
        assert live.live_pid == live.live_pgid
        assert live.live_marker is not None and live.live_marker.startswith(f"{os.getpid()}.")
        # Two processes carry the marker: the CLI and the tool it started in a new session.
        await wait_until(lambda: len(turn_processes(live.live_marker or "-")) == 2)
        assert await rt.interrupt("coder")
        await rt.wait(ref)
        assert await rt.store.live_processes() == ()
        assert turn_processes(live.live_marker) == []
        record = await rt.store.load("coder")
        assert record is not None
        assert (record.session_id, record.last_stop_reason) == (SID, "interrupted")


async def test_which_session_a_turn_resumes(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.sqlite3")
    cli = FakeClaude(tmp_path / "cli")
    cli.answer()
    first_id = "11111111-2222-4333-8444-555555555555"
    async with open_runtime(store=store) as rt:
        # No stored row: the backend's own first-turn option (from init_agent) applies...
        await rt.start_agent(Coder(resume=first_id), name="a", backend="claude", binary=cli.binary)
        await rt.ask("a", "one")
        assert cli.resumed() == first_id
        # ...and from then on the id the CLI reported.
        await rt.ask("a", "two")
        assert cli.resumed() == SID
        await rt.stop_agent("a")
        # A stored id wins over the backend option.
        await rt.start_agent(Coder(resume=first_id), name="a", backend="claude", binary=cli.binary)
        await rt.ask("a", "three")
        assert cli.resumed() == SID
        await rt.stop_agent("a")
        # The runtime's resume=<id> wins over both.
        forced = "99999999-2222-4333-8444-555555555555"
        await rt.start_agent(
            Coder(resume=first_id), name="a", backend="claude", binary=cli.binary, resume=forced
        )
        await rt.ask("a", "four")
        assert cli.resumed() == forced
        await rt.stop_agent("a")
        # resume=False: a new session (the backend option is a first-turn id, so it applies).
        await rt.start_agent(Coder(), name="a", backend="claude", binary=cli.binary, resume=False)
        await rt.ask("a", "five")
        assert cli.resumed() is None


async def hanging_child(store: Path, cli: FakeClaude, cwd: Path) -> trio.Process:
    """crash_child.py in ``hang`` mode, once its turn has reported its session (killed if
    it does not get there)."""
    argv = [sys.executable, str(CHILD), str(store), cli.binary, str(cwd), "hang"]
    # The reaper is what these tests are about. In turn cgroups, any runtime that starts on
    # this machine may remove a dead runtime's cgroups first (tests/test_isolation.py).
    env = {**os.environ, "AGENTRT_CGROUP": "off"}
    process = await trio.lowlevel.open_process(argv, stdout=subprocess.PIPE, env=env)
    assert process.stdout is not None
    try:
        seen = b""
        with trio.fail_after(30):
            while f"SESSION {SID}".encode() not in seen:
                chunk = await process.stdout.receive_some()
                assert chunk, f"the child ended early: {seen!r}"
                seen += chunk
    except BaseException:
        await kill_child(process)
        raise
    return process


async def kill_child(process: trio.Process) -> None:
    process.kill()
    await process.wait()
    assert process.stdout is not None
    await process.stdout.aclose()


@asynccontextmanager
async def killed_child(tmp_path: Path, cli: FakeClaude) -> AsyncIterator[tuple[Path, str]]:
    """Run crash_child.py until its turn is under way and its CLI has started its tool, then
    SIGKILL its fence guard and it (as the OOM killer or a kill of the whole session
    might: a guard alone would kill the turn itself, see the next test); give the store and
    the marker prefix of its turns. Whatever of its turns is still running at the end is
    killed (the test has failed by then)."""
    store = tmp_path / "s.sqlite3"
    process = await hanging_child(store, cli, tmp_path)
    for guard in fence_guards(process.pid):
        os.kill(guard, signal.SIGKILL)
    await kill_child(process)
    assert process.returncode == -signal.SIGKILL
    prefix = f"{process.pid}."
    try:
        # The CLI and its setsid'd tool outlive their runtime.
        await wait_until(lambda: len(turn_processes(prefix)) == 2, bound=10)
        yield store, prefix
    finally:
        await kill_marked(MARKER_ENV, prefix, prefix=True)


async def test_a_new_runtime_reaps_the_turn_a_killed_one_left(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="agentrt")
    cli = FakeClaude(tmp_path / "cli")
    async with killed_child(tmp_path, cli) as (store_path, prefix):
        store = SQLiteStore(store_path)
        async with open_runtime(store=store):
            [record] = await store.list()
            assert (record.live_pgid, record.runtime_id) == (None, None)
            assert (record.session_id, record.last_stop_reason) == (SID, "process_crashed")
            assert record.turns == 1
        await wait_until(lambda: turn_processes(prefix) == [], bound=5)
    [kill] = [r.getMessage() for r in caplog.records if "killed process group" in r.getMessage()]
    assert "'coder'" in kill and f":{prefix.rstrip('.')}:" in kill  # the dead runtime's id


async def test_the_fence_guard_kills_the_turn_of_a_killed_runtime_at_once(
    tmp_path: Path,
) -> None:
    cli = FakeClaude(tmp_path / "cli")
    process = await hanging_child(tmp_path / "s.sqlite3", cli, tmp_path)
    prefix = f"{process.pid}."
    try:
        await wait_until(lambda: len(turn_processes(prefix)) == 2, bound=10)
        assert len(fence_guards(process.pid)) == 1
    finally:
        await kill_child(process)
    try:
        # No new runtime, no reaper: the guard saw its runtime go and killed the CLI and
        # its setsid'd tool.
        await wait_until(lambda: turn_processes(prefix) == [], bound=5)
    finally:
        await kill_marked(MARKER_ENV, prefix, prefix=True)


async def test_rows_of_a_live_runtime_are_left_alone(tmp_path: Path) -> None:
    cli = FakeClaude(tmp_path / "cli")
    agent = Coder()
    path = tmp_path / "s.sqlite3"
    async with open_runtime(store=SQLiteStore(path)) as rt:
        await rt.start_agent(agent, name="coder", backend="claude", binary=cli.binary, **FAST)
        await rt.tell("coder", "long job")
        with trio.fail_after(10):
            await agent.session_seen.wait()
        # A second runtime on the same file, in this very process, while the turn runs: its
        # start reaps what dead runtimes left, and leaves this row.
        async with open_runtime(store=SQLiteStore(path)) as other:
            assert len(await other.store.live_processes()) == 1
        [live] = await rt.store.live_processes()
        assert live.live_marker is not None
        await wait_until(lambda: len(turn_processes(live.live_marker or "-")) == 2)


async def test_a_kill_of_the_cli_mid_turn_keeps_the_session(tmp_path: Path) -> None:
    cli = FakeClaude(tmp_path / "cli")
    agent = Coder()
    async with open_runtime(store=SQLiteStore(tmp_path / "s.sqlite3")) as rt:
        await rt.start_agent(agent, name="coder", backend="claude", binary=cli.binary, **FAST)
        ref = await rt.tell("coder", "long job")
        with trio.fail_after(10):
            await agent.session_seen.wait()
        [live] = await rt.store.live_processes()
        assert live.live_pid is not None
        os.kill(live.live_pid, signal.SIGKILL)
        result = await rt.wait(ref)
        assert isinstance(result, Failed) and isinstance(result.error, TurnFailed)
        assert result.error.reason is StopReason.PROCESS_CRASHED
        assert result.error.session_id == SID
