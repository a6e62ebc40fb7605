"""A runtime in a program of its own for the failover tests: one that owns agents, or one
that hosts agents (``host_agents=True``) and takes over those no live runtime owns.

    python host_child.py STORE NODE LEASE_TTL own COUNT CLAUDE_BINARY CWD [STOP ...]
    python host_child.py STORE NODE LEASE_TTL host MAX_PROCESSES|none

STORE is an SQLite file's path, or a PostgreSQL DSN (``host=...``). ``own`` starts agents
``a0`` .. ``a<COUNT-1>`` (`hosted_agent.Hosted` on the (fake) claude binary, in CWD), asks
each one prompt, stops the ones named STOP with ``stop_agent``, prints ``READY`` and runs
until killed. ``host`` prints ``TOOK <name> <session id>`` for each agent it takes over,
after asking it one more prompt (so its conversation goes on here), and runs until killed.
"""

from __future__ import annotations

import sys

import trio
from hosted_agent import Hosted

import agentrt


def open_store(store: str) -> agentrt.SessionStore:
    return agentrt.PostgresStore(store) if "host=" in store else agentrt.SQLiteStore(store)


async def own(rt: agentrt.Runtime, count: str, binary: str, cwd: str, *stop: str) -> None:
    for index in range(int(count)):
        name = f"a{index}"
        await rt.start_agent(
            Hosted, name=name, backend="claude", binary=binary, cwd=cwd, kill_grace=0.1
        )
        await rt.ask(name, "the first prompt")
    for name in stop:
        await rt.stop_agent(name)
    print("READY", flush=True)


async def host(rt: agentrt.Runtime) -> None:
    seen: set[str] = set()
    while True:
        for name in rt.agents():
            if name not in seen:
                seen.add(name)
                response = await rt.ask(name, "the next prompt")
                print(f"TOOK {name} {response.session_id}", flush=True)
        await trio.sleep(0.05)


async def main(store: str, node: str, lease_ttl: str, mode: str, *args: str) -> None:
    limit = None if mode != "host" or args[0] == "none" else int(args[0])
    async with agentrt.open_runtime(
        store=open_store(store),
        node=node,
        lease_ttl=float(lease_ttl),
        kill_grace=0.1,  # a short lease_ttl needs it (the agents' default)
        host_agents=mode == "host",
        max_processes=limit,
    ) as rt:
        if mode == "own":
            await own(rt, *args)
        else:
            await host(rt)
        await trio.sleep_forever()


if __name__ == "__main__":
    trio.run(main, *sys.argv[1:])
