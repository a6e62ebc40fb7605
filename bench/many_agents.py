"""Many idle agents in one runtime (issue 22): how long each start takes as the agents
accumulate, how long closing the runtime takes, and the memory per agent, on a MemoryStore
and on an SQLiteStore file (with ``node=``, as a host sharing the file runs).

The agents are plain `agentrt.Agent` instances on the scripted backend, started one after
another and never asked: the costs measured are the runtime's own per-agent work (the
lease, the store rows, the supervisor, the fencing). Start times are taken over the first
and the last tenth of the agents, so a per-agent cost that grows with their number shows
as a ratio above 1.
"""

from __future__ import annotations

import gc
import os
import tempfile
import time
from typing import Any

import trio
import trio.testing

from . import cli_tree

STORES = ("memory", "sqlite")


async def _run(n: int, store_kind: str, folder: str) -> dict[str, Any]:
    import agentrt
    from agentrt.testing import ScriptedBackend

    backend = ScriptedBackend(record=False)
    store: agentrt.SessionStore
    options: dict[str, Any] = {}
    if store_kind == "memory":
        store = agentrt.MemoryStore()
    else:
        store = agentrt.SQLiteStore(os.path.join(folder, "sessions.sqlite3"))
        options["node"] = "bench"
    tenth = max(1, n // 10)
    out: dict[str, Any] = {"agents": n, "store": store_kind}
    gc.collect()
    rss_before = cli_tree.status_kib("self", "VmRSS")
    async with agentrt.open_runtime(store=store, **options) as rt:
        begun = time.perf_counter()
        marks = []
        for i in range(n):
            if i in (0, tenth, n - tenth):
                marks.append(time.perf_counter())
            await rt.start_agent(agentrt.Agent, name=f"a{i}", backend=backend)
        ended = time.perf_counter()
        await trio.testing.wait_all_tasks_blocked()
        gc.collect()
        out["kib_per_agent"] = (cli_tree.status_kib("self", "VmRSS") - rss_before) / n
        closing = time.perf_counter()
    out["stop_s"] = time.perf_counter() - closing
    out["start_s"] = ended - begun
    out["first_us"] = (marks[1] - marks[0]) / tenth * 1e6
    out["last_us"] = (ended - marks[2]) / tenth * 1e6
    if store_kind == "sqlite":
        # Every lease given back as the runtime closed (none left to expire).
        async with agentrt.SQLiteStore(os.path.join(folder, "sessions.sqlite3")) as reader:
            out["leases_left"] = sum(lease.held for lease in await reader.leases())
    return out


def measure(spec: dict[str, Any]) -> dict[str, Any]:
    """One run of ``spec["agents"]`` agents on ``spec["store"]``, in this fresh process."""
    with tempfile.TemporaryDirectory(prefix="bench-agents-") as folder:
        result: dict[str, Any] = trio.run(_run, spec["agents"], spec["store"], folder)
    return result
