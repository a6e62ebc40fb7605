"""Warm sessions (``keep_alive``) through the public API, on the fake CLI's live mode.

The fake plays a live Claude Code process (`agentrt.testing.fake_cli`, step "live"): it
answers the handshake, runs one program per user message and takes in-band interrupts, so
every way a warm process may end (or must not) is driven here with real processes. The
real claude's tier is tests/realcli/test_claude_warm.py.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest
import trio
from proc_helpers import (
    SLACK,
    Watcher,
    child,
    running,
    wait_dead_unseen,
    wait_for_status,
    wait_until,
)
from trio.testing import MockClock

import agentrt
from agentrt import Agent, MemoryStore, RawEvent, Response, Runtime, StopReason, TurnFailed
from agentrt.testing import fake_cli_executable

FAST: dict[str, Any] = {"kill_grace": 0.3, "startup": 10, "watchdog": 30}
RESULT_THEN_LATE = "".join(
    json.dumps(frame) + "\n"
    for frame in (
        {"type": "result", "subtype": "success", "result": "1: one", "session_id": "s-1"},
        {"type": "system", "subtype": "late"},
    )
)


async def start(
    rt: Runtime, tmp_path: Path, live: dict[str, Any], name: str = "a", **options: Any
) -> None:
    binary = fake_cli_executable(str(tmp_path), ["live", live], name=f"claude-{name}")
    await rt.start_agent(
        options.pop("agent", Agent),
        name=name,
        backend="claude",
        binary=binary,
        **{**FAST, "keep_alive": 30, **options},
    )


async def pid(rt: Runtime, name: str = "a") -> int:
    value = (await rt.status(name)).cli_pid
    assert value is not None
    return value


async def ask(rt: Runtime, prompt: str, name: str = "a") -> Response:
    return await rt.ask(name, prompt)


async def test_turns_share_one_process_and_its_conversation(tmp_path: Path) -> None:
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        await start(rt, tmp_path, {"session_id": "s-1"})
        assert (await rt.status("a")).cli_pid is None  # nothing runs before the first turn
        first = await ask(rt, "one")
        warm = await pid(rt)
        second = await ask(rt, "two")
        third = await ask(rt, "three")
        assert await pid(rt) == warm and running(warm)
        # The turn counter lives in the process: one process answered all three.
        assert [first.text, second.text, third.text] == ["1: one", "2: two", "3: three"]
        assert {r.session_id for r in (first, second, third)} == {"s-1"}
        # Each turn's own cost, though the CLI reports the session's running total.
        assert [r.cost_usd for r in (first, second, third)] == pytest.approx([0.01] * 3)
        assert (await rt.status("a")).turns == 3
    assert not running(warm)


async def test_hibernation_after_keep_alive_then_a_resumed_turn(tmp_path: Path) -> None:
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        await start(rt, tmp_path, {"session_id": "s-1"}, keep_alive=0.5)
        await ask(rt, "one")
        warm = await pid(rt)
        await wait_for_status(rt, "a", lambda s: s.cli_pid is None, SLACK)
        assert not running(warm)
        again = await ask(rt, "two")
        # A new process (its first turn), on the same conversation (--resume s-1).
        assert again.text == "1: two" and again.session_id == "s-1"
        assert await pid(rt) != warm


async def test_keep_alive_counts_from_the_last_turns_end(tmp_path: Path) -> None:
    # The task that holds the process waits out the idle after the first turn; the second
    # turn's end does not wake it, and the process must still idle for keep_alive after it.
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        await start(rt, tmp_path, {"session_id": "s-1"}, keep_alive=4)
        await ask(rt, "one")
        warm = await pid(rt)
        await ask(rt, "two")  # the holder waits out the idle after "one" (4 s)
        await trio.sleep(2.5)
        await ask(rt, "three")  # idle 2.5 s: kept
        await trio.sleep(2.5)  # past the end of the idle after "one", 1.5 s before this one's
        assert running(warm) and await pid(rt) == warm
        await wait_for_status(rt, "a", lambda s: s.cli_pid is None, SLACK)
        assert not running(warm)


class TaskSteps(trio.abc.Instrument):
    """How often each task ran, by name."""

    def __init__(self) -> None:
        self.steps: dict[str, int] = {}

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self.steps[task.name] = self.steps.get(task.name, 0) + 1


async def test_a_warm_turn_runs_no_task_but_the_asker_and_the_agent(tmp_path: Path) -> None:
    # Nothing else wakes for a warm turn (the process's holder task did, at each turn's end:
    # a task switch a turn). Some other task may run meanwhile (the tracker's periodic
    # reap), but not once a turn.
    asks = 20
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        await start(rt, tmp_path, {"session_id": "s-1"})
        await ask(rt, "one")
        await ask(rt, "two")
        counter = TaskSteps()
        trio.lowlevel.add_instrument(counter)
        try:
            for _ in range(asks):
                await ask(rt, "again")
        finally:
            trio.lowlevel.remove_instrument(counter)
    me = trio.lowlevel.current_task().name
    others = {name: n for name, n in counter.steps.items() if name != me and "'a'" not in name}
    assert any("'a'" in name for name in counter.steps)  # the agent's task, by its name
    assert sum(others.values()) < asks // 2, others


async def test_in_band_interrupt_keeps_the_process(tmp_path: Path) -> None:
    working = ["emit", {"type": "system", "subtype": "working"}]
    live = {"session_id": "s-1", "turns": [[["answer"]], [working, ["hang"]], [["answer"]]]}
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        await start(rt, tmp_path, live)
        await ask(rt, "one")
        warm = await pid(rt)
        ref = await rt.tell("a", "hang")
        async with rt.stream(ref) as events:
            async for _event in events:  # the CLI is in the turn
                assert await rt.interrupt("a")
                break
        result = await rt.wait(ref)
        assert isinstance(result, agentrt.Failed)
        assert isinstance(result.error, agentrt.TurnFailed)
        assert result.error.reason is StopReason.INTERRUPTED
        after = await ask(rt, "three")
        assert after.text == "3: three" and await pid(rt) == warm


async def test_a_prompt_that_interrupts_runs_on_the_same_process(tmp_path: Path) -> None:
    """``when_busy="interrupt"``: the next turn starts as soon as the interrupted one read
    its result, and the interrupt's wait for that result must not take the new turn's
    for its own (it killed the CLI after the new prompt was written, at times)."""
    rounds = 12
    working = ["emit", {"type": "system", "subtype": "working"}]
    turns = [[["answer"]], *[[working, ["hang"]], [["answer"]]] * rounds]
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        await start(rt, tmp_path, {"session_id": "s-1", "turns": turns}, when_busy="interrupt")
        await ask(rt, "one")
        warm = await pid(rt)
        for n in range(rounds):
            ref = await rt.tell("a", "hang")
            async with rt.stream(ref) as events:
                async for _event in events:  # the CLI is in the turn
                    break
            after = await ask(rt, "next")
            result = await rt.wait(ref)
            assert isinstance(result, agentrt.Failed)
            assert isinstance(result.error, agentrt.TurnFailed)
            assert result.error.reason is StopReason.INTERRUPTED
            assert after.text == f"{2 * n + 3}: next" and await pid(rt) == warm


async def test_an_interrupt_before_the_cli_began_the_turn_ends_it_too(tmp_path: Path) -> None:
    """Made while the prompt is still being written (the turn and its process are there,
    the reading not yet): the interrupt is made as the reading begins, and the caller gets
    its answer, not the turn's assertion."""
    live = {"session_id": "s-1", "turns": [[["answer"]], [["hang"]], [["answer"]]]}
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        await start(rt, tmp_path, live)
        await ask(rt, "one")
        ref = await rt.tell("a", "hang")
        while not await rt.interrupt("a"):  # from the first moment a turn is there
            pass
        result = await rt.wait(ref)
        assert isinstance(result, agentrt.Failed)
        assert isinstance(result.error, agentrt.TurnFailed)
        assert result.error.reason is StopReason.INTERRUPTED
        assert (await ask(rt, "three")).text.endswith(": three")


async def test_an_unanswered_interrupt_ends_the_process(tmp_path: Path) -> None:
    live = {"turns": [[["answer"]], [["hang"]], [["answer"]]], "ignore_interrupt": True}
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        await start(rt, tmp_path, live)
        await ask(rt, "one")
        warm = await pid(rt)
        ref = await rt.tell("a", "hang")
        await wait_for_status(rt, "a", lambda s: s.state == "processing")
        await trio.sleep(0.2)  # the turn runs its hang step
        assert await rt.interrupt("a")
        with trio.fail_after(SLACK + 3 * FAST["kill_grace"]):
            result = await rt.wait(ref)
        assert isinstance(result, agentrt.Failed)
        assert isinstance(result.error, agentrt.TurnFailed)
        assert result.error.reason is StopReason.INTERRUPTED
        assert not running(warm)
        after = await ask(rt, "three")
        assert after.text == "1: three" and await pid(rt) != warm


async def test_sigkill_of_the_idle_process_then_a_resumed_turn(tmp_path: Path) -> None:
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        await start(rt, tmp_path, {"session_id": "s-1"})
        await ask(rt, "one")
        warm = await pid(rt)
        os.kill(warm, signal.SIGKILL)
        await wait_for_status(rt, "a", lambda s: s.cli_pid is None)
        again = await ask(rt, "two")
        assert again.text == "1: two" and again.session_id == "s-1" and await pid(rt) != warm


INIT = ["emit", {"type": "system", "subtype": "init", "session_id": "s-1"}]


# What a background task's end prints, whether the CLI read the next prompt or not.
TASK_NEWS = ["emit", {"type": "system", "subtype": "task_notification", "task_id": "t1"}]


@pytest.mark.parametrize(
    "where", ["between turns", "on reading the prompt", "after a background task's news"]
)
async def test_a_warm_cli_dead_before_the_turn_runs_it_on_a_new_process(
    tmp_path: Path, where: str
) -> None:
    # Killed while it idles (the write of the prompt fails, or the stream ends at once), or
    # gone as it read the prompt, before a line of the turn (a task's news is none, and an
    # exit 0 there is no answer either): no CLI answered the prompt.
    dies = [TASK_NEWS, ["exit", 0]] if where.startswith("after") else [["kill", "SIGKILL"]]
    live = {"session_id": "s-1", "turns": [[["answer"]], dies]}
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        await start(rt, tmp_path, live)
        await ask(rt, "one")
        warm = await pid(rt)
        if where == "between turns":
            os.kill(warm, signal.SIGKILL)
            wait_dead_unseen(warm)
        again = await ask(rt, "two")
        # A new process (its first turn) on the same conversation (--resume s-1).
        assert again.text == "1: two" and again.session_id == "s-1"
        assert await pid(rt) != warm and (await rt.status("a")).turns == 2


async def test_a_warm_cli_that_dies_after_a_line_of_the_turn_fails_it(tmp_path: Path) -> None:
    # The CLI may have acted on the prompt: it is not sent again.
    runs = tmp_path / "runs"
    live = {"session_id": "s-1", "turns": [[["answer"]], [INIT, ["kill", "SIGKILL"]]]}
    binary = fake_cli_executable(str(tmp_path), ["by_run", str(runs), [[["live", live]]]])
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(
            Agent, name="a", backend="claude", binary=binary, keep_alive=30, **FAST
        )
        await ask(rt, "one")
        with pytest.raises(TurnFailed) as info:
            await ask(rt, "two")
        assert info.value.reason is StopReason.PROCESS_CRASHED
        assert runs.read_text() == "1"  # no second process took the prompt
        assert (await ask(rt, "three")).text == "1: three"


async def test_a_turn_runs_again_once_only(tmp_path: Path) -> None:
    # The new process dies before a line too: the turn fails, as a cold start's crash does.
    runs = tmp_path / "runs"
    first = {"turns": [[["answer"]], [["kill", "SIGKILL"]]]}
    then = {"turns": [[["kill", "SIGKILL"]]]}
    program = ["by_run", str(runs), [[["live", first]], [["live", then]]]]
    binary = fake_cli_executable(str(tmp_path), program)
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(
            Agent, name="a", backend="claude", binary=binary, keep_alive=30, **FAST
        )
        await ask(rt, "one")
        with pytest.raises(TurnFailed) as info:
            await ask(rt, "two")
        assert info.value.reason is StopReason.PROCESS_CRASHED
        assert runs.read_text() == "2"


async def test_an_interrupt_stops_the_turn_on_its_new_process(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    first = {"turns": [[["answer"]], [["kill", "SIGKILL"]]]}
    then = {"turns": [[INIT, ["hang"]]], "ignore_interrupt": True}
    program = ["by_run", str(runs), [[["live", first]], [["live", then]]]]
    binary = fake_cli_executable(str(tmp_path), program)
    agent = Watcher()
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(
            agent, name="a", backend="claude", binary=binary, keep_alive=30, **FAST
        )
        await ask(rt, "one")
        seen = len(agent.events)
        ref = await rt.tell("a", "two")
        with trio.fail_after(SLACK):
            # The dead process printed nothing: this is the new process's turn.
            await agent.wait_for(lambda: len(agent.events) > seen)
        retried = await pid(rt)
        assert await rt.interrupt("a")
        with trio.fail_after(SLACK + 3 * FAST["kill_grace"]):
            result = await rt.wait(ref)
        assert isinstance(result, agentrt.Failed)
        assert isinstance(result.error, agentrt.TurnFailed)
        assert result.error.reason is StopReason.INTERRUPTED
        assert runs.read_text() == "2" and not running(retried)


@pytest.fixture
def jumping_clock() -> MockClock:
    """Real time, plus the jumps a test makes."""
    return MockClock(rate=1.0)


async def test_the_turn_on_its_new_process_keeps_the_watchdog_of_its_start(
    tmp_path: Path, jumping_clock: MockClock
) -> None:
    # 90 s pass on the dead process (which took the prompt silently), 15 s on the new one:
    # a watchdog of 100 s counted from the turn's start ends it, not one counted anew.
    runs, took = tmp_path / "runs", tmp_path / "took the prompt"
    first = {"turns": [[["answer"]], [["daemon", str(took), []], ["hang"]]]}
    then = {"turns": [[INIT, ["hang"]]]}
    program = ["by_run", str(runs), [[["live", first]], [["live", then]]]]
    binary = fake_cli_executable(str(tmp_path), program)
    bounds = {**FAST, "watchdog": 100, "startup": 1000}
    agent = Watcher()
    # A lease that outlives the jumps (a 90 s silence would be a lost lease).
    async with agentrt.open_runtime(store=MemoryStore(), lease_ttl=1000) as rt:
        await rt.start_agent(
            agent, name="a", backend="claude", binary=binary, keep_alive=600, **bounds
        )
        await ask(rt, "one")
        warm, seen = await pid(rt), len(agent.events)
        ref = await rt.tell("a", "two")
        await wait_until(took.exists)
        jumping_clock.jump(90)
        os.kill(warm, signal.SIGKILL)
        with trio.fail_after(SLACK):
            await agent.wait_for(lambda: len(agent.events) > seen)  # the new process's turn
        jumping_clock.jump(15)
        with trio.fail_after(SLACK):
            result = await rt.wait(ref)
        assert isinstance(result, agentrt.Failed)
        assert isinstance(result.error, TurnFailed)
        assert result.error.reason is StopReason.TOTAL_TIMEOUT
        assert runs.read_text() == "2"


async def test_recycled_after_recycle_turns(tmp_path: Path) -> None:
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        await start(rt, tmp_path, {}, recycle_turns=2)
        texts = [(await ask(rt, p)).text for p in ("a", "b", "c")]
        assert texts == ["1: a", "2: b", "1: c"]


async def test_recycled_past_its_memory_ceiling(tmp_path: Path) -> None:
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        await start(rt, tmp_path, {}, recycle_rss_bytes=1)
        texts = [(await ask(rt, p)).text for p in ("a", "b")]
        assert texts == ["1: a", "1: b"]


async def test_a_turns_tool_processes_die_at_its_end(tmp_path: Path) -> None:
    sleeper = child(["hang"], setsid=True)
    live = {"turns": [[sleeper, ["answer"]]]}
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        await start(rt, tmp_path, live, retention="lossless")
        response = await ask(rt, "one")
        spawned = [e.data for e in response.events if type(e) is RawEvent and "pid" in e.data]
        tool = spawned[0]["pid"]
        assert not running(tool)  # gone when ask returned
        assert running(await pid(rt))
        assert (await ask(rt, "two")).text == "2: two"


@pytest.mark.parametrize(
    "turn",
    [
        [["write", "not json\n"], ["answer"]],
        # One write, so one read: the late line comes with the result.
        [["write", RESULT_THEN_LATE]],
    ],
    ids=["an unreadable line", "output after the end of the turn"],
)
async def test_an_anomaly_in_a_turn_ends_the_process_with_it(
    tmp_path: Path, turn: list[Any]
) -> None:
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        await start(rt, tmp_path, {"turns": [turn]}, retention="lossless")
        response = await ask(rt, "one")
        assert response.text == "1: one"
        assert (await rt.status("a")).cli_pid is None  # ended before ask returned
        # The next turn runs on a new process (its first turn).
        assert (await ask(rt, "two")).text.startswith("1: ")


async def test_a_protocol_error_in_a_turn_kills_the_process(tmp_path: Path) -> None:
    # A control response without a response breaks the protocol: the process is killed
    # (the turn ends as any turn whose CLI dies) and the next turn runs on a new one.
    broken = [["emit", {"type": "control_response"}], ["hang"]]
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        await start(rt, tmp_path, {"turns": [[["answer"]], broken, [["answer"]]]})
        await ask(rt, "one")
        warm = await pid(rt)
        with trio.fail_after(SLACK + 3 * FAST["kill_grace"]), pytest.raises(TurnFailed):
            await ask(rt, "two")
        assert not running(warm)
        assert (await ask(rt, "three")).text == "1: three"


async def test_output_between_turns_ends_the_process(tmp_path: Path) -> None:
    late = [["answer"], ["sleep", 0.2], ["emit", {"type": "late"}]]
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        await start(rt, tmp_path, {"turns": [late, [["answer"]]]})
        await ask(rt, "one")
        first = await pid(rt)
        await trio.sleep(0.5)  # the late line is written meanwhile
        assert (await ask(rt, "two")).text == "1: two"
        assert not running(first)


async def test_a_bound_ends_the_process(tmp_path: Path) -> None:
    # For a warm turn, ``startup`` counts to its first line and ``idle`` from there.
    init = ["emit", {"type": "system", "subtype": "init", "session_id": "s-1"}]
    live = {"turns": [[["answer"]], [init, ["hang"]], [["answer"]]], "ignore_interrupt": True}
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        await start(rt, tmp_path, live, idle=0.5)
        await ask(rt, "one")
        warm = await pid(rt)
        with pytest.raises(TurnFailed) as info:
            await ask(rt, "two")
        assert info.value.reason is StopReason.IDLE_TIMEOUT
        assert not running(warm)
        assert (await ask(rt, "three")).text == "1: three"


@pytest.mark.parametrize(
    ("bound", "reason"),
    [("first_event", StopReason.FIRST_EVENT_TIMEOUT), ("watchdog", StopReason.TOTAL_TIMEOUT)],
)
async def test_a_turn_bound_fires_in_the_warm_turn_it_bounds(
    tmp_path: Path, bound: str, reason: StopReason
) -> None:
    # A warm agent's turns share one alarm for their bounds (watchdog, first_event): each
    # turn arms it afresh, so a bound fires in its own turn, with its own reason, on time.
    seconds = 2.0
    init = ["emit", {"type": "system", "subtype": "init", "session_id": "s-1"}]
    live = {"turns": [[["answer"]], [["answer"]], [init, ["hang"]], [["answer"]]]}
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        bounds: dict[str, Any] = {"watchdog": None, bound: seconds}
        await start(rt, tmp_path, live, **bounds)
        assert [(await ask(rt, p)).text for p in ("one", "two")] == ["1: one", "2: two"]
        warm = await pid(rt)
        started = trio.current_time()
        with trio.fail_after(seconds + SLACK), pytest.raises(TurnFailed) as info:
            await ask(rt, "three")
        took = trio.current_time() - started
        assert info.value.reason is reason
        assert seconds <= took < seconds + SLACK
        assert not running(warm)  # a bound's stop is not in band: the process ends
        assert (await ask(rt, "four")).text == "1: four"


async def test_a_line_past_the_cap_fails_the_turn_and_ends_the_process(tmp_path: Path) -> None:
    live = {"turns": [[["answer"]], [["big_line", 200_000]], [["answer"]]]}
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        await start(rt, tmp_path, live, max_line_bytes=100_000)
        await ask(rt, "one")
        warm = await pid(rt)
        with pytest.raises(TurnFailed) as info:
            await ask(rt, "two")
        assert info.value.reason is StopReason.OUTPUT_LINE_TOO_LONG
        assert not running(warm)
        assert (await ask(rt, "three")).text == "1: three"


async def test_a_refused_handshake_fails_the_turn(tmp_path: Path) -> None:
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        await start(rt, tmp_path, {"refuse": True})
        with pytest.raises(TurnFailed) as info:
            await ask(rt, "one")
        assert info.value.reason is StopReason.MALFORMED_OUTPUT
        assert "refused its handshake" in info.value.message
        assert (await rt.status("a")).cli_pid is None


async def test_a_cli_that_exits_at_once_fails_as_a_one_process_turn_would(
    tmp_path: Path,
) -> None:
    binary = fake_cli_executable(str(tmp_path), ["stderr", "bad flag\n"], ["exit", 3])
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(
            Agent, name="a", backend="claude", binary=binary, keep_alive=30, **FAST
        )
        with pytest.raises(TurnFailed) as info:
            await ask(rt, "one")
        assert "exited with code 3" in info.value.message
        assert "bad flag" in info.value.message


async def test_a_new_session_starts_a_new_process(tmp_path: Path) -> None:
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        await start(rt, tmp_path, {})
        await ask(rt, "one")
        warm = await pid(rt)
        await rt.reset_session("a")
        assert (await ask(rt, "two")).text == "1: two"
        assert await pid(rt) != warm and not running(warm)


class CrashesOnce(Agent):
    crashed = False

    def handle_response(self, ref: Any, response: Response) -> None:
        if not CrashesOnce.crashed:
            CrashesOnce.crashed = True
            raise RuntimeError("boom")


async def test_a_restart_ends_the_warm_process(tmp_path: Path) -> None:
    async with agentrt.open_runtime(store=MemoryStore(), backoff=0) as rt:
        await start(rt, tmp_path, {"session_id": "s-1"}, agent=CrashesOnce)
        with pytest.raises(agentrt.AgentStopped):
            await ask(rt, "one")
        await wait_for_status(rt, "a", lambda s: s.restarts == 1 and s.cli_pid is None)
        again = await ask(rt, "two")
        assert again.text == "1: two" and again.session_id == "s-1"


async def test_the_store_knows_the_warm_process_while_it_lives(tmp_path: Path) -> None:
    store = MemoryStore()
    async with agentrt.open_runtime(store=store) as rt:
        await start(rt, tmp_path, {})
        await ask(rt, "one")
        [record] = await store.live_processes()
        assert record.live_pid == await pid(rt)
        await rt.stop_agent("a")
        assert not await store.live_processes()


async def test_an_idle_warm_agent_has_its_own_state_in_its_status_and_the_store(
    tmp_path: Path,
) -> None:
    init = {"type": "system", "subtype": "init", "session_id": "s-1", "model": "fake"}
    live = {"session_id": "s-1", "turns": [[["answer"]], [["emit", init], ["hang"]]]}
    store = MemoryStore()

    async def live_idle() -> bool | None:
        record = await store.load("a")
        assert record is not None
        return None if record.live_pgid is None else record.live_idle

    async with agentrt.open_runtime(store=store) as rt:
        await start(rt, tmp_path, live)
        assert (await rt.status("a")).state == "idle"  # no CLI before the first turn
        await ask(rt, "one")
        warm = await pid(rt)
        assert (await rt.status("a")).state == "idle_warm" and await live_idle() is True
        ref = await rt.tell("a", "two")
        async with rt.stream(ref) as stream:
            await stream.__anext__()  # the turn runs on the kept CLI
            assert (await rt.status("a")).state == "processing" and await pid(rt) == warm
            assert await live_idle() is False
            assert await rt.interrupt("a")
        await rt.wait(ref)
        assert (await rt.status("a")).state == "idle_warm" and await live_idle() is True
        os.kill(warm, signal.SIGKILL)
        await wait_for_status(rt, "a", lambda s: s.cli_pid is None)
        assert (await rt.status("a")).state == "idle" and await live_idle() is None


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_the_store_knows_the_process_that_took_over_a_dead_ones_turn(
    tmp_path: Path, kind: str
) -> None:
    # The live record follows the turn to its new process (the reaper finds what runs).
    store = MemoryStore() if kind == "memory" else agentrt.SQLiteStore(tmp_path / "s.sqlite3")
    async with agentrt.open_runtime(store=store) as rt:
        await start(rt, tmp_path, {"turns": [[["answer"]], [["kill", "SIGKILL"]]]})
        await ask(rt, "one")
        warm = await pid(rt)
        await ask(rt, "two")
        [record] = await store.live_processes()
        assert record.live_pid == await pid(rt) != warm


async def test_an_idle_warm_process_makes_room_for_a_waiting_turn(tmp_path: Path) -> None:
    async with agentrt.open_runtime(store=MemoryStore(), max_processes=1) as rt:
        await start(rt, tmp_path, {}, name="a")
        await start(rt, tmp_path, {}, name="b")
        await ask(rt, "one", "a")
        a_pid = await pid(rt, "a")
        assert rt.statistics().processes_in_use == 1
        with trio.fail_after(SLACK):
            assert (await ask(rt, "two", "b")).text == "1: two"
        assert not running(a_pid) and (await rt.status("a")).cli_pid is None
        assert rt.statistics().processes_in_use == 1
        # And back: b's idle process makes room for a's next turn.
        assert (await ask(rt, "three", "a")).text == "1: three"


async def test_a_warm_process_waiting_turns_hibernate_at_a_turns_end(tmp_path: Path) -> None:
    # Two agents, one slot: a's process ends as soon as its turn does, since b's turn waits.
    live = {"turns": [[["sleep", 0.5], ["answer"]]]}
    async with agentrt.open_runtime(store=MemoryStore(), max_processes=1) as rt:
        await start(rt, tmp_path, live, name="a")
        await start(rt, tmp_path, live, name="b")
        with trio.fail_after(2 * SLACK):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(ask, rt, "one", "a")
                await wait_for_status(rt, "a", lambda s: s.cli_pid is not None)
                nursery.start_soon(ask, rt, "two", "b")
        assert rt.statistics().processes_in_use == 1


async def test_keep_alive_must_be_seconds_or_none(tmp_path: Path) -> None:
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        with pytest.raises(agentrt.InvalidOptions) as info:
            await start(rt, tmp_path, {}, keep_alive=0)
        assert "keep_alive" in str(info.value) and "one CLI process per turn" in str(info.value)
        with pytest.raises(agentrt.InvalidOptions):
            await start(rt, tmp_path, {}, recycle_turns=0)
