"""A warm claude fires the wake-ups it scheduled itself, while it lives (a turn it starts,
origin ``task``): agentrt does not store such a wake-up, so it runs once, not twice."""

from __future__ import annotations

import pytest
import trio
from proc_helpers import wait_until

from agentrt.testing import AnthropicText, AnthropicToolUse

from ._claude import Claude
from .test_claude_warm import warm_agent

pytestmark = [pytest.mark.realcli, pytest.mark.long]  # the CLI waits a minute or two

TURN_BOUND = 120  # generous: real CLI starts on a loaded machine
DELAY = 60  # the shortest the CLI takes; it fires at the next whole minute after it
WAKEUP_PROMPT = "Look at the CI run again."


async def test_a_warm_clis_wakeup_is_not_stored_and_the_cli_runs_it(claude: Claude) -> None:
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
    async with warm_agent(claude, keep_alive=600) as rt:
        with trio.fail_after(TURN_BOUND):
            assert (await rt.ask("coder", "start the CI run")).text == "Scheduled."
        assert await rt.schedules("coder") == ()

        def wakeups() -> int:
            return sum(WAKEUP_PROMPT in r.last_user_text() for r in claude.api.message_requests)

        await wait_until(wakeups, bound=2 * DELAY + TURN_BOUND)
        await wait_until(lambda: len(claude.api.message_requests) == 3, bound=TURN_BOUND)
        assert wakeups() == 1
