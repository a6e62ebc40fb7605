"""`agentrt._alarm.Alarm`'s own unit test (the turn bounds built on it are tested through
the public API in test_warm.py and test_hang_bounds.py)."""

from __future__ import annotations

import trio
import trio.testing

from agentrt._alarm import Alarm


async def test_a_set_alarm_calls_back_once_at_its_deadline_as_moved(
    autojump_clock: trio.testing.MockClock,
) -> None:
    calls: list[float] = []
    alarm = Alarm()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(alarm.run)
        alarm.set(10.0, calls.append)
        alarm.move(20.0)
        await trio.sleep(15)
        assert calls == []
        await trio.sleep(30)
        assert calls == [20.0]
        alarm.set(60.0, calls.append)
        alarm.move(50.0)
        await trio.sleep(100)
        assert calls == [20.0, 50.0]
        nursery.cancel_scope.cancel()


async def test_a_cleared_alarm_calls_nothing(autojump_clock: trio.testing.MockClock) -> None:
    calls: list[float] = []
    alarm = Alarm()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(alarm.run)
        alarm.set(10.0, calls.append)
        await trio.sleep(5)
        alarm.clear()
        await trio.sleep(100)
        assert calls == []
        nursery.cancel_scope.cancel()


async def test_with_nothing_set_a_deadline_in_the_past_does_not_keep_its_task_awake() -> None:
    # A turn's bound may move into the past after the turn has stopped (its drain reads on).
    alarm = Alarm()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(alarm.run)
        called = trio.Event()
        alarm.set(trio.current_time(), lambda now: called.set())
        await called.wait()  # nothing is set now
        alarm.move(trio.current_time() - 1)
        with trio.fail_after(5):
            await trio.testing.wait_all_tasks_blocked()  # never returns if it spins
        nursery.cancel_scope.cancel()
