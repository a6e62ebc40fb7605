"""A program of its own that starts agents in git worktrees, for the tests that stand two
programs on one repository (sharing a store, or each with its own).

    python workspace_child.py STORE REPO TAG BRANCHES [GATE_FILE]

STORE is an SQLite file's path, or a PostgreSQL DSN (``host=...``). Prints ``READY`` once
its runtime is open; then (once it gets a shared flock of GATE_FILE, when given: the test
holds it exclusively until every program is ready) starts at once one agent
``TAG-i`` on branch ``race-i`` for each i below BRANCHES, printing ``race-i STARTED``,
``race-i IN_USE <holder>`` or ``race-i FAILED <error>`` for each, then ``DONE``, and runs
(owning its agents) until killed.
"""

from __future__ import annotations

import fcntl
import os
import sys

import trio

import agentrt
from agentrt.testing import ScriptedBackend, reply


async def start(rt: agentrt.Runtime, repo: str, name: str, branch: str) -> None:
    backend = ScriptedBackend(default=lambda call: reply("ok"))
    try:
        workspace = agentrt.GitWorktree(repo, branch=branch)
        await rt.start_agent(agentrt.Agent, name=name, backend=backend, workspace=workspace)
    except agentrt.BranchInUse as exc:
        print(f"{branch} IN_USE {exc.holder}", flush=True)
    except agentrt.AgentRTError as exc:
        print(f"{branch} FAILED {type(exc).__name__}: {exc}", flush=True)
    else:
        print(f"{branch} STARTED", flush=True)


async def main(store: str, repo: str, tag: str, branches: str, gate: str = "") -> None:
    opened = agentrt.PostgresStore(store) if "host=" in store else agentrt.SQLiteStore(store)
    # A long lease: a killed program's agents stay "held" in the store for the tests.
    async with agentrt.open_runtime(store=opened, lease_ttl=60) as rt:
        print("READY", flush=True)
        if gate:  # the programs start their agents at once
            fd = os.open(gate, os.O_RDONLY)
            await trio.to_thread.run_sync(fcntl.flock, fd, fcntl.LOCK_SH)
            os.close(fd)
        async with trio.open_nursery() as nursery:
            for i in range(int(branches)):
                nursery.start_soon(start, rt, repo, f"{tag}-{i}", f"race-{i}")
        print("DONE", flush=True)
        await trio.sleep_forever()


if __name__ == "__main__":
    trio.run(main, *sys.argv[1:])
