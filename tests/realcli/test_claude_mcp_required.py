"""The pinned real ``claude`` with MCP servers that fail to start (issue 39, part 5), against
the fake API. Measured on 2.1.332: its ``system/init`` lists a server whose command exits at
once, or does not exist, as ``"failed"``, prints nothing on stderr, and goes on with the
turn. An agent that requires one ends the turn ``mcp_unavailable`` naming it; a failed
server no agent requires leaves the turn to answer."""

from __future__ import annotations

import sys

import pytest
import trio

from agentrt import Agent, MemoryStore, StopReason, TurnFailed, open_runtime
from agentrt.testing import AnthropicText

from ._claude import Claude

pytestmark = pytest.mark.realcli

TURN_BOUND = 60  # generous: the CLI starts in about half a second, CI machines are shared

# "exits": a server whose command exits at once; "absent": one whose command is not there.
SERVERS = {
    "mcpServers": {
        "exits": {"command": sys.executable, "args": ["-c", "raise SystemExit(1)"]},
        "absent": {"command": "/nonexistent/mcp-server"},
    }
}


@pytest.mark.parametrize("server", ["exits", "absent"])
async def test_a_required_server_that_fails_to_start_ends_the_turn_naming_it(
    claude: Claude, server: str
) -> None:
    claude.api.set_script(lambda request: AnthropicText("Without the server."))
    async with open_runtime(store=MemoryStore()) as rt:
        options = claude.agent_options(mcp_config=[SERVERS], required_mcp=(server,))
        await rt.start_agent(Agent, name="a", backend="claude", **options)
        with trio.fail_after(TURN_BOUND), pytest.raises(TurnFailed) as caught:
            await rt.ask("a", "use the server")
        failed = caught.value
        assert failed.reason is StopReason.MCP_UNAVAILABLE
        assert failed.detail == {"server": server, "status": "failed"}
        assert f"the required MCP server {server!r} is failed" in str(failed)
        assert (await rt.status("a")).state == "idle"  # the agent lives


async def test_a_failed_server_nobody_requires_leaves_the_turn_to_answer(claude: Claude) -> None:
    claude.api.set_script(lambda request: AnthropicText("Without the server."))
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(
            Agent, name="a", backend="claude", **claude.agent_options(mcp_config=[SERVERS])
        )
        with trio.fail_after(TURN_BOUND):
            response = await rt.ask("a", "go on")
        assert response.text == "Without the server."
        assert response.init is not None
        reported = {s.name: s.status for s in response.init.mcp_servers}
        assert reported == {"exits": "failed", "absent": "failed"}
