"""A process's stat, read from /proc: the fields that name one process (pid and start
time) and place it in its group, session and tree."""

from __future__ import annotations

import os

import attrs

PROC = "/proc"
_GONE_STATES = frozenset("ZXx")


@attrs.frozen
class ProcStat:
    """The fields of ``/proc/<pid>/stat`` the tree needs. ``start_time`` is in clock ticks
    since boot: together with the pid it names one process, whatever reuses the pid later."""

    pid: int
    ppid: int
    pgrp: int
    session: int
    state: str
    start_time: int

    @property
    def gone(self) -> bool:
        return self.state in _GONE_STATES


def read_stat(pid: int) -> ProcStat | None:
    """The stat of ``pid``, or None if there is no such process."""
    # os.read, not open(): a turn's scan reads this for every process on the machine, and the
    # buffered file object costs more than the read. One read returns the whole line.
    try:
        fd = os.open(f"{PROC}/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        data = os.read(fd, 4096)
    except OSError:
        return None
    finally:
        os.close(fd)
    return parse_stat(pid, data)


def parse_stat(pid: int, data: bytes | None) -> ProcStat | None:
    """`read_stat` from the text of ``/proc/<pid>/stat`` (None or empty: no such process)."""
    if not data:
        return None
    # comm may hold spaces and parentheses; the fields after the last ')' are fixed.
    fields = data[data.rindex(b")") + 2 :].split()
    return ProcStat(
        pid=pid,
        ppid=int(fields[1]),
        pgrp=int(fields[2]),
        session=int(fields[3]),
        state=fields[0].decode("ascii"),
        start_time=int(fields[19]),
    )


def process_start_time(pid: int) -> int | None:
    """When ``pid`` started, in clock ticks since boot (``/proc/<pid>/stat`` field 22), or None
    if it does not exist. Record it with a pid to recognise that process later, not a pid
    reuse."""
    st = read_stat(pid)
    return None if st is None else st.start_time
