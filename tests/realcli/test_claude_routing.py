"""An ask routed to the runtime that owns a claude agent, on a real PostgreSQL: the owner
is a program of its own (tests/route_child.py) running the pinned claude against the fake
API; this test's runtime, another node, asks it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import trio
from proc_helpers import kill_marked
from test_leases import Program

from agentrt import Completed, PostgresStore, StopReason, open_runtime
from agentrt.testing import AnthropicText

from ._claude import MARKER_VAR, Claude

CHILD = Path(__file__).parents[1] / "route_child.py"
TURN_BOUND = 60


async def test_an_ask_from_another_node_runs_on_the_owners_claude(
    claude: Claude, postgres_dsn: str, tmp_path: Path
) -> None:
    claude.api.set_script(
        [AnthropicText("First answer.", output_tokens=5), AnthropicText("Second answer.")]
    )
    # The agent's options (its env holds the fake's dummy key) go in a file, not in argv.
    options = tmp_path / "options.json"
    options.write_text(json.dumps(claude.agent_options(kill_grace=0.1)))
    argv = [sys.executable, str(CHILD), postgres_dsn, "node-a", "60", str(options)]
    process = await trio.lowlevel.open_process(argv, stdout=subprocess.PIPE)
    owner = Program(process)
    try:
        assert (await owner.line()).startswith("STARTED ")
        async with open_runtime(store=PostgresStore(postgres_dsn), node="node-b") as rt:
            with trio.fail_after(TURN_BOUND * 2):
                one = await rt.ask("x", "first prompt")
                ref = await rt.tell("x", "second prompt")
                two = await rt.wait(ref)
                status = await rt.status("x")
        assert (one.text, one.stop_reason) == ("First answer.", StopReason.COMPLETE)
        assert one.session_id is not None and one.usage is not None
        assert one.usage.output_tokens == 5
        assert isinstance(two, Completed)
        assert (two.response.text, two.response.session_id) == ("Second answer.", one.session_id)
        assert (status.turns, status.session_id) == (2, one.session_id)
        # The CLI ran under the owner: the fake saw both turns of one session.
        first, second = claude.api.message_requests
        assert second.headers["x-claude-code-session-id"] == one.session_id
        assert "first prompt" in second.texts("user") and "First answer." in second.texts()
        assert first.last_user_text() == "first prompt"
    finally:
        await owner.kill()
        assert process.stdout is not None
        await process.stdout.aclose()
        await kill_marked(MARKER_VAR, claude.marker)
