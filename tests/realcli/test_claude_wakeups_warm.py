"""A warm claude fires the wake-ups it scheduled itself, while it lives (a turn it starts):
agentrt stores the wake-up as for a per-turn agent, reads that turn as the wake-up's (origin
``wakeup``) and drops the stored copy, so it runs once, not twice."""

from __future__ import annotations

import pytest
import trio

from agentrt import Completed
from agentrt.testing import AnthropicText, AnthropicToolUse

from ._claude import Claude
from .test_claude_warm import warm_agent

pytestmark = [pytest.mark.realcli, pytest.mark.long]  # the CLI waits a minute or two

TURN_BOUND = 120  # generous: real CLI starts on a loaded machine
DELAY = 60  # the shortest the CLI takes; it fires at the next whole minute after it
WAKEUP_PROMPT = "Look at the CI run again."


async def test_a_warm_clis_wakeup_is_stored_and_run_once_by_the_cli(claude: Claude) -> None:
    claude.api.set_script(
        [
            AnthropicToolUse(
                "ScheduleWakeup",
                {"delaySeconds": DELAY, "reason": "wait for the CI run", "prompt": WAKEUP_PROMPT},
            ),
            AnthropicText("Scheduled."),
            AnthropicText("Woke."),
            AnthropicText("Woke again."),
        ]
    )
    async with warm_agent(claude, keep_alive=600) as rt, rt.unsolicited("coder") as turns:
        with trio.fail_after(TURN_BOUND):
            assert (await rt.ask("coder", "start the CI run")).text == "Scheduled."
        (kept,) = await rt.schedules("coder")
        assert (kept.origin, kept.prompt) == ("wakeup", WAKEUP_PROMPT)
        with trio.fail_after(2 * DELAY + TURN_BOUND):
            turn = await turns.__anext__()
        assert isinstance(turn.result, Completed)
        assert (turn.origin, turn.result.response.text) == ("wakeup", "Woke.")
        assert await rt.schedules("coder") == ()  # the stored copy was dropped

        def wakeups() -> int:
            return sum(WAKEUP_PROMPT in r.last_user_text() for r in claude.api.message_requests)

        assert len(claude.api.message_requests) == 3
        assert wakeups() == 1
