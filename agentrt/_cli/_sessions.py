"""``agentrt sessions [list | show NAME | forget NAME]`` and ``agentrt status``: the rows of
the session store, and which runtime (node, pid) owns each agent."""

from __future__ import annotations

import argparse
import datetime
import time
from collections.abc import Mapping, Sequence
from typing import Any

from .._budget_spending import budgets_data, counted_tokens, spent_by_key
from .._credentials import clock_time, held_agents
from .._records import Lease, SessionRecord, StoredBudget, StoredCredential, StoredRequest
from .._stores._postgres import PostgresStore
from .._stores._sqlite import SQLiteStore
from ._args import is_dsn
from ._render import CliError, Output, money
from ._store import store_path


def record_data(record: SessionRecord) -> dict[str, Any]:
    """The JSON shape of one stored session (the agent-state blob by size only)."""
    usage = record.usage
    return {
        "name": record.name,
        "backend": record.backend,
        "session_id": record.session_id,
        "cwd": record.cwd,
        "turns": record.turns,
        "cost_usd": record.cost_usd,
        "usage": {
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "cache_creation_input_tokens": usage.cache_creation_input_tokens,
            "cache_read_input_tokens": usage.cache_read_input_tokens,
        },
        "last_stop_reason": record.last_stop_reason,
        "created_at": record.created_at,
        "updated_at": record.updated_at,
        "live_pgid": record.live_pgid,
        "live_idle": record.live_idle,
        "state_bytes": None if record.state is None else len(record.state),
    }


def state_of(record: SessionRecord | None, lease: Lease | None) -> str:
    """``in a turn`` / ``idle, CLI kept`` / ``owned`` (a live lease), ``lease expired`` or
    ``not owned``."""
    if lease is not None and lease.held:
        if record is None or record.live_pgid is None:
            return "owned"
        return "idle, CLI kept" if record.live_idle else "in a turn"
    if lease is not None and lease.owner is not None:
        return "lease expired"
    return "not owned"


def owner_data(record: SessionRecord | None, lease: Lease | None) -> dict[str, Any]:
    """The JSON shape of who owns an agent: state, owner (node, pid, runtime), lease."""
    data: dict[str, Any] = {"state": state_of(record, lease), "owner": None, "lease": None}
    if lease is not None:
        data["lease"] = {key: getattr(lease, key) for key in ("epoch", "age", "remaining", "held")}
        if (owner := lease.owner) is not None:
            data["owner"] = {key: getattr(owner, key) for key in ("node", "pid", "runtime_id")}
    return data


def _owner_cells(record: SessionRecord | None, lease: Lease | None) -> list[str]:
    owner = None if lease is None else lease.owner
    if lease is None or owner is None:
        return [state_of(record, lease), "-", "-"]
    return [state_of(record, lease), f"{owner.node}:{owner.pid}", f"{lease.age:.1f}s"]


def _when(timestamp: float) -> str:
    return datetime.datetime.fromtimestamp(timestamp).strftime("%Y-%m-%d %H:%M")


async def run_status(args: argparse.Namespace, out: Output) -> int:
    """Every agent name of the store, with its state and owner, for every runtime sharing
    it: ``agentrt status`` is ``agentrt sessions status``."""
    args.action = "status"
    return await run_sessions(args, out)


async def run_sessions(args: argparse.Namespace, out: Output) -> int:
    """List, show or forget stored sessions; exit 1 when a named one is not there."""
    action = args.action or "list"
    if is_dsn(args.store):
        async with PostgresStore(args.store) as store:
            return await _sessions(store, action, args, out, "the PostgreSQL store")
    path = store_path(args)
    if not path.exists():
        # Reading must not create the store as a side effect.
        if action in ("list", "status"):
            if out.json_mode:
                out.data([])
            else:
                out.say(f"No sessions yet (the store {path} does not exist).")
            return 0
        raise _unknown(args.session_name, path)
    async with SQLiteStore(path) as store:
        return await _sessions(store, action, args, out, path)


async def _sessions(
    store: SQLiteStore | PostgresStore,
    action: str,
    args: argparse.Namespace,
    out: Output,
    path: object,
) -> int:
    if action == "list":
        records = await store.list()
        leases = {lease.name: lease for lease in await store.leases()}
        if out.json_mode:
            out.data([record_data(r) | owner_data(r, leases.get(r.name)) for r in records])
        elif not records:
            out.say(f"No sessions in {path}.")
        else:
            rows = [
                [
                    r.name,
                    r.backend,
                    r.session_id or "-",
                    str(r.turns),
                    money(r.cost_usd),
                    r.last_stop_reason or "-",
                    _when(r.updated_at),
                    *_owner_cells(r, leases.get(r.name)),
                    r.cwd or "-",
                ]
                for r in records
            ]
            headers = ["NAME", "BACKEND", "SESSION", "TURNS", "COST", "LAST STOP", "UPDATED"]
            owners = ["STATE", "OWNER", "LEASE AGE"]
            out.table([*headers, *owners, "CWD"], rows, title=f"Sessions in {path}")
        return 0
    if action == "status":
        return await _status(store, out, path)
    name = args.session_name
    if action == "show":
        record = await store.load(name)
        if record is None:
            raise _unknown(name, path)
        lease = next((lease for lease in await store.leases() if lease.name == name), None)
        data = record_data(record) | owner_data(record, lease)
        if out.json_mode:
            out.data(data)
        else:
            data["created_at"] = _when(record.created_at)
            data["updated_at"] = _when(record.updated_at)
            data["cost_usd"] = money(record.cost_usd)
            data["usage"] = f"{record.usage.input_tokens} in / {record.usage.output_tokens} out"
            out.table(
                ["FIELD", "VALUE"], [[k, "-" if v is None else str(v)] for k, v in data.items()]
            )
        return 0
    if not await store.forget(name):
        raise _unknown(name, path)
    if out.json_mode:
        out.data({"forgot": name})
    else:
        out.say(
            f"Forgot agent {name!r}: its next start begins a new session "
            "(the CLI's own transcript is left in place)."
        )
    return 0


def spending_data(
    record: SessionRecord | None,
    chain: tuple[StoredBudget, ...],
    spent: Mapping[str, tuple[float, int]],
) -> dict[str, Any]:
    """What an agent's name has spent (as budgets count it) and every budget that applies
    to it, as its last start stored them (`budgets_data`)."""
    return {
        "cost_usd": 0.0 if record is None else record.cost_usd,
        "tokens": 0 if record is None else counted_tokens(record.usage),
        "budgets": budgets_data(chain, spent),
    }


def _budget_cell(budget: dict[str, Any]) -> str:
    limits = []
    if budget["usd"] is not None:
        limits.append(f"{money(budget['left_usd'])} of {money(budget['usd'])} left")
    if budget["tokens"] is not None:
        limits.append(f"{budget['left_tokens']} of {budget['tokens']} tokens left")
    mark = "*" if budget["binding"] else ""
    return f"{mark}{budget['scope']}: {', '.join(limits)}"


def _spending_cells(data: dict[str, Any]) -> list[str]:
    budgets = "; ".join(_budget_cell(budget) for budget in data["budgets"]) or "-"
    return [money(data["cost_usd"]), str(data["tokens"]), budgets]


def hold_data(credential: StoredCredential | None, now: float) -> dict[str, Any]:
    """The JSON shape of what holds an agent (its credential's label, a park's end and
    reason, a halt's reason; None where nothing does)."""
    if credential is None:
        return {"credential": None, "parked_until": None, "park_reason": None, "halt_reason": None}
    parked = credential.parked_at(now)
    return {
        "credential": credential.label,
        "parked_until": credential.parked_until if parked else None,
        "park_reason": credential.park_reason if parked else None,
        "halt_reason": credential.halt_reason,
    }


def held_state(data: dict[str, Any]) -> str | None:
    """``halted`` or ``parked`` (`hold_data`), or None when nothing holds the agent."""
    if data["halt_reason"] is not None:
        return "halted"
    return "parked" if data["parked_until"] is not None else None


async def _status(store: SQLiteStore | PostgresStore, out: Output, path: object) -> int:
    records = {record.name: record for record in await store.list()}
    leases = {lease.name: lease for lease in await store.leases()}
    stored = await store.budgets()
    budgets, spent = dict(stored), spent_by_key(stored, records)
    names = sorted(records.keys() | leases.keys())
    now = time.time()
    queued = {name: _queued_data(await store.queued_requests(name), now) for name in names}
    held = held_agents(await store.credentials(), now)
    holds = {name: hold_data(held.get(name), now) for name in names}
    if out.json_mode:
        out.data(
            [
                {"name": n}
                | _held_owner(records.get(n), leases.get(n), holds[n])
                | spending_data(records.get(n), budgets.get(n, ()), spent)
                | {"queued": queued[n]}
                for n in names
            ],
        )
        return 0
    if not names:
        out.say(f"No agents in {path}.")
        return 0
    rows = []
    for name in names:
        record, lease = records.get(name), leases.get(name)
        left = "-" if lease is None or not lease.held else f"{lease.remaining:.1f}s"
        stop = "-" if record is None else record.last_stop_reason or "-"
        spending = _spending_cells(spending_data(record, budgets.get(name, ()), spent))
        waiting = queued[name]
        age = waiting["oldest_age"]
        cell = str(waiting["count"]) + ("" if age is None else f" ({age:.0f}s)")
        owner = _owner_cells(record, lease)
        hold = holds[name]
        owner[0] = held_state(hold) or owner[0]
        rows.append([name, *owner, left, stop, cell, *spending, _hold_cell(hold)])
    headers = ["NAME", "STATE", "OWNER", "LEASE AGE", "EXPIRES IN", "LAST STOP", "QUEUED"]
    headers += ["COST", "TOKENS", "BUDGETS (* binds)", "HELD BY"]
    out.table(headers, rows, title=f"Agents in {path}")
    return 0


def _held_owner(
    record: SessionRecord | None, lease: Lease | None, hold: dict[str, Any]
) -> dict[str, Any]:
    """`owner_data`, its state ``parked`` or ``halted`` where its credential holds it, and
    what holds it (`hold_data`)."""
    data = owner_data(record, lease) | hold
    data["state"] = held_state(hold) or data["state"]
    return data


def _hold_cell(hold: dict[str, Any]) -> str:
    if hold["halt_reason"] is not None:
        return str(hold["halt_reason"])
    if hold["parked_until"] is not None:
        until = clock_time(hold["parked_until"])
        return f"{hold['credential']}: parked until {until} ({hold['park_reason']})"
    return "-"


def _queued_data(requests: Sequence[StoredRequest], now: float) -> dict[str, Any]:
    """An agent's stored queue: how many wait, the oldest's age (seconds), their keys."""
    return {
        "count": len(requests),
        "oldest_age": max(0.0, now - requests[0].accepted_at) if requests else None,
        "keys": [request.key for request in requests if request.key is not None],
    }


def _unknown(name: str, path: object) -> CliError:
    return CliError(
        f"no stored session named {name!r} in {path}",
        "`agentrt sessions` lists the stored names (--store picks another store)",
    )
