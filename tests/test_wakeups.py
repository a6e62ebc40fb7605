"""Wake-ups the agent's CLI schedules (`agentrt.backend.WakeupBackend`; Claude's
``ScheduleWakeup``): stored as a one-shot schedule of origin ``wakeup``, fired once when due
as a turn of origin ``wakeup`` with the model's prompt, and dropped; a call the CLI refused
schedules nothing; on SQLite the wake-up outlives its program and fires once across a
restart between the fire and its drop. (Real claude: tests/realcli/test_claude_wakeups.py.)"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
import trio
from _helpers import echo
from trio.testing import MockClock

import agentrt
from agentrt import SQLiteStore, open_runtime
from agentrt.backend import Event, ToolResultEvent, ToolUseEvent, WakeupRequested
from agentrt.backends.claude import ClaudeBackend
from agentrt.testing import Gate, ScriptedBackend, reply


class WakingBackend(ScriptedBackend):
    """Scripted turns whose wake-ups are read as the claude backend reads its CLI's."""

    def wakeups(self, events: Sequence[Event]) -> Sequence[WakeupRequested]:
        return ClaudeBackend().wakeups(events)


def schedules_wakeup(delay: float, prompt: str, *, refused: bool = False) -> list[object]:
    """A turn whose model calls ScheduleWakeup, and the CLI's answer to the call."""
    return [
        ToolUseEvent(
            id="toolu_1",
            name="ScheduleWakeup",
            input={"delaySeconds": delay, "reason": "wait for CI", "prompt": prompt},
        ),
        ToolResultEvent(tool_use_id="toolu_1", content="Next wakeup scheduled", is_error=refused),
        *reply("Scheduled."),
    ]


class Turns(agentrt.Agent):
    """Keeps each answered turn: when it ended (trio's clock), its origin and its text."""

    def __init__(self) -> None:
        self.answered: list[tuple[float, str, str]] = []

    def handle_response(self, ref: agentrt.Ref, response: agentrt.Response) -> None:
        self.answered.append((trio.current_time(), response.origin, response.text))


async def test_a_wakeup_the_cli_scheduled_fires_once_when_due_and_is_dropped(
    autojump_clock: MockClock,
) -> None:
    agent = Turns()
    backend = WakingBackend(schedules_wakeup(90, "check the CI run"), default=echo)
    async with open_runtime() as rt:
        await rt.start_agent(agent, name="coder", backend=backend)
        start = trio.current_time()
        assert (await rt.ask("coder", "start the CI run")).text == "Scheduled."
        (kept,) = await rt.schedules("coder")
        assert (kept.origin, kept.prompt, kept.every, kept.cron) == (
            "wakeup",
            "check the CI run",
            None,
            None,
        )
        assert kept.next_due == kept.created_at + 90
        await trio.sleep(1000)
        assert [(t - start, origin, text) for t, origin, text in agent.answered] == [
            (0, "user", "Scheduled."),
            (90, "wakeup", "echo check the CI run"),
        ]
        assert await rt.schedules("coder") == ()
    assert backend.prompts == ["start the CI run", "check the CI run"]


async def test_a_wakeup_call_the_cli_refused_schedules_nothing(
    autojump_clock: MockClock,
) -> None:
    backend = WakingBackend(schedules_wakeup(90, "later", refused=True), default=echo)
    async with open_runtime() as rt:
        await rt.start_agent(agentrt.Agent, name="coder", backend=backend)
        await rt.ask("coder", "start")
        assert await rt.schedules("coder") == ()
        await trio.sleep(1000)
    assert backend.prompts == ["start"]


async def test_a_stored_wakeup_fires_once_in_the_next_program_and_is_dropped(
    tmp_path: Path,
) -> None:
    # Program 1's turn schedules a wake-up and the program ends. Program 2 stored the
    # wake-up's request under its fire key and died before dropping it (written here
    # through the store, as it would have). Program 3 owns the agent: firing the wake-up
    # finds that request, so it runs once, and the wake-up is dropped.
    path = tmp_path / "sessions.sqlite3"
    async with open_runtime(store=SQLiteStore(path)) as rt:
        backend = WakingBackend(schedules_wakeup(1, "check the CI run"), default=echo)
        await rt.start_agent(agentrt.Agent, name="coder", backend=backend)
        await rt.ask("coder", "start the CI run")
        await rt.stop_agent("coder")
        (kept,) = await rt.schedules("coder")
    assert kept.origin == "wakeup"
    async with SQLiteStore(path) as store:
        await store.enqueue_request(
            "coder",
            id="4242",
            prompt=kept.prompt,
            key=f"schedule:{kept.id}:{kept.next_due!r}",
            origin="wakeup",
            max_pending=10,
            max_pending_bytes=10_000,
        )
    backend = WakingBackend(default=echo)
    async with open_runtime(store=SQLiteStore(path)) as rt:
        await rt.start_agent(agentrt.Agent, name="coder", backend=backend)
        result = await rt.wait(agentrt.Ref("coder", 4242))
        assert isinstance(result, agentrt.Completed)
        assert result.response.origin == "wakeup"
        with trio.fail_after(30):
            # The scheduler reads the store as the agent starts, then each second while the
            # agent has schedules: no event to wait on.
            while await rt.schedules("coder"):  # noqa: ASYNC110
                await trio.sleep(0.05)
        # A second request for the wake-up would run before this prompt.
        await rt.ask("coder", "done")
    assert backend.prompts == ["check the CI run", "done"]


async def test_a_wakeup_due_while_the_mailbox_is_full_fires_once_there_is_room(
    autojump_clock: MockClock,
) -> None:
    agent = Turns()
    gate = Gate()
    backend = WakingBackend(
        schedules_wakeup(90, "check the CI run"), [gate, *reply("long done")], default=echo
    )
    async with open_runtime() as rt:
        await rt.start_agent(agent, name="coder", backend=backend, max_pending=1)
        start = trio.current_time()
        await rt.ask("coder", "start the CI run")
        await rt.tell("coder", "a long job")
        await gate.wait_reached()
        await rt.tell("coder", "queued")  # the mailbox holds no more
        with pytest.raises(agentrt.MailboxFull):
            await rt.tell("coder", "one too many")
        await trio.sleep(120)  # the wake-up came due (at 90) while the mailbox was full
        gate.release()
        await trio.sleep(1000)
        assert [(origin, text) for _, origin, text in agent.answered] == [
            ("user", "Scheduled."),
            ("user", "long done"),
            ("user", "echo queued"),
            ("wakeup", "echo check the CI run"),
        ]
        # The queue drained at 120; the store is read each second while the agent has one.
        assert agent.answered[-1][0] - start == 121
        assert await rt.schedules("coder") == ()
