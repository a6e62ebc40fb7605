"""Conformance checks of the scheduled prompts (`ScheduleStore`): kept (a wake-up's origin
too), listed in the order they were added and removed; one per idempotency key; a fire
recorded once for its due time, whichever handle records it; made due anew.
"""

from __future__ import annotations

from typing import Any

import attrs

from .._errors import StoreError
from .._schedule import Schedule
from .._stores._protocols import SessionStore, StoreCapabilities
from .._stores._schedule_store import ScheduleStore
from ._conformance_kit import StoreHarness, _check, _closing, _open, _raises


def _schedule(id: str, name: str = "coder", **changes: Any) -> Schedule:
    made = Schedule(
        id=id,
        name=name,
        prompt=f"check the build ({id})",
        every=3600.0,
        cron=None,
        overlap="skip",
        key=None,
        created_at=1000.0 + int(id),
        next_due=4600.0 + int(id),
    )
    return attrs.evolve(made, **changes)


async def _handle(harness: StoreHarness) -> tuple[SessionStore, ScheduleStore]:
    store = await _open(harness)
    kept = StoreCapabilities.of(store).schedules
    assert kept is not None
    return store, kept


@_check(ScheduleStore)
async def _schedules_are_kept_in_their_order_and_removed(harness: StoreHarness) -> None:
    store, kept = await _handle(harness)
    other, seen = await _handle(harness)
    try:
        assert list(await kept.schedules()) == []
        first = _schedule("1", cron="0 9 * * 1-5", every=None)
        # A wake-up the agent's CLI scheduled: one-shot, neither every nor cron.
        wakeup = _schedule("3", overlap="queue", every=None, origin="wakeup")
        added = [first, _schedule("2", name="reviewer"), wakeup]
        for schedule in added:
            assert await kept.add_schedule(schedule) == schedule
        assert list(await kept.schedules()) == added
        assert list(await seen.schedules("coder")) == [added[0], added[2]]  # another handle
        with _raises(StoreError, "exists"):
            await kept.add_schedule(_schedule("1", name="other"))
        assert not await kept.drop_schedule("reviewer", "1")  # not that agent's
        assert await seen.drop_schedule("coder", "1")
        assert not await kept.drop_schedule("coder", "1")
        assert list(await kept.schedules()) == added[1:]
    finally:
        await _closing(store, other)


@_check(ScheduleStore)
async def _a_key_keeps_one_schedule_per_agent(harness: StoreHarness) -> None:
    store, kept = await _handle(harness)
    try:
        first = _schedule("1", key="nightly")
        assert await kept.add_schedule(first) == first
        assert await kept.add_schedule(_schedule("2", key="nightly")) == first
        other = _schedule("3", name="reviewer", key="nightly")
        assert await kept.add_schedule(other) == other
        assert list(await kept.schedules()) == [first, other]
    finally:
        await _closing(store)


@_check(ScheduleStore)
async def _a_fire_is_recorded_once_for_its_due_time(harness: StoreHarness) -> None:
    store, kept = await _handle(harness)
    other, rival = await _handle(harness)
    try:
        schedule = _schedule("1")
        await kept.add_schedule(schedule)
        due = schedule.next_due
        fired: dict[str, Any] = {
            "due": due,
            "next_due": due + 3600,
            "fired_at": due + 0.5,
            "request": "77",
        }
        assert await kept.record_schedule_fire("coder", "1", **fired)
        # The same due time, recorded again (by another program, or after a restart): no.
        again = {**fired, "request": "78"}
        assert not await rival.record_schedule_fire("coder", "1", **again)
        (now,) = await rival.schedules("coder")
        assert (now.next_due, now.last_run, now.last_request) == (due + 3600, due + 0.5, "77")
        assert now.last_ref is not None and now.last_ref.id == 77
        # A skipped fire moves the due time only.
        skipped: dict[str, Any] = {
            "due": due + 3600,
            "next_due": due + 7200,
            "fired_at": None,
            "request": None,
        }
        assert await kept.record_schedule_fire("coder", "1", **skipped)
        (now,) = await kept.schedules("coder")
        assert (now.next_due, now.last_run, now.last_request) == (due + 7200, due + 0.5, "77")
        # Made due anew ("run now"): a fire recorded for the old due time is refused.
        assert await rival.make_schedule_due("coder", "1", 5000.25)
        late = {**skipped, "due": due + 7200}
        assert not await kept.record_schedule_fire("coder", "1", **late)
        (now,) = await kept.schedules("coder")
        assert now.next_due == 5000.25
        assert not await kept.make_schedule_due("coder", "9", 1.0)
        assert not await kept.make_schedule_due("reviewer", "1", 1.0)
        assert not await kept.record_schedule_fire("coder", "9", **fired)
    finally:
        await _closing(store, other)
