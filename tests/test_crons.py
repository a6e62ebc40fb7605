"""Cron jobs the agent's CLI makes (`agentrt.backend.CronBackend`; Claude's ``CronCreate`` and
``CronDelete``): stored as a schedule of origin ``cron`` under the key ``cron:<the CLI's
id>``, fired at each time the expression names as a turn of origin ``cron`` with the model's
prompt, until the model deletes the job (even on a CLI that no longer knows it); a one-shot
job fires once and is dropped; a call the CLI refused makes nothing; a warm CLI's jobs are
its own. (Real claude: tests/realcli/test_claude_crons.py.)"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import pytest
import trio
from _helpers import echo
from trio.testing import MockClock

import agentrt
from agentrt import SQLiteStore, open_runtime
from agentrt.backend import CronDeleted, CronRequested, Event, ToolResultEvent, ToolUseEvent
from agentrt.backends.claude import ClaudeBackend
from agentrt.testing import ScriptedBackend, reply

FIVE_MINUTES = 300.0


class CronBackend(ScriptedBackend):
    """Scripted turns whose cron jobs are read as the claude backend reads its CLI's."""

    def crons(self, events: Sequence[Event]) -> Sequence[CronRequested | CronDeleted]:
        return ClaudeBackend().crons(events)


def creates(cron: str, prompt: str, *, recurring: bool = True, refused: bool = False) -> list:
    """A turn whose model calls CronCreate, and the CLI's answer to the call (2.1.332's)."""
    kind = "recurring job" if recurring else "one-shot task"
    answer = (
        "<tool_use_error>Invalid cron expression</tool_use_error>"
        if refused
        else f"Scheduled {kind} 2cdf7cb9 (Every 5 minutes). Next run: Dec 7 12:29pm."
        " Session-only (not written to disk, dies when Claude exits)."
    )
    return [
        ToolUseEvent(
            id="toolu_1",
            name="CronCreate",
            input={"cron": cron, "prompt": prompt, "recurring": recurring},
        ),
        ToolResultEvent(tool_use_id="toolu_1", content=answer, is_error=refused),
        *reply("Scheduled."),
    ]


def deletes(cron_id: str, *, known: bool = True) -> list:
    """A turn whose model calls CronDelete, and the CLI's answer: 2.1.332's when it knows the
    job (a CLI that resumed the session does), or its error when it does not."""
    answer = (
        f"Cancelled job {cron_id}."
        if known
        else f"<tool_use_error>No scheduled job with id '{cron_id}'</tool_use_error>"
    )
    return [
        ToolUseEvent(id="toolu_2", name="CronDelete", input={"id": cron_id}),
        ToolResultEvent(tool_use_id="toolu_2", content=answer, is_error=not known),
        *reply("Deleted."),
    ]


class Turns(agentrt.Agent):
    """Keeps each answered turn: when it ended (trio's clock), its origin and its text."""

    def __init__(self) -> None:
        self.answered: list[tuple[float, str, str]] = []

    def handle_response(self, ref: agentrt.Ref, response: agentrt.Response) -> None:
        self.answered.append((trio.current_time(), response.origin, response.text))


async def test_a_cron_job_the_cli_made_fires_at_each_time_it_names_until_it_is_deleted(
    autojump_clock: MockClock,
) -> None:
    agent = Turns()
    backend = CronBackend(creates("*/5 * * * *", "check the CI run"), default=echo)
    async with open_runtime() as rt:
        await rt.start_agent(agent, name="coder", backend=backend)
        start = trio.current_time()
        assert (await rt.ask("coder", "watch the CI")).text == "Scheduled."
        (kept,) = await rt.schedules("coder")
        assert (kept.origin, kept.prompt, kept.every, kept.cron, kept.key) == (
            "cron",
            "check the CI run",
            None,
            "*/5 * * * *",
            "cron:2cdf7cb9",
        )
        # Read in UTC: the next whole five minutes of the wall clock.
        assert kept.next_due == math.floor(kept.created_at / FIVE_MINUTES + 1) * FIVE_MINUTES
        first = start + kept.next_due - kept.created_at
        await trio.sleep(first - start + 2 * FIVE_MINUTES + 1)
        backend.push(*deletes("2cdf7cb9", known=False))
        assert (await rt.ask("coder", "stop watching")).text == "Deleted."
        assert await rt.schedules("coder") == ()
        await trio.sleep(10 * FIVE_MINUTES)
    fires = [(t - first, origin, text) for t, origin, text in agent.answered[1:-1]]
    assert fires == [
        (pytest.approx(k * FIVE_MINUTES, abs=1e-6), "cron", "echo check the CI run")
        for k in range(3)
    ]
    assert agent.answered[-1][1:] == ("user", "Deleted.")
    assert backend.prompts == ["watch the CI", *["check the CI run"] * 3, "stop watching"]


async def test_a_one_shot_cron_job_fires_once_and_is_dropped(autojump_clock: MockClock) -> None:
    agent = Turns()
    backend = CronBackend(creates("*/10 * * * *", "send the report", recurring=False), default=echo)
    async with open_runtime() as rt:
        await rt.start_agent(agent, name="coder", backend=backend)
        start = trio.current_time()
        await rt.ask("coder", "remind me")
        (kept,) = await rt.schedules("coder")
        assert (kept.origin, kept.every, kept.cron, kept.key) == (
            "cron",
            None,
            None,
            "cron:2cdf7cb9",
        )
        due = start + kept.next_due - kept.created_at
        await trio.sleep(due - start + 3 * 600)
        assert await rt.schedules("coder") == ()
    assert [(t - due, o) for t, o, _ in agent.answered[1:]] == [
        (pytest.approx(0, abs=1e-6), "cron")
    ]
    assert backend.prompts == ["remind me", "send the report"]


async def test_a_cron_call_the_cli_refused_makes_nothing(autojump_clock: MockClock) -> None:
    backend = CronBackend(creates("61 * * * *", "later", refused=True), default=echo)
    async with open_runtime() as rt:
        await rt.start_agent(agentrt.Agent, name="coder", backend=backend)
        await rt.ask("coder", "start")
        assert await rt.schedules("coder") == ()


async def test_a_cron_job_made_and_deleted_in_one_turn_keeps_nothing(
    autojump_clock: MockClock,
) -> None:
    made = creates("*/5 * * * *", "check the CI run")
    backend = CronBackend([*made[:2], *deletes("2cdf7cb9")], default=echo)
    async with open_runtime() as rt:
        await rt.start_agent(agentrt.Agent, name="coder", backend=backend)
        assert (await rt.ask("coder", "start")).text == "Deleted."
        assert await rt.schedules("coder") == ()
        await trio.sleep(3 * FIVE_MINUTES)
    assert backend.prompts == ["start"]


async def test_a_stored_cron_job_fires_in_the_next_program_as_a_turn_of_origin_cron(
    tmp_path: Path,
) -> None:
    # Program 1's turn makes the job and the program ends; program 2 owns the agent and
    # fires it (made due now, not to wait for the minute): a request of origin cron, kept
    # as such in the store, on the agent's session.
    path = tmp_path / "sessions.sqlite3"
    async with open_runtime(store=SQLiteStore(path)) as rt:
        backend = CronBackend(creates("* * * * *", "check the CI run"), default=echo)
        await rt.start_agent(agentrt.Agent, name="coder", backend=backend)
        await rt.ask("coder", "watch the CI")
    agent = Turns()
    backend = CronBackend(default=echo)
    async with open_runtime(store=SQLiteStore(path)) as rt:
        await rt.start_agent(agent, name="coder", backend=backend)
        (kept,) = await rt.schedules("coder")
        assert (kept.origin, kept.cron) == ("cron", "* * * * *")
        assert await rt.run_schedule("coder", kept.id)
        with trio.fail_after(30):
            # The scheduler reads the store at least once a second: no event to wait on.
            while (fired := (await rt.schedules("coder"))[0].last_ref) is None:  # noqa: ASYNC110
                await trio.sleep(0.05)
            result = await rt.wait(fired)
    assert isinstance(result, agentrt.Completed)
    assert (result.response.origin, result.response.text) == ("cron", "echo check the CI run")
    assert [o for _, o, _ in agent.answered] == ["cron"]
