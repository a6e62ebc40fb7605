"""Runtime.stream: live events of one request, in order, with backpressure."""

from __future__ import annotations

import gc

import trio
from _helpers import echo_backend, settle
from trio.testing import MockClock

from agentrt import Agent, Completed, ErrorEvent, StopReason, TextEvent, open_runtime
from agentrt.testing import Gate, ScriptedBackend, reply

# Far more events than a stream holds for a reader that does not read.
MANY = [TextEvent(text=str(i)) for i in range(500)]


async def test_a_slow_reader_holds_the_turn_back(autojump_clock: MockClock) -> None:
    backend = ScriptedBackend([*MANY, *reply("end")])
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=backend)
        ref = await rt.tell("a", "x")
        stream = rt.stream(ref)
        await settle()
        # The buffer is full and nobody reads: the turn waits.
        assert (await rt.status("a")).state == "processing"
        texts: list[str] = []
        async for event in stream:
            if isinstance(event, TextEvent):
                texts.append(event.text)
            await trio.sleep(1)
        assert isinstance(await rt.poll(ref), Completed)
    assert texts == [event.text for event in MANY] + ["end"]
    # The turn finished while the reader still had a full buffer to go.
    assert trio.current_time() == len(MANY) + 2


async def test_two_readers_see_the_same_events_and_the_terminal(autojump_clock: MockClock) -> None:
    gate = Gate()
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=echo_backend([gate, *reply("hi")]))
        ref = await rt.tell("a", "x")
        first = rt.stream(ref)
        await gate.wait_reached()
        second = rt.stream(ref)  # joins a running turn
        gate.release()
        seen = [[e.kind async for e in first], [e.kind async for e in second]]
    assert seen == [["text", "result"], ["text", "result"]]


async def test_a_reader_that_goes_away_does_not_block_the_turn(autojump_clock: MockClock) -> None:
    backend = ScriptedBackend([*MANY, *reply("end")], [*MANY, *reply("end")])
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=backend)
        ref = await rt.tell("a", "x")
        async for _event in rt.stream(ref):
            break  # the stream is dropped here
        gc.collect()
        closed = await rt.tell("a", "y")
        async with rt.stream(closed) as stream:
            await stream.__anext__()
        assert isinstance(await rt.wait(ref), Completed)
        assert isinstance(await rt.wait(closed), Completed)
    assert trio.current_time() == 0.0


async def test_a_failed_turn_ends_the_stream_with_its_error(autojump_clock: MockClock) -> None:
    async with open_runtime() as rt:
        await rt.start_agent(
            Agent, name="a", backend=echo_backend([TextEvent(text="a"), Gate()]), watchdog=3
        )
        ref = await rt.tell("a", "x")
        events = [event async for event in rt.stream(ref)]
    assert [e.kind for e in events] == ["text", "error"]
    last = events[-1]
    assert isinstance(last, ErrorEvent)
    assert last.reason is StopReason.TOTAL_TIMEOUT
    assert last.timestamp == 3.0


async def test_a_finished_or_unknown_ref_gives_an_empty_stream(autojump_clock: MockClock) -> None:
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=echo_backend())
        ref = await rt.tell("a", "x")
        await rt.wait(ref)
        assert [e async for e in rt.stream(ref)] == []
