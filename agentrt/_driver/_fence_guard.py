"""The fence guard: a small program beside a runtime that runs CLI turns on a shared store. It
kills the runtime's turn processes when the runtime stops answering (frozen by SIGSTOP,
stuck, or dead) before the runtime's leases can pass to another runtime.

    python -I -S _fence_guard.py RUNTIME_PID

The runtime writes a line to the guard's stdin every lease_ttl / 5: the seconds left until
it would stop its own agents for want of a renewal (``inf``: none to guard). Past that time
with no newer line, or at the end of stdin without ``exit`` (the runtime died), the guard
SIGKILLs every process of its user whose ``AGENTRT_TURN`` marker starts with
``RUNTIME_PID.``: the runtime's turns, their setsid'd tools included. After a missed
deadline it goes on killing them until the next line, so a runtime that wakes up starts
no CLI before its own fence has run. ``exit`` ends the guard without a kill.

It runs as its own program because the runtime's process may be the frozen one, so it
imports nothing of agentrt (and starts in milliseconds); `marker_of` is also the one
`agentrt._driver._proctree` reads markers with.
"""

from __future__ import annotations

import math
import os
import select
import signal
import sys
import time

MARKER_ENV = "AGENTRT_TURN"
# How often a guard whose deadline passed looks for new turn processes to kill.
_REKILL = 0.05


def marker_of(pid: int, proc: str = "/proc") -> str | None:
    """The ``AGENTRT_TURN`` value a process was started with, if any.

    Only our own user's processes are read: the marker is inherited, so anything of ours runs
    as us, and other users' environments are none of our business.
    """
    try:
        if os.stat(f"{proc}/{pid}").st_uid != os.getuid():
            return None
        with open(f"{proc}/{pid}/environ", "rb") as f:
            data = f.read()
    except OSError:
        return None
    prefix = MARKER_ENV.encode() + b"="
    for entry in data.split(b"\0"):
        if entry.startswith(prefix):
            return entry[len(prefix) :].decode("utf-8", "replace")
    return None


def kill_turns(prefix: str) -> int:
    """SIGKILL every process whose marker starts with ``prefix``; how many were signalled."""
    killed = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (marker := marker_of(int(entry))) and marker.startswith(prefix):
            try:
                os.kill(int(entry), signal.SIGKILL)
                killed += 1
            except OSError:
                pass
    return killed


def main(runtime_pid: str) -> None:
    prefix = f"{runtime_pid}."
    deadline = math.inf
    missed = False
    pending = b""
    while True:
        wait = _REKILL if missed else max(0.0, deadline - time.monotonic())
        ready, _, _ = select.select([0], [], [], None if math.isinf(wait) else wait)
        if not ready:
            missed = True
            kill_turns(prefix)
            continue
        chunk = os.read(0, 4096)
        if not chunk:  # the runtime is gone
            kill_turns(prefix)
            return
        *lines, pending = (pending + chunk).split(b"\n")
        if lines:
            last = lines[-1].strip()
            if last == b"exit":
                return
            try:
                deadline = time.monotonic() + float(last)
            except ValueError:  # a line cut short by the runtime's bounded write
                continue
            missed = False


if __name__ == "__main__":
    main(sys.argv[1])
