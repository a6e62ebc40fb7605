"""ask() round trips per second on the scripted backend (one process, one core).

    .venv/bin/python bench/bench_ask.py [--asks N] [--repeat R]

Each ask is a full turn: mailbox, pre_turn, backend.command, the scripted run, three
events translated, stamped, retained and delivered, the Response, the answer. The
script is a session event, a text event and a result (like a short Claude reply).
"""

from __future__ import annotations

import argparse
import time

import trio

import agentrt
from agentrt.testing import ScriptedBackend, reply


def backend() -> ScriptedBackend:
    script = reply("ok", session_id="s-1")
    return ScriptedBackend(default=lambda call: script, record=False)


async def sequential(asks: int) -> float:
    """One caller, one agent: every ask waits for the previous answer."""
    async with agentrt.open_runtime(store=agentrt.MemoryStore()) as rt:
        await rt.start_agent(agentrt.Agent, name="a", backend=backend())
        await rt.ask("a", "warm up")
        start = time.perf_counter()
        for _ in range(asks):
            await rt.ask("a", "hi")
        return asks / (time.perf_counter() - start)


async def concurrent(asks: int, agents: int) -> float:
    """``agents`` agents, one caller each, all at once."""
    per_agent = asks // agents
    async with agentrt.open_runtime(store=agentrt.MemoryStore()) as rt:
        shared = backend()
        for i in range(agents):
            await rt.start_agent(agentrt.Agent, name=f"a{i}", backend=shared)

        async def caller(name: str) -> None:
            for _ in range(per_agent):
                await rt.ask(name, "hi")

        start = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for i in range(agents):
                nursery.start_soon(caller, f"a{i}")
        return per_agent * agents / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--asks", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    best_seq = max(trio.run(sequential, args.asks) for _ in range(args.repeat))
    best_conc = max(trio.run(concurrent, args.asks, 100) for _ in range(args.repeat))
    print(f"sequential asks, 1 agent:       {best_seq:9,.0f} asks/s")
    print(f"concurrent asks, 100 agents:    {best_conc:9,.0f} asks/s")


if __name__ == "__main__":
    main()
