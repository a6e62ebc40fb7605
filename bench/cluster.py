"""4 nodes x 250 agents on one PostgreSQL: routed asks per second and the database's load
(issue 16).

    .venv/bin/python -m bench.cluster [--dsn DSN] [--nodes 4] [--agents 250]
        [--callers 4] [--seconds 20]

Each node is a runtime in a program of its own, as a host would be, on one loopback
PostgreSQL, owning ``--agents`` agents on the scripted backend (no process: only the
runtime, the routing and the database are timed). When all are up, every node runs
``--callers`` concurrent callers for ``--seconds``, each asking, one ask after the other,
a random agent owned by another node (so every ask is routed). The driver prints the
cluster's routed asks per second, the median and 95th percentile of an ask, and the
database's load over the same window: committed transactions per second
(``pg_stat_database.xact_commit``), connections (``pg_stat_activity``, at mid-run) and the
CPU of the server's processes (postmaster and backends, from /proc; only for the
throwaway server, started without ``--dsn`` from tests/pg_server.py), and the nodes' own
CPU, to show which side is the bottleneck.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import trio

import agentrt
from agentrt.testing import ScriptedBackend, reply
from bench.throwaway_pg import throwaway_dsn

REPO = Path(__file__).resolve().parents[1]


def _name(node: int, agent: int) -> str:
    return f"n{node}-a{agent}"


async def serve(dsn: str, node: int, nodes: int, agents: int, callers: int, seconds: float) -> None:
    """One node: own ``agents`` agents, then (on "GO" from stdin) ask the others' agents."""
    store = agentrt.PostgresStore(dsn)
    async with agentrt.open_runtime(store=store, node=f"node-{node}") as rt:
        for agent in range(agents):
            backend = ScriptedBackend(default=lambda call: reply("ok"))
            await rt.start_agent(agentrt.Agent, name=_name(node, agent), backend=backend)
        print("READY", flush=True)
        await trio.to_thread.run_sync(sys.stdin.readline)
        others = [n for n in range(nodes) if n != node]
        latencies: list[float] = []
        errors: list[str] = []
        deadline = trio.current_time() + seconds
        cpu = time.process_time()

        async def caller(seed: int) -> None:
            pick = random.Random(seed)
            while trio.current_time() < deadline:
                name = _name(pick.choice(others), pick.randrange(agents))
                start = time.perf_counter()
                try:
                    await rt.ask(name, "ping")
                except agentrt.AgentRTError as e:
                    errors.append(f"{name}: {e!r}")
                    continue
                latencies.append(time.perf_counter() - start)

        async with trio.open_nursery() as nursery:
            for seed in range(callers):
                nursery.start_soon(caller, node * 1000 + seed)
        cpu = time.process_time() - cpu
        print(json.dumps({"latencies": latencies, "errors": errors, "cpu": cpu}), flush=True)
        # Open until every node is done: the others may still be asking this one's agents.
        await trio.to_thread.run_sync(sys.stdin.readline)


def _server_cpu(postmaster: int | None) -> float:
    """CPU seconds of the postmaster, its live backends and the backends it reaped (0 for
    a server given by ``--dsn``, whose processes may be on another machine)."""
    if postmaster is None:
        return 0.0
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                # The fields after the command name, which may hold spaces: ") state ppid ..."
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # a process that ended meanwhile
        pid, ppid = int(entry), int(fields[1])
        if pid == postmaster:
            total += sum(int(v) for v in fields[11:15])  # utime stime cutime cstime
        elif ppid == postmaster:
            total += int(fields[11]) + int(fields[12])
    return total / ticks


def _commits(dsn: str) -> int:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()
    assert row is not None
    return int(row[0])


def _connections(dsn: str) -> int:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone()
    assert row is not None
    return int(row[0])


def measure(dsn: str, postmaster: int | None, args: argparse.Namespace) -> None:
    started = time.perf_counter()
    nodes = []
    try:
        for node in range(args.nodes):
            argv = [sys.executable, "-m", "bench.cluster", "--dsn", dsn, "--serve", str(node)]
            argv += ["--nodes", str(args.nodes), "--agents", str(args.agents)]
            argv += ["--callers", str(args.callers), "--seconds", str(args.seconds)]
            pipes = subprocess.PIPE
            nodes.append(subprocess.Popen(argv, stdin=pipes, stdout=pipes, cwd=REPO, text=True))
        for process in nodes:
            assert process.stdout is not None
            line = process.stdout.readline().strip()
            if line != "READY":
                sys.exit(f"a node did not start (it printed {line!r}; its errors are above)")
        up = time.perf_counter() - started
        commits, cpu, start = _commits(dsn), _server_cpu(postmaster), time.perf_counter()
        for process in nodes:
            assert process.stdin is not None
            process.stdin.write("GO\n")
            process.stdin.flush()
        time.sleep(args.seconds / 2)
        connections = _connections(dsn)
        results: list[dict[str, Any]] = []
        for process in nodes:
            assert process.stdout is not None
            results.append(json.loads(process.stdout.readline()))
        wall = time.perf_counter() - start
        commits, cpu = _commits(dsn) - commits, _server_cpu(postmaster) - cpu
        for process in nodes:
            assert process.stdin is not None
            process.stdin.close()  # the end of its input: the node closes its runtime
        for process in nodes:
            process.wait(timeout=60)
    finally:
        for process in nodes:
            if process.poll() is None:
                process.kill()
                process.wait()
    ms = sorted(s * 1000 for r in results for s in r["latencies"])
    errors = [e for r in results for e in r["errors"]]
    print(f"{args.nodes} nodes x {args.agents} agents up in {up:.1f} s;", end=" ")
    print(f"{args.callers} callers per node for {wall:.1f} s")
    print(f"routed asks: {len(ms)} ({len(ms) / wall:.0f} per second), {len(errors)} failed")
    if errors:
        print(f"first failure: {errors[0]}")
    if ms:
        p95 = ms[int(len(ms) * 0.95)]
        print(f"latency: median {statistics.median(ms):.2f} ms, p95 {p95:.2f} ms")
    print(f"database: {commits / wall:.0f} commits per second, {connections} connections")
    if postmaster is not None:
        print(f"server CPU: {cpu:.1f} s in {wall:.1f} s ({cpu / wall:.2f} cores)")
    nodes_cpu = sum(r["cpu"] for r in results)
    print(f"the nodes' CPU: {nodes_cpu:.1f} s in {wall:.1f} s ({nodes_cpu / wall:.2f} cores)")
    print(f"load average now: {os.getloadavg()[0]:.2f} (2 shared cores)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", help="a PostgreSQL DSN (default: a throwaway server)")
    parser.add_argument("--nodes", type=int, default=4, help="runtimes, one program each (4)")
    parser.add_argument("--agents", type=int, default=250, help="agents per node (250)")
    parser.add_argument("--callers", type=int, default=4, help="concurrent callers per node (4)")
    parser.add_argument("--seconds", type=float, default=20.0, help="asking time (20)")
    parser.add_argument("--serve", type=int, metavar="NODE", help=argparse.SUPPRESS)
    args = parser.parse_args()
    for option in ("agents", "callers"):
        if getattr(args, option) < 1:
            parser.error(f"--{option} must be at least 1, not {getattr(args, option)}")
    if args.nodes < 2:
        parser.error(f"--nodes must be at least 2 (asks go to other nodes), not {args.nodes}")
    if args.seconds <= 0:
        parser.error(f"--seconds must be positive, not {args.seconds}")
    if args.serve is not None:
        trio.run(serve, args.dsn, args.serve, args.nodes, args.agents, args.callers, args.seconds)
        return
    if args.dsn:
        measure(args.dsn, None, args)
        return
    with throwaway_dsn() as (dsn, postmaster):
        measure(dsn, postmaster, args)


if __name__ == "__main__":
    main()
