"""A cron job the real claude made (its ``CronCreate`` tool) on a per-turn agent: agentrt
stores it (the CLI keeps it in its process only, which ends with the turn), fires it once at
the next whole minute as a turn of origin ``cron`` on the same session with the model's
prompt, and drops it when the model deletes it with ``CronDelete`` in that turn (on a new
CLI process, which has the job back from the session it resumed). A warm claude fires its
own jobs while it lives (a turn it starts, origin ``task``): agentrt stores none, so a job
runs once, not twice."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
from proc_helpers import wait_until

from agentrt import Agent, Ref, Response, SQLiteStore, open_runtime
from agentrt.testing import AnthropicText, AnthropicToolUse

from ._claude import Claude, request_where
from .test_claude_warm import warm_agent

pytestmark = pytest.mark.realcli

TURN_BOUND = 120  # generous: real CLI starts on a loaded machine
CRON_PROMPT = "Look at the CI run again."


class Turns(Agent):
    """Keeps each answered turn's origin and text."""

    def __init__(self) -> None:
        self.answered: list[tuple[str, str]] = []
        self.fired = trio.Event()

    def handle_response(self, ref: Ref, response: Response) -> None:
        self.answered.append((response.origin, response.text))
        if response.origin == "cron":
            self.fired.set()


async def test_a_cron_job_the_cli_made_fires_once_per_time_and_its_delete_drops_it(
    claude: Claude, tmp_path: Path
) -> None:
    claude.api.set_script(
        [
            AnthropicToolUse.tool_search("CronCreate", "CronDelete"),
            AnthropicToolUse("CronCreate", {"cron": "* * * * *", "prompt": CRON_PROMPT}),
            AnthropicText("Scheduled."),
        ]
    )
    agent = Turns()
    async with open_runtime(store=SQLiteStore(tmp_path / "sessions.sqlite3")) as rt:
        await rt.start_agent(agent, name="coder", backend="claude", **claude.agent_options())
        with trio.fail_after(TURN_BOUND):
            assert (await rt.ask("coder", "Watch the CI run.")).text == "Scheduled."
        (kept,) = await rt.schedules("coder")
        assert (kept.origin, kept.cron, kept.prompt) == ("cron", "* * * * *", CRON_PROMPT)
        assert kept.key is not None and kept.key.startswith("cron:")
        cron_id = kept.key.removeprefix("cron:")
        # The fire's turn (a new CLI process) deletes it.
        claude.api.set_script(
            [
                AnthropicToolUse.tool_search("CronDelete"),
                AnthropicToolUse("CronDelete", {"id": cron_id}),
                AnthropicText("Stopped watching."),
            ]
        )
        with trio.fail_after(60 + TURN_BOUND):
            await agent.fired.wait()
        assert await rt.schedules("coder") == ()
    assert agent.answered == [("user", "Scheduled."), ("cron", "Stopped watching.")]
    requests = claude.api.message_requests
    session_id = requests[0].headers["x-claude-code-session-id"]
    assert {r.headers["x-claude-code-session-id"] for r in requests} == {session_id}
    assert any("Session-only" in text for text in requests[2].texts())
    assert [CRON_PROMPT in r.last_user_text() for r in requests[3:4]] == [True]
    # The CLI of the fire's turn, a new process, had the job back from the session it
    # resumed, and cancelled it.
    assert any(f"Cancelled job {cron_id}." in t for t in requests[-1].texts())


async def test_a_warm_clis_cron_job_is_not_stored_and_the_cli_runs_it(claude: Claude) -> None:
    claude.api.set_script(
        [
            AnthropicToolUse.tool_search("CronCreate"),
            AnthropicToolUse(
                "CronCreate", {"cron": "* * * * *", "prompt": CRON_PROMPT, "recurring": False}
            ),
            AnthropicText("Scheduled."),
            AnthropicText("Fired."),
            AnthropicText("Fired again."),
        ]
    )
    async with warm_agent(claude, keep_alive=600) as rt:
        with trio.fail_after(TURN_BOUND):
            assert (await rt.ask("coder", "Watch the CI run.")).text == "Scheduled."
        assert await rt.schedules("coder") == ()

        def fires() -> int:
            return sum(CRON_PROMPT in r.last_user_text() for r in claude.api.message_requests)

        with trio.fail_after(60 + TURN_BOUND):
            await request_where(claude.api, lambda r: CRON_PROMPT in r.last_user_text())
        await wait_until(lambda: len(claude.api.message_requests) == 4, bound=TURN_BOUND)
        assert fires() == 1
