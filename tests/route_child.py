"""A runtime in a program of its own (a host) that owns agent "x" on a shared store (a
PostgreSQL DSN, or the path of an SQLite file ending in ``.sqlite3``), for the tests of
calls routed to it from other runtimes.

    python route_child.py DSN_OR_FILE NODE LEASE_TTL [OPTIONS_JSON]

Prints ``STARTED <runtime id>`` once it owns "x", then runs until killed (or until "x" is
stopped: then it prints ``STOPPED`` and waits on). The scripted "x" answers ``NODE heard:
PROMPT``; a prompt starting with "slow" first sleeps for an hour (until interrupted), one
starting with "chatty" first says "NODE working" twice a second for as long. An
event notified to it is printed as ``EVENT <repr of the event>``.
With OPTIONS_JSON (a file of ``start_agent`` keywords: the binary, cwd and env of the
real claude against a fake API), "x" runs on the claude backend instead.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import trio

import agentrt
from agentrt import TextEvent
from agentrt.testing import Call, ScriptedBackend, Sleep, reply


class Owned(agentrt.Agent):
    def handle_event(self, event: Any) -> None:
        print(f"EVENT {event!r}", flush=True)


async def main(dsn: str, node: str, lease_ttl: str, claude_options: dict[str, Any]) -> None:
    def script(call: Call) -> list[object]:
        slow: list[object] = [Sleep(3600)] if call.prompt.startswith("slow") else []
        if call.prompt.startswith("chatty"):
            slow = [TextEvent(text=f"{node} working"), Sleep(0.5)] * 7200
        return [*slow, *reply(f"{node} heard: {call.prompt}", session_id="sid-x")]

    backend: Any = ScriptedBackend(default=script)
    options: dict[str, Any] = {"kill_grace": 0.1}
    if claude_options:
        backend, options = "claude", claude_options
    store = agentrt.SQLiteStore(dsn) if dsn.endswith(".sqlite3") else agentrt.PostgresStore(dsn)
    # A short lease_ttl needs the short kill_grace at open_runtime, its agents' default.
    async with agentrt.open_runtime(
        store=store, node=node, lease_ttl=float(lease_ttl), kill_grace=0.1
    ) as rt:
        await rt.start_agent(Owned, name="x", backend=backend, **options)
        print(f"STARTED {rt.runtime_id}", flush=True)
        while "x" in rt.agents():  # noqa: ASYNC110 (a stop from another runtime)
            await trio.sleep(0.05)
        print("STOPPED", flush=True)
        await trio.sleep_forever()


if __name__ == "__main__":
    dsn, node, lease_ttl, *options_file = sys.argv[1:]
    claude = json.loads(Path(options_file[0]).read_text()) if options_file else {}
    trio.run(main, dsn, node, lease_ttl, claude)
