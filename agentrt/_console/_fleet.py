"""The fleet as the console shows it: one row per agent name the store knows, from the
store's records and leases and, where the agent can be reached (this runtime's, or through
the routing of a store that routes calls), its `AgentStatus`."""

from __future__ import annotations

import datetime
import math
import os
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import attrs
import trio

from .._credentials import held_agents
from .._errors import AgentRTError, AgentStopped
from .._records import Lease, SessionRecord, StoredCredential
from .._redact import redact
from .._status import AgentStatus

if TYPE_CHECKING:
    from .._runtime import Runtime

# What the page calls each state (the status's, or the store's when no status is had).
STATE_LABELS = {
    "processing": "in a turn",
    "idle_warm": "idle, CLI kept",
    "idle": "idle",
    "halted": "halted",
    "parked": "parked",
    "restarting": "restarting",
}
# A status call routed to another node must not hold a refresh of the whole fleet up.
STATUS_BOUND = 3.0
_STATUS_CALLS = 16  # routed status calls in flight at once


@attrs.frozen
class AgentRow:
    """One agent on the fleet page: content-free (no prompt, no answer)."""

    name: str
    node: str | None
    pid: int | None
    backend: str
    mode: str | None
    state: str
    session_id: str | None
    turns: int
    cost_usd: float
    restarts: int | None
    last_outcome: str | None
    # When the store last wrote its record (wall clock; the page shows its age).
    updated_at: float | None
    queued: int | None
    # Seconds its oldest queued request has waited (None: none queued, or no status had).
    oldest_queued: float | None
    halt_pending: bool
    # What is left of the agent's tightest budget (AgentStatus; None: no such limit, or
    # no status had).
    budget_left_usd: float | None
    budget_left_tokens: int | None
    # Background tasks its warm CLI runs (a count: their descriptions are the model's words).
    background: int | None = None

    def data(self) -> dict[str, Any]:
        data = attrs.asdict(self)
        data["cost_usd"] = self.cost_usd if math.isfinite(self.cost_usd) else None
        return data


def store_state(
    record: SessionRecord | None, lease: Lease | None, leases: bool, *, owner_ended: bool = False
) -> str:
    """The state the store alone tells: a held lease's agent is in a turn or idle, an
    expired one's lost its lease; without leases (or with a released one) it is stopped.
    ``owner_ended``: a routed call found the lease's runtime gone (killed: its lease is
    held until it expires), so no turn runs, whatever its record last said."""
    if lease is not None and lease.held:
        if owner_ended:
            return "owner ended"
        if record is not None and record.live_pgid is not None:
            return "idle, CLI kept" if record.live_idle else "in a turn"
        return "idle"
    if leases and lease is not None and lease.owner is not None:
        return "lease lost"
    return "stopped"


async def fleet(runtime: Runtime) -> list[AgentRow]:
    """Every agent name of the runtime's store (and every agent the runtime runs), by name."""
    records = {record.name: record for record in await runtime.store.list()}
    store = runtime.store_capabilities.leases
    has_leases = store is not None
    leases = {}
    if store is not None:
        leases = {lease.name: lease for lease in await store.leases()}
    local = set(runtime.agents())
    names = sorted(records.keys() | local | {n for n, lease in leases.items() if lease.held})
    reachable = [n for n in names if n in local or (n in leases and leases[n].held)]
    statuses, ended = await _statuses(runtime, reachable)
    kept = runtime.store_capabilities.credentials
    held = {} if kept is None else held_agents(await kept.credentials(), time.time())
    rows = []
    for name in names:
        record, lease, status = records.get(name), leases.get(name), statuses.get(name)
        row = _row(runtime, name, record, lease, status, name in local, has_leases, name in ended)
        if name in held and (status is None or status.state in ("idle", "idle_warm")):
            # Its credential holds it, as the store says (another program's limit or
            # expiry, a dead program's): its next turn waits.
            row = attrs.evolve(row, state=stored_label(held[name], time.time()))
        rows.append(row)
    return rows


def _row(
    runtime: Runtime,
    name: str,
    record: SessionRecord | None,
    lease: Lease | None,
    status: AgentStatus | None,
    local: bool,
    has_leases: bool,
    owner_ended: bool,
) -> AgentRow:
    owner = None if lease is None else lease.owner
    if local:
        node, pid = runtime.node, os.getpid()
    elif owner is not None and lease is not None and lease.held:
        node, pid = owner.node, owner.pid
    else:
        node, pid = None, None
    if status is not None:
        state = state_label(status)
        # The CLI's pid where it runs one; else the runtime's process.
        pid = status.cli_pid or pid
    else:
        state = store_state(record, lease, has_leases, owner_ended=owner_ended)
    handle = runtime.whereis(name) if local else None
    backend = record.backend if record is not None else handle.backend if handle else "-"
    return AgentRow(
        name=name,
        node=node,
        pid=pid,
        backend=backend,
        mode=None if status is None else status.mode,
        state=state,
        session_id=status.session_id if status is not None else _stored_session(record),
        turns=record.turns if record is not None else status.turns if status else 0,
        cost_usd=record.cost_usd if record is not None else 0.0,
        restarts=None if status is None else status.restarts,
        last_outcome=None
        if record is None or record.last_stop_reason is None
        else redact(record.last_stop_reason),
        updated_at=None if record is None else record.updated_at,
        queued=None if status is None else status.queued,
        oldest_queued=None if status is None else status.oldest_queued,
        halt_pending=status is not None and status.halt_pending,
        budget_left_usd=None if status is None else status.budget_left_usd,
        budget_left_tokens=None if status is None else status.budget_left_tokens,
        background=None if status is None else len(status.background),
    )


def state_label(status: AgentStatus) -> str:
    """What the page calls the agent's state, with why the runtime holds it: "parked until
    07:50 UTC, usage limit", "halted, login expired"."""
    label = STATE_LABELS.get(status.state, status.state)
    if status.state == "parked" and status.parked_until is not None:
        until = datetime.datetime.fromtimestamp(status.parked_until, datetime.UTC)
        return f"{label} until {until:%H:%M} UTC, usage limit"
    if status.state == "halted" and status.halt_reason is not None:
        return f"{label}, login expired"
    return label


def stored_label(credential: StoredCredential, now: float) -> str:
    """`state_label` of an agent the store says its credential holds."""
    if credential.halt_reason is not None:
        return f"{STATE_LABELS['halted']}, login expired"
    assert credential.parked_until is not None and credential.parked_at(now)
    until = datetime.datetime.fromtimestamp(credential.parked_until, datetime.UTC)
    return f"{STATE_LABELS['parked']} until {until:%H:%M} UTC, usage limit"


def _stored_session(record: SessionRecord | None) -> str | None:
    return None if record is None else record.session_id


async def _statuses(
    runtime: Runtime, names: Sequence[str]
) -> tuple[dict[str, AgentStatus], set[str]]:
    """The status of each of ``names`` that answered, and the names whose owner the
    routing found gone (`AgentStopped`)."""
    found: dict[str, AgentStatus] = {}
    ended: set[str] = set()
    limit = trio.CapacityLimiter(_STATUS_CALLS)

    async def one(name: str) -> None:
        async with limit:
            with trio.move_on_after(STATUS_BOUND):
                try:
                    found[name] = await runtime.status(name)
                except AgentStopped:
                    ended.add(name)
                except AgentRTError:
                    pass  # stopped meanwhile, or out of reach: the store's state stands

    async with trio.open_nursery() as nursery:
        for name in names:
            nursery.start_soon(one, name)
    return found, ended
