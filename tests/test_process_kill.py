"""Tier 3: interrupt, cancellation and the kill ladder over whole trees (real processes)."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import threading
from typing import Any

import attrs
import pytest
import trio
from proc_helpers import (
    ENV,
    FAST,
    IGNORE_INT,
    IGNORE_TERM,
    READY,
    SLACK,
    Frames,
    Walks,
    child,
    fake,
    running,
    wait_not_running,
    wait_until,
)

import agentrt._driver._proctree
from agentrt._driver._lines import LineSplitter
from agentrt._driver._process import kill_stale_group, process_start_time
from agentrt._driver._procfs import read_stat
from agentrt._driver._proctree import (
    _PR_GET_CHILD_SUBREAPER,
    MARKER_ENV,
    ProcTree,
    _prctl,
    new_marker,
)
from agentrt.backend import ExitStatus
from agentrt.lowlevel import ProcessTracker, open_cli_process
from agentrt.testing import fake_cli_argv

RESULT = {"type": "result", "subtype": "error_during_execution"}


def is_subreaper() -> bool:
    """Whether this process is a child subreaper now."""
    value = ctypes.c_int(0)
    _prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(value))
    return bool(value.value)


# Graces far longer than SLACK: a test that ends within SLACK waited out none of them.
LONG_GRACES = attrs.evolve(FAST, interrupt_grace=60.0, term_grace=60.0)


async def frames_until_ready(frames: Any) -> list[Any]:
    """Read frames up to and including the first {"type": "ready"}."""
    got = []
    async for frame in frames:
        got.append(frame)
        if frame == {"type": "ready"}:
            return got
    raise AssertionError(f"no ready frame in {got}")


async def test_interrupt_with_sigint_lets_the_cli_finish_its_turn() -> None:
    # Claude Code on SIGINT: a final result, exit 0.
    command = fake(["on", "SIGINT", [["emit", RESULT]]], READY, ["hang"])
    command = attrs.evolve(command, interrupt_signal=signal.SIGINT)
    async with open_cli_process(command, LONG_GRACES) as proc:
        frames = Frames(proc)
        await frames_until_ready(frames)
        proc.interrupt()
        proc.interrupt()  # idempotent
        with trio.fail_after(SLACK):  # no grace waited out, no escalation
            rest = [f async for f in frames]
            assert await proc.wait() == ExitStatus(0)
    assert rest == [RESULT]


async def test_interrupt_escalates_to_sigterm_after_the_interrupt_grace() -> None:
    command = attrs.evolve(fake(IGNORE_INT, READY, ["hang"]), interrupt_signal=signal.SIGINT)
    async with open_cli_process(command, FAST) as proc:
        await frames_until_ready(Frames(proc))
        start = trio.current_time()
        proc.interrupt()
        status = await proc.wait()
        took = trio.current_time() - start
    assert status == ExitStatus(None, signal.SIGTERM)
    assert FAST.interrupt_grace <= took < FAST.interrupt_grace + SLACK


async def test_interrupt_escalates_to_sigkill_after_the_term_grace() -> None:
    command = fake(IGNORE_INT, IGNORE_TERM, READY, ["hang"])
    command = attrs.evolve(command, interrupt_signal=signal.SIGINT)
    async with open_cli_process(command, FAST) as proc:
        frames = Frames(proc)
        await frames_until_ready(frames)
        start = trio.current_time()
        proc.interrupt()
        assert [f async for f in frames] == []  # reading goes on until the stream ends
        status = await proc.wait()
        took = trio.current_time() - start
    assert status == ExitStatus(None, signal.SIGKILL)
    grace = FAST.interrupt_grace + FAST.term_grace
    assert grace <= took < grace + SLACK


async def test_interrupt_without_an_interrupt_signal_starts_at_sigterm() -> None:
    async with open_cli_process(fake(READY, ["hang"]), LONG_GRACES) as proc:
        await frames_until_ready(Frames(proc))
        proc.interrupt()
        with trio.fail_after(SLACK):  # not after the interrupt grace
            assert await proc.wait() == ExitStatus(None, signal.SIGTERM)


async def test_cancelling_a_silent_reader_waits_out_no_grace() -> None:
    cancelled_at = 0.0
    async with trio.open_nursery() as nursery:

        async def turn() -> None:
            async with open_cli_process(fake(READY, ["hang"]), LONG_GRACES) as proc:
                frames = Frames(proc)
                await frames_until_ready(frames)
                nursery.cancel_scope.cancel()
                nonlocal cancelled_at
                cancelled_at = trio.current_time()
                async for _ in frames:
                    pass
            raise AssertionError("not reached")

        nursery.start_soon(turn)
    # The whole ladder ran inside the cancelled block: SIGTERM, exit, confirm, drain, reap.
    assert trio.current_time() - cancelled_at < SLACK


async def test_cancellation_kills_a_sigterm_ignoring_cli_after_the_term_grace() -> None:
    statuses: list[ExitStatus | None] = []
    start = 0.0
    with trio.move_on_after(60) as scope:
        async with open_cli_process(fake(IGNORE_TERM, READY, ["hang"]), FAST) as proc:
            await frames_until_ready(Frames(proc))
            start = trio.current_time()
            scope.cancel()
            await trio.sleep_forever()
    statuses.append(proc.exit_status)
    took = trio.current_time() - start
    assert statuses == [ExitStatus(None, signal.SIGKILL)]
    assert FAST.term_grace <= took < FAST.term_grace + SLACK


async def test_the_whole_tree_dies_with_the_turn() -> None:
    # Same group, ignoring SIGTERM; a setsid'd subtree (as the Claude Bash tool runs) with a
    # grandchild of its own; and one in a new session with a cleared environment, findable
    # only by parent pid while the CLI lives.
    command = fake(
        child(IGNORE_TERM, READY, ["hang"]),
        child(child(IGNORE_TERM, READY, ["hang"]), READY, ["hang"], setsid=True),
        child(IGNORE_TERM, READY, ["hang"], setsid=True, clear_env=True),
        ["hang"],
    )
    pids: list[int] = []
    ready = 0
    async with open_cli_process(command, FAST) as proc:
        async for frame in Frames(proc):
            if frame.get("type") == "spawned":
                pids.append(frame["pid"])
            ready += frame == {"type": "ready"}
            if ready == 4:
                break
        assert len(pids) == 4 and all(running(pid) for pid in pids)
    assert proc.exit_status == ExitStatus(None, signal.SIGTERM)
    assert not any(running(pid) for pid in pids)


async def test_setsid_grandchild_of_a_sigkilled_cli_does_not_survive() -> None:
    # The CLI dies by SIGKILL with no chance to clean up; its Bash-tool-like grandchild in a
    # new session ignores SIGTERM. It is found again by its env marker and killed.
    command = fake(
        child(IGNORE_TERM, READY, ["hang"], setsid=True, stderr="null"),
        ["sleep", 0.3],
        ["kill", "SIGKILL"],
    )
    async with open_cli_process(command, FAST) as proc:
        frames = [f async for f in Frames(proc)]
        assert await proc.wait() == ExitStatus(None, signal.SIGKILL)
    grandchild = frames[0]["pid"]
    assert {"type": "ready"} in frames
    assert not running(grandchild)


async def test_with_a_tracker_orphans_are_adopted_recorded_killed_and_reaped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Worse: the orphan also cleared its environment, so no marker finds it. The tracker makes
    # us its new parent (subreaper) and its walks knew it by pid and start time.
    tracker = ProcessTracker()
    walks = Walks(tracker, monkeypatch)
    command = fake(
        child(IGNORE_TERM, READY, ["hang"], setsid=True, clear_env=True, stderr="null"),
        ["hang"],
    )
    assert not is_subreaper()
    async with trio.open_nursery() as nursery:
        await nursery.start(tracker.run, 0.05)
        assert is_subreaper()
        async with open_cli_process(command, FAST, tracker=tracker) as proc:
            assert [p.pid for p in tracker.live()] == [proc.pid]
            frames = Frames(proc)
            got = await frames_until_ready(frames)
            orphan = got[0]["pid"]
            await walks.wait()  # one walk while its parent lives records it
            os.kill(proc.pid, signal.SIGKILL)
            me = os.getpid()
            await wait_until(lambda: (st := read_stat(orphan)) is not None and st.ppid == me)
            assert running(orphan)  # adopted by us, still alive
            assert [f async for f in frames] == []
        assert read_stat(orphan) is None  # killed, and reaped: not even a zombie
        assert tracker.live() == ()
        nursery.cancel_scope.cancel()
    assert not is_subreaper()


async def test_a_turn_ending_finds_its_marked_orphan_and_passes_other_turns_leaders_by(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # With many turns at once, the end of each would read the environ of every other turn's
    # leader (all children of ours) looking for its marker; they carry their own, so they are
    # passed by, while an orphan of the ending turn is still found by its marker.
    read: list[int] = []
    original = agentrt._driver._proctree.marker_of

    def marker_of(pid: int) -> str | None:
        read.append(pid)
        return original(pid)

    monkeypatch.setattr(agentrt._driver._proctree, "marker_of", marker_of)
    tracker = ProcessTracker(cgroups=False)  # the walk is what this is about
    # No periodic walk: had one seen the orphan while its parent lived, it would be known by
    # pid, and its marker never read (a race on a loaded machine).
    monkeypatch.setattr(tracker, "reap", lambda: 0)
    ending = fake(child(READY, ["hang"], setsid=True, stderr="null"), ["hang"])
    async with trio.open_nursery() as nursery:
        await nursery.start(tracker.run, 60.0)
        async with open_cli_process(ending, FAST, tracker=tracker) as first:
            frames = Frames(first)
            orphan = (await frames_until_ready(frames))[0]["pid"]
            async with open_cli_process(fake(READY, ["hang"]), FAST, tracker=tracker) as other:
                await frames_until_ready(Frames(other))
                os.kill(first.pid, signal.SIGKILL)
                me = os.getpid()
                await wait_until(lambda: (st := read_stat(orphan)) is not None and st.ppid == me)
                assert [f async for f in frames] == []
                read.clear()
                await first._shutdown()  # what leaving its block runs
                assert read_stat(orphan) is None  # found by its marker, killed, reaped
                assert orphan in read and other.pid not in read
                assert running(other.pid)
        nursery.cancel_scope.cancel()


async def test_the_trackers_walk_reads_its_turns_processes_not_the_machines(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The leader is our child and we are the subreaper: the periodic walk (every second of a
    # busy runtime) reads the turn's own subtree and our children, not every process's stat.
    read: list[int] = []
    original = agentrt._driver._proctree.read_stat

    def read_stat(pid: int) -> Any:
        read.append(pid)
        return original(pid)

    tracker = ProcessTracker(cgroups=False)  # the walk is what this is about
    async with trio.open_nursery() as nursery:
        await nursery.start(tracker.run, 60.0)
        async with open_cli_process(fake(READY, ["hang"]), FAST, tracker=tracker) as proc:
            await frames_until_ready(Frames(proc))
            monkeypatch.setattr(agentrt._driver._proctree, "read_stat", read_stat)
            tracker.reap()
            monkeypatch.undo()
            assert proc.pid in read
            assert os.getppid() not in read and 1 not in read
        nursery.cancel_scope.cancel()


async def test_the_tracker_never_takes_another_childs_exit_status(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tracker = ProcessTracker()
    walks = Walks(tracker, monkeypatch)
    async with trio.open_nursery() as nursery:
        await nursery.start(tracker.run, 0.01)
        async with open_cli_process(fake(READY, ["hang"]), FAST, tracker=tracker) as proc:
            await frames_until_ready(Frames(proc))
            other = await trio.lowlevel.open_process([sys.executable, "-c", "raise SystemExit(5)"])
            await wait_until(lambda: not running(other.pid))  # a zombie child of ours now
            assert tracker.reap() == 0
            await walks.wait(3)  # nor do the periodic walks
            # Had anyone reaped it, Popen would find no child and report 0.
            assert await other.wait() == 5
        nursery.cancel_scope.cancel()


async def close(process: trio.Process) -> None:
    with contextlib.suppress(ProcessLookupError):
        process.kill()
    await process.wait()
    assert process.stdout is not None
    await process.stdout.aclose()


async def start_stale_turn(*steps: Any, ready: int) -> tuple[trio.Process, int]:
    """A turn as a previous runtime would have left it: its own session, our marker, not
    driven by open_cli_process. Returns once ``ready`` processes said so."""
    process = await trio.lowlevel.open_process(
        fake_cli_argv(*steps),
        env={**ENV, MARKER_ENV: new_marker()},
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
    )
    assert process.stdout is not None
    splitter = LineSplitter(1 << 20)
    seen = 0
    with trio.fail_after(30):
        while seen < ready:
            lines = splitter.feed(await process.stdout.receive_some())
            seen += sum(json.loads(line) == {"type": "ready"} for line in lines)
    start = process_start_time(process.pid)
    assert start is not None
    return process, start


async def test_kill_stale_group_kills_a_live_leader_and_its_tree() -> None:
    process, start = await start_stale_turn(
        child(IGNORE_TERM, READY, ["hang"], setsid=True), READY, ["hang"], ready=2
    )
    try:
        assert await kill_stale_group(process.pid, process.pid, start, term_grace=0.3)
        assert await process.wait() == -signal.SIGTERM
        assert not await kill_stale_group(process.pid, process.pid, start, term_grace=0.3)
    finally:
        await close(process)


async def test_kill_stale_group_finds_the_marker_on_a_surviving_group_member() -> None:
    # The leader is dead and gone; a group member and a setsid'd grandchild live on.
    process, start = await start_stale_turn(
        child(READY, ["hang"]),
        child(IGNORE_TERM, READY, ["hang"], setsid=True),
        READY,
        ["hang"],
        ready=3,
    )
    try:
        tree = ProcTree(leader=process.pid, start_time=start, pgid=process.pid)
        members = [st.pid for st in tree.scan()]
        process.kill()
        await process.wait()
        assert (len(members) == 3 and running(members[1])) or running(members[2])
        assert await kill_stale_group(process.pid, process.pid, start, term_grace=0.3)
        for pid in members:
            await wait_not_running(pid)
    finally:
        await close(process)


async def test_kill_stale_group_leaves_a_reused_pid_alone() -> None:
    process, start = await start_stale_turn(READY, ["hang"], ready=1)
    try:
        # Recorded with another start time: this pid now belongs to somebody else.
        assert not await kill_stale_group(process.pid, process.pid, start - 1, term_grace=0.3)
        await trio.sleep(0.05)
        assert running(process.pid)
        assert await kill_stale_group(process.pid, process.pid, start, term_grace=0.3)
    finally:
        await close(process)


def test_process_start_time() -> None:
    assert isinstance(process_start_time(os.getpid()), int)
    assert process_start_time(2**22 + 1) is None  # above any pid_max


def test_adopted_reads_every_thread_once_the_main_thread_has_finished(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Orphans go to the subreaper's first live thread: the main thread while it runs; after
    # it, to any thread, so all their child lists are read.
    finished = threading.Thread(target=lambda: None)
    finished.start()
    finished.join()
    reads: list[object] = []
    original = agentrt._driver._proctree._thread_children

    def thread_children(pid: int, tid: int | str) -> list[int]:
        reads.append(tid)
        return original(pid, tid)

    monkeypatch.setattr(agentrt._driver._proctree, "_thread_children", thread_children)
    agentrt._driver._proctree._adopted()
    assert reads == [os.getpid()]
    reads.clear()
    monkeypatch.setattr(threading, "main_thread", lambda: finished)
    agentrt._driver._proctree._adopted()
    assert sorted(map(int, reads)) == sorted(map(int, os.listdir(f"/proc/{os.getpid()}/task")))
