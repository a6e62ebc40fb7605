"""Tier 3: the liveness bounds and the drains (real child processes)."""

from __future__ import annotations

import os
import signal
from typing import Any

import attrs
import pytest
import trio
from proc_helpers import FAST, READY, SLACK, Frames, child, fake, running, wait_not_running

from agentrt import StopReason
from agentrt.backend import ExitStatus
from agentrt.lowlevel import ProcessFailure, open_cli_process


async def test_startup_bound_fails_a_silent_process_after_the_ladder() -> None:
    limits = attrs.evolve(FAST, startup=0.3)
    start = trio.current_time()
    async with open_cli_process(fake(["hang"]), limits) as proc:
        with pytest.raises(ProcessFailure) as info:
            async for _ in Frames(proc):
                pass
        took = trio.current_time() - start
        assert proc.exit_status == ExitStatus(None, signal.SIGTERM)
    assert info.value.reason is StopReason.STARTUP_TIMEOUT
    assert "0.3 s" in info.value.message
    assert 0.3 <= took < 0.3 + SLACK


async def test_startup_counts_a_complete_line_not_a_partial_one() -> None:
    limits = attrs.evolve(FAST, startup=0.3)
    with pytest.raises(ProcessFailure) as info:
        async with open_cli_process(fake(["write", '{"partial'], ["hang"]), limits) as proc:
            async for _ in Frames(proc):
                pass
    assert info.value.reason is StopReason.STARTUP_TIMEOUT


async def test_idle_bound_measures_the_gap_between_lines() -> None:
    # Gaps of 0.1 s pass a bound of 2 s even on a loaded machine; the silence after 3 does not.
    limits = attrs.evolve(FAST, startup=10.0, idle=2.0)
    command = fake(["emit", 1], ["sleep", 0.1], ["emit", 2], ["sleep", 0.1], ["emit", 3], ["hang"])
    got: list[Any] = []
    async with open_cli_process(command, limits) as proc:
        with pytest.raises(ProcessFailure) as info:
            async for frame in Frames(proc):
                got.append(frame)
                last = trio.current_time()
        gap = trio.current_time() - last
    assert got == [1, 2, 3]
    assert info.value.reason is StopReason.IDLE_TIMEOUT
    assert "2 s" in info.value.message
    assert 2.0 <= gap < 2.0 + SLACK


async def test_a_slow_consumer_is_not_an_idle_cli() -> None:
    # The CLI writes its second line at once; the consumer takes longer than the idle bound
    # before asking for it. Data waiting in the pipe is not silence.
    limits = attrs.evolve(FAST, idle=0.1)
    command = fake(["emit", 1], ["sleep", 0.05], ["emit", 2], ["hang"])
    async with open_cli_process(command, limits) as proc:
        frames = Frames(proc)
        assert await frames.__anext__() == 1
        await trio.sleep(1.0)  # ten idle bounds: the line is in the pipe long before
        assert await frames.__anext__() == 2
        with pytest.raises(ProcessFailure) as info:
            await frames.__anext__()
    assert info.value.reason is StopReason.IDLE_TIMEOUT


async def test_no_bounds_means_no_failure_on_a_slow_stream() -> None:
    limits = attrs.evolve(FAST, startup=None, idle=None)
    command = fake(["sleep", 0.2], ["repeat", 3, [["emit", "tick"], ["sleep", 0.1]]], ["exit", 0])
    async with open_cli_process(command, limits) as proc:
        assert [f async for f in Frames(proc)] == ["tick"] * 3
        assert await proc.wait() == ExitStatus(0)


async def test_a_grandchild_holding_stdout_does_not_hold_the_stream() -> None:
    # The CLI exits; a helper it started (same group) keeps stdout open and silent.
    command = fake(child(READY, ["hang"], stderr="null"), ["emit", "result"], ["exit", 0])
    start = trio.current_time()
    async with open_cli_process(command, FAST) as proc:
        frames = [f async for f in Frames(proc)]
        ended = trio.current_time()
        assert await proc.wait() == ExitStatus(0)
    helper = frames[0]["pid"]
    assert {"type": "ready"} in frames and "result" in frames
    assert ended - start < SLACK  # drain bound 0.3 s after the exit, not the helper's life
    assert not running(helper)


async def test_a_stderr_holder_we_cannot_find_costs_only_the_drain_bound() -> None:
    # A setsid'd grandchild with a cleared environment, spawned and left behind after the
    # CLI's last walk: nothing ties it to the turn, so only the time bound protects us.
    command = fake(
        child(["sleep", 60], setsid=True, clear_env=True, stdout="null"),
        ["stderr", "last words\n"],
        ["exit", 0],
    )
    start = trio.current_time()
    async with open_cli_process(command, FAST) as proc:
        frames = [f async for f in Frames(proc)]
        assert await proc.wait() == ExitStatus(0)
    took = trio.current_time() - start
    stray = frames[0]["pid"]
    try:
        assert running(stray)  # it really was out of reach...
        assert proc.stderr_tail == "last words\n"
        assert took < SLACK  # ...and cost the stderr drain bound, not its minute
    finally:
        os.kill(stray, signal.SIGKILL)
        await wait_not_running(stray)


async def test_a_stderr_holder_in_the_tree_is_killed_without_waiting() -> None:
    limits = attrs.evolve(FAST, stderr_drain=60.0)
    command = fake(child(["sleep", 60], setsid=True, stdout="null"), ["exit", 0])
    start = trio.current_time()
    async with open_cli_process(command, limits) as proc:
        frames = [f async for f in Frames(proc)]
    assert trio.current_time() - start < SLACK  # killed via its marker, not drained for 60 s
    assert not running(frames[0]["pid"])


# --- after EOF and after the exit: every wait is bounded ----------------------------------


async def test_a_cli_that_closes_its_output_and_lingers_fails_after_the_eof_grace() -> None:
    limits = attrs.evolve(FAST, eof_grace=0.3)
    command = fake(["emit", 1], ["write", "2"], ["close_output"], ["hang"])
    got: list[Any] = []
    async with open_cli_process(command, limits) as proc:
        with pytest.raises(ProcessFailure) as info:
            async for frame in Frames(proc):
                got.append(frame)
                if frame == 1:
                    closed = trio.current_time()
        took = trio.current_time() - closed
        assert proc.exit_status == ExitStatus(None, signal.SIGTERM)
    assert got == [1, 2]  # the last line, unterminated, still counts
    assert info.value.reason is StopReason.MALFORMED_OUTPUT
    assert info.value.message == "the CLI closed its output and did not exit within 0.3 s"
    assert 0.3 <= took < 0.3 + SLACK


async def test_a_cli_that_exits_within_the_eof_grace_ends_the_stream_normally() -> None:
    limits = attrs.evolve(FAST, eof_grace=5.0)
    command = fake(["emit", 1], ["close_output"], ["sleep", 0.2], ["exit", 3])
    async with open_cli_process(command, limits) as proc:
        assert [f async for f in Frames(proc)] == [1]
        assert await proc.wait() == ExitStatus(3)


TICK = [["emit", {"type": "tick"}], ["sleep", 0.05]]


async def test_the_drain_after_the_exit_is_bounded_in_all_not_per_line() -> None:
    # A grandchild in its own session keeps stdout open and writes a line every 0.05 s.
    command = fake(child(["repeat", 1000, TICK], setsid=True), ["emit", "result"], ["exit", 0])
    async with open_cli_process(command, FAST) as proc:
        frames = Frames(proc)
        while await frames.__anext__() != "result":
            pass
        await proc.wait()
        exited = trio.current_time()
        ticks = [f async for f in frames]
        took = trio.current_time() - exited
    assert ticks  # it did write meanwhile
    assert took < FAST.stdout_drain + SLACK  # the grandchild writes for 50 s


async def test_a_grandchild_writing_flat_out_cannot_hold_the_stream_past_the_drain() -> None:
    # The consumer is slower than the grandchild, so the pipe is never empty. Past the drain
    # bound only what the CLI left in the pipe is read: its last line arrives, then the end.
    # Each flood line fits in PIPE_BUF (4096 bytes), so the kernel writes it whole: a longer
    # write may be split around the CLI's own line, and that line would then not be a line.
    flood = ["repeat", 10**9, [["emit", "x" * 4000]]]
    command = fake(child(flood, setsid=True), ["sleep", 0.2], ["emit", "last words"], ["exit", 0])
    got: list[Any] = []
    async with open_cli_process(command, FAST) as proc:
        with trio.fail_after(20):
            async for frame in Frames(proc):
                got.append(frame)
                await trio.sleep(0.001)
        assert proc.exit_status == ExitStatus(0)
    assert "last words" in got


async def test_an_interrupt_after_the_exit_ends_the_drain() -> None:
    limits = attrs.evolve(FAST, stdout_drain=30.0)
    command = fake(child(["repeat", 1000, TICK], setsid=True), ["emit", "result"], ["exit", 0])
    async with open_cli_process(command, limits) as proc:
        frames = Frames(proc)
        while await frames.__anext__() != "result":
            pass
        await proc.wait()
        proc.interrupt()
        interrupted = trio.current_time()
        with trio.fail_after(5):
            async for _ in frames:
                pass
        took = trio.current_time() - interrupted
    assert took < SLACK  # not the 30 s drain
