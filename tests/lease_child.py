"""A runtime in a program of its own that takes agent "x" on a shared store, for the tests
that stand two programs (or two nodes) on one store.

    python lease_child.py STORE NODE LEASE_TTL once|wait [CLAUDE_BINARY CWD]

STORE is an SQLite file's path, or a PostgreSQL DSN (``host=...``). Prints ``STARTED`` once
it owns "x", then runs until killed. ``once``: a refusal prints ``REFUSED <message>`` and
ends. ``wait``: a refusal prints ``REFUSED`` the first time and is retried every 0.1 s.
With a (fake) claude binary, "x" runs on it in CWD: once started it is told one prompt,
prints ``SESSION <id>`` when its CLI reports it, and ``RESULT <what wait returned>``.
"""

from __future__ import annotations

import sys
from typing import Any

import trio

import agentrt
from agentrt.testing import ScriptedBackend, reply


class Reporter(agentrt.Agent):
    def handle_stream_event(self, event: agentrt.Event) -> None:
        if isinstance(event, agentrt.SessionEvent):
            print(f"SESSION {event.session_id}", flush=True)


async def main(store: str, node: str, lease_ttl: str, mode: str, *cli: str) -> None:
    opened = agentrt.PostgresStore(store) if "host=" in store else agentrt.SQLiteStore(store)
    backend: Any = ScriptedBackend(default=lambda call: reply("ok"))
    options: dict[str, Any] = {"kill_grace": 0.1}
    if cli:
        backend = "claude"
        options.update(binary=cli[0], cwd=cli[1])
    # A short lease_ttl needs the short kill_grace at open_runtime, its agents' default.
    async with agentrt.open_runtime(
        store=opened, node=node, lease_ttl=float(lease_ttl), kill_grace=0.1
    ) as rt:
        refused = False
        while True:
            try:
                await rt.start_agent(Reporter, name="x", backend=backend, **options)
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
        if cli:
            result = await rt.wait(await rt.tell("x", "the long job"))
            print(f"RESULT {result!r}", flush=True)
        await trio.sleep_forever()


if __name__ == "__main__":
    trio.run(main, *sys.argv[1:])
