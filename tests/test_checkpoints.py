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
        ref = await rt.tell("a", "told")
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


async def test_the_calls_that_may_wait_checkpoint_and_the_others_never(
    autojump_clock: MockClock,
) -> None:
    """Every call naming an agent may reach another runtime, so each is async and a
    checkpoint, also for a local agent with nothing to wait for; stream, agents, whereis
    and statistics are about this runtime only, and never are."""
    gate = Gate()
    async with open_runtime() as rt:
        await rt.start_agent(
            Agent, name="a", backend=echo_backend([gate, *reply("first")]), watchdog=None
        )
        await settle()  # the agent idle, waiting for work
        with assert_checkpoints():
            first = await rt.tell("a", "first")
        with assert_checkpoints():
            queued = await rt.tell("a", "queued")
        with assert_checkpoints():
            await rt.notify("a", "an event")
        with assert_checkpoints():
            assert isinstance(await rt.poll(queued), Pending)
        with assert_checkpoints():
            status = await rt.status("a")
        assert status.queued == 1  # the second: the first is the agent's already
        with assert_no_checkpoints():
            assert rt.agents() == ("a",) and rt.whereis("a") is not None
            assert rt.statistics().agents == 1
            rt.stream(queued)
        await gate.wait_reached()
        for call in (rt.halt, rt.unhalt):
            with assert_checkpoints():
                await call("a")
        with assert_checkpoints():
            assert not await rt.interrupt_request(queued)  # queued, not running
        with assert_checkpoints():
            assert await rt.withdraw(queued)
        with assert_checkpoints():
            assert await rt.interrupt("a")
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
            await rt.tell("a", "too late")
    assert agent.only("terminate") == ["stopped"]
