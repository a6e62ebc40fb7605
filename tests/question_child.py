"""One agent whose ``approve_tool`` hands the fake CLI's tool call to a person, in a program
of its own on a SQLite store, for the test that SIGKILLs it while the question waits.

    python question_child.py STORE BINARY

Prints ``ASKED <id>`` once the question waits in the store, then waits for ever (the test
kills it).
"""

from __future__ import annotations

import sys

import trio

import agentrt


class Asks(agentrt.Agent):
    async def approve_tool(self, request: agentrt.ToolRequest) -> agentrt.AskOperator:
        return agentrt.AskOperator(reason="a person decides")


async def main(store_path: str, binary: str) -> None:
    store = agentrt.SQLiteStore(store_path)
    async with agentrt.open_runtime(store=store) as rt:
        await rt.start_agent(
            Asks, name="coder", backend="claude", binary=binary, approval_timeout=600
        )
        await rt.tell("coder", "clean up")
        while not (waiting := await store.pending_approvals()):  # noqa: ASYNC110 (polled, as a console does)
            await trio.sleep(0.05)
        print(f"ASKED {waiting[0].id}", flush=True)
        await trio.sleep_forever()


if __name__ == "__main__":
    trio.run(main, *sys.argv[1:3])
