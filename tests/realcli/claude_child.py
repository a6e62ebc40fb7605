"""A program with one agent on the real claude backend, for the test that SIGKILLs it mid-turn.

    python claude_child.py STORE [NODE LEASE_TTL] < options.json

STORE is an SQLite file, or a PostgreSQL DSN (``host=...``); NODE and LEASE_TTL are the
runtime's (default: the hostname, 10 s).

The agent's ``start_agent`` options come as JSON on stdin (they hold the dummy key, which
must not travel on argv). The program asks ``first prompt`` and prints ``ANSWER <text>``,
then tells ``second prompt`` and waits for ever: the test kills it while that turn runs.
"""

from __future__ import annotations

import json
import sys

import trio

import agentrt


async def main(store: str, node: str | None = None, lease_ttl: str = "10") -> None:
    options = json.loads(sys.stdin.read())
    opened = agentrt.PostgresStore(store) if "host=" in store else agentrt.SQLiteStore(store)
    async with agentrt.open_runtime(store=opened, node=node, lease_ttl=float(lease_ttl)) as rt:
        await rt.start_agent(agentrt.Agent, name="coder", backend="claude", **options)
        response = await rt.ask("coder", "first prompt")
        print(f"ANSWER {response.text}", flush=True)
        rt.tell("coder", "second prompt")
        await trio.sleep_forever()


if __name__ == "__main__":
    trio.run(main, *sys.argv[1:])
