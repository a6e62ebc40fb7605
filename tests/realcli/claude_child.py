"""A program with one agent on the real claude backend, for the test that SIGKILLs it mid-turn.

    python claude_child.py STORE [--idle] < options.json

The agent's ``start_agent`` options come as JSON on stdin (they hold the dummy key, which
must not travel on argv). The program asks ``first prompt`` and prints ``ANSWER <text>``,
then tells ``second prompt`` (unless ``--idle``: then it does nothing more, and a warm CLI
waits between turns) and waits for ever: the test kills it.
"""

from __future__ import annotations

import json
import sys

import trio

import agentrt


async def main(store: str, idle: bool) -> None:
    options = json.loads(sys.stdin.read())
    async with agentrt.open_runtime(store=agentrt.SQLiteStore(store)) as rt:
        await rt.start_agent(agentrt.Agent, name="coder", backend="claude", **options)
        response = await rt.ask("coder", "first prompt")
        print(f"ANSWER {response.text}", flush=True)
        if not idle:
            rt.tell("coder", "second prompt")
        await trio.sleep_forever()


if __name__ == "__main__":
    trio.run(main, sys.argv[1], "--idle" in sys.argv[2:])
