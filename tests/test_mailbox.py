"""Queueing: FIFO, admission (count and bytes), cancellation, poll and its eviction."""

import pytest
import trio
from _helpers import echo_backend, settle
from trio.testing import MockClock

from agentrt import (
    Agent,
    AgentNotFound,
    Completed,
    ErrorEvent,
    MailboxFull,
    NotFound,
    Pending,
    Response,
    StopReason,
    Withdrawn,
    open_runtime,
)
from agentrt.testing import Gate, reply


async def test_asks_to_a_busy_agent_run_in_fifo_order(autojump_clock: MockClock) -> None:
    gate = Gate()
    backend = echo_backend([gate, *reply("first")])
    answers: list[str] = []
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=backend)

        async def ask(prompt: str) -> None:
            answers.append((await rt.ask("a", prompt)).text)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask, "first")
            await gate.wait_reached()
            for prompt in ["p1", "p2", "p3", "p4"]:
                nursery.start_soon(ask, prompt)
                await settle()
            assert (await rt.status("a")).queued == 4
            assert (await rt.status("a")).queued_bytes == 8
            gate.release()
    assert answers == ["first", "echo p1", "echo p2", "echo p3", "echo p4"]
    assert backend.prompts == ["first", "p1", "p2", "p3", "p4"]
    assert trio.current_time() == 0.0


async def test_tells_and_asks_share_one_fifo_queue(autojump_clock: MockClock) -> None:
    gate = Gate()
    backend = echo_backend([gate, *reply("first")])
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=backend)
        await rt.tell("a", "first")
        await gate.wait_reached()
        await rt.tell("a", "t1")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(rt.ask, "a", "a1")
            await settle()
            await rt.tell("a", "t2")
            gate.release()
    assert backend.prompts == ["first", "t1", "a1", "t2"]


async def test_overload_by_count(autojump_clock: MockClock) -> None:
    gate = Gate()
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=echo_backend([gate]), max_pending=2)
        await rt.tell("a", "running")
        await gate.wait_reached()
        await rt.tell("a", "q1")
        await rt.tell("a", "q2")
        with pytest.raises(MailboxFull) as info:
            await rt.tell("a", "q3")
        assert (info.value.limit, info.value.maximum, info.value.queued) == ("max_pending", 2, 2)
        with pytest.raises(MailboxFull):
            await rt.ask("a", "q3")
        assert (await rt.status("a")).queued == 2
        gate.release()


async def test_overload_by_bytes_counts_utf8_bytes(autojump_clock: MockClock) -> None:
    gate = Gate()
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=echo_backend([gate]), max_pending_bytes=10)
        await rt.tell("a", "running")
        await gate.wait_reached()
        await rt.tell("a", "ééé")  # 6 bytes
        with pytest.raises(MailboxFull) as info:
            await rt.tell("a", "éé!")  # 5 bytes: 11 > 10
        assert info.value.limit == "max_pending_bytes"
        assert (info.value.maximum, info.value.queued, info.value.queued_bytes) == (10, 1, 6)
        await rt.tell("a", "éé")  # 4 bytes: exactly 10
        assert (await rt.status("a")).queued_bytes == 10
        gate.release()


async def test_max_pending_zero_takes_work_only_when_idle(autojump_clock: MockClock) -> None:
    gate = Gate()
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=echo_backend([gate]), max_pending=0)
        await rt.tell("a", "taken while idle")
        await gate.wait_reached()
        with pytest.raises(MailboxFull):
            await rt.tell("a", "busy")
        gate.release()
        await settle()
        assert (await rt.ask("a", "idle again")).text == "echo idle again"


async def test_an_ask_cancelled_while_queued_leaves_the_queue(autojump_clock: MockClock) -> None:
    gate = Gate()
    backend = echo_backend([gate, *reply("first")])
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=backend)
        await rt.tell("a", "first")
        await gate.wait_reached()
        async with trio.open_nursery() as nursery:
            scope = trio.CancelScope()

            async def doomed() -> None:
                with scope:
                    await rt.ask("a", "doomed")
                    raise AssertionError("not reached")

            nursery.start_soon(doomed)
            await settle()
            nursery.start_soon(rt.ask, "a", "kept")
            await settle()
            assert (await rt.status("a")).queued == 2
            scope.cancel()
            await settle()
            assert (await rt.status("a")).queued == 1
            assert (await rt.status("a")).queued_bytes == 4
            gate.release()
    assert backend.prompts == ["first", "kept"]


async def test_poll_pending_completed_and_unknown(autojump_clock: MockClock) -> None:
    gate = Gate()
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=echo_backend([gate, *reply("one")]))
        ref = await rt.tell("a", "one")
        assert await rt.poll(ref) == Pending()
        await gate.wait_reached()
        assert await rt.poll(ref) == Pending()
        gate.release()
        result = await rt.wait(ref)
        assert isinstance(result, Completed)
        assert result.response.text == "one"
        assert await rt.poll(ref) == result
        other = await rt.tell("a", "x")
        assert await rt.poll(type(ref)("a", other.id + 100)) == NotFound()
        with pytest.raises(AgentNotFound):  # the ref names an agent that is not running
            await rt.poll(type(ref)("b", other.id))


async def test_poll_evicts_the_oldest_beyond_max_results(autojump_clock: MockClock) -> None:
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=echo_backend(), max_results=2)
        refs = [await rt.tell("a", f"p{i}") for i in range(3)]
        for ref in refs:
            await rt.wait(ref)
        assert await rt.poll(refs[0]) == NotFound()
        assert [type(await rt.poll(ref)) for ref in refs[1:]] == [Completed, Completed]


def kept_size(response: Response) -> int:
    """What a kept result counts against ``max_result_bytes``: its text, its final message
    and the events it retained, in bytes."""
    text = len(response.text.encode()) + len(response.final_message.encode())
    return text + response.event_coverage.retained_bytes


async def test_poll_evicts_the_oldest_beyond_max_result_bytes(autojump_clock: MockClock) -> None:
    async with open_runtime() as rt:
        # Every "echo pN" response has the same size; measure one first.
        await rt.start_agent(Agent, name="probe", backend=echo_backend())
        size = kept_size(await rt.ask("probe", "p0"))
        await rt.start_agent(Agent, name="a", backend=echo_backend(), max_result_bytes=2 * size)
        refs = [await rt.tell("a", f"p{i}") for i in range(3)]
        for ref in refs:
            await rt.wait(ref)
        assert await rt.poll(refs[0]) == NotFound()
        assert isinstance(await rt.poll(refs[1]), Completed)
        assert isinstance(await rt.poll(refs[2]), Completed)
        # A result larger than the whole bound is not kept at all (wait still gets it).
        big = await rt.tell("a", "p" * (2 * size))
        assert isinstance(await rt.wait(big), Completed)
        assert await rt.poll(big) == NotFound()


async def test_withdraw_takes_a_queued_tell_out_only(autojump_clock: MockClock) -> None:
    gate = Gate()
    backend = echo_backend([gate, *reply("first")])
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=backend)
        first = await rt.tell("a", "first")
        await gate.wait_reached()
        queued = await rt.tell("a", "queued")
        stream = rt.stream(queued)
        assert not await rt.withdraw(first)  # running: only interrupt_request stops it
        assert await rt.withdraw(queued)
        assert not await rt.withdraw(queued)  # already withdrawn
        assert await rt.poll(queued) == Withdrawn()
        assert await rt.wait(queued) == Withdrawn()
        assert (await rt.status("a")).queued == 0
        events = [event async for event in stream]
        assert len(events) == 1
        assert isinstance(events[0], ErrorEvent)
        assert events[0].reason is StopReason.CANCELLED
        gate.release()
        await rt.wait(first)
        assert not await rt.withdraw(first)  # finished
    assert backend.prompts == ["first"]


async def test_every_waiter_of_a_request_is_woken_but_one_cancelled(
    autojump_clock: MockClock,
) -> None:
    # The waiters of one request park on it (no trio.Event of its own): a cancelled one
    # leaves, and the others, one that came after it too, get the outcome as it settles.
    gate = Gate()
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=echo_backend([gate, *reply("done")]))
        ref = await rt.tell("a", "x")
        results: list[object] = []
        cancelled = trio.CancelScope()

        async def wait(scope: trio.CancelScope) -> None:
            with scope:
                results.append(await rt.wait(ref))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(wait, trio.CancelScope())
            nursery.start_soon(wait, cancelled)
            await gate.wait_reached()
            cancelled.cancel()
            await settle()
            nursery.start_soon(wait, trio.CancelScope())
            await settle()
            gate.release()
    assert cancelled.cancelled_caught
    assert len(results) == 2
    assert all(isinstance(r, Completed) and r.response.text == "done" for r in results)
