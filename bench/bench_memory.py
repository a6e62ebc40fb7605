"""Memory per idle agent, with 10,000 agents started.

    .venv/bin/python bench/bench_memory.py [--agents N]

Each agent is a plain `agentrt.Agent` on a shared scripted backend with the default
options; every agent answers one ask (so it holds a session id) and is then idle.
Reports Python heap growth (tracemalloc) and resident set growth per agent.
"""

from __future__ import annotations

import argparse
import gc
import os
import tracemalloc

import trio
import trio.testing

import agentrt
from agentrt.testing import ScriptedBackend, reply


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def heap_bytes() -> int:
    return tracemalloc.get_traced_memory()[0] if tracemalloc.is_tracing() else 0


async def measure(agents: int, trace: bool) -> float:
    """Growth per agent: of the traced Python heap if ``trace``, else of the RSS (tracing
    itself costs memory per allocation, so the two are measured in separate runs)."""
    script = reply("ok", session_id="s-1")
    backend = ScriptedBackend(default=lambda call: script, record=False)
    async with agentrt.open_runtime(store=agentrt.MemoryStore()) as rt:
        await rt.start_agent(agentrt.Agent, name="warm", backend=backend)
        await rt.ask("warm", "hi")
        gc.collect()
        if trace:
            tracemalloc.start()
        before = heap_bytes() if trace else rss_bytes()
        for i in range(agents):
            await rt.start_agent(agentrt.Agent, name=f"agent-{i}", backend=backend)
        for i in range(agents):
            await rt.ask(f"agent-{i}", "hi")
        await trio.testing.wait_all_tasks_blocked()
        gc.collect()
        grown = (heap_bytes() if trace else rss_bytes()) - before
        tracemalloc.stop()
        assert all(rt.status(f"agent-{i}").state == "idle" for i in range(agents))
        return grown / agents


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--agents", type=int, default=10_000)
    args = parser.parse_args()
    rss = trio.run(measure, args.agents, False)
    heap = trio.run(measure, args.agents, True)
    print(f"{args.agents:,} idle agents")
    print(f"python heap per agent (tracemalloc): {heap / 1024:6.2f} KiB")
    print(f"resident set per agent (RSS):        {rss / 1024:6.2f} KiB")


if __name__ == "__main__":
    main()
