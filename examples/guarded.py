"""A coding agent on a leash: it asks before each tool, a hook keeps it out of .git, and
it proposes deletions through a tool of ours instead of deleting.

    .venv/bin/python examples/guarded.py [DIRECTORY]
    .venv/bin/python -m agentrt.testing.fake_anthropic --scenario guarded \\
        -- python examples/guarded.py .

``approve_tool`` is asked before the CLI runs a tool its settings do not already allow:
shell commands that delete are denied (the model is told to propose them instead), every
other command runs with a timeout put in front of it. ``handle_hook`` sees the hook events
of each turn; its ``before_tool`` blocks any tool call that names the ``.git`` directory.
``propose_deletion`` is an application tool (a method, so the proposals are the agent's).
The agent is warm (``keep_alive``): its turns share one CLI process.
"""

from __future__ import annotations

import json
import sys

import trio

import agentrt
from agentrt.hooks import Hook, PreToolUseHook


class Guarded(agentrt.Agent):
    def __init__(self) -> None:
        self.decisions: list[str] = []
        self.proposed: list[str] = []

    @agentrt.tool
    async def propose_deletion(self, paths: list[str]) -> str:
        """Propose files to delete; a human decides."""
        self.proposed += paths
        return f"{len(paths)} paths proposed for deletion"

    app_tools = (propose_deletion,)

    def approve_tool(self, request: agentrt.ToolRequest) -> agentrt.Allow | agentrt.Deny:
        command = request.input.get("command", "") if request.tool_name == "Bash" else ""
        if "rm " in command:
            self.decisions.append(f"denied {command!r}")
            return agentrt.Deny("deleting needs a human: call propose_deletion instead")
        if command:
            self.decisions.append(f"allowed {command!r} with a timeout")
            return agentrt.Allow(
                updated_input={**request.input, "command": f"timeout 60 {command}"}
            )
        self.decisions.append(f"allowed {request.tool_name}")
        return agentrt.Allow()

    def handle_hook(self, hook: Hook) -> agentrt.Block | None:
        if isinstance(hook, PreToolUseHook) and ".git" in json.dumps(hook.tool_input):
            self.decisions.append(f"blocked {hook.tool_name} on .git")
            return agentrt.Block("leave .git alone")
        return None


async def main(cwd: str = ".") -> tuple[list[str], list[str]]:
    agent = Guarded()
    async with agentrt.open_runtime() as rt:
        await rt.start_agent(agent, name="guarded", backend="claude", cwd=cwd, keep_alive=300)
        for prompt in ("Clean up the build output.", "What is in .git/config?"):
            response = await rt.ask("guarded", prompt)
            print(f"{prompt} -> {response.text}")
    for decision in agent.decisions:
        print(f"  {decision}")
    print(f"  proposed for deletion: {', '.join(agent.proposed) or 'nothing'}")
    return agent.decisions, agent.proposed


if __name__ == "__main__":
    trio.run(main, *sys.argv[1:2])
