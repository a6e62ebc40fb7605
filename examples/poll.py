"""tell + poll + wait: hand an agent work, get on with yours, collect the results.

    .venv/bin/python examples/poll.py [DIRECTORY]

``tell`` returns a ref without waiting for the turn; a second tell queues behind the first
in the agent's mailbox. ``poll`` says where a ref is without waiting for it; ``wait`` waits
for it.
"""

from __future__ import annotations

import sys

import trio

import agentrt


async def main(cwd: str = ".") -> list[str]:
    lines: list[str] = []

    def say(line: str) -> None:
        print(line)
        lines.append(line)

    async with agentrt.open_runtime() as rt:
        await rt.start_agent(
            agentrt.Agent, name="reader", backend="claude", cwd=cwd, tools=["Read", "Glob"]
        )
        first = await rt.tell("reader", "Which files are here? One line.")
        second = await rt.tell("reader", "Which of them looks most important, and why? One line.")
        say(f"told twice; poll says {await rt.poll(first)}")

        ticks = 0
        while isinstance(await rt.poll(first), agentrt.Pending):
            ticks += 1  # your own work goes here
            await trio.sleep(0.05)
        result = await rt.poll(first)
        if not isinstance(result, agentrt.Completed):
            raise SystemExit(f"the first turn did not complete: {result}")
        say(f"first (after {ticks} ticks of our own work): {result.response.text}")

        outcome = await rt.wait(second)
        if not isinstance(outcome, agentrt.Completed):
            raise SystemExit(f"the second turn did not complete: {outcome}")
        say(f"second: {outcome.response.text}")
        same = outcome.response.session_id == result.response.session_id
        say(f"both turns in one session: {same}")
    return lines


if __name__ == "__main__":
    trio.run(main, sys.argv[1] if len(sys.argv) > 1 else ".")
