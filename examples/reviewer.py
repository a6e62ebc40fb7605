"""A read-only reviewer: it may read, search and list files, and nothing else.

    .venv/bin/python examples/reviewer.py [DIRECTORY]
    .venv/bin/python -m agentrt.testing.fake_anthropic --scenario reviewer \\
        -- python examples/reviewer.py .

``tools`` limits the CLI's built-in tools to the read-only ones, so the model cannot edit
or run anything; ``hermetic=True`` leaves out the user's and the project's Claude
settings, hooks and MCP servers, so the review runs the same on every machine.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

import trio

import agentrt

READ_ONLY = ["Read", "Grep", "Glob"]


class Reviewer(agentrt.Agent):
    def __init__(self) -> None:
        self.files_read: list[str] = []

    def init_agent(self, **options: Any) -> Mapping[str, Any]:
        return {
            **options,
            "tools": READ_ONLY,
            "hermetic": True,
            "append_system_prompt": "You review code. Report problems; never change files.",
        }

    def handle_stream_event(self, event: agentrt.Event) -> None:
        if isinstance(event, agentrt.ToolUseEvent) and event.name == "Read":
            self.files_read.append(str(event.input.get("file_path", "?")))


async def main(cwd: str = ".") -> tuple[str, list[str]]:
    reviewer = Reviewer()
    async with agentrt.open_runtime() as rt:
        await rt.start_agent(reviewer, name="reviewer", backend="claude", cwd=cwd)
        response = await rt.ask("reviewer", "Review the Python files here: the worst bug, briefly.")
    print(response.text)
    print(f"(read: {', '.join(reviewer.files_read) or 'nothing'})")
    return response.text, reviewer.files_read


if __name__ == "__main__":
    trio.run(main, sys.argv[1] if len(sys.argv) > 1 else ".")
