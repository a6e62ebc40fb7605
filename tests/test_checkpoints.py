"""The "Cancellation:" paragraphs of the public API, checked. As in trio: an async call is a
checkpoint even when it has nothing to wait for, and a sync-colored one never is (it acts
at once, and no other task runs meanwhile)."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from _helpers import Recorder, echo_backend, settle
from trio.testing import MockClock, assert_checkpoints, assert_no_checkpoints

import agentrt
from agentrt import Agent, Completed, Pending, open_runtime
from agentrt.testing import Gate, reply


async def test_open_runtime_checkpoints_opening_and_closing(autojump_clock: MockClock) -> None:
    with assert_checkpoints():
        async with open_runtime():
            pass


async def test_every_async_call_checkpoints_on_its_fast_path(autojump_clock: MockClock) -> None:
    async with open_runtime() as rt:
        with assert_checkpoints():
            await rt.start_agent(Agent, name="a", backend=echo_backend())
        with assert_checkpoints():
            assert (await rt.ask("a", "hi")).text == "echo hi"
        ref = rt.tell("a", "told")
        assert isinstance(await rt.wait(ref), Completed)
        with assert_checkpoints():  # settled already: nothing to wait for
            assert isinstance(await rt.wait(ref), Completed)
        with assert_checkpoints():  # a MemoryStore write waits for nothing
            await rt.reset_session("a")
        with assert_checkpoints():
            await rt.stop_agent("a")


async def test_the_module_level_async_calls_checkpoint_too(autojump_clock: MockClock) -> None:
    async with open_runtime():
        with assert_checkpoints():
            await agentrt.start_agent(Agent, name="a", backend=echo_backend())
        with assert_checkpoints():
            await agentrt.ask("a", "hi")
        with assert_checkpoints():
            await agentrt.stop_agent("a")


async def test_the_sync_calls_never_checkpoint_and_act_at_once(autojump_clock: MockClock) -> None:
    gate = Gate()
    async with open_runtime() as rt:
        await rt.start_agent(
            Agent, name="a", backend=echo_backend([gate, *reply("first")]), watchdog=None
        )
        await settle()  # the agent idle, waiting for work
        with assert_no_checkpoints():
            first = rt.tell("a", "first")
            queued = rt.tell("a", "queued")
            rt.notify("a", "an event")
            assert isinstance(rt.poll(queued), Pending)
            assert rt.status("a").queued == 1  # the second: the first is the agent's already
        await gate.wait_reached()
        with assert_no_checkpoints():
            assert rt.interrupt("a")
            assert rt.status("a").current is not None  # the turn ends later, in its own task
        outcome = await rt.wait(first)
        assert isinstance(outcome, agentrt.Failed)
        assert outcome.error.reason is agentrt.StopReason.INTERRUPTED


async def test_a_cancelled_start_agent_leaves_no_agent_behind(autojump_clock: MockClock) -> None:
    class SlowStart(Agent):
        async def init_agent(self, **options: Any) -> dict[str, Any]:  # type: ignore[override]
            await trio.sleep(10)
            return options

    async with open_runtime() as rt:
        with trio.move_on_after(1) as scope:
            await rt.start_agent(SlowStart, name="a", backend=echo_backend())
        await settle()
        assert scope.cancelled_caught
        assert rt.agents() == () and rt.whereis("a") is None
        # The name is free again.
        await rt.start_agent(Agent, name="a", backend=echo_backend())
        assert (await rt.ask("a", "hi")).text == "echo hi"


async def test_a_cancelled_stop_agent_still_stops_the_agent(autojump_clock: MockClock) -> None:
    class SlowStop(Recorder):
        async def terminate_agent(self, reason: str | BaseException) -> None:  # type: ignore[override]
            super().terminate_agent(reason)
            await trio.sleep(10)

    agent = SlowStop()
    async with open_runtime() as rt:
        await rt.start_agent(agent, name="a", backend=echo_backend())
        with trio.move_on_after(1) as scope:
            await rt.stop_agent("a")
        assert scope.cancelled_caught  # only the wait was cut short...
        assert rt.agents() == ()  # ...the agent is stopped
        with pytest.raises(agentrt.AgentNotFound):
            rt.tell("a", "too late")
    assert agent.only("terminate") == ["stopped"]
