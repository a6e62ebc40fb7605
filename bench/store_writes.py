"""Store calls per turn on each store, and the time per call (issue 16).

    .venv/bin/python -m bench.store_writes [--dsn DSN] [--turns N]

For MemoryStore, SQLiteStore and PostgresStore, and three kinds of turn: a scripted turn
(no process), a per-turn CLI turn (the claude backend driving the fake CLI, a process per
turn) and a warm turn (the same with ``keep_alive``, one live process for all turns). The
store's public methods are wrapped to count each kind of call and the seconds spent in it;
the first turn (which starts the session) is counted on its own, the next N are averaged. Without
``--dsn`` a throwaway PostgreSQL is started (tests/pg_server.py).
"""

from __future__ import annotations

import argparse
import functools
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trio

import agentrt
from agentrt.testing import ScriptedBackend, fake_cli_executable, reply
from bench.throwaway_pg import throwaway_dsn

# Reads and writes of a turn's path; the lease methods are timed too (renewals run on their
# own clock, so they show up only when a turn spans a renewal).
METHODS = (
    "load",
    "checkpoint_session",
    "record_turn",
    "record_turn_with_history",
    "set_live_process",
    "clear_live_process",
    "set_live_idle",
    "save_state",
    "save_spec",
    "append_transcript",
    "load_transcript",
    # A durable request's (SQLite and PostgreSQL keep requests; MemoryStore has none).
    "enqueue_request",
    "start_request",
    "claim_request",
    "settle_request",
    "release_request",
    "acquire_lease",
    "renew_leases",
    "release_leases",
)
FAST: dict[str, Any] = {"kill_grace": 0.3, "startup": 10, "watchdog": 30}
SESSION = "s-bench"
ONE_TURN = (
    {"type": "system", "subtype": "init", "session_id": SESSION, "model": "fake"},
    {"type": "assistant", "message": {"content": [{"type": "text", "text": "ok"}]}},
    {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "result": "ok",
        "session_id": SESSION,
        "total_cost_usd": 0.01,
        "usage": {"input_tokens": 10},
    },
)


class Counted:
    """Counts and times the calls made to one store's methods, while ``on``."""

    def __init__(self, store: Any) -> None:
        self.calls: Counter[str] = Counter()
        self.seconds: dict[str, float] = defaultdict(float)
        self.on = False
        for name in METHODS:
            if hasattr(store, name):
                setattr(store, name, self._wrap(name, getattr(store, name)))

    def _wrap(self, name: str, method: Callable[..., Awaitable[Any]]) -> Callable[..., Any]:
        @functools.wraps(method)
        async def counted(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return await method(*args, **kwargs)
            finally:
                if self.on:
                    self.calls[name] += 1
                    self.seconds[name] += time.perf_counter() - start

        return counted


def _stores(directory: Path, dsn: str) -> dict[str, Callable[[], Any]]:
    return {
        "memory": agentrt.MemoryStore,
        "sqlite": lambda: agentrt.SQLiteStore(directory / f"s-{time.monotonic_ns()}.sqlite3"),
        "postgres": lambda: agentrt.PostgresStore(dsn),
    }


def _turn_kinds(directory: Path) -> dict[str, dict[str, Any]]:
    # A per-turn process prints one turn and exits; a live one answers each user message.
    once = fake_cli_executable(str(directory), *(["emit", e] for e in ONE_TURN), name="claude")
    live = fake_cli_executable(str(directory), ["live", {"turns": [[["answer"]]]}], name="live")
    cli = {"backend": "claude", "cwd": str(directory), **FAST}
    return {
        "scripted": {"backend": ScriptedBackend(default=lambda call: reply("ok"))},
        "per-turn CLI": {**cli, "binary": once},
        "warm (keep_alive)": {**cli, "binary": live, "keep_alive": 600},
    }


async def measure(
    store: Any, name: str, options: dict[str, Any], turns: int
) -> tuple[Counted, Counter[str]]:
    """The calls of ``turns`` turns after the first, and those the first one made. ``name``
    is new to the store (the PostgreSQL database is shared by the rows), so the first turn
    starts a session."""
    counted = Counted(store)
    async with agentrt.open_runtime(store=store, node="bench") as rt:
        await rt.start_agent(agentrt.Agent, name=name, **options)
        counted.on = True
        await rt.ask(name, "first")
        first = counted.calls.copy()
        counted.calls.clear()
        counted.seconds.clear()
        for n in range(turns):
            await rt.ask(name, f"turn {n}")
        counted.on = False
    return counted, first


def _kinds(calls: Counter[str], turns: int) -> str:
    return ", ".join(f"{name} {n / turns:g}" for name, n in sorted(calls.items()))


def report(kind: str, store: str, measured: tuple[Counted, Counter[str]], turns: int) -> None:
    counted, first = measured
    total = sum(counted.calls.values())
    seconds = sum(counted.seconds.values())
    per_call = seconds / total * 1000 if total else 0.0
    row = (kind, store, _kinds(first, 1), f"{total / turns:g}", _kinds(counted.calls, turns))
    print(f"| {' | '.join(row)} | {per_call:.2f} ms |")


async def run(dsn: str, turns: int) -> None:
    with tempfile.TemporaryDirectory(prefix="agentrt-bench-") as scratch:
        directory = Path(scratch)
        print("| turn | store | first turn | calls per turn | of each kind | time per call |")
        print("|---|---|---|---|---|---|", flush=True)
        for k, (kind, options) in enumerate(_turn_kinds(directory).items()):
            for store, make in _stores(directory, dsn).items():
                measured = await measure(make(), f"agent-{k}", options, turns)
                report(kind, store, measured, turns)
                sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", help="a PostgreSQL DSN (default: a throwaway server)")
    parser.add_argument("--turns", type=int, default=50, help="turns measured per row (50)")
    args = parser.parse_args()
    if args.turns < 1:
        parser.error(f"--turns must be at least 1, not {args.turns}")
    if args.dsn:
        trio.run(run, args.dsn, args.turns)
        return
    with throwaway_dsn() as (dsn, _):
        trio.run(run, dsn, args.turns)


if __name__ == "__main__":
    main()
