"""One agent on the claude backend (a fake CLI as its binary) in a program of its own, for
the tests that SIGKILL a whole runtime mid-turn and start it again.

    python crash_child.py STORE BINARY CWD hang|ask

``hang``: tell the agent a prompt and wait for ever (the test kills us); each session id the
agent sees is printed as ``SESSION <id>``. ``ask``: ask and print ``ANSWER <text> <session>``.
agentrt's log goes to stdout too.
"""

from __future__ import annotations

import logging
import sys

import trio

import agentrt


class Coder(agentrt.Agent):
    def handle_stream_event(self, event: agentrt.Event) -> None:
        if isinstance(event, agentrt.SessionEvent):
            print(f"SESSION {event.session_id}", flush=True)


async def main(store: str, binary: str, cwd: str, mode: str) -> None:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s", stream=sys.stdout)
    async with agentrt.open_runtime(store=agentrt.SQLiteStore(store)) as rt:
        await rt.start_agent(
            Coder, name="coder", backend="claude", binary=binary, cwd=cwd, kill_grace=0.5
        )
        if mode == "hang":
            await rt.tell("coder", "start the long job")
            await trio.sleep_forever()
        response = await rt.ask("coder", "go on")
        print(f"ANSWER {response.text} {response.session_id}", flush=True)


if __name__ == "__main__":
    trio.run(main, *sys.argv[1:5])
