"""``agentrt sessions [list | show NAME | forget NAME]``: the rows of the session store."""

from __future__ import annotations

import argparse
import datetime
from typing import Any

from .._store import SessionRecord
from .._store_sqlite import SQLiteStore
from ._agent import store_path
from ._render import CliError, Output, money


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
        "state_bytes": None if record.state is None else len(record.state),
    }


def _when(timestamp: float) -> str:
    return datetime.datetime.fromtimestamp(timestamp).strftime("%Y-%m-%d %H:%M")


async def run_sessions(args: argparse.Namespace, out: Output) -> int:
    """List, show or forget stored sessions; exit 1 when a named one is not there."""
    path = store_path(args)
    action = args.action or "list"
    if not path.exists():
        # Reading must not create the store as a side effect.
        if action == "list":
            if out.json_mode:
                out.data([])
            else:
                out.say(f"No sessions yet (the store {path} does not exist).")
            return 0
        raise _unknown(args.session_name, path)
    async with SQLiteStore(path) as store:
        if action == "list":
            records = await store.list()
            if out.json_mode:
                out.data([record_data(r) for r in records])
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
                        r.cwd or "-",
                    ]
                    for r in records
                ]
                headers = ["NAME", "BACKEND", "SESSION", "TURNS", "COST", "LAST STOP"]
                out.table([*headers, "UPDATED", "CWD"], rows, title=f"Sessions in {path}")
            return 0
        name = args.session_name
        if action == "show":
            record = await store.load(name)
            if record is None:
                raise _unknown(name, path)
            data = record_data(record)
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


def _unknown(name: str, path: object) -> CliError:
    return CliError(
        f"no stored session named {name!r} in {path}",
        "`agentrt sessions` lists the stored names (--store picks another store)",
    )
