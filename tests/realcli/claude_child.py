"""A program with one agent on the real claude backend, for the test that SIGKILLs it mid-turn.

    python claude_child.py STORE [NODE LEASE_TTL] [--idle] < options.json

STORE is an SQLite file, or a PostgreSQL DSN (``host=...``); NODE and LEASE_TTL are the
runtime's (default: the hostname, 10 s).

The agent's ``start_agent`` options come as JSON on stdin (they hold the dummy key, which
must not travel on argv). The program asks ``first prompt`` and prints ``ANSWER <text>``,
then tells ``second prompt`` (unless ``--idle``: then it does nothing more, and a warm CLI
waits between turns) and waits for ever: the test kills it.
"""

from __future__ import annotations

import functools
import json
import sys

import trio

import agentrt


async def main(
    store: str, node: str | None = None, lease_ttl: str = "10", *, idle: bool = False
) -> None:
    options = json.loads(sys.stdin.read())
    opened = agentrt.PostgresStore(store) if "host=" in store else agentrt.SQLiteStore(store)
    # The agent's kill_grace is the runtime's too: open_runtime checks it against lease_ttl.
    grace = {"kill_grace": options["kill_grace"]} if "kill_grace" in options else {}
    async with agentrt.open_runtime(
        store=opened, node=node, lease_ttl=float(lease_ttl), **grace
    ) as rt:
        await rt.start_agent(agentrt.Agent, name="coder", backend="claude", **options)
        response = await rt.ask("coder", "first prompt")
        print(f"ANSWER {response.text}", flush=True)
        if not idle:
            await rt.tell("coder", "second prompt")
        await trio.sleep_forever()


if __name__ == "__main__":
    arguments = [a for a in sys.argv[1:] if a != "--idle"]
    trio.run(functools.partial(main, *arguments, idle="--idle" in sys.argv[2:]))
