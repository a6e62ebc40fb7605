"""Interrupt latency: from the interrupt call to every process of a fake CLI's tree gone.

The fake CLI is a shell that starts two children and then waits: one ``sleep`` in its own
process group and one ``setsid sleep`` in a session of its own (as Claude Code's Bash tool
does, so a group kill misses it). It writes the tree's pids to a file, prints an init line
carrying them, and waits. Like Claude Code it ends on SIGINT (exit 130); SIGTERM kills it;
its children, started as background jobs of a non-interactive shell, ignore SIGINT and die
on SIGTERM.

Per turn the harness waits for the pid file, opens a pidfd on every member (so "gone" is
seen the moment the kernel reports the exit, without polling; a zombie counts as gone),
takes T0, calls the contender's interrupt, and takes T1 when the last pidfd is readable.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import shlex
import signal
import tempfile
import time

import trio

from .contenders import InterruptContender, Start

_TREE = """#!/bin/sh
# Fake CLI tree for the interrupt benchmark (see bench/interrupt.py).
trap 'exit 130' INT
sleep 1000 &
a=$!
setsid sleep 1000 &
b=$!
printf '%s %s %s\\n' "$$" "$a" "$b" > {pidfile}
printf '{{"type":"system","subtype":"init","session_id":"t","pids":[%s,%s,%s]}}\\n' "$$" "$a" "$b"
wait
"""
_TREE_SIZE = 3
# The warm variant: a live process (stream-json input) that starts the two children at each
# user message and, like claude 2.1.332, answers an interrupt request by ending the turn with
# an error_during_execution result and living on; its children are left for the runtime to
# kill at the turn's end. The pid file names the children only (the CLI stays).
_LIVE_TREE = """#!/bin/sh
# Fake live CLI tree for the warm interrupt benchmark (see bench/interrupt.py).
ok='{{"type":"control_response","response":{{"subtype":"success","request_id":"'
stop='{{"type":"result","subtype":"error_during_execution","is_error":true,"result":""'
while IFS= read -r line; do
    case "$line" in
    *control_request*)
        rest=${{line#*\\"request_id\\"}}
        rest=${{rest#*\\"}}
        printf '%s%s","response":{{}}}}}}\\n' "$ok" "${{rest%%\\"*}}"
        case "$line" in
        *'"interrupt"'*) printf '%s,"session_id":"t"}}\\n' "$stop";;
        esac;;
    *'"user"'*)
        sleep 1000 &
        a=$!
        setsid sleep 1000 &
        b=$!
        printf '%s %s\\n' "$a" "$b" > {pidfile}
        printf '{{"type":"system","subtype":"init","session_id":"t","pids":[%s,%s]}}\\n' "$a" "$b";;
    esac
done
"""
_LIVE_TREE_SIZE = 2
# Bounds so a contender that never kills the tree fails the run instead of hanging it.
_READY_TIMEOUT = 10.0
_GONE_TIMEOUT = 30.0


async def measure(contender: InterruptContender, turns: int) -> list[float]:
    """Latencies in seconds, one per turn."""
    latencies: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bench-interrupt-") as tmp:
        pidfile = trio.Path(tmp, "tree.pids")
        cli = trio.Path(tmp, "tree.cli")
        script, size = (_LIVE_TREE, _LIVE_TREE_SIZE) if contender.live else (_TREE, _TREE_SIZE)
        await cli.write_text(script.format(pidfile=shlex.quote(str(pidfile))))
        await cli.chmod(0o755)

        async def body(start: Start) -> None:
            for _ in range(turns):
                latencies.append(await _one_turn(start, pidfile, size))

        await contender.run(str(cli), body)
    return latencies


async def _one_turn(start: Start, pidfile: trio.Path, size: int) -> float:
    await pidfile.unlink(missing_ok=True)
    pidfds: list[int] = []
    gone = False
    try:
        async with trio.open_nursery() as nursery:
            interrupt = await start(nursery)
            with trio.fail_after(_READY_TIMEOUT):
                pids = await _wait_tree(pidfile, size)
            pidfds = [os.pidfd_open(pid) for pid in pids]
            t0 = time.perf_counter()
            result = interrupt()
            if inspect.isawaitable(result):
                await result
            with trio.fail_after(_GONE_TIMEOUT):
                for fd in pidfds:
                    await trio.lowlevel.wait_readable(fd)
            t1 = time.perf_counter()
            gone = True
        return t1 - t0
    finally:
        for fd in pidfds:
            # Only after a failure can one still be alive: leave nothing behind. A pidfd
            # names the process itself, so a reused pid is never hit.
            if not gone:
                with contextlib.suppress(ProcessLookupError):
                    signal.pidfd_send_signal(fd, signal.SIGKILL)
            os.close(fd)


async def _wait_tree(pidfile: trio.Path, size: int) -> list[int]:
    # Before T0, so polling costs nothing that is measured.
    while True:
        with contextlib.suppress(FileNotFoundError):
            text = await pidfile.read_text()
            if text.endswith("\n"):
                pids = [int(p) for p in text.split()]
                if len(pids) == size:
                    return pids
        await trio.sleep(0.001)
