"""The reaper: turns a dead runtime left running are killed at the next start.

A runtime records the process group of every running CLI turn in the store, with its own
id (host, pid and start time of the Python process, and a random part) and the turn's env
marker. A runtime that dies without cleaning up (SIGKILL, OOM, power loss of the
terminal) leaves those rows behind, and the CLI and its tools run on. The next
`open_runtime` on that store finds the rows whose runtime is gone, kills what is left of
each turn with `kill_stale_group` (which checks start times, so a reused pid is never
hit, and finds setsid'd orphans by the marker), and marks the row. A runtime that takes an
agent over does the same with that agent's row before the agent's CLI starts.

The questions such a runtime's turns left waiting for a person (`AskOperator`) go too: the
turn that would read a decision is gone, so the console would offer a question whose answer
reaches nobody.
"""

from __future__ import annotations

import logging

from .._driver._process import kill_stale_group
from .._driver._runtimes import runtime_gone
from .._events import StopReason
from .._records import SessionRecord
from .._stores._protocols import ApprovalStore, LiveProcessStore, SessionStore
from .._telemetry._otel import reap_span

logger = logging.getLogger("agentrt")


async def reap_stale_turns(
    store: SessionStore, live: LiveProcessStore | None, *, term_grace: float = 2.0
) -> int:
    """Kill the turns recorded as live in ``store`` (``live``: the store's live process
    records, its `StoreCapabilities.live`) whose runtime is gone; return how many rows
    were reaped. Each row is marked: a turn ended ``process_crashed``, no live group.

    Cancellation: bounded by about ``term_grace + 2 s`` per stale row; cancelled, the
    processes signalled so far stay signalled and unreaped rows stay for the next start.
    A store without live process records (``live`` None) has none to reap.
    """
    if live is None:
        return 0
    reaped = 0
    for record in await live.live_processes():
        reaped += await reap_stale_turn(store, live, record, term_grace=term_grace)
    return reaped


async def reap_stale_approvals(approvals: ApprovalStore | None) -> int:
    """Take away the requests waiting for a person (``approvals``: the store's, its
    `StoreCapabilities.approvals`) whose runtime is gone; return how many."""
    if approvals is None:
        return 0
    stale = [a for a in await approvals.pending_approvals() if runtime_gone(a.runtime_id)]
    for approval in stale:
        await approvals.remove_approval(approval.id)
        logger.info(
            "agent %r: its question for a person (%s) went with runtime %s",
            approval.name,
            approval.tool_name,
            approval.runtime_id,
            extra={"agent": approval.name},
        )
    return len(stale)


async def reap_stale_turn(
    store: SessionStore,
    live: LiveProcessStore | None,
    record: SessionRecord,
    *,
    term_grace: float = 2.0,
) -> bool:
    """Kill the turn ``record`` (an agent's row) names as live if its runtime is gone, and
    mark the row as `reap_stale_turns` does; whether it did. A runtime that takes an agent
    over calls it before the agent's first CLI starts: the dead owner's CLI may still run
    (its fence guard died with it), and the next start of a program on the store, which
    reaps every row, may never come.

    Cancellation: bounded by about ``term_grace + 2 s``; cancelled, the processes signalled
    so far stay signalled and the row stays for the next start."""
    if (
        live is None
        or record.live_pgid is None
        or record.runtime_id is None
        or not runtime_gone(record.runtime_id)
    ):
        return False
    await _reap(store, live, record, term_grace)
    return True


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
