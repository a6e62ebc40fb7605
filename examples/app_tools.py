"""Application tools: the model calls Python functions of yours, typed by their hints.

    .venv/bin/python examples/app_tools.py [DIRECTORY]
    .venv/bin/python -m agentrt.testing.fake_anthropic --scenario app_tools \\
        -- python examples/app_tools.py .

``word_count`` is a plain tool; ``note`` is a method tool, called on this agent's own
instance, so the notes are the agent's state. The runtime serves both to the CLI over a
loopback MCP server (the model sees ``mcp__agentrt__word_count`` and
``mcp__agentrt__note``); what a tool returns, or the error it raises, goes back to the
model, and the agent goes on either way.
"""

from __future__ import annotations

import sys

import trio

import agentrt


@agentrt.tool
async def word_count(text: str) -> int:
    """Count the words of a text."""
    return len(text.split())


class Notetaker(agentrt.Agent):
    def __init__(self) -> None:
        self.notes: list[str] = []

    @agentrt.tool
    async def note(self, text: str, tags: list[str] | None = None) -> str:
        """Keep a note for later, with optional tags."""
        self.notes.append(text + "".join(f" #{tag}" for tag in tags or ()))
        return f"noted ({len(self.notes)} so far)"

    app_tools = (note, word_count)


async def main(cwd: str = ".") -> tuple[str, list[str]]:
    agent = Notetaker()
    async with agentrt.open_runtime() as rt:
        await rt.start_agent(agent, name="notetaker", backend="claude", cwd=cwd, hermetic=True)
        response = await rt.ask(
            "notetaker", "How many words are in 'to be or not to be'? Note the answer."
        )
    print(response.text)
    print(f"(notes: {'; '.join(agent.notes) or 'none'})")
    return response.text, agent.notes


if __name__ == "__main__":
    trio.run(main, sys.argv[1] if len(sys.argv) > 1 else ".")
