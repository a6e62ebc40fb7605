"""Failover benchmark: a node holding N agents is SIGKILLed; how long until a runtime
opened with ``host_agents=True`` on another node runs all N (goal: <= lease_ttl + 5 s).

    .venv/bin/python -m bench.failover [--agents 100] [--lease-ttl 10] [--store postgres|sqlite]

Two programs of their own on one store stand for two hosts: a loopback PostgreSQL started
from the machine's binaries (tests/pg_server.py) or an SQLite file. The agents are
`bench.hosted.Parked` on the claude backend with a fake binary that never runs (no turn is
asked: the figure is the takeover, not a CLI's start). The host prints the number of agents
it runs each time it changes; the driver times from the SIGKILL to the last agent, and
prints a Markdown row for bench/README.md.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import trio

import agentrt
from agentrt.testing import fake_cli_executable
from bench.hosted import Parked
from bench.throwaway_pg import throwaway_dsn

ROOT = Path(__file__).resolve().parent.parent


def open_store(store: str) -> agentrt.SessionStore:
    return agentrt.PostgresStore(store) if "host=" in store else agentrt.SQLiteStore(store)


async def own(store: str, ttl: float, count: int, workdir: str) -> None:
    binary = fake_cli_executable(workdir, ["hang"], name="claude")
    # kill_grace: a --lease-ttl under 10 s needs the short one (open_runtime checks the pair).
    async with agentrt.open_runtime(
        store=open_store(store), node="node-a", lease_ttl=ttl, kill_grace=0.1
    ) as rt:
        for index in range(count):
            await rt.start_agent(
                Parked,
                name=f"agent-{index:04d}",
                backend="claude",
                binary=binary,
                cwd=workdir,
                kill_grace=0.1,
            )
        print("READY", flush=True)
        await trio.sleep_forever()


async def host(store: str, ttl: float) -> None:
    async with agentrt.open_runtime(
        store=open_store(store), node="node-b", lease_ttl=ttl, kill_grace=0.1, host_agents=True
    ) as rt:
        print("HOSTING", flush=True)
        running = 0
        while True:
            if len(rt.agents()) != running:
                running = len(rt.agents())
                print(f"RUNNING {running} {time.monotonic()!r}", flush=True)
            await trio.sleep(0.01)


def spawn(*args: str) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "bench.failover", *args]
    return subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, text=True)


def expect(program: subprocess.Popen[str], word: str) -> str:
    assert program.stdout is not None
    line = program.stdout.readline()
    if not line.startswith(word):
        raise SystemExit(f"expected {word}, the program said {line!r}")
    return line


def measure(store: str, ttl: float, count: int, workdir: str) -> tuple[float, float]:
    """Seconds from the SIGKILL to the first and to the last agent running on the host."""
    owner = spawn("--role", "own", store, str(ttl), str(count), workdir)
    hosting = spawn("--role", "host", store, str(ttl))
    try:
        expect(owner, "READY")
        expect(hosting, "HOSTING")
        time.sleep(ttl / 2)  # a few renewals: the host sees a live owner
        killed = time.monotonic()
        os.kill(owner.pid, signal.SIGKILL)
        owner.wait()
        first = None
        while True:
            _, running, at = expect(hosting, "RUNNING").split()
            first = first if first is not None else float(at) - killed
            if int(running) == count:
                return first, float(at) - killed
    finally:
        for program in (owner, hosting):
            program.kill()
            program.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=100)
    parser.add_argument("--lease-ttl", type=float, default=10.0)
    parser.add_argument("--store", choices=("postgres", "sqlite"), default="postgres")
    parser.add_argument("--role", choices=("own", "host"), help=argparse.SUPPRESS)
    parser.add_argument("role_args", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "own":
        store, ttl, count, workdir = args.role_args
        trio.run(own, store, float(ttl), int(count), workdir)
        return
    if args.role == "host":
        store, ttl = args.role_args
        trio.run(host, store, float(ttl))
        return
    with tempfile.TemporaryDirectory(prefix="agentrt-failover-") as workdir:
        if args.store == "sqlite":
            first, last = measure(
                str(Path(workdir) / "store.sqlite3"), args.lease_ttl, args.agents, workdir
            )
        else:
            with throwaway_dsn() as (dsn, _):
                first, last = measure(dsn, args.lease_ttl, args.agents, workdir)
    goal = args.lease_ttl + 5
    print("| store | agents | lease_ttl | first runs elsewhere | all run elsewhere | goal |")
    print("|---|---|---|---|---|---|")
    verdict = "met" if last <= goal else "missed"
    print(
        f"| {args.store} | {args.agents} | {args.lease_ttl:g} s | {first:.2f} s | "
        f"{last:.2f} s | <= {goal:g} s ({verdict}) |"
    )


if __name__ == "__main__":
    main()
