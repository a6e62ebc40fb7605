"""`stream` of a request another runtime runs, through the routing, on a real PostgreSQL
and on a real SQLite file: two runtimes in this test (the owner "alpha" and the follower
"beta") with the scripted backend, and an owner that is a program of its own
(route_child.py) for its death."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
import pytest
import trio
from console_helpers import act, events
from proc_helpers import store_programs, wait_until
from test_docs import run_block
from test_routing import Shared, start_owner
from test_routing import shared as shared  # the fixture: each store that routes
from trio.testing import MockClock

import agentrt
from agentrt import (
    AgentNotFound,
    Completed,
    ErrorEvent,
    Event,
    Ref,
    ResultEvent,
    StopReason,
    TextEvent,
    open_console,
)
from agentrt._address import LocalAgent
from agentrt._follow import HOLD, KEPT_ENDED, LINGER, Tap
from agentrt._stores._route_codec import (
    EventBatch,
    decode_answer,
    decode_call,
    encode_answer,
    encode_call,
    encode_event,
)
from agentrt._stores._route_values import RowRefused
from agentrt.testing import Gate, ScriptedBackend, reply

BOUND = 60
CHILD = Path(__file__).parent / "route_child.py"


@pytest.fixture
async def nodes(shared: Shared) -> AsyncIterator[tuple[agentrt.Runtime, agentrt.Runtime]]:
    async with (
        agentrt.open_runtime(store=shared.open(), node="alpha") as alpha,
        agentrt.open_runtime(store=shared.open(), node="beta") as beta,
    ):
        yield alpha, beta


def taps(rt: agentrt.Runtime, name: str) -> dict[int, Tap]:
    return rt._context.children[name].slot.mailbox.taps or {}


async def start_halted(rt: agentrt.Runtime, *steps: object) -> None:
    """Agent "x" of ``rt`` runs ``steps`` then replies; halted, so that a follower's tap
    is there before its first event."""
    backend = ScriptedBackend(default=lambda call: [*steps, *reply("done")])
    await rt.start_agent(agentrt.Agent, name="x", backend=backend)
    await rt.halt("x")


async def unhalt_when_tapped(alpha: agentrt.Runtime) -> None:
    await wait_until(lambda: taps(alpha, "x"), BOUND)
    await alpha.unhalt("x")


async def first_event(alpha: agentrt.Runtime, stream: agentrt.EventStream) -> Event:
    """The stream's first event, read while its owner is unhalted once the tap is there."""
    async with trio.open_nursery() as nursery:
        nursery.start_soon(unhalt_when_tapped, alpha)
        return await stream.__anext__()


async def test_a_turn_on_another_runtime_streams_live_and_ends_with_its_terminal(
    nodes: tuple[agentrt.Runtime, agentrt.Runtime],
) -> None:
    alpha, beta = nodes
    gate = Gate()
    await start_halted(alpha, TextEvent(text="reading"), gate, TextEvent(text="writing"))
    with trio.fail_after(BOUND):
        ref = await beta.tell("x", "go")
        async with beta.stream(ref) as stream:
            first = await first_event(alpha, stream)
            # Live: the turn is still at the gate when the follower has its first event.
            assert first == TextEvent(text="reading", timestamp=first.timestamp)
            await gate.wait_reached()
            assert (await beta.status("x")).state == "processing"
            gate.release()
            rest = [event async for event in stream]
        assert [type(e) for e in rest] == [TextEvent, TextEvent, ResultEvent]
        assert rest[0].text == "writing" and rest[-1].text == "done"  # type: ignore[attr-defined]
        assert stream.dropped == 0
        settled = await beta.wait(ref)
        assert isinstance(settled, Completed)
        assert [type(e) for e in settled.response.events] == [type(first)] + [type(e) for e in rest]
        # A follower's first read is where it joins: the owner still holds the events of a
        # request that ended moments ago for a reader that comes late.
        assert [event async for event in beta.stream(ref)] == [first, *rest]
        # A ref no longer running, whose events nobody followed, streams what the store
        # keeps of it (issue 38), as locally: its answer.
        again = await beta.tell("x", "again")
        answered = await beta.wait(again)
        assert isinstance(answered, Completed)
        [kept] = [event async for event in beta.stream(again)]
        assert isinstance(kept, ResultEvent) and kept.text == answered.response.text
        with pytest.raises(AgentNotFound):  # nobody runs it: the first read says so
            await beta.stream(Ref("nobody", 1)).__anext__()


async def test_a_slow_follower_never_holds_the_turn_and_learns_how_many_it_missed(
    nodes: tuple[agentrt.Runtime, agentrt.Runtime], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("agentrt._follow.HELD_EVENTS", 8)
    alpha, beta = nodes
    gate = Gate()
    many = [TextEvent(text=f"t{i}") for i in range(40)]
    await start_halted(alpha, TextEvent(text="start"), gate, *many)
    with trio.fail_after(BOUND):
        ref = await beta.tell("x", "go")
        async with beta.stream(ref) as stream:
            assert (await first_event(alpha, stream)).text == "start"  # type: ignore[attr-defined]
            # The follower reads nothing more: the turn goes on to its end regardless.
            gate.release()
            settled = await beta.wait(ref)
            assert isinstance(settled, Completed)
            rest = [event async for event in stream]
        events = list(settled.response.events)[1:]
        assert len(rest) == 8 and rest == events[-8:]  # the newest, the terminal last
        assert stream.dropped == len(events) - len(rest)


async def test_a_cancelled_read_leaves_nothing_behind_and_loses_no_event(
    nodes: tuple[agentrt.Runtime, agentrt.Runtime],
) -> None:
    alpha, beta = nodes
    gate = Gate()
    await start_halted(alpha, gate, TextEvent(text="after the gate"))
    with trio.fail_after(BOUND):
        ref = await beta.tell("x", "go")
        stream = beta.stream(ref)
        await alpha.unhalt("x")
        await gate.wait_reached()
        with trio.move_on_after(1) as scope:
            await stream.__anext__()  # nothing comes while the turn waits at the gate
        assert scope.cancelled_caught
        # The owner's read was cancelled (on SQLite its connection closed: nothing held).
        serving = getattr(alpha._router, "_serving", {})
        await wait_until(lambda: not serving, BOUND)
        gate.release()
        assert (await stream.__anext__()).text == "after the gate"  # type: ignore[attr-defined]
        stream.close()  # the follower goes: the turn ends as if nobody had looked
        assert [event async for event in stream] == []
        assert isinstance(await beta.wait(ref), Completed)
        assert not serving


async def test_the_owner_killed_mid_follow_ends_the_stream_with_an_error_event(
    shared: Shared,
) -> None:
    async with store_programs(CHILD, shared.where) as start_program:
        program = await start_owner(start_program, "node-a", 3.0)
        # On the owner's node its death is seen at once (its pid, or its socket closing).
        async with agentrt.open_runtime(store=shared.open(), node="node-a") as rt:
            with trio.fail_after(BOUND):
                ref = await rt.tell("x", "chatty job")
                async with rt.stream(ref) as stream:
                    event = await stream.__anext__()
                    assert event == TextEvent(text="node-a working", timestamp=event.timestamp)
                    await program.kill()
                    rest = [event async for event in stream]
    [error] = rest
    assert isinstance(error, ErrorEvent) and error.reason is StopReason.CANCELLED
    assert "node 'node-a'" in error.message and f"pid {program.pid}" in error.message


async def test_the_owner_killed_before_the_first_read_ends_the_stream_too(
    shared: Shared,
) -> None:
    # No event yet, its request unsettled: nothing settles it before a runtime takes "x"
    # again, so the stream must not wait for the store (the console's page did, for good).
    async with store_programs(CHILD, shared.where) as start_program:
        program = await start_owner(start_program, "node-a")
        async with agentrt.open_runtime(store=shared.open(), node="node-a") as rt:
            with trio.fail_after(BOUND):
                ref = await rt.tell("x", "slow job")
                await program.kill()
                async with rt.stream(ref) as stream:
                    rest = [event async for event in stream]
    [error] = rest
    assert isinstance(error, ErrorEvent) and error.reason is StopReason.CANCELLED
    assert "node 'node-a'" in error.message and f"pid {program.pid}" in error.message


async def test_the_console_of_another_node_shows_the_turn_live_redacted(
    nodes: tuple[agentrt.Runtime, agentrt.Runtime],
) -> None:
    alpha, beta = nodes
    gate = Gate()
    secret = "sk-ant-" + "k3y" * 10
    await start_halted(alpha, TextEvent(text=f"using {secret}"), gate)
    with trio.fail_after(BOUND):
        async with open_console(beta) as console, events(console, "/events/agent?name=x") as live:
            await live.until(lambda kind, data: kind == "agent")
            answer = await act(console, name="x", action="tell", prompt="go")
            assert answer.status == 200, answer
            await unhalt_when_tapped(alpha)
            _, shown = await live.until(lambda kind, data: kind == "event")
            assert shown["kind"] == "text" and shown["text"].startswith("using ")
            assert secret not in shown["text"]
            assert gate.reached and not gate._released.is_set()  # live: the turn waits on
            gate.release()
            _, result = await live.until(lambda kind, data: data.get("kind") == "result")
            assert result["text"] == "done"


async def test_the_console_says_when_the_owners_ring_overflowed(
    nodes: tuple[agentrt.Runtime, agentrt.Runtime], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("agentrt._follow.HELD_EVENTS", 2)
    alpha, beta = nodes
    gate = Gate()
    # Far more events at once than the ring holds: the console's next read finds a gap.
    many = [TextEvent(text=f"t{i} ") for i in range(200)]
    await start_halted(alpha, TextEvent(text="start"), gate, *many)
    with trio.fail_after(BOUND):
        async with open_console(beta) as console, events(console, "/events/agent?name=x") as live:
            await live.until(lambda kind, data: kind == "agent")
            answer = await act(console, name="x", action="tell", prompt="go")
            assert answer.status == 200, answer
            await unhalt_when_tapped(alpha)
            await live.until(lambda kind, data: data.get("text") == "start")
            gate.release()
            _, gap = await live.until(lambda kind, data: kind == "dropped")
            assert gap["count"] > 0 and "owner's buffer" in gap["why"]
            await live.until(lambda kind, data: data.get("kind") == "result")


async def test_the_deployment_pages_stream_block_follows_another_runtimes_turn(
    nodes: tuple[agentrt.Runtime, agentrt.Runtime], capsys: pytest.CaptureFixture[str]
) -> None:
    alpha, beta = nodes
    backend = ScriptedBackend(default=lambda call: [TextEvent(text="Fixing. "), *reply("Fixed.")])
    await alpha.start_agent(agentrt.Agent, name="coder", backend=backend)
    await alpha.halt("coder")
    with trio.fail_after(BOUND):
        async with trio.open_nursery() as nursery:

            async def unhalt_when_tapped() -> None:
                await wait_until(lambda: taps(alpha, "coder"), BOUND)
                await alpha.unhalt("coder")

            nursery.start_soon(unhalt_when_tapped)
            await run_block("async with rt.stream(ref) as events", {"rt": beta, "agentrt": agentrt})
    assert capsys.readouterr().out == "Fixing. Fixed."


def test_an_events_call_and_its_answer_travel_as_data() -> None:
    ref = Ref("x", 7)
    assert decode_call("events", encode_call("events", (ref, 3))) == (ref, 3)
    with pytest.raises(RowRefused):
        encode_call("events", (ref, -1))
    text = TextEvent(text="hi")
    encoded = encode_event(text)
    assert encoded is not None
    assert encode_event(TextEvent(text="a\udc00")) is None  # a lone surrogate cannot travel
    row = encode_answer("x", "events", EventBatch((encoded,), 4, 1, False))
    assert decode_answer("events", row) == EventBatch((text,), 4, 1, False)
    forged = msgspec.msgpack.encode(
        {
            "protocol": 1,
            "body": {
                "answer": "events",
                "events": [b"\xc1"],
                "last": 1,
                "dropped": 0,
                "ended": False,
            },
        }
    )
    with pytest.raises(RowRefused):
        decode_answer("events", forged)


def encoded(text: str) -> bytes:
    data = encode_event(TextEvent(text=text))
    assert data is not None
    return data


async def test_a_tap_holds_the_newest_events_and_counts_what_a_reader_missed(
    monkeypatch: pytest.MonkeyPatch, autojump_clock: MockClock
) -> None:
    monkeypatch.setattr("agentrt._follow.HELD_EVENTS", 3)
    tap = Tap()
    for i in range(1, 6):  # events 1 to 5; 3 to 5 are held
        tap.send_nowait(TextEvent(text=f"e{i}"))
    tap.send_nowait(TextEvent(text="bad \udc00"))  # 6 cannot travel
    tap.send_nowait(TextEvent(text="e7"))
    # A reader that had event 1: 2 to 4 fell out of the ring, 6 cannot travel.
    assert await tap.read(1) == EventBatch((encoded("e5"), encoded("e7")), 7, 4, False)
    assert await tap.read(0) == EventBatch((encoded("e5"), encoded("e7")), 7, 5, False)
    start = trio.current_time()
    assert await tap.read(7) == EventBatch((), 7, 0, False)  # nothing came: answered empty
    assert trio.current_time() - start == HOLD
    tap.close(ResultEvent(text="done"))
    terminal = encode_event(ResultEvent(text="done"))
    assert await tap.read(7) == EventBatch((terminal,), 8, 0, True)
    assert await tap.read(8) == EventBatch((), 8, 0, True)


async def test_a_mailbox_keeps_a_few_ended_taps_for_a_minute(autojump_clock: MockClock) -> None:
    async with agentrt.open_runtime(store=agentrt.MemoryStore()) as rt:
        backend = ScriptedBackend(default=lambda call: reply("ok"))
        await rt.start_agent(agentrt.Agent, name="x", backend=backend)
        address = rt._resolve("x")
        assert isinstance(address, LocalAgent)
        refs = []
        for _ in range(KEPT_ENDED + 2):
            refs.append(ref := await rt.tell("x", "go"))
            await address.events(ref, 0)  # a routed follower's first read
            await rt.wait(ref)
        assert list(taps(rt, "x")) == [ref.id for ref in refs[-KEPT_ENDED:]]
        await trio.sleep(LINGER + 1)
        ref = await rt.tell("x", "go")
        await address.events(ref, 0)
        await rt.wait(ref)
        assert list(taps(rt, "x")) == [ref.id]
