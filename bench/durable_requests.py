"""What a durable request costs (issue 38): a plain `ask` against a keyed one, and a `tell`,
on each store, in one run.

    .venv/bin/python -m bench.durable_requests [--dsn DSN] [--calls N]

One runtime, one agent on the scripted backend (no process: what is measured is the
runtime and its store). For each store: N plain asks one after another, N keyed asks
(each its own key), then N tells to the agent while a turn holds it, so each is queued
(stored, not started) and its call's own time is what is timed. Each row gives calls per
second and the p50 and p99 of one call. MemoryStore keeps no requests (its asks and tells
are in memory: today's cost without durable requests); SQLiteStore (a file, fsynced) and
PostgresStore (the throwaway loopback server without ``--dsn``) store each request before
the call returns. Without ``--dsn`` a throwaway PostgreSQL is started (tests/pg_server.py).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trio

import agentrt
from agentrt.testing import Gate, ScriptedBackend, reply
from bench.throwaway_pg import throwaway_dsn


def _row(store: str, kind: str, seconds: list[float]) -> None:
    ordered = sorted(seconds)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    per_second = len(seconds) / sum(seconds)
    p50 = statistics.median(ordered)
    print(f"| {store} | {kind} | {per_second:,.0f} | {p50 * 1000:.2f} ms | {p99 * 1000:.2f} ms |")
    sys.stdout.flush()


async def _timed(calls: int, call: Callable[[int], Awaitable[Any]]) -> list[float]:
    seconds = []
    for n in range(calls):
        start = time.perf_counter()
        await call(n)
        seconds.append(time.perf_counter() - start)
    return seconds


async def measure(label: str, store: agentrt.SessionStore, calls: int) -> None:
    gate = Gate()
    scripts = [*reply("x", session_id="s")[:1], gate, *reply("x", session_id="s")[1:]]
    keyed = not isinstance(store, agentrt.MemoryStore)
    backend = ScriptedBackend(default=lambda call: reply("ok", session_id="s"))
    async with agentrt.open_runtime(store=store) as rt:
        await rt.start_agent(agentrt.Agent, name="a", backend=backend, max_pending=calls + 1)
        await rt.ask("a", "warm up")
        _row(label, "ask", await _timed(calls, lambda n: rt.ask("a", f"plain {n}")))
        if keyed:
            asked = await _timed(calls, lambda n: rt.ask("a", f"keyed {n}", key=f"k{n}"))
            _row(label, "ask, keyed", asked)
        held = ScriptedBackend([*scripts, *reply("x")], default=lambda call: reply("ok"))
        await rt.start_agent(agentrt.Agent, name="b", backend=held, max_pending=calls + 1)
        await rt.tell("b", "hold")
        await gate.wait_reached()
        _row(label, "tell, queued", await _timed(calls, lambda n: rt.tell("b", f"tell {n}")))
        await rt.stop_agent("b")


async def run(dsn: str, calls: int) -> None:
    with tempfile.TemporaryDirectory(prefix="agentrt-bench-") as scratch:
        print("| store | call | calls/s | p50 | p99 |")
        print("|---|---|---|---|---|", flush=True)
        await measure("memory", agentrt.MemoryStore(), calls)
        await measure("sqlite", agentrt.SQLiteStore(Path(scratch) / "s.sqlite3"), calls)
        await measure("postgres", agentrt.PostgresStore(dsn), calls)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", help="a PostgreSQL DSN (default: a throwaway server)")
    parser.add_argument("--calls", type=int, default=300, help="calls timed per row (300)")
    args = parser.parse_args()
    if args.calls < 1:
        parser.error(f"--calls must be at least 1, not {args.calls}")
    if args.dsn:
        trio.run(run, args.dsn, args.calls)
        return
    with throwaway_dsn() as (dsn, _):
        trio.run(run, dsn, args.calls)


if __name__ == "__main__":
    main()
