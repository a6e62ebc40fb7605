"""Self-chaining across two agents: a writer drafts, tightens its own draft (a turn it
chains to itself by returning ``Prompt``), then hands the result to a critic.

    .venv/bin/python examples/chain.py [DIRECTORY]

The handlers run in each agent's own task; ``agentrt.tell`` inside them acts on the
runtime the agents run in.
"""

from __future__ import annotations

import sys

import trio

import agentrt


class Writer(agentrt.Agent):
    def __init__(self) -> None:
        self.drafts: list[str] = []

    async def handle_response(
        self, ref: agentrt.Ref, response: agentrt.Response
    ) -> agentrt.Prompt | None:
        self.drafts.append(response.text)
        if len(self.drafts) == 1:
            # A second turn on the same session, ahead of anything queued.
            return agentrt.Prompt("Tighten that to at most eight words.")
        await agentrt.tell("critic", f"Critique this tagline in one sentence: {response.text}")
        return None


class Critic(agentrt.Agent):
    def __init__(self) -> None:
        self.verdict = ""
        self.done = trio.Event()

    def handle_response(self, ref: agentrt.Ref, response: agentrt.Response) -> None:
        self.verdict = response.text
        self.done.set()


async def main(cwd: str = ".") -> tuple[list[str], str]:
    writer, critic = Writer(), Critic()
    async with agentrt.open_runtime() as rt:
        await rt.start_agent(writer, name="writer", backend="claude", cwd=cwd, tools=[])
        await rt.start_agent(critic, name="critic", backend="claude", cwd=cwd, tools=[])
        await rt.ask("writer", "Write a tagline for a runtime that supervises coding agents.")
        await critic.done.wait()
    for number, draft in enumerate(writer.drafts, 1):
        print(f"draft {number}: {draft}")
    print(f"critic: {critic.verdict}")
    return writer.drafts, critic.verdict


if __name__ == "__main__":
    trio.run(main, sys.argv[1] if len(sys.argv) > 1 else ".")
