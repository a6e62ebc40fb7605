"""The added cost of a routed ``ask`` over a local one, on PostgreSQL (issue 16).

    .venv/bin/python -m bench.routed_ask [--dsn DSN] [--asks N]

Two runtimes on one loopback PostgreSQL, each a program of its own, as two hosts would
be: the owner (this script with ``--serve``) runs agent "x", the caller runs agent "y";
both agents are on the scripted backend (no process: only the runtime and the routing are
timed). The caller alternates a local ask to "y" and a routed ask to "x" and prints the
median and 90th percentile of each and the difference of the medians. Without ``--dsn`` a
throwaway server is started from the machine's PostgreSQL binaries (tests/pg_server.py).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import trio

import agentrt
from agentrt.testing import ScriptedBackend, reply
from bench.throwaway_pg import throwaway_dsn

WARMUP = 20
REPO = Path(__file__).resolve().parents[1]


async def serve(dsn: str) -> None:
    async with agentrt.open_runtime(store=agentrt.PostgresStore(dsn), node="owner") as rt:
        await rt.start_agent(agentrt.Agent, name="x", backend=_backend())
        print("READY", flush=True)
        await trio.sleep_forever()


def _backend() -> ScriptedBackend:
    return ScriptedBackend(default=lambda call: reply("ok"))


async def measure(dsn: str, asks: int) -> dict[str, list[float]]:
    argv = [sys.executable, "-m", "bench.routed_ask", "--serve", "--dsn", dsn]
    owner = await trio.lowlevel.open_process(argv, stdout=subprocess.PIPE, cwd=REPO)
    try:
        assert owner.stdout is not None
        assert (await owner.stdout.receive_some()).strip() == b"READY"
        store = agentrt.PostgresStore(dsn)
        async with agentrt.open_runtime(store=store, node="caller") as rt:
            await rt.start_agent(agentrt.Agent, name="y", backend=_backend())
            times: dict[str, list[float]] = {"local": [], "routed": []}
            for round_ in range(WARMUP + asks):
                for kind, name in (("local", "y"), ("routed", "x")):
                    start = time.perf_counter()
                    await rt.ask(name, "ping")
                    if round_ >= WARMUP:
                        times[kind].append(time.perf_counter() - start)
            return times
    finally:
        owner.kill()
        await owner.wait()


def report(times: dict[str, list[float]]) -> None:
    medians = {}
    for kind, seconds in times.items():
        ms = sorted(s * 1000 for s in seconds)
        medians[kind] = statistics.median(ms)
        p90 = ms[int(len(ms) * 0.9)]
        print(f"{kind:7} ask: median {medians[kind]:.2f} ms, p90 {p90:.2f} ms ({len(ms)} asks)")
    added = medians["routed"] - medians["local"]
    print(f"added by routing, at the median: {added:.2f} ms (goal <= 20 ms)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", help="a PostgreSQL DSN (default: a throwaway server)")
    parser.add_argument("--asks", type=int, default=300, help="asks of each kind (300)")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        trio.run(serve, args.dsn)
        return
    if args.dsn:
        report(trio.run(measure, args.dsn, args.asks))
        return
    with throwaway_dsn() as (dsn, _):
        report(trio.run(measure, dsn, args.asks))


if __name__ == "__main__":
    main()
