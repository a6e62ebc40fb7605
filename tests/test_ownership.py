"""`agentrt._cluster._ownership`'s own unit tests: what the fence guard is told (a lease
taken when none was held, a beat still being written as the runtime closes). The leases
themselves are tested through the public API (tests/test_leases.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import attrs
import trio
import trio.testing
from proc_helpers import running, wait_dead_unseen

from agentrt import MemoryStore
from agentrt._cluster._ownership import Ownership
from agentrt._driver._proctree import MARKER_ENV, marker_prefix


@attrs.define(eq=False)
class SharedStore(MemoryStore):
    """A MemoryStore that says other programs share it, so the runtime starts its guard."""

    @property
    def shared_between_programs(self) -> bool:
        return True


async def test_a_lease_taken_with_none_held_reaches_the_guard_before_the_cli_can_start() -> None:
    # Issue 34: the guard of a runtime holding no lease was told "inf" (none to guard); the
    # next lease's deadline reached it only at the fence's next beat, up to lease_ttl / 5
    # later. A runtime frozen in between (its new CLI just spawned) kept that CLI alive
    # past its lease, beside the next owner's. The grant must tell the guard itself.
    store = await SharedStore().__aenter__()
    ownership = Ownership(
        store, None, node="n", runtime_id="n:1:2:abc", ttl=1.0, on_lost=lambda *_: None
    )
    # What the guard kills: a process carrying a marker of this runtime's turns.
    env = {**os.environ, MARKER_ENV: f"{marker_prefix('n:1:2:abc')}.cli"}
    cli = await trio.lowlevel.open_process(
        [sys.executable, "-c", "import time; time.sleep(60)"], env=env
    )
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(ownership.run)
            await ownership.acquire("before", runs_processes=True)  # starts the guard
            await ownership.release("before")
            await ownership._beat()  # the fence's beat with no lease held: "inf"
            await ownership.acquire("x", runs_processes=True)
            # Frozen from here (no checkpoint: neither the fence nor its beats run), as a
            # runtime stopped by SIGSTOP right after it spawned x's CLI: the guard kills it
            # half a lease after the grant.
            wait_dead_unseen(cli.pid, bound=10)
            nursery.cancel_scope.cancel()
    finally:
        cli.kill()
        await cli.wait()
        await ownership.release_all()
        await store.aclose()
    assert not running(cli.pid)


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
