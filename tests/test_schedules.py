"""Scheduled turns (`Runtime.schedule`): each fire a request of origin ``schedule`` on the
trio clock (exact under MockClock), the overlap rule, run now, unschedule, the arguments
refused; and on SQLite, a schedule that outlives its program and a fire that happens once
across a restart between the fire and its record. (The store's side: the conformance kit,
tests/test_store_conformance.py.)"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import trio
from _helpers import echo_backend
from doc_blocks import doc_block
from trio.testing import MockClock

import agentrt
from agentrt import InvalidOptions, MemoryStore, SQLiteStore, open_runtime
from agentrt.testing import Call, ScriptedBackend, Sleep, reply


class Turns(agentrt.Agent):
    """Keeps each answered turn: when it ended (trio's clock), its origin and its text."""

    def __init__(self) -> None:
        self.answered: list[tuple[float, str, str]] = []

    def handle_response(self, ref: agentrt.Ref, response: agentrt.Response) -> None:
        self.answered.append((trio.current_time(), response.origin, response.text))


async def test_a_schedule_fires_every_period_as_a_turn_of_origin_schedule(
    autojump_clock: MockClock,
) -> None:
    agent = Turns()
    async with open_runtime() as rt:
        await rt.start_agent(agent, name="coder", backend=echo_backend())
        start = trio.current_time()
        made = await rt.schedule("coder", "check the build", every=60)
        assert (made.name, made.every, made.overlap, made.last_run) == ("coder", 60.0, "skip", None)
        assert made.next_due == pytest.approx(made.created_at + 60)
        await trio.sleep(185)
        assert [(t - start, origin, text) for t, origin, text in agent.answered] == [
            (60, "schedule", "echo check the build"),
            (120, "schedule", "echo check the build"),
            (180, "schedule", "echo check the build"),
        ]
        (kept,) = await rt.schedules("coder")
        assert kept.id == made.id
        assert kept.last_run == pytest.approx(made.created_at + 180)
        assert kept.next_due == pytest.approx(made.created_at + 240)
        assert kept.last_ref is not None
        result = await rt.wait(kept.last_ref)
        assert isinstance(result, agentrt.Completed)
        assert result.response.origin == "schedule"
        # An answer to the application's own prompt says so.
        assert (await rt.ask("coder", "hi")).origin == "user"


@pytest.mark.parametrize(
    ("overlap", "started", "queued"),
    [
        # Each turn takes 90 s, and a fire comes every 60 s: the fire of 120 comes while
        # the turn of 60 runs (to 150).
        ("skip", [60, 180, 300], 0),  # the fires of 120 and 240 dropped
        ("queue", [60, 150, 240, 330], 1),  # each queued behind the last; 300's waits
    ],
)
async def test_the_overlap_rule_drops_or_queues_a_fire_while_the_last_runs(
    autojump_clock: MockClock, overlap: str, started: list[int], queued: int
) -> None:
    starts: list[float] = []

    def ninety_seconds(call: Call) -> list[object]:
        starts.append(trio.current_time())
        return [Sleep(90), *reply(call.prompt)]

    async with open_runtime() as rt:
        await rt.start_agent(
            agentrt.Agent, name="coder", backend=ScriptedBackend(default=ninety_seconds)
        )
        start = trio.current_time()
        await rt.schedule("coder", "lint", every=60, overlap=overlap)
        await trio.sleep(335)
        assert [t - start for t in starts] == started
        assert (await rt.status("coder")).queued == queued


@pytest.mark.parametrize("when_busy", ["interrupt", "reject"])
async def test_a_fire_queues_behind_a_running_turn_whatever_when_busy_says(
    autojump_clock: MockClock, when_busy: str
) -> None:
    # when_busy says what a prompt of the application's does that arrives during a turn: a
    # fire neither ends the person's turn nor is refused; it queues (overlap is its rule).
    agent = Turns()

    def ninety_seconds(call: Call) -> list[object]:
        return [Sleep(90), *reply(call.prompt)]

    async with open_runtime() as rt:
        backend = ScriptedBackend(default=ninety_seconds)
        await rt.start_agent(agent, name="coder", backend=backend, when_busy=when_busy)
        start = trio.current_time()
        await rt.schedule("coder", "lint", every=60, overlap="queue")
        work = await rt.tell("coder", "refactor")
        assert isinstance(await rt.wait(work), agentrt.Completed)
        await trio.sleep(100)
        assert [(t - start, origin, text) for t, origin, text in agent.answered] == [
            (90, "user", "refactor"),
            (180, "schedule", "lint"),
        ]


async def test_run_schedule_fires_now_and_the_next_fire_is_a_period_later(
    autojump_clock: MockClock,
) -> None:
    agent = Turns()
    async with open_runtime() as rt:
        await rt.start_agent(agent, name="coder", backend=echo_backend())
        start = trio.current_time()
        made = await rt.schedule("coder", "report", every=3600)
        await trio.sleep(100)
        assert await rt.run_schedule("coder", made.id)
        await trio.sleep(3601)
        assert [t - start for t, _origin, _text in agent.answered] == [100, 3700]
        assert not await rt.run_schedule("coder", "no-such-id")
        assert not await rt.run_schedule("reviewer", made.id)  # not that agent's


async def test_unschedule_stops_the_fires(autojump_clock: MockClock) -> None:
    backend = echo_backend()
    async with open_runtime() as rt:
        await rt.start_agent(agentrt.Agent, name="coder", backend=backend)
        made = await rt.schedule("coder", "tick", every=10)
        await trio.sleep(25)
        assert await rt.unschedule("coder", made.id)
        assert not await rt.unschedule("coder", made.id)
        await trio.sleep(100)
        assert backend.prompts == ["tick", "tick"]
        assert await rt.schedules("coder") == ()


async def test_a_cron_schedule_fires_at_the_times_it_names(autojump_clock: MockClock) -> None:
    agent = Turns()
    async with open_runtime() as rt:
        await rt.start_agent(agent, name="coder", backend=echo_backend())
        made = await rt.schedule("coder", "standup", cron="*/15 * * * *")
        assert made.next_due % 900 == 0 and 0 < made.next_due - made.created_at <= 900
        await trio.sleep(made.next_due - made.created_at + 1801)
        assert len(agent.answered) == 3
        (kept,) = await rt.schedules("coder")
        assert kept.next_due == made.next_due + 2700


async def test_a_schedule_key_keeps_one_schedule(autojump_clock: MockClock) -> None:
    async with open_runtime() as rt:
        await rt.start_agent(agentrt.Agent, name="coder", backend=echo_backend())
        first = await rt.schedule("coder", "nightly", every=86400, key="nightly")
        again = await rt.schedule("coder", "nightly too", every=60, key="nightly")
        assert again == first
        assert [s.id for s in await rt.schedules("coder")] == [first.id]


@pytest.mark.parametrize(
    ("arguments", "key"),
    [
        ({}, "every"),
        ({"every": 60, "cron": "* * * * *"}, "every"),
        ({"every": 0}, "every"),
        ({"every": float("inf")}, "every"),
        ({"every": True}, "every"),
        ({"cron": "every day"}, "cron"),
        ({"cron": 5}, "cron"),
        ({"every": 60, "overlap": "later"}, "overlap"),
        ({"every": 60, "key": ""}, "key"),
        ({"every": 60, "name": ""}, "name"),
    ],
)
async def test_a_schedule_with_bad_timing_is_refused_naming_the_argument(
    arguments: dict[str, object], key: str
) -> None:
    async with open_runtime(store=MemoryStore()) as rt:
        name = arguments.pop("name", "coder")
        with pytest.raises(InvalidOptions) as caught:
            await rt.schedule(name, "x", **arguments)  # type: ignore[arg-type]
        assert caught.value.key == key
        assert await rt.schedules("coder") == ()


async def test_a_schedule_outlives_its_program_and_its_due_fire_runs_once(tmp_path: Path) -> None:
    # Program 1 schedules and closes; program 2 stored a fire's request under the fire's
    # key and died before recording it (written here through the store, as it would have).
    # Program 3 owns the agent: it runs that request, and firing the due time again finds
    # it, so the due time makes one request and one turn.
    path = tmp_path / "sessions.sqlite3"
    async with open_runtime(store=SQLiteStore(path)) as rt:
        made = await rt.schedule("coder", "nightly", every=0.5)
    # The key a program stores the fire of a due time under (docs: long-lived-coders.md).
    fire_key = f"schedule:{made.id}:{made.next_due!r}"
    async with SQLiteStore(path) as store:
        await store.enqueue_request(
            "coder",
            id="4242",
            prompt="nightly",
            key=fire_key,
            origin="schedule",
            max_pending=10,
            max_pending_bytes=10_000,
        )
    backend = echo_backend()
    async with open_runtime(store=SQLiteStore(path)) as rt:
        await rt.start_agent(agentrt.Agent, name="coder", backend=backend)
        with trio.fail_after(30):
            # The scheduler reads the store as the agent starts, then each second while the
            # agent has schedules: no event to wait on.
            while (kept := (await rt.schedules("coder"))[0]).last_run is None:  # noqa: ASYNC110
                await trio.sleep(0.05)
        assert kept.last_request == "4242"
        result = await rt.wait(agentrt.Ref("coder", 4242))
        assert isinstance(result, agentrt.Completed)
        assert result.response.origin == "schedule"
        await rt.unschedule("coder", made.id)
    assert backend.prompts == ["nightly"]


async def test_the_guides_schedule_block_runs(autojump_clock: MockClock) -> None:
    namespace: dict[str, Any] = {}
    exec(compile(doc_block("async def schedule_coder"), "long-lived-coders.md", "exec"), namespace)
    backend = echo_backend()
    async with open_runtime() as rt:
        await rt.start_agent(agentrt.Agent, name="coder", backend=backend)
        nightly, ci = await namespace["schedule_coder"](rt)
        assert (nightly.cron, ci.every, ci.overlap, ci.key) == ("0 2 * * *", 900.0, "queue", "ci")
        await trio.sleep(901)
        assert "Check the CI status." in backend.prompts
        assert {s.id for s in await rt.schedules("coder")} == {nightly.id, ci.id}


async def test_another_program_schedules_and_runs_now_and_the_owner_fires(tmp_path: Path) -> None:
    # Two runtimes on one SQLite file, as two programs: one owns the agent, the other
    # (which does not run it) schedules for it and fires it now; the owner fires, once.
    path = tmp_path / "sessions.sqlite3"
    agent = Turns()
    async with (
        open_runtime(store=SQLiteStore(path)) as owner,
        open_runtime(store=SQLiteStore(path)) as other,
    ):
        await owner.start_agent(agent, name="coder", backend=echo_backend())
        made = await other.schedule("coder", "report", every=3600)
        assert await other.run_schedule("coder", made.id)
        with trio.fail_after(30):
            # The owner reads the store each 5 s while its agents have no schedule: no event
            # to wait on.
            while (kept := (await other.schedules("coder"))[0]).last_ref is None:  # noqa: ASYNC110
                await trio.sleep(0.05)
        assert kept.last_ref is not None
        result = await owner.wait(kept.last_ref)
        assert isinstance(result, agentrt.Completed)
        assert result.response.origin == "schedule"
        assert kept.next_due == pytest.approx(kept.last_run + 3600)  # type: ignore[operator]
    assert [(origin, text) for _t, origin, text in agent.answered] == [("schedule", "echo report")]


class SharedCountingStore(MemoryStore):
    """A memory store as one other programs share (so its owner reads it for their
    schedules), counting the scheduler's readings of every schedule."""

    readings = 0

    @property
    def shared_between_programs(self) -> bool:
        return True

    async def schedules(self, name: str | None = None) -> Sequence[agentrt.Schedule]:
        if name is None:
            self.readings += 1
        return await super().schedules(name)


async def test_an_owner_whose_agents_have_no_schedule_reads_a_shared_store_seldom(
    autojump_clock: MockClock,
) -> None:
    # An idle owner on a store another program shares, over a minute: 60 readings of
    # every schedule while it read the store each second whatever it held; 12 once it
    # reads it each 5 s while none is of its agents, and each second once one is.
    store = SharedCountingStore()
    agent = Turns()
    async with (
        open_runtime(store=store) as owner,
        open_runtime(store=store.handle()) as other,
    ):
        await owner.start_agent(agent, name="coder", backend=echo_backend())
        await other.schedule("elsewhere", "not the owner's", every=3600)
        await trio.sleep(1)
        before = store.readings
        await trio.sleep(60)
        assert store.readings - before <= 13
        # Another program's schedule of its agent, made due at once, fires within 5 s.
        made = await other.schedule("coder", "report", every=3600)
        start = trio.current_time()
        assert await other.run_schedule("coder", made.id)
        await trio.sleep(6)
        assert [(t - start <= 5, text) for t, _, text in agent.answered] == [(True, "echo report")]
        before = store.readings
        await trio.sleep(60)
        assert store.readings - before >= 55
        # An agent that starts with a schedule overdue (another program's) fires it at once,
        # while the owner reads the store each 5 s again.
        assert await other.unschedule("coder", made.id)
        late = Turns()
        await other.schedule("late", "catch up", every=30)
        await trio.sleep(31)
        start = trio.current_time()
        await owner.start_agent(late, name="late", backend=echo_backend())
        await trio.sleep(0.5)
        assert [(t - start, text) for t, _, text in late.answered] == [(0, "echo catch up")]
