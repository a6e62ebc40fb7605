"""CPU and memory of this process and of the processes it started, read from /proc.

A warm CLI lives across the turns a measurement times, so its CPU is not in
``getrusage(RUSAGE_CHILDREN)`` (only reaped children are): it is read from its tree in
/proc instead. A process's ``utime + stime + cutime + cstime`` is its own CPU plus that of
the children it reaped, so the sum over the live tree, plus what this process reaped
(``RUSAGE_CHILDREN``), counts every descendant's CPU once, whichever of them ended when.
"""

from __future__ import annotations

import contextlib
import os
import resource
from collections.abc import Collection

_TICK = os.sysconf("SC_CLK_TCK")


def descendants(exclude: Collection[int] = ()) -> list[int]:
    """The live descendants of this process, but the subtrees of ``exclude``."""
    found: list[int] = []
    todo = _children("self")
    while todo:
        pid = todo.pop()
        if pid in exclude:
            continue
        found.append(pid)
        todo += _children(str(pid))
    return found


def _children(pid: str) -> list[int]:
    kids: list[int] = []
    with contextlib.suppress(FileNotFoundError, ProcessLookupError):
        for task in os.listdir(f"/proc/{pid}/task"):
            path = f"/proc/{pid}/task/{task}/children"
            with contextlib.suppress(FileNotFoundError, ProcessLookupError), open(path) as f:
                kids += (int(x) for x in f.read().split())
    return kids


def cpu_seconds(exclude: Collection[int] = ()) -> float:
    """CPU seconds of every descendant so far: the live tree's and the reaped ones'."""
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    ticks = sum(_stat_ticks(pid) for pid in descendants(exclude))
    return reaped.ru_utime + reaped.ru_stime + ticks / _TICK


def _stat_ticks(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat") as f:
            # The command may hold spaces and parentheses: the fields start after the last ")".
            fields = f.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return 0
    # utime, stime, cutime, cstime: fields 14-17 of stat(5), 12-15 after the command.
    return sum(int(x) for x in fields[11:15])


def rss_kib(exclude: Collection[int] = ()) -> int:
    """The sum of the live descendants' VmRSS (shared pages counted in each)."""
    return sum(status_kib(pid, "VmRSS") for pid in descendants(exclude))


def status_kib(pid: int | str, field: str) -> int:
    """A KiB field of /proc/PID/status (``pid`` may be "self"); 0 once the process is gone
    or a zombie (which has no memory fields)."""
    with (
        contextlib.suppress(FileNotFoundError, ProcessLookupError),
        open(f"/proc/{pid}/status") as f,
    ):
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0
