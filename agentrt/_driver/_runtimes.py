"""Runtime ids, and which runtimes are gone: the id a runtime writes with each record of
the store (its live processes, its leases), and whether the runtime that wrote one has
certainly ended (the reaper and the lease holders ask; a runtime of this process is gone
once it is closed)."""

from __future__ import annotations

import os
import secrets
import socket

from ._procfs import process_start_time

# The ids of the runtimes open in this process: their rows are never reaped.
_open: set[str] = set()


def new_runtime_id() -> str:
    """A fresh id for a runtime of this process: ``host:pid:start_time:random``."""
    pid = os.getpid()
    return f"{socket.gethostname()}:{pid}:{process_start_time(pid) or 0}:{secrets.token_hex(4)}"


def register(runtime_id: str) -> None:
    _open.add(runtime_id)


def unregister(runtime_id: str) -> None:
    _open.discard(runtime_id)


def runtime_gone(runtime_id: str) -> bool:
    """Whether the runtime that wrote ``runtime_id`` has certainly ended. A runtime of
    another host, or an id this agentrt did not write, is never taken for gone."""
    parts = runtime_id.split(":")
    if len(parts) != 4 or parts[0] != socket.gethostname():
        return False
    try:
        pid, start_time = int(parts[1]), int(parts[2])
    except ValueError:
        return False
    return local_runtime_gone(runtime_id, pid, start_time)


def local_runtime_gone(runtime_id: str, pid: int, start_time: int) -> bool:
    """Whether the runtime ``runtime_id`` of this machine's process ``pid`` (started at
    ``start_time`` clock ticks) has ended: the process is gone (or the pid is another
    process's now), or it is this process and that runtime is no longer open."""
    if pid == os.getpid() and start_time == process_start_time(pid):
        return runtime_id not in _open
    return process_start_time(pid) != start_time
