"""One turn: bounds (watchdog, first event), failures, session ids, the Response."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
import trio
from _helpers import Recorder, echo_backend, settle
from trio.testing import MockClock

from agentrt import (
    Agent,
    Completed,
    ErrorEvent,
    Failed,
    MemoryStore,
    PermissionDenial,
    RawEvent,
    ResultEvent,
    SessionEvent,
    StopReason,
    StoreError,
    TextEvent,
    TextRetractedEvent,
    TurnFailed,
    Usage,
    UsageEvent,
    open_runtime,
)
from agentrt.store import StoredTurn
from agentrt.testing import Exit, Fail, Gate, Raise, ScriptedBackend, Sleep, reply


async def test_the_watchdog_ends_a_turn_at_its_limit_and_the_agent_goes_on(
    autojump_clock: MockClock,
) -> None:
    agent = Recorder()
    backend = echo_backend([SessionEvent(session_id="s1"), Gate()])
    async with open_runtime() as rt:
        await rt.start_agent(agent, name="a", backend=backend, watchdog=30)
        slow = await rt.tell("a", "slow")
        response = await rt.ask("a", "next")
        assert trio.current_time() == 30.0
        assert response.text == "echo next"
        assert response.duration == 0.0
        result = await rt.poll(slow)
    assert isinstance(result, Failed)
    assert isinstance(result.error, TurnFailed)
    assert result.error.reason is StopReason.TOTAL_TIMEOUT
    assert "30 s" in result.error.message
    assert result.error.session_id == "s1"
    assert agent.only("error") == [StopReason.TOTAL_TIMEOUT]
    assert backend.session_ids == [None, "s1"]


async def test_the_watchdog_counts_from_the_turn_start(autojump_clock: MockClock) -> None:
    backend = echo_backend([Sleep(20), *reply("one")], [Sleep(20), *reply("two")])
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=backend, watchdog=25)
        first = await rt.tell("a", "one")
        second = await rt.tell("a", "two")
        assert isinstance(await rt.wait(first), Completed)
        assert isinstance(await rt.wait(second), Completed)
        assert trio.current_time() == 40.0


async def test_after_result_ends_a_turn_that_goes_on_after_its_result(
    autojump_clock: MockClock,
) -> None:
    # The same bound holds for an in-process backend; a later result restarts it.
    backend = echo_backend(
        [*reply("first"), Gate()],
        [*reply("first"), Sleep(3), *reply("second"), Gate()],
    )
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=backend, after_result=5)
        first = await rt.ask("a", "x")
        assert trio.current_time() == 5.0
        second = await rt.ask("a", "y")
        assert trio.current_time() == 13.0
    assert first.text == "first"
    assert second.text == "second"
    assert (first.duration, second.duration) == (5.0, 8.0)


async def test_no_watchdog(autojump_clock: MockClock) -> None:
    # An hour: six default watchdogs, past every bound a turn has by default. Not a week:
    # the runtime wakes every second of it (its lease renewals), and on the autojumping
    # clock each wakeup still costs real time (a week took 95 s beside load).
    backend = echo_backend([Sleep(3600), *reply("an hour later")])
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=backend, watchdog=None)
        response = await rt.ask("a", "x")
    assert response.text == "an hour later"
    assert response.duration == 3600


async def test_first_event_bound(autojump_clock: MockClock) -> None:
    # The session event does not count as content; the bound fires at 5 s.
    backend = echo_backend([SessionEvent(session_id="s1"), Sleep(10), *reply("late")])
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=backend, first_event=5)
        with pytest.raises(TurnFailed) as info:
            await rt.ask("a", "x")
        assert info.value.reason is StopReason.FIRST_EVENT_TIMEOUT
        assert info.value.session_id == "s1"
        assert trio.current_time() == 5.0


async def test_content_lifts_the_first_event_bound(autojump_clock: MockClock) -> None:
    backend = echo_backend([Sleep(4), TextEvent(text="hi"), Sleep(100), *reply("done")])
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=backend, first_event=5, watchdog=200)
        response = await rt.ask("a", "x")
    assert response.text == "hidone"
    assert response.duration == 104.0


async def test_the_watchdog_still_applies_after_content(autojump_clock: MockClock) -> None:
    backend = echo_backend([Sleep(4), TextEvent(text="hi"), Gate()])
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=backend, first_event=5, watchdog=50)
        with pytest.raises(TurnFailed) as info:
            await rt.ask("a", "x")
        assert info.value.reason is StopReason.TOTAL_TIMEOUT
        assert trio.current_time() == 50.0


@pytest.mark.parametrize(
    ("script", "reason", "message"),
    [
        ([Fail(StopReason.RATE_LIMITED, "slow down")], StopReason.RATE_LIMITED, "slow down"),
        ([Exit(returncode=3)], StopReason.CLI_ERROR, "exited with status 3"),
        ([Exit(returncode=None, signal=9)], StopReason.PROCESS_CRASHED, "killed by signal 9"),
        ([TextEvent(text="half")], StopReason.MALFORMED_OUTPUT, "without a terminal event"),
        ([Raise(OSError("disk on fire"))], StopReason.TURN_CRASHED, "OSError: disk on fire"),
    ],
)
async def test_failures_reach_the_caller_and_handle_error_and_the_agent_survives(
    autojump_clock: MockClock, script: list[object], reason: StopReason, message: str
) -> None:
    agent = Recorder()
    async with open_runtime() as rt:
        await rt.start_agent(agent, name="a", backend=echo_backend(script))
        with pytest.raises(TurnFailed) as info:
            await rt.ask("a", "x")
        assert (await rt.ask("a", "y")).text == "echo y"
    assert info.value.reason is reason
    assert message in info.value.message
    assert agent.only("error") == [reason]


async def test_a_crash_mid_stream_carries_its_cause(autojump_clock: MockClock) -> None:
    error = KeyError("frame")
    backend = echo_backend([SessionEvent(session_id="s9"), TextEvent(text="a"), Raise(error)])
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=backend)
        with pytest.raises(TurnFailed) as info:
            await rt.ask("a", "x")
        await rt.ask("a", "y")
    assert info.value.reason is StopReason.TURN_CRASHED
    assert info.value.__cause__ is error
    assert info.value.session_id == "s9"
    assert backend.session_ids == [None, "s9"]


async def test_an_exception_in_handle_stream_event_fails_the_turn(
    autojump_clock: MockClock,
) -> None:
    class Picky(Recorder):
        def handle_stream_event(self, event: object) -> None:
            if isinstance(event, TextEvent):
                raise ValueError("no text please")

    agent = Picky()
    async with open_runtime() as rt:
        await rt.start_agent(agent, name="a", backend=echo_backend())
        with pytest.raises(TurnFailed) as info:
            await rt.ask("a", "x")
        assert rt.whereis("a") is not None
    assert info.value.reason is StopReason.TURN_CRASHED
    assert isinstance(info.value.__cause__, ValueError)
    assert agent.only("error") == [StopReason.TURN_CRASHED]


async def test_a_backend_with_no_script_left_fails_the_turn(autojump_clock: MockClock) -> None:
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=ScriptedBackend())
        with pytest.raises(TurnFailed) as info:
            await rt.ask("a", "x")
    assert info.value.reason is StopReason.TURN_CRASHED
    assert isinstance(info.value.__cause__, LookupError)


async def test_failure_messages_are_redacted(autojump_clock: MockClock) -> None:
    secret = "sk-ant-abcdefghijklmnopqrstuvwx"
    backend = echo_backend([Fail(message=f"bad key {secret}")], [Raise(ValueError(secret))])
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=backend)
        for _ in range(2):
            with pytest.raises(TurnFailed) as info:
                await rt.ask("a", "x")
            assert secret not in info.value.message
            assert secret not in str(info.value)
            assert "[REDACTED]" in info.value.message


async def test_session_ids_are_threaded_into_the_next_turn(autojump_clock: MockClock) -> None:
    backend = ScriptedBackend(
        reply("one", session_id="s1"),
        [SessionEvent(session_id="s2"), Fail()],  # a failed turn still moves the session on
        reply("three"),  # no session event: the id stays
        [ResultEvent(text="four", session_id="s4")],  # an id on the result alone counts
        reply("five"),
    )
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=backend)
        for prompt in ["1", "2", "3", "4", "5"]:
            with contextlib.suppress(TurnFailed):
                await rt.ask("a", prompt)
        assert (await rt.status("a")).session_id == "s4"
    assert backend.session_ids == [None, "s1", "s2", "s2", "s4"]


class Store(MemoryStore):
    """A MemoryStore that also logs the actor's writes, in order."""

    def __init__(self) -> None:
        super().__init__(clock=lambda: 0.0)
        self.log: list[tuple[object, ...]] = []

    async def checkpoint_session(
        self, name: str, *, backend: str, session_id: str | None, cwd: str | None
    ) -> None:
        await super().checkpoint_session(name, backend=backend, session_id=session_id, cwd=cwd)
        self.log.append(("checkpoint", name, backend, session_id, cwd))

    async def record_turn_with_history(
        self, turn: StoredTurn, *, session_id: str | None, keep: int
    ) -> None:
        await super().record_turn_with_history(turn, session_id=session_id, keep=keep)
        self.log.append(("turn", turn.name, turn.outcome, turn.cost_usd, session_id))


async def test_the_store_is_checkpointed_before_the_turn_goes_on(
    autojump_clock: MockClock, tmp_path: Path
) -> None:
    repo = str(tmp_path)
    gate = Gate()
    store = Store()
    backend = ScriptedBackend(
        [Fail()],  # before any session id: the row (made at start) has none yet
        [SessionEvent(session_id="s1"), gate, ResultEvent(text="x", cost_usd=0.5)],
        [SessionEvent(session_id="s1"), Fail()],
    )
    async with open_runtime(store=store) as rt:
        await rt.start_agent(Agent, name="a", backend=backend, cwd=repo)
        with pytest.raises(TurnFailed):
            await rt.ask("a", "zero")
        ref = await rt.tell("a", "one")
        await gate.wait_reached()
        assert store.log[-1] == ("checkpoint", "a", "scripted", "s1", repo)
        gate.release()
        await rt.wait(ref)
        with pytest.raises(TurnFailed):
            await rt.ask("a", "two")
        record = await store.load("a")
        assert record is not None
        assert (record.session_id, record.turns, record.cost_usd) == ("s1", 3, 0.5)
        assert record.last_stop_reason == "cli_error"
        await rt.reset_session("a")
        record = await store.load("a")
        assert record is not None
        assert record.session_id is None
    assert store.log == [
        ("checkpoint", "a", "scripted", None, repo),  # start_agent: a new session
        ("turn", "a", "cli_error", None, None),
        ("checkpoint", "a", "scripted", "s1", repo),
        ("turn", "a", "complete", 0.5, "s1"),
        ("turn", "a", "cli_error", None, "s1"),  # same id: no second checkpoint
        ("checkpoint", "a", "scripted", None, repo),
    ]


async def test_the_runtime_opens_and_closes_its_store() -> None:
    store = MemoryStore()
    async with open_runtime(store=store):
        assert list(await store.list()) == []
    with pytest.raises(StoreError):
        await store.list()


DENIAL = PermissionDenial(tool_name="Bash", tool_use_id="t1", input={"command": "rm x"})


async def test_the_response_is_built_from_the_whole_stream(autojump_clock: MockClock) -> None:
    usage = Usage(input_tokens=10, output_tokens=5)
    backend = ScriptedBackend(
        [
            SessionEvent(session_id="s1", model="m-1"),
            TextEvent(text="Hello "),
            TextEvent(text="world.", message_boundary=True),
            UsageEvent(usage=usage),
            {"type": "mystery"},
            Sleep(3),
            TextEvent(text=" Bye", message_boundary=True),
            TextEvent(text=" (trailing)"),
            ResultEvent(
                cost_usd=0.25,
                num_turns=2,
                raw={"r": 1},
                structured_output={"answer": 42},
                permission_denials=(DENIAL,),
            ),
        ]
    )
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=backend)
        response = await rt.ask("a", "x")
    assert response.text == "Hello world.\n\n Bye\n\n (trailing)"  # messages apart
    assert response.final_message == " (trailing)"
    assert response.usage == usage
    assert response.cost_usd == 0.25
    assert response.num_turns == 2
    assert response.model == "m-1"
    assert response.session_id == "s1"
    assert response.duration == 3.0
    assert response.raw == {"r": 1}
    assert response.structured_output == {"answer": 42}
    assert response.permission_denials == (DENIAL,)
    assert response.stop_reason is StopReason.COMPLETE
    raw = [e for e in response.events if isinstance(e, RawEvent)]
    assert raw == [RawEvent(timestamp=0.0, data={"type": "mystery"}, note="not an event")]
    assert [e.timestamp for e in response.events] == [0.0] * 5 + [3.0] * 3
    assert response.terminal.timestamp == 3.0


async def test_final_message_prefers_the_result_text(autojump_clock: MockClock) -> None:
    backend = ScriptedBackend(
        [TextEvent(text="a", message_boundary=True), ResultEvent(text="the answer")],
        [TextEvent(text="one", message_boundary=True), TextEvent(text="two"), ResultEvent()],
    )
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=backend)
        first = await rt.ask("a", "x")
        second = await rt.ask("a", "y")
    assert (first.text, first.final_message) == ("a", "the answer")
    assert (second.text, second.final_message) == ("one\n\ntwo", "two")


async def test_retracted_text_leaves_the_answer(autojump_clock: MockClock) -> None:
    # An attempt abandoned mid-stream is taken back from the end of the open message; a
    # retraction that does not end the open message takes nothing.
    backend = ScriptedBackend(
        [
            TextEvent(text="Done.", message_boundary=True),
            TextEvent(text="Partial "),
            TextEvent(text="ans"),
            TextRetractedEvent(text="Partial ans"),
            TextRetractedEvent(text="Done."),
            TextEvent(text="Whole answer.", message_boundary=True),
            ResultEvent(),
        ],
        [
            TextEvent(text="keep "),
            TextEvent(text="cut"),
            TextRetractedEvent(text="cut"),
            ResultEvent(),
        ],
    )
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=backend)
        first = await rt.ask("a", "x")
        second = await rt.ask("a", "y")
    assert (first.text, first.final_message) == ("Done.\n\nWhole answer.", "Whole answer.")
    assert [type(e) for e in first.events].count(TextRetractedEvent) == 2  # kept as events
    assert (second.text, second.final_message) == ("keep ", "keep ")


async def test_a_later_terminal_replaces_an_earlier_result(autojump_clock: MockClock) -> None:
    agent = Recorder()
    backend = ScriptedBackend(
        [ResultEvent(text="done"), TextEvent(text="late"), ErrorEvent(reason=StopReason.CLI_ERROR)]
    )
    async with open_runtime() as rt:
        await rt.start_agent(agent, name="a", backend=backend)
        with pytest.raises(TurnFailed) as info:
            await rt.ask("a", "x")
    assert info.value.reason is StopReason.CLI_ERROR
    assert agent.only("stream") == ["result", "text", "error"]


async def test_a_terminal_error_ends_the_turn_at_once(autojump_clock: MockClock) -> None:
    agent = Recorder()
    backend = ScriptedBackend(
        [
            ErrorEvent(reason=StopReason.AUTHENTICATION_FAILED, message="401"),
            Sleep(100),
            TextEvent(text="late"),
            ResultEvent(text="late result"),
        ]
    )
    async with open_runtime() as rt:
        await rt.start_agent(agent, name="a", backend=backend, watchdog=50)
        with pytest.raises(TurnFailed) as info:
            await rt.ask("a", "x")
        assert trio.current_time() == 0.0  # the run was cancelled, not slept out
    assert info.value.reason is StopReason.AUTHENTICATION_FAILED
    assert info.value.message == "401"
    assert agent.only("stream") == ["error"]


async def test_a_crashing_handler_wins_over_a_terminal_error(autojump_clock: MockClock) -> None:
    class Crashing(Agent):
        def handle_stream_event(self, event: object) -> None:
            if isinstance(event, ErrorEvent):
                raise RuntimeError("handler bug")

    backend = ScriptedBackend([Fail(StopReason.RATE_LIMITED)])
    async with open_runtime() as rt:
        await rt.start_agent(Crashing, name="a", backend=backend)
        with pytest.raises(TurnFailed) as info:
            await rt.ask("a", "x")
    assert info.value.reason is StopReason.TURN_CRASHED


async def test_interrupt_and_watchdog_race_first_one_wins(autojump_clock: MockClock) -> None:
    gate = Gate()
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=echo_backend([gate]), watchdog=10)
        ref = await rt.tell("a", "x")
        await gate.wait_reached()
        await trio.sleep(10 - 1e-3)
        assert await rt.interrupt("a")
        await settle()
        assert await rt.interrupt("a") is False
        result = await rt.poll(ref)
    assert isinstance(result, Failed)
    assert isinstance(result.error, TurnFailed)
    assert result.error.reason is StopReason.INTERRUPTED


async def test_a_stop_before_an_in_process_run_waits_ends_the_wait(
    autojump_clock: MockClock,
) -> None:
    # The run was stopped (its lossless log overflowed) while it had not waited yet, so it
    # had no cancel scope to cancel: its first wait is cancelled instead of running on.
    backend = ScriptedBackend(
        [SessionEvent(session_id="s1"), TextEvent(text="a"), TextEvent(text="b"), Gate()]
    )
    async with open_runtime() as rt:
        await rt.start_agent(
            Agent, name="a", backend=backend, retention="lossless", max_events=2, watchdog=None
        )
        with pytest.raises(TurnFailed) as failed:
            await rt.ask("a", "x")
    assert failed.value.reason is StopReason.EVENT_CAPTURE_OVERFLOW
    assert failed.value.session_id == "s1"
    assert trio.current_time() == 0.0


async def test_an_in_process_run_that_waits_keeps_its_bounds_and_stops(
    autojump_clock: MockClock,
) -> None:
    # A run that waits (in a cancel scope of its own, as trio.sleep's) is bounded by the
    # watchdog from the turn's start, and an interrupt ends its wait.
    backend = ScriptedBackend([*reply("early"), Sleep(100)], [Sleep(5), Gate()])
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=backend, watchdog=30, after_result=None)
        early = await rt.ask("a", "x")  # the watchdog ends the wait; the result stands
        assert (early.text, trio.current_time()) == ("early", 30.0)
        ref = await rt.tell("a", "y")
        await trio.sleep(10)
        assert await rt.interrupt("a")
        result = await rt.wait(ref)
    assert isinstance(result, Failed)
    assert isinstance(result.error, TurnFailed)
    assert result.error.reason is StopReason.INTERRUPTED
    assert trio.current_time() == 40.0
