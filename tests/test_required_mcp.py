"""``required_mcp`` (issue 39, part 5): a turn whose CLI reports, at its start, that an MCP
server the agent requires failed, needs authentication or is not configured ends
``mcp_unavailable`` naming it; one still connecting, or one not required, lets the turn go
on; a backend whose CLI reports no MCP status is refused it at ``start_agent``. The
scripted backend plays the CLI's report (an `InitEvent`); tests/realcli has the real
claude's."""

from __future__ import annotations

import pytest
import trio.testing

from agentrt import (
    Agent,
    InitEvent,
    InvalidOptions,
    McpServerStatus,
    StopReason,
    TurnFailed,
    open_runtime,
)
from agentrt.testing import ScriptedBackend, reply


def started_with(**servers: str) -> InitEvent:
    """What a CLI says at its start, its MCP servers with their statuses."""
    statuses = tuple(McpServerStatus(name=n, status=s) for n, s in servers.items())
    return InitEvent(mcp_servers=statuses)


@pytest.mark.parametrize(
    ("servers", "status"),
    [
        ({"github": "failed", "docs": "connected"}, "failed"),
        ({"github": "needs-auth", "docs": "connected"}, "needs-auth"),
        ({"docs": "pending"}, "not configured"),
    ],
)
async def test_a_required_server_the_cli_cannot_use_ends_the_turn_naming_it(
    autojump_clock: trio.testing.MockClock, servers: dict[str, str], status: str
) -> None:
    backend = ScriptedBackend(
        [started_with(**servers), *reply("never")],
        default=lambda call: [started_with(github="connected"), *reply("again")],
    )
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=backend, required_mcp=("docs", "github"))
        with pytest.raises(TurnFailed) as caught:
            await rt.ask("a", "go")
        failed = caught.value
        assert failed.reason is StopReason.MCP_UNAVAILABLE
        assert failed.detail["server"] == "github" and failed.detail["status"] == status
        assert "'github'" in str(failed) and "required_mcp" in str(failed)
        # The agent lives; a turn whose servers are there answers (docs is not, so only
        # github is required of it below).
        await rt.start_agent(Agent, name="b", backend=backend, required_mcp=("github",))
        assert (await rt.ask("b", "again")).text == "again"


async def test_a_server_still_connecting_or_not_required_lets_the_turn_go_on(
    autojump_clock: trio.testing.MockClock,
) -> None:
    backend = ScriptedBackend(
        [started_with(github="pending", other="failed"), *reply("answered")],
        [started_with(other="failed"), *reply("free")],
    )
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=backend, required_mcp=("github",))
        assert (await rt.ask("a", "go")).text == "answered"
        await rt.start_agent(Agent, name="b", backend=backend)
        assert (await rt.ask("b", "go")).text == "free"


@pytest.mark.parametrize("value", ["github", ("",), [1], None])
async def test_required_mcp_is_a_tuple_of_names(value: object) -> None:
    async with open_runtime() as rt:
        with pytest.raises(InvalidOptions) as caught:
            await rt.start_agent(Agent, name="a", backend=ScriptedBackend(), required_mcp=value)
    assert caught.value.key == "required_mcp"


async def test_a_backend_whose_cli_reports_no_mcp_status_is_refused_it() -> None:
    async with open_runtime() as rt:
        with pytest.raises(InvalidOptions) as caught:
            await rt.start_agent(Agent, name="a", backend="gemini", required_mcp=("github",))
        assert caught.value.key == "required_mcp"
        assert "does not report its MCP servers' status" in str(caught.value)
        assert not rt.agents()
