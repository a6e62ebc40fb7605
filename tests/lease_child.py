"""A runtime in a program of its own that takes agent "x" on a shared store, for the tests
that stand two programs (or two nodes) on one store.

    python lease_child.py STORE NODE LEASE_TTL once|wait

STORE is an SQLite file's path, or a PostgreSQL DSN (``host=...``).

Prints ``STARTED`` once it owns "x", then runs until killed. ``once``: a refusal prints
``REFUSED <message>`` and ends. ``wait``: a refusal prints ``REFUSED`` the first time and is
retried every 0.1 s.
"""

from __future__ import annotations

import sys

import trio

import agentrt
from agentrt.testing import ScriptedBackend, reply


async def main(store: str, node: str, lease_ttl: str, mode: str) -> None:
    opened = agentrt.PostgresStore(store) if "host=" in store else agentrt.SQLiteStore(store)
    async with agentrt.open_runtime(store=opened, node=node, lease_ttl=float(lease_ttl)) as rt:
        refused = False
        while True:
            try:
                await rt.start_agent(
                    agentrt.Agent,
                    name="x",
                    backend=ScriptedBackend(default=lambda call: reply("ok")),
                    kill_grace=0.1,
                )
                break
            except agentrt.AgentAlreadyStarted as exc:
                if mode == "once":
                    print(f"REFUSED {exc}", flush=True)
                    return
                if not refused:
                    print("REFUSED", flush=True)
                    refused = True
                await trio.sleep(0.1)
        print("STARTED", flush=True)
        await trio.sleep_forever()


if __name__ == "__main__":
    trio.run(main, *sys.argv[1:5])
