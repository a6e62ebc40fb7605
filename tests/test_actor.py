"""The actor: callbacks and their order, notify, chaining, halt, interrupt, stop."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import trio
from _helpers import Recorder, echo_backend, settle
from trio.testing import MockClock

from agentrt import (
    Agent,
    AgentBusy,
    AgentNotFound,
    AgentStopped,
    Completed,
    Failed,
    Halt,
    Prompt,
    Ref,
    Response,
    SessionEvent,
    StopReason,
    TurnFailed,
    open_runtime,
)
from agentrt.testing import Fail, Gate, reply


async def test_callbacks_run_in_order_around_a_turn(autojump_clock: MockClock) -> None:
    agent = Recorder()
    async with open_runtime() as rt:
        await rt.start_agent(agent, name="a", backend=echo_backend([Fail()]))
        with pytest.raises(TurnFailed):
            await rt.ask("a", "one")
        await rt.ask("a", "two")
    assert agent.log == [
        ("pre_turn", "one"),
        ("stream", "error"),
        ("error", StopReason.CLI_ERROR),
        ("post_turn", "TurnFailed"),
        ("pre_turn", "two"),
        ("stream", "text"),
        ("stream", "result"),
        ("response", "echo two"),
        ("post_turn", "Response"),
        ("terminate", "runtime closed"),
    ]


async def test_notify_waits_for_the_running_turn(autojump_clock: MockClock) -> None:
    gate = Gate()
    agent = Recorder()
    async with open_runtime() as rt:
        await rt.start_agent(agent, name="a", backend=echo_backend([gate, *reply("one")]))
        await rt.tell("a", "one")
        await gate.wait_reached()
        await rt.notify("a", "n1")
        await rt.notify("a", "n2")
        await settle()
        assert agent.only("event") == []
        assert (await rt.status("a")).pending_notifications == 2
        await rt.tell("a", "two")  # queued behind; notifications go first
        gate.release()
        await settle()
        # Idle: a notification is handled at once.
        await rt.notify("a", "n3")
        await settle()
        assert agent.only("event") == ["n1", "n2", "n3"]
    kinds = [entry[0] for entry in agent.log if entry[0] != "stream"]
    assert kinds == [
        "pre_turn",
        "response",
        "post_turn",
        "event",
        "event",
        "pre_turn",
        "response",
        "post_turn",
        "event",
        "terminate",
    ]


class Chainer(Agent):
    def __init__(self) -> None:
        self.refs: list[Ref] = []

    def pre_turn(self, prompt: str) -> None:
        self.refs.append(Ref("?", -1))

    def handle_response(self, ref: Ref, response: Response) -> Prompt | None:
        if response.text == "echo start":
            return Prompt("chained")
        return None

    def handle_event(self, event: Any) -> Prompt | None:
        return Prompt(f"from event {event}")


async def test_a_chained_prompt_runs_before_queued_work(autojump_clock: MockClock) -> None:
    gate = Gate()
    backend = echo_backend([gate, *reply("echo start")])
    async with open_runtime() as rt:
        await rt.start_agent(Chainer, name="a", backend=backend)
        await rt.tell("a", "start")
        await gate.wait_reached()
        queued = await rt.tell("a", "queued")
        gate.release()
        await rt.wait(queued)
        await rt.notify("a", "e")
        await settle()
        assert (await rt.status("a")).turns == 4
    assert backend.prompts == ["start", "chained", "queued", "from event e"]


async def test_halt_and_unhalt_from_outside(autojump_clock: MockClock) -> None:
    gate = Gate()
    backend = echo_backend([gate, *reply("one")])
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=backend)
        await rt.tell("a", "one")
        await gate.wait_reached()
        await rt.halt("a")
        assert (await rt.status("a")).halt_pending
        two = await rt.tell("a", "two")
        gate.release()
        await settle()
        status = await rt.status("a")
        assert (status.state, status.halt_pending, status.queued) == ("halted", False, 1)
        await rt.tell("a", "three")  # still accepted while halted
        assert await rt.poll(two) == (await rt.poll(two)).__class__()  # Pending
        assert backend.prompts == ["one"]
        await rt.unhalt("a")
        await settle()
        assert (await rt.status("a")).state == "idle"
    assert backend.prompts == ["one", "two", "three"]


async def test_halt_while_idle_and_unhalt(autojump_clock: MockClock) -> None:
    backend = echo_backend()
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=backend)
        await rt.halt("a")
        assert (await rt.status("a")).state == "halted"
        ref = await rt.tell("a", "waits")
        await settle()
        assert backend.prompts == []
        await rt.unhalt("a")
        assert isinstance(await rt.wait(ref), Completed)


class HaltsAfterOne(Agent):
    def handle_response(self, ref: Ref, response: Response) -> Halt:
        return Halt()


async def test_a_handler_returning_halt_halts(autojump_clock: MockClock) -> None:
    backend = echo_backend()
    async with open_runtime() as rt:
        await rt.start_agent(HaltsAfterOne, name="a", backend=backend)
        await rt.tell("a", "one")
        ref = await rt.tell("a", "two")
        await settle()
        assert (await rt.status("a")).state == "halted"
        assert backend.prompts == ["one"]
        await rt.unhalt("a")
        await rt.wait(ref)
    assert backend.prompts == ["one", "two"]


class GatedPreTurn(Agent):
    def __init__(self) -> None:
        self.seen: list[str] = []

    def pre_turn(self, prompt: str) -> Prompt | Halt | None:
        self.seen.append(prompt)
        if prompt == "stop here" and len(self.seen) == 1:
            return Halt()
        return Prompt(prompt.upper())


async def test_pre_turn_rewrites_or_halts_keeping_the_request(autojump_clock: MockClock) -> None:
    backend = echo_backend()
    agent = GatedPreTurn()
    async with open_runtime() as rt:
        await rt.start_agent(agent, name="a", backend=backend)
        first = await rt.tell("a", "stop here")
        second = await rt.tell("a", "after")
        await settle()
        status = await rt.status("a")
        assert (status.state, status.queued) == ("halted", 2)
        assert (await rt.poll(first)).__class__.__name__ == "Pending"
        await rt.unhalt("a")
        result = await rt.wait(first)
        assert isinstance(result, Completed)
        assert result.response.text == "echo STOP HERE"
        assert isinstance(await rt.wait(second), Completed)
    assert agent.seen == ["stop here", "stop here", "after"]
    assert backend.prompts == ["STOP HERE", "AFTER"]


async def test_interrupt_ends_the_current_turn_only(autojump_clock: MockClock) -> None:
    gate = Gate()
    backend = echo_backend([SessionEvent(session_id="s1"), gate])
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=backend)
        assert not await rt.interrupt("a")  # idle: nothing to interrupt
        first = await rt.tell("a", "one")
        second = await rt.tell("a", "two")
        await gate.wait_reached()
        assert (await rt.status("a")).current.ref == first  # type: ignore[union-attr]
        assert not await rt.interrupt_request(second)
        assert await rt.interrupt_request(first)
        result = await rt.wait(first)
        assert isinstance(result, Failed)
        assert isinstance(result.error, TurnFailed)
        assert result.error.reason is StopReason.INTERRUPTED
        assert result.error.session_id == "s1"
        assert isinstance(await rt.wait(second), Completed)
        assert not await rt.interrupt_request(second)  # finished
    # The interrupted turn's session id was kept for the next turn.
    assert backend.session_ids == [None, "s1"]
    assert trio.current_time() == 0.0


async def test_an_interrupted_ask_raises_turn_failed(autojump_clock: MockClock) -> None:
    gate = Gate()
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=echo_backend([gate]))
        async with trio.open_nursery() as nursery:

            async def interrupt_later() -> None:
                await gate.wait_reached()
                await trio.sleep(7)
                assert await rt.interrupt("a")

            nursery.start_soon(interrupt_later)
            with pytest.raises(TurnFailed) as info:
                await rt.ask("a", "long")
        assert info.value.reason is StopReason.INTERRUPTED
        assert trio.current_time() == 7.0
        assert (await rt.ask("a", "after")).text == "echo after"


async def test_stop_agent_fails_every_waiter_and_nothing_hangs(autojump_clock: MockClock) -> None:
    gate = Gate()
    agent = Recorder()
    outcomes: list[BaseException] = []
    async with open_runtime() as rt:
        await rt.start_agent(agent, name="a", backend=echo_backend([gate]))

        async def ask(prompt: str) -> None:
            try:
                await rt.ask("a", prompt)
            except AgentStopped as exc:
                outcomes.append(exc)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask, "active")
            await gate.wait_reached()
            nursery.start_soon(ask, "queued")
            await settle()
            told = await rt.tell("a", "told")
            stream = rt.stream(told)
            await rt.stop_agent("a")
        assert [str(exc) for exc in outcomes] == ["agent 'a' stopped: stopped"] * 2
        assert rt.whereis("a") is None
        assert rt.agents() == ()
        with pytest.raises(AgentNotFound):
            await rt.status("a")
        with pytest.raises(AgentNotFound):
            await rt.ask("a", "gone")
        with pytest.raises(AgentNotFound):
            await rt.wait(told)  # a stopped agent's refs are gone with it
        events = [event async for event in stream]
        assert [event.kind for event in events] == ["error"]
        # The name is free again.
        await rt.start_agent(Agent, name="a", backend=echo_backend())
        assert (await rt.ask("a", "again")).text == "echo again"
    assert agent.log[-1] == ("terminate", "stopped")
    assert trio.current_time() == 0.0


async def test_wait_on_a_tell_sees_the_agent_stop(autojump_clock: MockClock) -> None:
    gate = Gate()
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=echo_backend([gate]))
        running = await rt.tell("a", "running")
        queued = await rt.tell("a", "queued")
        results: list[object] = []
        async with trio.open_nursery() as nursery:

            async def wait(ref: Ref) -> None:
                results.append(await rt.wait(ref))

            nursery.start_soon(wait, running)
            nursery.start_soon(wait, queued)
            await gate.wait_reached()
            await settle()
            await rt.stop_agent("a")
    assert len(results) == 2
    for result in results:
        assert isinstance(result, Failed)
        assert isinstance(result.error, AgentStopped)


async def test_closing_the_runtime_fails_waiters_outside_it(autojump_clock: MockClock) -> None:
    gate = Gate()
    agent = Recorder()
    errors: list[AgentStopped] = []
    async with trio.open_nursery() as outside, open_runtime() as rt:
        await rt.start_agent(agent, name="a", backend=echo_backend([gate]))

        async def ask() -> None:
            try:
                await rt.ask("a", "never answered")
            except AgentStopped as exc:
                errors.append(exc)

        outside.start_soon(ask)
        outside.start_soon(ask)
        await gate.wait_reached()
        await settle()
    assert [exc.reason for exc in errors] == ["runtime closed"] * 2
    assert agent.log[-1] == ("terminate", "runtime closed")


class BrokenResponse(Agent):
    def __init__(self) -> None:
        self.reasons: list[object] = []

    def handle_response(self, ref: Ref, response: Response) -> None:
        raise ValueError("bad state token=hunter2")

    def terminate_agent(self, reason: str | BaseException) -> None:
        self.reasons.append(reason)


async def test_an_exception_in_handle_response_stops_a_temporary_agent(
    autojump_clock: MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    gate = Gate()
    agent = BrokenResponse()
    caplog.set_level(logging.ERROR, logger="agentrt")
    async with open_runtime() as rt:
        await rt.start_agent(
            agent, name="a", backend=echo_backend([gate, *reply("one")]), restart="temporary"
        )
        errors: list[AgentStopped] = []
        async with trio.open_nursery() as nursery:

            async def ask(prompt: str) -> None:
                with pytest.raises(AgentStopped) as info:
                    await rt.ask("a", prompt)
                errors.append(info.value)

            nursery.start_soon(ask, "one")
            await gate.wait_reached()
            nursery.start_soon(ask, "queued")
            await settle()
            gate.release()
        assert rt.whereis("a") is None
    assert len(errors) == 2
    error = errors[0]
    assert "handle_response raised ValueError" in error.reason
    assert "hunter2" not in error.reason
    assert isinstance(error.__cause__, ValueError)
    assert len(agent.reasons) == 1
    assert isinstance(agent.reasons[0], ValueError)
    records = [r for r in caplog.records if r.name == "agentrt"]
    assert len(records) == 1
    message = records[0].getMessage()
    assert "agent 'a' crashed: handle_response raised ValueError" in message
    assert "Traceback" in message
    assert "hunter2" not in message


class BadReturn(Agent):
    def handle_response(self, ref: Ref, response: Response) -> Any:
        return "not a reaction"


async def test_a_malformed_return_stops_a_temporary_agent(autojump_clock: MockClock) -> None:
    async with open_runtime() as rt:
        await rt.start_agent(BadReturn, name="a", backend=echo_backend(), restart="temporary")
        with pytest.raises(AgentStopped) as info:
            await rt.ask("a", "x")
        assert isinstance(info.value.__cause__, TypeError)
        assert rt.agents() == ()


class BrokenErrorHandler(Agent):
    def handle_error(self, ref: Ref, error: TurnFailed) -> None:
        raise RuntimeError("oops")


async def test_an_exception_in_handle_error_is_contained_and_logged(
    autojump_clock: MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="agentrt")
    async with open_runtime() as rt:
        await rt.start_agent(BrokenErrorHandler, name="a", backend=echo_backend([Fail()]))
        with pytest.raises(TurnFailed) as info:
            await rt.ask("a", "fails")
        assert info.value.reason is StopReason.CLI_ERROR
        assert (await rt.ask("a", "alive")).text == "echo alive"
    records = [r for r in caplog.records if r.name == "agentrt"]
    assert len(records) == 1
    assert "handle_error raised" in records[0].getMessage()


class AsyncAgent(Agent):
    def __init__(self) -> None:
        self.log: list[str] = []

    async def handle_response(self, ref: Ref, response: Response) -> None:
        await trio.sleep(2)
        self.log.append(response.text)

    async def handle_stream_event(self, event: object) -> None:
        await trio.sleep(1)


async def test_async_callbacks_are_awaited(autojump_clock: MockClock) -> None:
    agent = AsyncAgent()
    async with open_runtime() as rt:
        await rt.start_agent(agent, name="a", backend=echo_backend())
        response = await rt.ask("a", "x")
        # Two stream events of 1 s each, then 2 s in handle_response.
        assert response.duration == 2.0
        assert trio.current_time() == 4.0
    assert agent.log == ["echo x"]


async def test_reset_session_only_while_idle(autojump_clock: MockClock) -> None:
    gate = Gate()
    backend = echo_backend([SessionEvent(session_id="s1"), gate, *reply("one", session_id="s1")])
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=backend)
        await rt.tell("a", "one")
        await gate.wait_reached()
        with pytest.raises(AgentBusy):
            await rt.reset_session("a")
        gate.release()
        await settle()
        assert (await rt.status("a")).session_id == "s1"
        await rt.reset_session("a")
        assert (await rt.status("a")).session_id is None
        await rt.ask("a", "two")
    assert backend.session_ids == [None, None]


async def test_max_processes_makes_turns_wait_and_shows_it(autojump_clock: MockClock) -> None:
    gate = Gate()
    backend_a = echo_backend([gate, *reply("a")])
    backend_b = echo_backend()
    async with open_runtime(max_processes=1) as rt:
        await rt.start_agent(Agent, name="a", backend=backend_a, watchdog=None)
        await rt.start_agent(Agent, name="b", backend=backend_b, watchdog=10)
        await rt.tell("a", "holds the slot")
        await gate.wait_reached()
        ref = await rt.tell("b", "waits")
        await trio.sleep(60)  # waiting for a slot is not on the watchdog
        status = await rt.status("b")
        assert status.state == "processing"
        assert status.current is not None
        assert status.current.waiting_for_process
        assert status.current.elapsed == 60.0
        stats = rt.statistics()
        assert (stats.agents, stats.processes_in_use, stats.turns_waiting) == (2, 1, 1)
        assert backend_b.prompts == []
        gate.release()
        result = await rt.wait(ref)
        assert isinstance(result, Completed)
        assert rt.statistics().processes_in_use == 0


async def test_interrupting_a_turn_that_waits_for_a_slot(autojump_clock: MockClock) -> None:
    gate = Gate()
    async with open_runtime(max_processes=1) as rt:
        await rt.start_agent(Agent, name="a", backend=echo_backend([gate]))
        await rt.start_agent(Agent, name="b", backend=echo_backend())
        await rt.tell("a", "holds the slot")
        await gate.wait_reached()
        ref = await rt.tell("b", "waits")
        await settle()
        assert await rt.interrupt("b")
        result = await rt.wait(ref)
        assert isinstance(result, Failed)
        assert isinstance(result.error, TurnFailed)
        assert result.error.reason is StopReason.INTERRUPTED
        assert rt.statistics().turns_waiting == 0
        gate.release()
