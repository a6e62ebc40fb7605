"""Where this round's features meet: a credential's usage limit (the fleet's park) with
durable requests (a key, withdraw, a restart of the program on the SQLite file), and
`when_busy` with a store that keeps requests. Scripted turns; on SQLite in real time, with
resets a few seconds on (its worker thread would let a MockClock run ahead of the lease),
else under an autojumping clock."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import pytest
import trio
import trio.testing

from agentrt import (
    Agent,
    AgentBusy,
    Completed,
    Pending,
    Runtime,
    SQLiteStore,
    StopReason,
    TurnFailed,
    Withdrawn,
    open_runtime,
)
from agentrt.testing import Call, Fail, Gate, ScriptedBackend, reply

HOUR = 3600.0
RESET = 3.0  # seconds to a usage limit's reset, on SQLite in real time
BOUND = 60.0  # a loaded machine's bound on each wait; never reached when all is well
LIMIT = "You've hit your limit"


def credential(resets_at: float) -> ScriptedBackend:
    """Turns on a credential whose usage window is spent until ``resets_at`` (the wall
    clock, as the CLI's model API sees it): before it each meets the limit, after it each
    answers its prompt upper."""

    def turn(call: Call) -> Sequence[object]:
        if time.time() < resets_at:
            return [Fail(StopReason.USAGE_LIMIT, LIMIT, resets_at=resets_at)]
        return reply(call.prompt.upper(), session_id="s")

    return ScriptedBackend(default=turn)


async def park(rt: Runtime, backend: ScriptedBackend) -> None:
    """Start agent "a" on credential "team" and have its first turn meet the limit."""
    await rt.start_agent(Agent, name="a", backend=backend, credential="team")
    with pytest.raises(TurnFailed) as caught:
        await rt.ask("a", "first")
    assert caught.value.reason is StopReason.USAGE_LIMIT
    assert (await rt.status("a")).state == "parked"


async def test_a_request_withdrawn_while_its_agent_is_parked_never_runs(tmp_path: Path) -> None:
    resets_at = time.time() + RESET
    backend = credential(resets_at)
    async with open_runtime(store=SQLiteStore(tmp_path / "s.sqlite3")) as rt:
        await park(rt, backend)
        dropped = await rt.tell("a", "dropped", key="job-1")
        kept = await rt.tell("a", "kept")
        status = await rt.status("a")
        assert (status.state, status.queued, status.queued_keys) == ("parked", 2, ("job-1",))
        assert await rt.withdraw(dropped)
        assert not await rt.withdraw(dropped)  # once
        assert isinstance(await rt.poll(dropped), Withdrawn)
        assert isinstance(await rt.poll(kept), Pending)
        status = await rt.status("a")
        assert (status.state, status.queued, status.queued_keys) == ("parked", 1, ())
        with trio.fail_after(BOUND):
            result = await rt.wait(kept)
        assert isinstance(result, Completed) and result.response.text == "KEPT"
        assert isinstance(await rt.poll(dropped), Withdrawn)
    assert backend.prompts == ["first", "kept"]


async def test_a_keyed_tell_to_a_parked_agent_survives_a_restart_before_the_reset(
    tmp_path: Path,
) -> None:
    """The program that accepted the request closes while the agent is parked; the next
    one on the file runs it once, and the caller finds its answer by key."""
    path = tmp_path / "s.sqlite3"
    resets_at = time.time() + RESET
    before = credential(resets_at)
    async with open_runtime(store=SQLiteStore(path)) as rt:
        await park(rt, before)
        ref = await rt.tell("a", "later", key="job-1")
        assert await rt.tell("a", "later, again", key="job-1") == ref
        assert (await rt.status("a")).queued == 1
    assert time.time() < resets_at, "the first program took longer than RESET to close"
    after = credential(resets_at)
    async with open_runtime(store=SQLiteStore(path)) as rt:
        await rt.start_agent(Agent, name="a", backend=after, credential="team")
        assert await rt.request("a", "job-1") == ref
        with trio.fail_after(BOUND):
            result = await rt.wait(ref)
        assert isinstance(result, Completed) and result.response.text == "LATER"
        assert await rt.tell("a", "later, once more", key="job-1") == ref
    assert before.prompts == ["first"]
    assert after.prompts[-1:] == ["later"]


async def test_reject_while_busy_stores_nothing_and_a_keyed_prompt_still_queues(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.sqlite3"
    gate = Gate()
    held = ScriptedBackend(
        [*reply("x", session_id="s")[:1], gate, *reply("x")[1:]],
        default=lambda call: reply(call.prompt.upper(), session_id="s"),
    )
    async with open_runtime(store=SQLiteStore(path)) as rt:
        await rt.start_agent(Agent, name="a", backend=held, when_busy="reject")
        running = await rt.tell("a", "first")
        await gate.wait_reached()
        with pytest.raises(AgentBusy):
            await rt.tell("a", "refused tell")
        with pytest.raises(AgentBusy):
            await rt.ask("a", "refused ask")
        status = await rt.status("a")
        assert (status.queued, status.oldest_queued) == (0, None)
        keyed = await rt.tell("a", "keyed", key="job-1")
        assert (await rt.status("a")).queued_keys == ("job-1",)
        gate.release()
        assert isinstance(await rt.wait(running), Completed)
        result = await rt.wait(keyed)
        assert isinstance(result, Completed) and result.response.text == "KEYED"
    # The next program on the file finds nothing of the refused prompts to run.
    after = ScriptedBackend(default=lambda call: reply(call.prompt.upper(), session_id="s"))
    async with open_runtime(store=SQLiteStore(path)) as rt:
        await rt.start_agent(Agent, name="a", backend=after)
        assert (await rt.ask("a", "next")).text == "NEXT"
    assert held.prompts == ["first", "keyed"]
    assert after.prompts == ["next"]


async def test_an_interrupt_policy_prompt_to_a_parked_agent_queues_behind_the_reset(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """No turn runs while the agent is parked, so `when_busy="interrupt"` has nothing to
    end: the prompt waits for the reset like any other, in order."""
    backend = ScriptedBackend(
        [Fail(StopReason.USAGE_LIMIT, LIMIT, resets_at=time.time() + HOUR)],
        default=lambda call: reply(call.prompt.upper(), session_id="s"),
    )
    async with open_runtime() as rt:
        await rt.start_agent(
            Agent, name="a", backend=backend, credential="team", when_busy="interrupt"
        )
        with pytest.raises(TurnFailed):
            await rt.ask("a", "first")
        start = trio.current_time()
        one = await rt.tell("a", "one")
        two = await rt.tell("a", "two")
        assert (await rt.status("a")).queued == 2
        for ref, text in ((one, "ONE"), (two, "TWO")):
            result = await rt.wait(ref)
            assert isinstance(result, Completed) and result.response.text == text
        assert trio.current_time() - start >= HOUR - 5  # neither ran before the reset
    assert backend.prompts == ["first", "one", "two"]


async def test_another_program_on_the_file_sees_the_park_and_withdraws_from_the_queue(
    tmp_path: Path,
) -> None:
    """Status and withdraw reach the owner of a parked agent through the SQLite file's
    routing: the park's fields travel, and a request withdrawn from the other program
    never runs after the reset."""
    path = tmp_path / "s.sqlite3"
    resets_at = time.time() + RESET
    backend = credential(resets_at)
    async with open_runtime(store=SQLiteStore(path)) as owner:
        await park(owner, backend)
        async with open_runtime(store=SQLiteStore(path)) as other:
            dropped = await other.tell("a", "dropped", key="job-1")
            kept = await other.tell("a", "kept")
            status = await other.status("a")
            assert (status.state, status.parked_until, status.credential) == (
                "parked",
                resets_at,
                "team",
            )
            assert (status.queued, status.queued_keys) == (2, ("job-1",))
            assert await other.withdraw(dropped)
            assert isinstance(await owner.poll(dropped), Withdrawn)
            with trio.fail_after(BOUND):
                result = await other.wait(kept)
            assert isinstance(result, Completed) and result.response.text == "KEPT"
            assert (await other.status("a")).state in ("idle", "idle_warm")
    assert backend.prompts == ["first", "kept"]
