"""`agentrt._cluster._ownership`'s own unit test: closing while a beat to the fence guard is
still being written. The leases themselves are tested through the public API
(tests/test_leases.py)."""

from __future__ import annotations

import signal
import subprocess

import trio
import trio.testing

from agentrt._cluster._ownership import Ownership


async def test_closing_waits_for_a_beat_to_the_guard_still_being_written(
    autojump_clock: object,
) -> None:
    # A guard that reads nothing, its pipe full: a beat waits inside its write when the
    # runtime closes, and the closing exit must wait its turn (two writers at once raised
    # BusyResourceError out of the closing runtime), then kill the guard that stopped reading.
    ownership = Ownership(
        None, None, node="n", runtime_id="r", ttl=10.0, on_lost=lambda name, reason: None
    )
    guard = await trio.lowlevel.open_process(["sleep", "60"], stdin=subprocess.PIPE)
    assert guard.stdin is not None
    with trio.move_on_after(1.0):
        await guard.stdin.send_all(b"\n" * (1 << 20))
    ownership._guard = guard
    async with trio.open_nursery() as nursery:
        nursery.start_soon(ownership._beat)
        await trio.testing.wait_all_tasks_blocked()
        await ownership._stop_guard()
    assert guard.returncode == -signal.SIGKILL


async def test_a_cancelled_close_still_tells_the_guard_exit() -> None:
    # The close is cancelled (the runtime's bound on giving its leases back ran out, say)
    # as it stops the guard: the guard must hear ``exit`` all the same. Left running, it
    # would read the end of its stdin, once the pipe is collected, as the runtime's death.
    ownership = Ownership(
        None, None, node="n", runtime_id="r", ttl=10.0, on_lost=lambda name, reason: None
    )
    # Exits 0 only if its first line is exit.
    argv = ["sh", "-c", 'read line && [ "$line" = exit ]']
    guard = await trio.lowlevel.open_process(argv, stdin=subprocess.PIPE)
    ownership._guard = guard
    try:
        with trio.CancelScope() as scope:
            scope.cancel()
            await ownership._stop_guard()
        assert guard.returncode == 0
    finally:
        if guard.returncode is None:
            guard.kill()
            await guard.wait()
