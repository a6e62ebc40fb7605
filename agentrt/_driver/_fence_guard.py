"""The fence guard: a small program beside a runtime that runs CLI turns on a shared store. It
kills the runtime's turn processes when the runtime stops answering (frozen by SIGSTOP,
stuck, or dead) before the runtime's leases can pass to another runtime.

    python -I -S _fence_guard.py TURNS

``TURNS`` is the runtime's marker prefix, ``<runtime pid>.<runtime token>``
(`agentrt._driver._proctree.marker_prefix`). The runtime writes a line to the guard's stdin
every lease_ttl / 5, and as it takes a lease while it holds none: the seconds left until it
would stop its own agents for want of a renewal (``inf``: none to guard). Past that time
with no newer line, or at the end of stdin without ``exit`` (the runtime died, or was closed
without saying so), the guard SIGKILLs every process of its user whose ``AGENTRT_TURN``
marker starts with ``TURNS.``: the runtime's turns, their setsid'd tools included, and no
other runtime's, not even one in the same process; and every turn process still waiting at
the runtime process's spawn gate (`gate_of`), which carries no marker yet (it has not
exec'd) and would otherwise run its CLI once the frozen runtime wakes, or wait there for
ever once the runtime died. After a missed deadline it goes on killing them until the next
line, so a runtime that wakes up starts no CLI before its own fence has run. ``exit`` ends
the guard without a kill.

It runs as its own program because the runtime's process may be the frozen one, so it
imports nothing of agentrt (and starts in milliseconds); `marker_of` is also the one
`agentrt._driver._proctree` reads markers with, `GATE_DIRECTORY` the name
`agentrt._driver._spawn` gives its gate.
"""

from __future__ import annotations

import math
import os
import select
import signal
import sys
import time

MARKER_ENV = "AGENTRT_TURN"
# The spawn gate of the runtime process PID is a FIFO in a (removed) directory named
# ``GATE_DIRECTORY.format(pid=PID)`` plus a random suffix; a child waiting at it holds the
# FIFO as fd GATE_FD (agentrt._driver._spawn).
GATE_DIRECTORY = "agentrt-spawn-{pid}-"
GATE_FD = 3
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


def gate_of(pid: int, proc: str = "/proc") -> str | None:
    """The name of the directory holding the file a process has open as fd `GATE_FD`: for a
    spawn's child waiting at its gate, the gate's (see `GATE_DIRECTORY`).

    A link is read, not the environment: until it execs, a spawn's child shares the runtime's
    memory, so /proc shows the runtime's environment there, not the turn's marker. Only our
    own user's processes are looked at, as in `marker_of`.
    """
    try:
        if os.stat(f"{proc}/{pid}").st_uid != os.getuid():
            return None
        return os.path.basename(os.path.dirname(os.readlink(f"{proc}/{pid}/fd/{GATE_FD}")))
    except OSError:
        return None


def kill_turns(turns: str) -> int:
    """SIGKILL every process of the turns of the runtime whose marker prefix is ``turns``
    (``<runtime pid>.<runtime token>``): those whose marker starts with ``<turns>.`` and
    those waiting at its process's spawn gate; how many were signalled."""
    runtime_pid = turns.partition(".")[0]
    prefix, gate = f"{turns}.", GATE_DIRECTORY.format(pid=runtime_pid)
    # The runtime holds its gate too (not at GATE_FD, but it must never be hit).
    spared = {runtime_pid, str(os.getpid())}
    killed = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or entry in spared:
            continue
        pid = int(entry)
        marker = marker_of(pid)
        if (marker is not None and marker.startswith(prefix)) or (
            (directory := gate_of(pid)) is not None and directory.startswith(gate)
        ):
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except OSError:
                pass
    return killed


def main(turns: str) -> None:
    deadline = math.inf
    missed = False
    pending = b""
    while True:
        wait = _REKILL if missed else max(0.0, deadline - time.monotonic())
        ready, _, _ = select.select([0], [], [], None if math.isinf(wait) else wait)
        if not ready:
            missed = True
            kill_turns(turns)
            continue
        chunk = os.read(0, 4096)
        if not chunk:  # the runtime is gone
            kill_turns(turns)
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
