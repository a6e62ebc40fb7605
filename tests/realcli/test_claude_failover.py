"""Failover with the real claude: a program owning an agent is SIGKILLed after turn 1, and
a program opened with ``host_agents=True`` on another node takes the agent over once the
lease has expired and continues its conversation (same session, the fake sees turn 1)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import trio
from proc_helpers import marked, store_programs, wait_until

from agentrt.testing import AnthropicText

from ._claude import MARKER_VAR, Claude, base_env

HOST_CHILD = Path(__file__).parent.parent / "host_child.py"
TURN_BOUND = 120  # generous: real CLI starts on a loaded machine


async def test_a_host_takes_over_a_killed_owners_agent_and_its_conversation_goes_on(
    claude: Claude, postgres_dsn: str
) -> None:
    claude.api.set_script([AnthropicText("First answer."), AnthropicText("Back.")])
    (claude.home / "tmp").mkdir(exist_ok=True)
    # The key travels in the programs' environment, which their CLIs inherit: specs in the
    # store hold no env.
    env = {**os.environ, **base_env(claude.api, claude.home, claude.marker)}
    ttl = 3.0
    async with store_programs(HOST_CHILD, postgres_dsn, env) as start:
        with trio.fail_after(TURN_BOUND):
            owner = await start(
                "node-a", str(ttl), "own", "1", str(claude.binary), str(claude.project)
            )
            assert await owner.line(TURN_BOUND) == "READY"
            host = await start("node-b", str(ttl), "host", "none")
            os.kill(owner.pid, signal.SIGKILL)
            took = await host.line(TURN_BOUND)
    # The killed programs' fence guards (they carry the marker too) end after their sweep.
    await wait_until(lambda: marked(MARKER_VAR, claude.marker) == [], bound=10)

    first, second = claude.api.message_requests
    session_id = first.headers["x-claude-code-session-id"]
    assert took == f"TOOK a0 {session_id}"
    assert second.headers["x-claude-code-session-id"] == session_id
    texts = second.texts()
    assert "First answer." in texts and "the first prompt" in texts and "the next prompt" in texts
