"""agentrt from asyncio, from threads and from a notebook's running loop (issue 27), on the
scripted backend: the guarantees of the trio API through agentrt.asyncio and agentrt.sync.

Each test is a plain function that runs its own asyncio loop (or threads): the runtime
runs in a trio thread of its own, so no trio clock is shared and a turn is held open by a
long scripted sleep that the test's cancellation ends."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import threading
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.lowlevel
import trio.testing
from cli_programs import HANG, FakeClaude
from proc_helpers import IGNORE_INT, IGNORE_TERM, ProcInfo, kill_marked, running, turn_processes

import agentrt
import agentrt.asyncio
import agentrt.sync
from agentrt import (
    Agent,
    AgentNotFound,
    InvalidOptions,
    MemoryStore,
    NoRuntime,
    Ref,
    RestartLimitExceeded,
    SessionEvent,
    StopReason,
    TextEvent,
    TurnFailed,
)
from agentrt._faces._asyncio_runtime import _settle
from agentrt._faces._sync_runtime import _blocking
from agentrt.lowlevel import TURN_MARKER_ENV as MARKER_ENV
from agentrt.testing import Fail, ScriptedBackend, Sleep, reply

HOUR = 3600.0


def echo_backend(*scripts: Any) -> ScriptedBackend:
    return ScriptedBackend(*scripts, default=lambda call: reply(f"echo {call.prompt}"))


class Watched(Agent):
    """Tells the asyncio loop when a turn starts (the way back to the loop from a
    callback: call_soon_threadsafe), and keeps the errors its turns ended with."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.started = asyncio.Event()
        self.errors: list[TurnFailed] = []

    def pre_turn(self, prompt: str) -> None:
        self.loop.call_soon_threadsafe(self.started.set)

    def handle_error(self, ref: Ref, error: TurnFailed) -> None:
        self.errors.append(error)


async def _idle(rt: agentrt.asyncio.Runtime) -> None:
    """Wait until every task of the runtime's thread is blocked (a turn at a full stream)."""
    await _settle(rt._thread, trio.testing.wait_all_tasks_blocked)


def test_ask_and_the_exception_as_itself() -> None:
    async def main() -> None:
        backend = echo_backend([Fail(StopReason.RATE_LIMITED, "slow down")])
        async with agentrt.asyncio.open_runtime(store=MemoryStore()) as rt:
            agent = Watched(asyncio.get_running_loop())
            handle = await rt.start_agent(agent, name="a", backend=backend)
            assert rt.agents() == ("a",) and rt.whereis("a") == handle
            with pytest.raises(TurnFailed) as caught:
                await rt.ask("a", "first")
            # The very object the agent's handle_error saw: class, reason, message.
            assert caught.value is agent.errors[0]
            assert caught.value.reason is StopReason.RATE_LIMITED
            assert (await rt.ask("a", "second")).text == "echo second"
            with pytest.raises(AgentNotFound) as missing:
                await rt.status("nobody")
            assert missing.value.name == "nobody"
            assert rt.statistics().agents == 1
        with pytest.raises(NoRuntime):
            await rt.ask("a", "after")

    asyncio.run(main())


def test_bad_options_come_out_of_the_block_as_themselves() -> None:
    async def main() -> None:
        with pytest.raises(InvalidOptions) as caught:
            async with agentrt.asyncio.open_runtime(store=MemoryStore(), max_processes=0):
                pass
        assert caught.value.key == "max_processes"

    asyncio.run(main())


def test_asyncio_timeout_cancels_a_running_ask_and_a_queued_one() -> None:
    async def main() -> None:
        backend = echo_backend([TextEvent(text="partial"), Sleep(HOUR)])
        async with agentrt.asyncio.open_runtime(store=MemoryStore()) as rt:
            agent = Watched(asyncio.get_running_loop())
            await rt.start_agent(agent, name="a", backend=backend)
            running = asyncio.create_task(rt.ask("a", "long"))
            await agent.started.wait()
            queued = asyncio.create_task(rt.ask("a", "queued"))
            await _idle(rt)
            assert (await rt.status("a")).queued == 1
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0):
                    await queued
            # Queued: it left the queue and never runs.
            assert (await rt.status("a")).queued == 0
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.05):
                    await running
            # Running: its turn stopped as trio cancellation stops it, its session kept.
            (error,) = agent.errors
            assert error.reason is StopReason.CANCELLED
            assert (await rt.ask("a", "next")).text == "echo next"
            assert backend.prompts == ["long", "next"]

    asyncio.run(main())


def test_cancelling_again_while_a_turn_stops_still_waits_for_it() -> None:
    async def main() -> None:
        backend = echo_backend([TextEvent(text="partial"), Sleep(HOUR)])
        async with agentrt.asyncio.open_runtime(store=MemoryStore()) as rt:
            agent = Watched(asyncio.get_running_loop())
            await rt.start_agent(agent, name="a", backend=backend)
            running = asyncio.create_task(rt.ask("a", "long"))
            await agent.started.wait()
            for _ in range(3):  # each while the first one's undoing may still run
                running.cancel()
                await asyncio.sleep(0)
            with pytest.raises(asyncio.CancelledError):
                await running
            # It came out once the turn had stopped, not at the second cancellation.
            (error,) = agent.errors
            assert error.reason is StopReason.CANCELLED
            assert (await rt.ask("a", "next")).text == "echo next"

    asyncio.run(main())


@pytest.mark.parametrize("when", ["just before", "just after"])
def test_a_cancellation_meeting_the_outcome_neither_hangs_nor_loses_it(when: str) -> None:
    # The outcome and the task's cancellation reach the loop in the same step, in either
    # order: the task is cancelled, at once (its call has settled: nothing to undo).
    async def main() -> None:
        async with agentrt.asyncio.open_runtime(store=MemoryStore()) as rt:
            loop = asyncio.get_running_loop()
            tasks: list[asyncio.Task[str]] = []

            async def settles() -> str:  # in the runtime's thread
                if when == "just before":
                    loop.call_soon_threadsafe(tasks[0].cancel)
                else:  # after the outcome's delivery, which this call queues behind it
                    loop.call_soon_threadsafe(loop.call_soon, tasks[0].cancel)
                return "done"

            tasks.append(asyncio.create_task(_settle(rt._thread, settles)))
            await asyncio.wait(tasks, timeout=60)
            assert tasks[0].cancelled()

    asyncio.run(main())


def test_a_stream_read_from_asyncio_has_backpressure() -> None:
    events = 3 * agentrt._stream.BUFFER

    class Counting(Agent):
        def __init__(self) -> None:
            self.seen = 0

        def handle_stream_event(self, event: agentrt.Event) -> None:
            self.seen += 1

    async def main() -> None:
        script = [TextEvent(text=f"{i} ") for i in range(events)] + reply("done")
        async with agentrt.asyncio.open_runtime(store=MemoryStore()) as rt:
            agent = Counting()
            await rt.start_agent(agent, name="a", backend=echo_backend(script))
            await rt.halt("a")  # so the stream is there before the turn starts
            ref = await rt.tell("a", "go")
            async with rt.stream(ref) as stream:
                await rt.unhalt("a")
                first = await anext(stream)
                await _idle(rt)
                # The turn waits for the reader: at most a buffer ahead of it.
                assert agent.seen <= 2 + agentrt._stream.BUFFER
                assert isinstance(await rt.poll(ref), agentrt.Pending)
                texts = [first] + [event async for event in stream]
            assert len(texts) == events + 2  # and the reply's text and result
            assert stream.dropped == 0  # a local stream never skips
            assert isinstance(await rt.wait(ref), agentrt.Completed)

    asyncio.run(main())


def test_the_runtime_giving_up_cancels_the_block_and_comes_out_of_it() -> None:
    class Crashing(Agent):
        def handle_response(self, ref: Ref, response: agentrt.Response) -> None:
            raise ValueError("bad answer")

    async def main() -> None:
        with pytest.raises(RestartLimitExceeded) as caught:
            async with agentrt.asyncio.open_runtime(store=MemoryStore(), max_restarts=0) as rt:
                await rt.start_agent(Crashing, name="a", backend=echo_backend())
                await rt.tell("a", "go")
                await asyncio.Event().wait()  # only the runtime's end ends this
        assert caught.value.name == "a"
        assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]

    asyncio.run(main())


class Crashing(Agent):
    """Crashes on the answer to "crash" (the ask gets AgentStopped, the supervisor restarts
    it: a new instance, the same conversation)."""

    def handle_response(self, ref: Ref, response: agentrt.Response) -> None:
        if response.text == "echo crash":
            raise ValueError("bad answer")


def test_a_nested_supervisor_from_asyncio_restarts_then_gives_up() -> None:
    async def main() -> None:
        async with agentrt.asyncio.open_runtime(store=MemoryStore()) as rt:
            await rt.start_agent(Agent, name="top", backend=echo_backend())
            async with rt.open_supervisor(max_restarts=1, period=HOUR, backoff=0) as sup:
                assert (sup.strategy.value, sup.max_restarts, sup.period) == (
                    "one_for_one",
                    1,
                    HOUR,
                )
                await sup.start_agent(Crashing, name="a", backend=echo_backend())
                assert sup.agents() == ("a",)
                with pytest.raises(agentrt.AgentStopped):
                    await rt.ask("a", "crash")
                assert (await rt.ask("a", "again")).text == "echo again"
                assert (await rt.status("a")).restarts == 1
            assert rt.agents() == ("top",)  # leaving the block stopped its agents

            with pytest.raises(RestartLimitExceeded) as caught:
                async with rt.open_supervisor(max_restarts=0) as sup:
                    await sup.start_agent(Crashing, name="b", backend=echo_backend())
                    await rt.tell("b", "crash")
                    await asyncio.Event().wait()  # only the supervisor giving up ends this
            assert caught.value.name == "b"
            assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]
            # The rest of the runtime goes on.
            assert rt.agents() == ("top",)
            assert (await rt.ask("top", "still")).text == "echo still"
            with pytest.raises(InvalidOptions) as bad:
                async with rt.open_supervisor(strategy="one_for_some"):
                    pass
            assert bad.value.key == "strategy"
        with pytest.raises(NoRuntime):
            async with rt.open_supervisor():
                pass

    asyncio.run(main())


class HeldBack(Agent):
    """Stops only once `released` is set: a supervisor that gives up raises only after
    every agent of its has stopped, so this one holds the give-up back until the test's
    block has met what the give-up did to its ask."""

    def __init__(self) -> None:
        self.released = threading.Event()

    async def terminate_agent(self, reason: str | BaseException) -> None:
        await trio.to_thread.run_sync(self.released.wait)


async def _ask_until_given_up(rt: agentrt.asyncio.Runtime, long: Watched, held: HeldBack) -> None:
    """Await an ask of agent "long", which only the give-up ends (with AgentStopped), while
    agent "a" crashes; then let the give-up go on: its cancellation of the block comes
    after the block has met what it did to the ask."""

    async def crash_once_asked() -> None:
        await long.started.wait()
        await rt.tell("a", "crash")

    crashing = asyncio.create_task(crash_once_asked())
    try:
        await rt.ask("long", "never answered")
    finally:
        held.released.set()
        await crashing


def test_the_runtime_giving_up_while_the_block_awaits_an_ask_comes_out_as_itself() -> None:
    async def main() -> None:
        held = HeldBack()
        with pytest.raises(RestartLimitExceeded) as caught:
            async with agentrt.asyncio.open_runtime(store=MemoryStore(), max_restarts=0) as rt:
                long = Watched(asyncio.get_running_loop())
                await rt.start_agent(held, name="held", backend=echo_backend())
                await rt.start_agent(long, name="long", backend=echo_backend([Sleep(HOUR)]))
                await rt.start_agent(Crashing, name="a", backend=echo_backend())
                await _ask_until_given_up(rt, long, held)
        assert caught.value.name == "a"
        assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]

    asyncio.run(main())


def test_a_nested_supervisor_giving_up_while_its_block_awaits_an_ask_is_caught_by_type() -> None:
    async def main() -> None:
        held = HeldBack()
        async with agentrt.asyncio.open_runtime(store=MemoryStore()) as rt:
            await rt.start_agent(Agent, name="top", backend=echo_backend())
            caught: list[RestartLimitExceeded] = []
            try:
                async with rt.open_supervisor(max_restarts=0) as sup:
                    long = Watched(asyncio.get_running_loop())
                    await sup.start_agent(held, name="held", backend=echo_backend())
                    await sup.start_agent(long, name="long", backend=echo_backend([Sleep(HOUR)]))
                    await sup.start_agent(Crashing, name="a", backend=echo_backend())
                    await _ask_until_given_up(rt, long, held)
            except RestartLimitExceeded as exc:
                caught.append(exc)
            assert [exc.name for exc in caught] == ["a"]
            # Not its stopped ask's error as its cause: that error's cause is the give-up.
            assert caught[0].__cause__ is None
            assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]
            # Only its own block was given up: the runtime's goes on.
            assert (await rt.ask("top", "still")).text == "echo still"

    asyncio.run(main())


def test_the_runtime_giving_up_comes_out_of_a_sync_block_in_place_of_what_it_met() -> None:
    long_started = threading.Event()

    class Long(Agent):
        def pre_turn(self, prompt: str) -> None:
            long_started.set()

    def crash_once_asked(rt: agentrt.sync.Runtime) -> None:
        long_started.wait()
        rt.tell("a", "crash")

    with (
        pytest.raises(RestartLimitExceeded) as caught,
        agentrt.sync.open_runtime(store=MemoryStore(), max_restarts=0) as rt,
        ThreadPoolExecutor(1) as pool,
    ):
        rt.start_agent(Long, name="long", backend=echo_backend([Sleep(HOUR)]))
        rt.start_agent(Crashing, name="a", backend=echo_backend())
        pool.submit(crash_once_asked, rt)
        rt.ask("long", "never answered")  # AgentStopped, caused by the give-up
    assert caught.value.name == "a"
    assert caught.value.__cause__ is None  # (what the give-up caused would point back)


def test_a_nested_supervisor_from_a_thread_restarts_then_gives_up() -> None:
    with agentrt.sync.open_runtime(store=MemoryStore()) as rt:
        rt.start_agent(Agent, name="top", backend=echo_backend())

        def worker() -> tuple[str, int]:  # the block in a thread of its own
            with rt.open_supervisor(max_restarts=1, period=HOUR, backoff=0) as sup:
                sup.start_agent(Crashing, name="a", backend=echo_backend())
                assert sup.agents() == ("a",)
                with pytest.raises(agentrt.AgentStopped):
                    rt.ask("a", "crash")
                return rt.ask("a", "again").text, rt.status("a").restarts

        with ThreadPoolExecutor(1) as pool:
            assert pool.submit(worker).result() == ("echo again", 1)
        assert rt.agents() == ("top",)

        with (
            pytest.raises(RestartLimitExceeded) as caught,
            rt.open_supervisor(max_restarts=0) as sup,
        ):
            sup.start_agent(Crashing, name="b", backend=echo_backend())
            with pytest.raises(agentrt.AgentStopped):
                rt.ask("b", "crash")
            # Until the supervisor has given up: a thread's block is not cancelled.
            _blocking(rt._thread, trio.testing.wait_all_tasks_blocked)
            rt.ask("b", "after")  # AgentNotFound, and RestartLimitExceeded in its place
        assert caught.value.name == "b"
        assert isinstance(caught.value.__cause__, AgentNotFound)
        assert (rt.ask("top", "still")).text == "echo still"
        with pytest.raises(InvalidOptions) as bad, rt.open_supervisor(max_restarts=-1):
            pass
        assert bad.value.key == "max_restarts"
    with pytest.raises(NoRuntime), rt.open_supervisor():
        pass


class UsesAsyncio(Agent):
    async def handle_response(self, ref: Ref, response: agentrt.Response) -> None:
        await asyncio.sleep(1)


class HandsBack(Agent):
    """Hands work back to the application's loop (allowed), then awaits trio."""

    loop: asyncio.AbstractEventLoop
    results: list[str]
    recorded: asyncio.Event

    async def handle_response(self, ref: Ref, response: agentrt.Response) -> None:
        async def record(text: str) -> None:  # on the application's loop
            self.results.append(text)
            self.recorded.set()

        asyncio.run_coroutine_threadsafe(record(response.text), self.loop)
        await trio.lowlevel.checkpoint()


class AwaitsAsyncioAtRunTime(Agent):
    """Awaits an asyncio object reached through an attribute: known only when it runs."""

    event: asyncio.Event

    async def handle_response(self, ref: Ref, response: agentrt.Response) -> None:
        await self.event.wait()


def test_callbacks_using_asyncio_are_refused_at_start_agent() -> None:
    async def main() -> None:
        async with agentrt.asyncio.open_runtime(store=MemoryStore()) as rt:
            with pytest.raises(TypeError, match=r"UsesAsyncio\.handle_response uses asyncio\.sl"):
                await rt.start_agent(UsesAsyncio, name="refused", backend=echo_backend())
            assert rt.agents() == ()
            HandsBack.loop, HandsBack.results = asyncio.get_running_loop(), []
            HandsBack.recorded = asyncio.Event()
            await rt.start_agent(HandsBack, name="allowed", backend=echo_backend())
            assert (await rt.ask("allowed", "hi")).text == "echo hi"
            await HandsBack.recorded.wait()
            assert HandsBack.results == ["echo hi"]
            # What no code scan can see fails at its first await (here asyncio finds no
            # loop in the runtime's thread): the agent crashes, and the ask says with what.
            AwaitsAsyncioAtRunTime.event = asyncio.Event()
            await rt.start_agent(
                AwaitsAsyncioAtRunTime, name="late", backend=echo_backend(), restart="temporary"
            )
            with pytest.raises(agentrt.AgentStopped) as stopped:
                await rt.ask("late", "hi")
            cause = stopped.value.__cause__
            assert cause is not None and cause.__traceback__ is not None
            assert "asyncio" in traceback.extract_tb(cause.__traceback__)[-1].filename

    asyncio.run(main())


def test_the_same_refusal_under_trio() -> None:
    async def main() -> None:
        async with agentrt.open_runtime(store=MemoryStore()) as rt:
            with pytest.raises(TypeError, match=r"uses asyncio\.sleep"):
                await rt.start_agent(UsesAsyncio, name="refused", backend=echo_backend())

    trio.run(main)


def test_sixteen_threads_ask_four_agents() -> None:
    asks = 25
    with agentrt.sync.open_runtime(store=MemoryStore()) as rt:
        for i in range(4):
            rt.start_agent(Agent, name=f"agent-{i}", backend=echo_backend())

        def worker(n: int) -> list[str]:
            return [rt.ask(f"agent-{n % 4}", f"{n}.{k}").text for k in range(asks)]

        with ThreadPoolExecutor(16) as pool:
            answers = list(pool.map(worker, range(16)))
        assert answers == [[f"echo {n}.{k}" for k in range(asks)] for n in range(16)]
        assert sorted(rt.agents()) == [f"agent-{i}" for i in range(4)]
        assert sum(rt.status(name).turns for name in rt.agents()) == 16 * asks
    with pytest.raises(NoRuntime):
        rt.ask("agent-0", "after")


@pytest.mark.skipif(
    threading.current_thread() is not threading.main_thread(),
    reason="SIGINT interrupts the main thread's wait only",
)
def test_ctrl_c_during_a_sync_ask_stops_its_turn_before_it_goes_on() -> None:
    class Interrupted(Agent):
        def __init__(self) -> None:
            self.errors: list[TurnFailed] = []

        def pre_turn(self, prompt: str) -> None:  # Ctrl-C while the main thread waits
            main = threading.main_thread().ident
            assert main is not None
            signal.pthread_kill(main, signal.SIGINT)

        def handle_error(self, ref: Ref, error: TurnFailed) -> None:
            self.errors.append(error)

    backend = echo_backend([TextEvent(text="partial"), Sleep(HOUR)])
    with agentrt.sync.open_runtime(store=MemoryStore()) as rt:
        agent = Interrupted()
        rt.start_agent(agent, name="a", backend=backend, restart="temporary")
        with pytest.raises(KeyboardInterrupt):
            rt.ask("a", "long")
        (error,) = agent.errors
        assert error.reason is StopReason.CANCELLED
        assert rt.status("a").current is None


def test_a_sync_stream_and_the_exception_as_itself() -> None:
    backend = echo_backend([TextEvent(text="a"), TextEvent(text="b"), *reply("ab")])
    with agentrt.sync.open_runtime(store=MemoryStore()) as rt:
        rt.start_agent(Agent, name="a", backend=backend)
        rt.halt("a")  # so the stream is there before the turn starts
        ref = rt.tell("a", "go")
        with rt.stream(ref) as stream:
            rt.unhalt("a")
            kinds = [type(event).__name__ for event in stream]
        assert kinds == ["TextEvent", "TextEvent", "TextEvent", "ResultEvent"]
        assert stream.dropped == 0
        with pytest.raises(AgentNotFound) as caught:
            rt.ask("nobody", "hi")
        assert caught.value.name == "nobody"


def test_a_notebook_cell_on_a_running_loop() -> None:
    # As ipykernel runs a cell: a coroutine on the kernel's running asyncio loop, which
    # calls the blocking API (and a later cell uses what an earlier one opened).
    opened: list[agentrt.sync.Runtime] = []

    async def first_cell() -> str:
        asyncio.get_running_loop()  # a loop runs in this thread
        rt = agentrt.sync.open_runtime(store=MemoryStore())
        opened.append(rt)
        rt.start_agent(Agent, name="nb", backend=echo_backend())
        return rt.ask("nb", "cell one").text

    async def second_cell() -> str:
        (rt,) = opened
        try:
            return rt.ask("nb", "cell two").text
        finally:
            rt.close()

    async def kernel() -> list[str]:
        return [await first_cell(), await second_cell()]

    assert asyncio.run(kernel()) == ["echo cell one", "echo cell two"]
    assert not any(t.name == "agentrt runtime" for t in threading.enumerate())


def test_a_callback_calling_the_sync_api_is_told_why_not() -> None:
    outer: list[agentrt.sync.Runtime] = []
    errors: list[BaseException] = []

    class Reentrant(Agent):
        def handle_response(self, ref: Ref, response: agentrt.Response) -> None:
            try:
                outer[0].agents()
            except RuntimeError as exc:
                errors.append(exc)

    with agentrt.sync.open_runtime(store=MemoryStore()) as rt:
        outer.append(rt)
        rt.start_agent(Reentrant, name="a", backend=echo_backend())
        rt.ask("a", "hi")
    assert "the runtime's own thread" in str(errors[0])


async def _faces_child(*args: str) -> Ended:
    """Run tests/faces_child.py with ``args`` until it exits; what it printed and which of
    its turns' processes were still alive when it had exited. A child still running after
    a bound far beyond what it needs (seconds) is killed, with its turns' processes, and
    fails the test: a runtime that never closes must not hang the suite."""
    argv = [sys.executable, str(FACES_CHILD), *args]
    process = await trio.lowlevel.open_process(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    output: dict[str, bytearray] = {"stdout": bytearray(), "stderr": bytearray()}

    async def drain(stream: trio.abc.ReceiveStream, into: bytearray) -> None:
        async for chunk in stream:
            into += chunk

    try:
        with trio.move_on_after(CHILD_BOUND) as bound:
            async with trio.open_nursery() as nursery:
                assert process.stdout is not None and process.stderr is not None
                nursery.start_soon(drain, process.stdout, output["stdout"])
                nursery.start_soon(drain, process.stderr, output["stderr"])
                await process.wait()
        left = turn_processes(f"{process.pid}.")
    finally:
        process.kill()
        await process.wait()
        await kill_marked(MARKER_ENV, f"{process.pid}.", prefix=True)
    stdout, stderr = (output[name].decode() for name in ("stdout", "stderr"))
    assert not bound.cancelled_caught, f"still running after {CHILD_BOUND} s: {stderr}"
    return Ended(process.returncode, stdout, stderr, left)


@attrs.frozen
class Ended:
    returncode: int
    stdout: str
    stderr: str
    left: list[ProcInfo]


FACES_CHILD = Path(__file__).parent / "faces_child.py"
CHILD_BOUND = 30.0


@pytest.mark.parametrize("face", ["sync", "asyncio"])
async def test_a_reader_that_breaks_out_of_a_stream_releases_its_turn(face: str) -> None:
    # 600 events, far more than the stream's buffer, and the reader drops the stream after 4.
    ended = await _faces_child("drop-stream", face)
    assert ended.stdout.splitlines() == ["Pending", "Completed", "left"], ended.stderr
    assert ended.returncode == 0
    assert "Exception ignored" not in ended.stderr


def _stubborn_cli(tmp_path: Path) -> FakeClaude:
    """A fake claude whose turn (and the tool it starts in a session of its own) ignores
    SIGINT and SIGTERM: the turn ends only at its kill ladder's SIGKILL step."""
    return FakeClaude(tmp_path / "cli", [IGNORE_INT, IGNORE_TERM, *HANG])


class Reported(Watched):
    """Tells the asyncio loop when its CLI has reported the session (its process runs)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(loop)
        self.session = asyncio.Event()

    def handle_stream_event(self, event: agentrt.Event) -> None:
        if isinstance(event, SessionEvent):
            self.loop.call_soon_threadsafe(self.session.set)


def test_asyncio_timeout_while_the_runtime_closes_waits_for_the_turns_processes(
    tmp_path: Path,
) -> None:
    cli = _stubborn_cli(tmp_path)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        coder, sleeper = Reported(loop), Watched(loop)
        pids: list[int] = []
        alive_when_it_ended: list[bool] = []
        deadline = asyncio.timeout(None)

        async def ask_the_coder() -> None:
            try:
                async with deadline:
                    await rt.ask("coder", "long")
            finally:
                alive_when_it_ended.append(running(pids[0]))

        async def time_out_once_closing() -> None:
            # The runtime closes: this scripted turn ends at once, the CLI's only after
            # its kill ladder.
            with pytest.raises(agentrt.AgentStopped):
                await rt.ask("sleeper", "sleep")
            deadline.reschedule(loop.time())

        async with agentrt.asyncio.open_runtime(store=MemoryStore()) as rt:
            await rt.start_agent(coder, name="coder", backend="claude", binary=cli.binary)
            await rt.start_agent(sleeper, name="sleeper", backend=echo_backend([Sleep(HOUR)]))
            asking = asyncio.create_task(ask_the_coder())
            timing_out = asyncio.create_task(time_out_once_closing())
            await coder.session.wait()
            await sleeper.started.wait()
            pid = (await rt.status("coder")).cli_pid
            assert pid is not None
            pids.append(pid)
        with pytest.raises(TimeoutError):
            await asking
        await timing_out
        assert alive_when_it_ended == [False]

    asyncio.run(main())


@pytest.mark.skipif(
    threading.current_thread() is not threading.main_thread(),
    reason="SIGINT interrupts the main thread's wait only",
)
def test_ctrl_c_during_a_sync_ask_while_another_thread_closes_the_runtime(tmp_path: Path) -> None:
    cli = _stubborn_cli(tmp_path)
    session, sleeping = threading.Event(), threading.Event()

    class Coder(Agent):
        def handle_stream_event(self, event: agentrt.Event) -> None:
            if isinstance(event, SessionEvent):
                session.set()

    class Sleeper(Agent):
        def pre_turn(self, prompt: str) -> None:
            sleeping.set()

    main = threading.main_thread().ident
    assert main is not None
    pids: list[int] = []
    rt = agentrt.sync.open_runtime(store=MemoryStore())

    def ctrl_c_once_closing() -> None:
        # The runtime closes: this scripted turn ends at once, the CLI's only after its
        # kill ladder.
        with pytest.raises(agentrt.AgentStopped):
            rt.ask("sleeper", "sleep")
        signal.pthread_kill(main, signal.SIGINT)

    def close_once_running() -> None:
        session.wait()
        sleeping.wait()
        pid = rt.status("coder").cli_pid
        assert pid is not None
        pids.append(pid)
        rt.close()

    rt.start_agent(Coder, name="coder", backend="claude", binary=cli.binary)
    rt.start_agent(Sleeper, name="sleeper", backend=echo_backend([Sleep(HOUR)]))
    with ThreadPoolExecutor(2) as pool:
        interrupting = pool.submit(ctrl_c_once_closing)
        closing = pool.submit(close_once_running)
        with pytest.raises(KeyboardInterrupt):
            rt.ask("coder", "long")
        assert not running(pids[0])  # it went on once the turn's processes were gone
        interrupting.result()
        closing.result()


async def test_ctrl_c_while_a_sync_with_is_left_goes_on_once_the_turns_processes_are_gone(
    tmp_path: Path,
) -> None:
    ended = await _faces_child("interrupted-close", _stubborn_cli(tmp_path).binary)
    assert len(ended.stdout.splitlines()) == 1, ended.stdout  # the CLI's pid; never "left"
    assert ended.returncode == -signal.SIGINT, ended.stderr
    assert ended.stderr.rstrip().endswith("KeyboardInterrupt")
    assert ended.left == []  # nothing of the turn outlived the program
