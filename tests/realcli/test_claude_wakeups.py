"""A wake-up the real claude scheduled (its ``ScheduleWakeup`` tool) fires after the program
that ran the turn was SIGKILLed: agentrt stored it, and the program that owns the agent then
(another one, on the same SQLite file) runs its turn when it is due, on the same session,
with the model's prompt."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
import trio
from proc_helpers import marked, store_programs, wait_until

from agentrt.testing import AnthropicText, AnthropicToolUse

from ._claude import MARKER_VAR, Claude, base_env, request_where

pytestmark = [pytest.mark.realcli, pytest.mark.long]  # the CLI waits a minute or two

HOST_CHILD = Path(__file__).parent.parent / "host_child.py"
TURN_BOUND = 120  # generous: real CLI starts on a loaded machine
# The shortest wake-up the CLI takes (60 s); it sets it on at a whole minute, so it is due
# 60 to 120 s after the turn.
DELAY = 60
WAKEUP_PROMPT = "Look at the CI run again."


async def test_a_wakeup_the_cli_scheduled_fires_in_the_next_owner_after_a_sigkill(
    claude: Claude, tmp_path: Path
) -> None:
    claude.api.set_script(
        [
            AnthropicToolUse(
                "ScheduleWakeup",
                {"delaySeconds": DELAY, "reason": "wait for the CI run", "prompt": WAKEUP_PROMPT},
            ),
            AnthropicText("Scheduled."),
            AnthropicText("Back."),
            AnthropicText("Woke."),
        ]
    )
    (claude.home / "tmp").mkdir(exist_ok=True)
    env = {**os.environ, **base_env(claude.api, claude.home, claude.marker)}
    ttl = 3.0
    store = str(tmp_path / "sessions.sqlite3")
    async with store_programs(HOST_CHILD, store, env) as start:
        with trio.fail_after(TURN_BOUND):
            owner = await start(
                "node-a", str(ttl), "own", "1", str(claude.binary), str(claude.project)
            )
            assert await owner.line(TURN_BOUND) == "READY"
        os.kill(owner.pid, signal.SIGKILL)
        host = await start("node-b", str(ttl), "host", "none")
        with trio.fail_after(2 * DELAY + TURN_BOUND):
            await request_where(claude.api, lambda r: WAKEUP_PROMPT in r.last_user_text())
        assert (await host.line(TURN_BOUND)).startswith("TOOK a0 ")
    await wait_until(lambda: marked(MARKER_VAR, claude.marker) == [], bound=10)

    requests = claude.api.message_requests
    session_id = requests[0].headers["x-claude-code-session-id"]
    # The turn that scheduled it (the call, then its result), the host's turn, the wake-up.
    assert [r.headers["x-claude-code-session-id"] for r in requests] == [session_id] * 4
    assert any("Next wakeup scheduled" in text for text in requests[1].texts())
    assert WAKEUP_PROMPT in requests[3].last_user_text()
