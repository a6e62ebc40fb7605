"""A warm claude agent that keeps background work, in a program of its own, for the tests
that SIGKILL the program while a background task runs.

    python background_child.py STORE OPTIONS_FILE

``STORE``: ``memory`` or a SQLite file; ``OPTIONS_FILE``: the agent's options as JSON (in a
file: they hold the fake API's key, which no command line shows). Asks "start it", prints
``ASKED``, and waits for ever (the test kills it).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import trio

import agentrt


async def main(store: str, options: dict[str, object]) -> None:
    kept = agentrt.MemoryStore() if store == "memory" else agentrt.SQLiteStore(store)
    async with agentrt.open_runtime(store=kept) as rt:
        await rt.start_agent(
            agentrt.Agent,
            name="coder",
            backend="claude",
            keep_alive=60,
            background=True,
            **options,
        )
        await rt.ask("coder", "start it")
        print("ASKED", flush=True)
        await trio.sleep_forever()


if __name__ == "__main__":
    trio.run(main, sys.argv[1], json.loads(Path(sys.argv[2]).read_text()))
