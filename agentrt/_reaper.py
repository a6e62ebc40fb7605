"""Runtime ids, and the reaper: turns a dead runtime left running are killed at the next start.

A runtime records the process group of every running CLI turn in the store, with its own
id (host, pid and start time of the Python process, and a random part) and the turn's env
marker. A runtime that dies without cleaning up (SIGKILL, OOM, power loss of the
terminal) leaves those rows behind, and the CLI and its tools run on. The next
`open_runtime` on that store finds the rows whose runtime is gone, kills what is left of
each turn with `kill_stale_group` (which checks start times, so a reused pid is never
hit, and finds setsid'd orphans by the marker), and marks the row.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket

from ._events import StopReason
from ._process import kill_stale_group, process_start_time
from ._records import SessionRecord
from ._store import LiveProcessStore, SessionStore
from ._telemetry import reap_span

logger = logging.getLogger("agentrt")

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


async def reap_stale_turns(store: SessionStore, *, term_grace: float = 2.0) -> int:
    """Kill the turns recorded as live in ``store`` whose runtime is gone; return how many
    rows were reaped. Each row is marked: a turn ended ``process_crashed``, no live group.

    Cancellation: bounded by about ``term_grace + 2 s`` per stale row; cancelled, the
    processes signalled so far stay signalled and unreaped rows stay for the next start.
    A store without live process records (no `LiveProcessStore`) has none to reap.
    """
    if not isinstance(store, LiveProcessStore):
        return 0
    reaped = 0
    for record in await store.live_processes():
        if record.runtime_id is None or not runtime_gone(record.runtime_id):
            continue
        await _reap(store, store, record, term_grace)
        reaped += 1
    return reaped


async def _reap(
    store: SessionStore, live: LiveProcessStore, record: SessionRecord, term_grace: float
) -> None:
    assert record.live_pgid is not None and record.live_pid is not None
    assert record.runtime_id is not None
    with reap_span(record.name, record.live_pgid, record.runtime_id) as reaped:
        killed = reaped["killed"] = await kill_stale_group(
            record.live_pgid,
            record.live_pid,
            record.live_start_time or 0,
            marker=record.live_marker,
            term_grace=term_grace,
        )
    extra = {"agent": record.name}
    if killed:
        logger.warning(
            "agent %r: killed process group %d (pid %d), left running by runtime %s",
            record.name,
            record.live_pgid,
            record.live_pid,
            record.runtime_id,
            extra=extra,
        )
    else:
        logger.info(
            "agent %r: process group %d of runtime %s had already ended",
            record.name,
            record.live_pgid,
            record.runtime_id,
            extra=extra,
        )
    await store.record_turn(
        record.name,
        stop_reason=StopReason.PROCESS_CRASHED.value,
        cost_usd=None,
        usage=None,
        session_id=None,
    )
    await live.clear_live_process(record.name)
