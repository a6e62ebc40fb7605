"""Supervision on the mock clock: restart types x strategies, intensity and backoff, queued
work across restarts, nested supervisors and escalation."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import pytest
import trio
from _helpers import echo_backend, settle
from trio.testing import MockClock

from agentrt import (
    Agent,
    AgentStopped,
    Completed,
    Crash,
    Failed,
    InvalidOptions,
    Ref,
    Response,
    RestartLimitExceeded,
    Runtime,
    Stop,
    open_runtime,
)
from agentrt.testing import Gate, reply

Start = Callable[..., Awaitable[Any]]


class Worker(Agent):
    """Crashes on a response containing "crash", ends normally on one containing "stop"."""

    def handle_response(self, ref: Ref, response: Response) -> Stop | None:
        if "crash" in response.text:
            raise RuntimeError("boom")
        if "stop" in response.text:
            return Stop()
        return None


@asynccontextmanager
async def supervisor(
    where: str, strategy: str, **intensity: Any
) -> AsyncIterator[tuple[Runtime, Start]]:
    """A runtime and the start_agent of the supervisor under test: the root or a nested one."""
    async with AsyncExitStack() as stack:
        if where == "root":
            rt = await stack.enter_async_context(open_runtime(strategy=strategy, **intensity))
            yield rt, rt.start_agent
        else:
            rt = await stack.enter_async_context(open_runtime())
            sup = await stack.enter_async_context(
                rt.open_supervisor(strategy=strategy, **intensity)
            )
            yield rt, sup.start_agent


def incarnations(rt: Runtime) -> dict[str, int | None]:
    return {
        name: (None if (handle := rt.whereis(name)) is None else handle.incarnation)
        for name in "abc"
    }


RESTARTED = {"one_for_one": {"b"}, "one_for_all": {"a", "b", "c"}, "rest_for_one": {"b", "c"}}


@pytest.mark.parametrize("how", ["crash", "stop"])
@pytest.mark.parametrize("strategy", ["one_for_one", "one_for_all", "rest_for_one"])
@pytest.mark.parametrize("restart", ["permanent", "transient", "temporary"])
@pytest.mark.parametrize("where", ["root", "nested"])
async def test_restart_type_by_strategy(
    where: str, restart: str, strategy: str, how: str, autojump_clock: MockClock
) -> None:
    comes_back = restart == "permanent" or (restart == "transient" and how == "crash")
    restarted = RESTARTED[strategy] if comes_back else set()
    gate = Gate()
    results: dict[str, object] = {}
    async with supervisor(where, strategy) as (rt, start):
        await start(Worker, name="a", backend=echo_backend(), restart=restart)
        await start(Worker, name="b", backend=echo_backend([gate, *reply(how)]), restart=restart)
        await start(Worker, name="c", backend=echo_backend(), restart=restart)
        before = incarnations(rt)

        async def collect(key: str, ref: Ref) -> None:
            results[key] = await rt.wait(ref)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(collect, "ended", await rt.tell("b", how))
            await gate.wait_reached()
            nursery.start_soon(collect, "queued", await rt.tell("b", "queued"))
            await settle()
            gate.release()
        after = incarnations(rt)
        for name in "ac":
            assert (after[name] != before[name]) == (name in restarted)
            assert (await rt.ask(name, "ping")).text == "echo ping"
        queued = results["queued"]
        if comes_back:
            assert after["b"] not in (None, before["b"])
            assert (await rt.status("b")).restarts == 1
            assert isinstance(queued, Completed) and queued.response.text == "echo queued"
            # The first restart comes after the initial backoff, exactly.
            assert trio.current_time() == pytest.approx(0.1)
        else:
            assert "b" not in rt.agents()
            assert isinstance(queued, Failed) and isinstance(queued.error, AgentStopped)
            assert trio.current_time() == 0.0
        ended = results["ended"]
        if how == "crash":
            assert isinstance(ended, Failed) and isinstance(ended.error, AgentStopped)
            assert isinstance(ended.error.__cause__, RuntimeError)
        else:
            assert isinstance(ended, Completed) and ended.response.text == "stop"


async def test_temporary_siblings_are_stopped_and_not_restarted(autojump_clock: MockClock) -> None:
    gate = Gate()
    terminated: list[object] = []

    class Sibling(Agent):
        def terminate_agent(self, reason: str | BaseException) -> None:
            terminated.append(reason)

    async with open_runtime(strategy="one_for_all") as rt:
        await rt.start_agent(Sibling, name="a", backend=echo_backend([gate]), restart="temporary")
        await rt.start_agent(Worker, name="b", backend=echo_backend(), restart="transient")
        await rt.start_agent(Sibling, name="c", backend=echo_backend(), restart="transient")
        before = incarnations(rt)
        waiting = await rt.tell("a", "held")
        await gate.wait_reached()
        with pytest.raises(AgentStopped):
            await rt.ask("b", "crash")
        result = await rt.wait(waiting)
        assert isinstance(result, Failed)
        assert "a temporary agent is not restarted" in str(result.error)
        await trio.sleep(1)
        assert rt.agents() == ("b", "c")
        after = incarnations(rt)
        assert after["b"] != before["b"] and after["c"] != before["c"]
    assert len(terminated) == 3  # a (for good), c (for the restart), c (runtime closed)
    assert all(isinstance(reason, str) and "'b'" in reason for reason in terminated[:2])


async def test_a_restarted_agent_is_a_new_instance_of_its_class(autojump_clock: MockClock) -> None:
    made: list[Agent] = []
    inits: list[dict[str, Any]] = []

    class Counted(Worker):
        def __init__(self) -> None:
            made.append(self)

        def init_agent(self, **options: Any) -> dict[str, Any]:
            inits.append(options)
            return {}

    given = Worker()
    async with open_runtime() as rt:
        await rt.start_agent(Counted, name="a", backend=echo_backend(), extra=1)
        await rt.start_agent(given, name="b", backend=echo_backend())
        for name in "ab":
            with pytest.raises(AgentStopped):
                await rt.ask(name, "crash")
        await trio.sleep(1)
        assert (await rt.ask("a", "x")).text == "echo x"
        assert (await rt.ask("b", "x")).text == "echo x"
    assert len(made) == 2 and made[0] is not made[1]
    assert inits == [{"extra": 1}, {"extra": 1}]


# --- intensity and backoff ---


async def test_past_the_intensity_the_runtime_gives_up_with_the_history(
    autojump_clock: MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    starts: list[float] = []

    class Flaky(Worker):
        def init_agent(self, **options: Any) -> dict[str, Any]:
            starts.append(trio.current_time())
            return options

    refs: list[Ref] = []
    outcomes: list[object] = []
    with pytest.raises(RestartLimitExceeded) as info:
        async with open_runtime() as rt, trio.open_nursery() as nursery:
            await rt.start_agent(Flaky, name="flaky", backend=echo_backend())
            await rt.start_agent(Agent, name="bystander", backend=echo_backend())

            async def collect(ref: Ref) -> None:
                outcomes.append(await rt.wait(ref))

            for i in range(6):
                ref = await rt.tell("flaky", f"crash {i}")
                refs.append(ref)
                nursery.start_soon(collect, ref)
            await trio.sleep_forever()
    # Default intensity: 3 restarts in 5 s, backoff 0.1 doubling; the 4th crash gives up.
    assert starts == pytest.approx([0.0, 0.1, 0.3, 0.7])
    error = info.value
    assert error.name == "flaky"
    assert all(isinstance(crash, Crash) for crash in error.history)
    assert [crash.at for crash in error.history] == pytest.approx([0.0, 0.1, 0.3, 0.7])
    assert "handle_response raised RuntimeError" in error.history[0].reason
    assert len(outcomes) == 6
    failed = [o.error for o in outcomes if isinstance(o, Failed)]
    assert len(failed) == 6
    # The last two never ran: they failed because the supervisor gave up.
    assert all(isinstance(e.__cause__, RestartLimitExceeded) for e in failed[4:])
    assert any("gives up" in r.getMessage() for r in caplog.records)


async def test_backoff_doubles_up_to_its_bound_and_resets_with_the_window(
    autojump_clock: MockClock,
) -> None:
    starts: list[float] = []

    class Flaky(Worker):
        def init_agent(self, **options: Any) -> dict[str, Any]:
            starts.append(trio.current_time())
            return options

    async with open_runtime(max_restarts=5, period=10.0, backoff=1.0, max_backoff=3.0) as rt:
        await rt.start_agent(Flaky, name="a", backend=echo_backend())
        for _ in range(4):
            ref = await rt.tell("a", "crash")
            await rt.wait(ref)
            await trio.sleep(20)  # back to idle, the crash window empty again
        # Now four in a row: 1, 2, 3 (capped), 3.
        for _ in range(4):
            await rt.tell("a", "crash")
        await trio.sleep(20)
    # Four single crashes 20 s apart, each restarted after 1 s; then a burst of four at
    # t=80: 1, 2, 3 (capped), 3 s.
    assert starts == pytest.approx([0.0, 1.0, 21.0, 41.0, 61.0, 81.0, 83.0, 86.0, 89.0])


async def test_a_restart_that_cannot_start_counts_as_a_crash(autojump_clock: MockClock) -> None:
    attempts: list[float] = []

    class Fragile(Worker):
        def init_agent(self, **options: Any) -> dict[str, Any]:
            attempts.append(trio.current_time())
            if len(attempts) > 1:
                raise OSError("the backend's config is gone")
            return options

    with pytest.raises(RestartLimitExceeded) as info:
        async with open_runtime(max_restarts=2) as rt:
            await rt.start_agent(Fragile, name="a", backend=echo_backend())
            with pytest.raises(AgentStopped):
                await rt.ask("a", "crash")
            assert (await rt.status("a")).state == "restarting"
            await trio.sleep_forever()
    assert attempts == pytest.approx([0.0, 0.1, 0.3])
    reasons = [crash.reason for crash in info.value.history]
    assert "restart failed: OSError" in reasons[1]


async def test_a_nested_supervisor_escalates_to_its_owner_only(autojump_clock: MockClock) -> None:
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="outside", backend=echo_backend())
        reached_end = False
        with pytest.raises(RestartLimitExceeded) as info:
            async with rt.open_supervisor(max_restarts=1, period=10) as sup:
                await sup.start_agent(Worker, name="a", backend=echo_backend())
                await sup.start_agent(Agent, name="b", backend=echo_backend())
                assert sup.agents() == ("a", "b")
                for _ in range(2):
                    with pytest.raises(AgentStopped):
                        await rt.ask("a", "crash")
                    await trio.sleep(1)
                reached_end = True
        assert not reached_end
        assert info.value.name == "a"
        assert len(info.value.history) == 2
        assert rt.agents() == ("outside",)
        assert (await rt.ask("outside", "still here")).text == "echo still here"


async def test_leaving_a_nested_supervisor_stops_its_agents(autojump_clock: MockClock) -> None:
    gate = Gate()
    errors: list[AgentStopped] = []
    async with open_runtime() as rt, trio.open_nursery() as outside:
        async with rt.open_supervisor(strategy="rest_for_one") as sup:
            assert (sup.strategy.value, sup.max_restarts, sup.period) == ("rest_for_one", 3, 5.0)
            await sup.start_agent(Agent, name="a", backend=echo_backend([gate]))

            async def ask() -> None:
                with pytest.raises(AgentStopped) as info:
                    await rt.ask("a", "held")
                errors.append(info.value)

            outside.start_soon(ask)
            await gate.wait_reached()
        assert rt.agents() == ()
        with pytest.raises(InvalidOptions):
            async with rt.open_supervisor(strategy="one_for_some"):
                pass
    assert [e.reason for e in errors] == ["supervisor closed"]


async def test_intensity_arguments_are_checked() -> None:
    for kwargs in (
        {"max_restarts": -1},
        {"period": 0},
        {"backoff": float("nan")},
        {"strategy": "all"},
    ):
        with pytest.raises(InvalidOptions):
            async with open_runtime(**kwargs):
                pass


# --- queued work across restarts ---


@pytest.mark.parametrize("restart", ["permanent", "transient", "temporary"])
async def test_queued_asks_wait_for_the_new_instance(
    restart: str, autojump_clock: MockClock
) -> None:
    gate = Gate()
    answers: list[object] = []
    async with open_runtime() as rt:
        await rt.start_agent(
            Worker, name="a", backend=echo_backend([gate, *reply("crash")]), restart=restart
        )

        async def ask(prompt: str) -> None:
            try:
                answers.append((await rt.ask("a", prompt)).text)
            except AgentStopped as exc:
                answers.append(exc)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask, "first")
            await gate.wait_reached()
            for prompt in ("second", "third"):
                nursery.start_soon(ask, prompt)
                await settle()
            gate.release()
            await settle()
            if restart != "temporary":
                # Restarting: new work is accepted and waits too.
                assert (await rt.status("a")).state == "restarting"
                assert rt.whereis("a") is None
                told = await rt.tell("a", "fourth")
                assert (await rt.status("a")).queued == 3
        if restart != "temporary":
            result = await rt.wait(told)
            assert isinstance(result, Completed)
    assert isinstance(answers[0], AgentStopped)
    if restart == "temporary":
        assert all(isinstance(a, AgentStopped) for a in answers)
    else:
        assert answers[1:] == ["echo second", "echo third"]


async def test_a_halted_agent_stays_halted_across_a_restart(autojump_clock: MockClock) -> None:
    gate = Gate()
    async with open_runtime() as rt:
        await rt.start_agent(Worker, name="a", backend=echo_backend([gate, *reply("crash")]))
        crash = await rt.tell("a", "go")
        await gate.wait_reached()
        await rt.halt("a")  # while processing: it halts once this request is done
        gate.release()
        await rt.wait(crash)
        queued = await rt.tell("a", "later")
        await trio.sleep(1)
        assert (await rt.status("a")).state == "halted"
        await rt.unhalt("a")
        assert isinstance(await rt.wait(queued), Completed)


async def test_the_next_instance_takes_the_agent_as_calls_left_it(
    autojump_clock: MockClock,
) -> None:
    # One state per name: what the instance counted and what calls changed while it was
    # restarting (halt, reset_session) is what the next instance starts from.
    backend = echo_backend(reply("one", session_id="s1"), reply("crash"))
    async with open_runtime() as rt:
        await rt.start_agent(Worker, name="a", backend=backend)
        await rt.ask("a", "one")
        with pytest.raises(AgentStopped):
            await rt.ask("a", "crash")
        status = await rt.status("a")
        assert (status.state, status.turns, status.restarts, status.session_id) == (
            "restarting",
            2,
            0,
            "s1",
        )
        await rt.halt("a")
        await rt.reset_session("a")
        await trio.sleep(1)
        status = await rt.status("a")
        assert (status.state, status.turns, status.restarts, status.session_id) == (
            "halted",
            2,
            1,
            None,
        )
        await rt.unhalt("a")
        await rt.ask("a", "two")
        assert (await rt.status("a")).turns == 3
    assert backend.session_ids == [None, "s1", None]


async def test_stop_agent_while_restarting_fails_its_queue(autojump_clock: MockClock) -> None:
    results: list[object] = []
    async with open_runtime() as rt:
        await rt.start_agent(Worker, name="a", backend=echo_backend())
        with pytest.raises(AgentStopped):
            await rt.ask("a", "crash")
        assert (await rt.status("a")).state == "restarting"
        queued = await rt.tell("a", "queued")
        assert await rt.withdraw(await rt.tell("a", "cancelled"))
        await rt.notify("a", "note")
        assert (await rt.status("a")).pending_notifications == 1
        assert not await rt.interrupt("a")
        async with trio.open_nursery() as nursery:

            async def collect() -> None:
                results.append(await rt.wait(queued))

            nursery.start_soon(collect)
            await settle()
            await rt.stop_agent("a")
        assert rt.agents() == ()
        await trio.sleep(1)
        assert rt.agents() == ()  # the pending restart did not bring it back
    assert trio.current_time() == pytest.approx(1.0)
    [result] = results
    assert isinstance(result, Failed) and str(result.error) == "agent 'a' stopped: stopped"


async def test_restarts_are_logged(
    autojump_clock: MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="agentrt")
    async with open_runtime() as rt:
        await rt.start_agent(Worker, name="a", backend=echo_backend())
        with pytest.raises(AgentStopped):
            await rt.ask("a", "crash")
        await trio.sleep(1)
    messages = [r.getMessage() for r in caplog.records]
    assert any("restarting 'a' in 0.1 s (1 of at most 3 restarts in 5 s)" in m for m in messages)
