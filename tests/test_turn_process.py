"""The turn's CLI-process path, against a stand-in for `open_cli_process` (frames,
interrupt, wait) that runs on the mock clock; the failures and bad lines are the real types.

The real driver is tested with real processes in its own tests; these check the turn's
side: frames become events, bounds and interrupts go through proc.interrupt() while
reading continues, and driver failures become stop reasons.
"""

from __future__ import annotations

import types
import weakref
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing
from trio.testing import MockClock

import agentrt._turn
from agentrt import (
    Agent,
    Completed,
    ErrorEvent,
    Event,
    Failed,
    MemoryStore,
    RawEvent,
    ResultEvent,
    SessionEvent,
    StopReason,
    TextEvent,
    TurnFailed,
    open_runtime,
)
from agentrt._retention import EventLog
from agentrt.backend import Command, ExitStatus
from agentrt.lowlevel import BadLine, ProcessFailure, ProcessLimits

HANG = object()  # frames() blocks here until the process is interrupted


class FakeProcess:
    def __init__(
        self, script: Sequence[Any], on_interrupt: Sequence[Any], *, one_read: bool = False
    ) -> None:
        self.pid = self.pgid = 4242
        self.start_time, self.marker = 1, None  # what the live process record keeps
        self.one_read = one_read
        self.stderr_tail = "stderr tail"
        self.script = script
        self.on_interrupt = on_interrupt
        self.interrupted_at: float | None = None
        self._interrupted = trio.Event()
        self.closed = False

    async def frames(self) -> AsyncIterator[Any]:
        for item in self.script:
            if item is HANG:
                await self._interrupted.wait()
                # What the CLI prints as it ends.
                async for frame in self._play(self.on_interrupt):
                    yield frame
                return
            async for frame in self._play([item]):
                yield frame

    async def batches(self, decode: Any = None) -> AsyncIterator[list[Any]]:
        if self.one_read:  # the whole script (frames only) in one read
            await trio.lowlevel.checkpoint()
            yield list(self.script)
            return
        # One frame per read: the turn must handle each before it asks for the next.
        async for frame in self.frames():
            yield [frame]

    async def _play(self, items: Sequence[Any]) -> AsyncIterator[Any]:
        for item in items:
            if isinstance(item, float):
                await trio.sleep(item)
            elif isinstance(item, ProcessFailure):
                raise item
            else:
                yield item

    def interrupt(self) -> None:
        self.interrupted_at = trio.current_time()
        self._interrupted.set()

    async def wait(self) -> ExitStatus:
        await trio.lowlevel.checkpoint()
        return ExitStatus(130 if self.interrupted_at is not None else 0)


@pytest.fixture
def driver(monkeypatch: pytest.MonkeyPatch) -> types.SimpleNamespace:
    state = types.SimpleNamespace(script=[], on_interrupt=[], processes=[], one_read=False)

    @asynccontextmanager
    async def open_cli_process(
        command: Command, limits: ProcessLimits, *, tracker: object = None
    ) -> AsyncIterator[FakeProcess]:
        proc = FakeProcess(state.script, state.on_interrupt, one_read=state.one_read)
        state.processes.append(proc)
        try:
            yield proc
        finally:
            proc.closed = True

    monkeypatch.setattr(agentrt._turn, "open_cli_process", open_cli_process)
    return state


class JsonTranslator:
    decode = None  # every line decoded generically

    def feed(self, frame: Any) -> Sequence[Event]:
        kind = frame["type"]
        if kind == "init":
            return (SessionEvent(session_id=frame["session_id"]),)
        if kind == "text":
            return (TextEvent(text=frame["text"]),)
        if kind == "result":
            return (
                ResultEvent(
                    text=frame["text"],
                    session_id=frame.get("session_id"),
                    cost_usd=frame.get("cost"),
                    num_turns=frame.get("turns"),
                ),
            )
        if kind == "error":
            return (ErrorEvent(reason=StopReason(frame["reason"]), message=frame["message"]),)
        return (RawEvent(data=frame),)

    def finish(self, exit_status: ExitStatus, stderr_tail: str) -> Event | None:
        return ErrorEvent(reason=StopReason.CLI_ERROR, message=f"exit {exit_status.returncode}")


class CliBackend:
    """A pure backend (no run method): its turns go through the process driver."""

    name = "fake-cli"

    def __init__(self) -> None:
        self.session_ids: list[str | None] = []

    def parse_options(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        return dict(raw)

    def command(self, options: Any, prompt: str, *, session_id: str | None) -> Command:
        self.session_ids.append(session_id)
        return Command(argv=("fake-cli", "-p"), stdin=prompt.encode())

    def translator(self, options: Any, *, baseline: Any = None) -> JsonTranslator:
        return JsonTranslator()

    def version_command(self, options: Any) -> Command:
        return Command(argv=("fake-cli", "--version"))


INIT = {"type": "init", "session_id": "s1"}


async def test_frames_become_a_response(
    driver: types.SimpleNamespace, autojump_clock: MockClock
) -> None:
    driver.script = [
        INIT,
        BadLine(text="not json", size=40, error="invalid JSON"),
        {"type": "text", "text": "hi"},
        {"type": "result", "text": "hi", "session_id": "s1"},
    ]
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=CliBackend())
        response = await rt.ask("a", "x")
    assert response.text == "hi"
    assert response.session_id == "s1"
    raw = [event for event in response.events if isinstance(event, RawEvent)]
    assert len(raw) == 1
    assert raw[0].note == "unreadable line (40 bytes): invalid JSON"
    assert raw[0].data == "not json"
    assert driver.processes[0].closed


async def test_interrupt_goes_to_the_process_and_reading_continues(
    driver: types.SimpleNamespace, autojump_clock: MockClock
) -> None:
    backend = CliBackend()
    driver.script = [{"type": "text", "text": "working"}, HANG]
    # Interrupted, the CLI still prints its session and a result; the turn is interrupted.
    driver.on_interrupt = [INIT, {"type": "result", "text": "partial", "session_id": "s1"}]
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=backend)
        ref = rt.tell("a", "long")
        await trio.sleep(3)
        assert rt.interrupt("a")
        result = await rt.wait(ref)
        proc = driver.processes[0]
        assert proc.interrupted_at == 3.0
        driver.script = [{"type": "result", "text": "next"}]
        await rt.ask("a", "again")
    assert isinstance(result, Failed)
    assert isinstance(result.error, TurnFailed)
    assert result.error.reason is StopReason.INTERRUPTED
    assert result.error.exit_status == ExitStatus(130)
    assert result.error.stderr_tail == "stderr tail"
    assert backend.session_ids == [None, "s1"]  # the id printed after the interrupt counts


async def test_the_watchdog_interrupts_the_process(
    driver: types.SimpleNamespace, autojump_clock: MockClock
) -> None:
    driver.script = [INIT, HANG]
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=CliBackend(), watchdog=20)
        with pytest.raises(TurnFailed) as info:
            await rt.ask("a", "x")
    assert info.value.reason is StopReason.TOTAL_TIMEOUT
    assert driver.processes[0].interrupted_at == 20.0


async def test_the_first_event_bound_interrupts_the_process(
    driver: types.SimpleNamespace, autojump_clock: MockClock
) -> None:
    driver.script = [INIT, HANG]
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=CliBackend(), first_event=4)
        with pytest.raises(TurnFailed) as info:
            await rt.ask("a", "x")
    assert info.value.reason is StopReason.FIRST_EVENT_TIMEOUT
    assert driver.processes[0].interrupted_at == 4.0


async def test_driver_failures_are_stop_reasons(
    driver: types.SimpleNamespace, autojump_clock: MockClock
) -> None:
    driver.script = [INIT, 2.0, ProcessFailure(StopReason.IDLE_TIMEOUT, "no output for 2 s")]
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=CliBackend())
        with pytest.raises(TurnFailed) as info:
            await rt.ask("a", "x")
    assert info.value.reason is StopReason.IDLE_TIMEOUT
    assert info.value.message == "no output for 2 s"
    assert info.value.session_id == "s1"
    assert isinstance(info.value.__cause__, ProcessFailure)


async def test_an_exit_without_a_result_is_classified_by_the_translator(
    driver: types.SimpleNamespace, autojump_clock: MockClock
) -> None:
    driver.script = [INIT, {"type": "text", "text": "cut off"}]
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=CliBackend())
        with pytest.raises(TurnFailed) as info:
            await rt.ask("a", "x")
    assert info.value.reason is StopReason.CLI_ERROR
    assert info.value.message == "exit 0"


async def test_stopping_the_agent_leaves_the_driver_to_clean_up(
    driver: types.SimpleNamespace, autojump_clock: MockClock
) -> None:
    driver.script = [INIT, HANG]
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=CliBackend())
        rt.tell("a", "x")
        await trio.sleep(1)
        await rt.stop_agent("a")
    proc = driver.processes[0]
    assert proc.closed
    assert proc.interrupted_at is None  # plain cancellation: __aexit__ does the killing


async def test_the_last_of_several_results_decides_and_reading_goes_on_until_exit(
    driver: types.SimpleNamespace, autojump_clock: MockClock
) -> None:
    # A background task: a result, the CLI waits for the task, then a second init and result.
    driver.script = [
        INIT,
        {"type": "text", "text": "Started it."},
        {"type": "result", "text": "Started it.", "session_id": "s1", "cost": 0.5, "turns": 2},
        20.0,  # within after_result (30 s)
        INIT,
        {"type": "text", "text": "The task "},
        {"type": "text", "text": "printed done."},
        {
            "type": "result",
            "text": "It printed done.",
            "session_id": "s1",
            "cost": 0.25,
            "turns": 1,
        },
    ]
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=CliBackend())
        response = await rt.ask("a", "x")
    assert response.duration == 20.0
    assert response.text == "The task printed done."
    assert response.final_message == "It printed done."
    assert (response.cost_usd, response.num_turns) == (0.25, 1)
    assert isinstance(response.terminal, ResultEvent)
    assert response.terminal.text == "It printed done."
    results = [e for e in response.events if isinstance(e, ResultEvent)]
    assert [r.text for r in results] == ["Started it.", "It printed done."]
    assert response.events[-1] is response.terminal
    assert driver.processes[0].interrupted_at is None


async def test_an_empty_last_result_falls_back_to_the_text_after_the_previous_terminal(
    driver: types.SimpleNamespace, autojump_clock: MockClock
) -> None:
    driver.script = [
        {"type": "text", "text": "first"},
        {"type": "result", "text": "first"},
        {"type": "text", "text": "second"},
        {"type": "result", "text": ""},
    ]
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=CliBackend())
        response = await rt.ask("a", "x")
    assert (response.text, response.final_message) == ("second", "second")


async def test_a_terminal_error_interrupts_the_cli_at_once_and_keeps_its_reason(
    driver: types.SimpleNamespace, autojump_clock: MockClock
) -> None:
    backend = CliBackend()
    driver.script = [
        INIT,
        5.0,
        {"type": "error", "reason": "authentication_failed", "message": "401"},
        HANG,  # the CLI would retry for minutes
    ]
    # Interrupted, it prints its own result, another session id, then the driver gives up on
    # an idle bound: none of it changes the outcome, and the session id is still taken.
    driver.on_interrupt = [
        {"type": "init", "session_id": "s2"},
        {"type": "result", "text": "aborted", "session_id": "s2"},
        {"type": "error", "reason": "cli_error", "message": "later"},
        1.0,
        ProcessFailure(StopReason.IDLE_TIMEOUT, "no output for 1 s"),
    ]
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=backend, watchdog=5.5)
        with pytest.raises(TurnFailed) as info:
            await rt.ask("a", "x")
        assert trio.current_time() == 6.0
        driver.script = [{"type": "result", "text": "next"}]
        await rt.ask("a", "again")
    assert info.value.reason is StopReason.AUTHENTICATION_FAILED
    assert info.value.message == "401"
    assert info.value.session_id == "s2"
    assert driver.processes[0].interrupted_at == 5.0
    assert backend.session_ids == [None, "s2"]


async def test_an_interrupt_stays_interrupted_whatever_error_the_cli_prints_then(
    driver: types.SimpleNamespace, autojump_clock: MockClock
) -> None:
    driver.script = [INIT, HANG]
    # Claude Code on SIGINT: a result with subtype error_during_execution.
    driver.on_interrupt = [{"type": "error", "reason": "cli_error", "message": "ede"}]
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=CliBackend())
        ref = rt.tell("a", "x")
        await trio.sleep(2)
        assert rt.interrupt("a")
        result = await rt.wait(ref)
    assert isinstance(result, Failed)
    assert isinstance(result.error, TurnFailed)
    assert result.error.reason is StopReason.INTERRUPTED


STARTED = {"type": "result", "text": "started", "session_id": "s1"}


@pytest.mark.parametrize(
    ("options", "ends_at"),
    [
        pytest.param({}, 32.0, id="after_result_default"),
        pytest.param({"after_result": 5}, 7.0, id="after_result"),
        pytest.param({"watchdog": 12}, 12.0, id="watchdog"),
        pytest.param({"after_result": None, "watchdog": 60}, 60.0, id="watchdog_only"),
    ],
)
async def test_a_cli_lingering_after_its_result_is_ended_and_the_result_kept(
    driver: types.SimpleNamespace,
    autojump_clock: MockClock,
    options: dict[str, Any],
    ends_at: float,
) -> None:
    driver.script = [INIT, 2.0, STARTED, HANG]
    # Interrupted, Claude Code prints an error result: the earlier result stays the outcome.
    driver.on_interrupt = [{"type": "error", "reason": "cli_error", "message": "ede"}]
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=CliBackend(), **options)
        response = await rt.ask("a", "x")
    assert response.text == "started"
    assert response.stop_reason is StopReason.COMPLETE
    assert response.duration == ends_at
    assert driver.processes[0].interrupted_at == ends_at


async def test_a_later_result_restarts_the_after_result_bound(
    driver: types.SimpleNamespace, autojump_clock: MockClock
) -> None:
    later = {"type": "result", "text": "the task is done", "session_id": "s1"}
    driver.script = [INIT, STARTED, 20.0, later, HANG]
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=CliBackend())
        response = await rt.ask("a", "x")
    assert response.text == "the task is done"
    assert driver.processes[0].interrupted_at == 50.0


@pytest.mark.parametrize("how", ["interrupt", "idle"])
async def test_an_interrupt_or_a_driver_bound_after_a_result_keeps_it(
    driver: types.SimpleNamespace, autojump_clock: MockClock, how: str
) -> None:
    driver.script = [INIT, STARTED, HANG]
    if how == "idle":
        driver.script = [INIT, STARTED, 3.0, ProcessFailure(StopReason.IDLE_TIMEOUT, "idle")]
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=CliBackend())
        ref = rt.tell("a", "x")
        if how == "interrupt":
            await trio.sleep(3)
            assert rt.interrupt("a")
        outcome = await rt.wait(ref)
    assert isinstance(outcome, Completed)
    assert outcome.response.text == "started"
    assert outcome.response.duration == 3.0


async def test_a_handler_crash_after_a_result_still_fails_the_turn(
    driver: types.SimpleNamespace, autojump_clock: MockClock
) -> None:
    driver.script = [INIT, STARTED, {"type": "text", "text": "boom"}, HANG]
    async with open_runtime() as rt:
        await rt.start_agent(Recorder([], fail_on="boom"), name="a", backend=CliBackend())
        with pytest.raises(TurnFailed) as info:
            await rt.ask("a", "x")
    assert info.value.reason is StopReason.TURN_CRASHED


class CheckpointLog(MemoryStore):
    def __init__(self, log: list[str]) -> None:
        super().__init__()
        self.log = log

    async def checkpoint_session(
        self, name: str, *, backend: str, session_id: str | None, cwd: str | None
    ) -> None:
        await super().checkpoint_session(name, backend=backend, session_id=session_id, cwd=cwd)
        self.log.append(f"checkpoint {session_id}")


class Recorder(Agent):
    def __init__(self, log: list[str], fail_on: str | None = None) -> None:
        self.log = log
        self.fail_on = fail_on

    def handle_stream_event(self, event: Event) -> None:
        if isinstance(event, SessionEvent):
            self.log.append(f"session {event.session_id}")
        elif isinstance(event, TextEvent):
            self.log.append(f"text {event.text}")
            if event.text == self.fail_on:
                raise RuntimeError("handler failed")


ONE_READ = [
    INIT,
    {"type": "text", "text": "a"},
    {"type": "init", "session_id": "s2"},
    {"type": "text", "text": "b"},
    {"type": "init", "session_id": "s3"},
    {"type": "result", "text": "ab", "session_id": "s3"},
]


async def test_events_of_one_read_are_delivered_in_order_each_session_checkpointed_first(
    driver: types.SimpleNamespace, autojump_clock: MockClock
) -> None:
    driver.script, driver.one_read = ONE_READ, True
    log: list[str] = []
    async with open_runtime(store=CheckpointLog(log)) as rt:
        await rt.start_agent(Recorder(log), name="a", backend=CliBackend())
        log.clear()
        async with rt.stream(rt.tell("a", "x")) as stream:
            streamed = [event async for event in stream]
    assert log == [
        "checkpoint None",  # the spawned turn writes the new name's row
        "checkpoint s1",
        "session s1",
        "text a",
        "checkpoint s2",
        "session s2",
        "text b",
        "checkpoint s3",
        "session s3",
    ]
    kinds = [(type(event).__name__, getattr(event, "session_id", None)) for event in streamed]
    assert kinds == [
        ("SessionEvent", "s1"),
        ("TextEvent", None),
        ("SessionEvent", "s2"),
        ("TextEvent", None),
        ("SessionEvent", "s3"),
        ("ResultEvent", "s3"),
    ]


async def test_a_handler_failing_mid_read_delivers_nothing_further_but_session_ids_count(
    driver: types.SimpleNamespace, autojump_clock: MockClock
) -> None:
    driver.script, driver.one_read = ONE_READ, True
    log: list[str] = []
    async with open_runtime(store=CheckpointLog(log)) as rt:
        await rt.start_agent(Recorder(log, fail_on="a"), name="a", backend=CliBackend())
        log.clear()
        result = await rt.wait(rt.tell("a", "x"))
    assert isinstance(result, Failed)
    assert isinstance(result.error, TurnFailed)
    assert result.error.reason is StopReason.TURN_CRASHED
    # Stopped at "a": the later session ids of the same read are still checkpointed.
    assert log == [
        "checkpoint None",
        "checkpoint s1",
        "session s1",
        "text a",
        "checkpoint s2",
        "checkpoint s3",
    ]
    assert result.error.session_id == "s3"


async def test_a_slow_subscriber_gets_every_event_of_a_long_read_in_order(
    driver: types.SimpleNamespace, autojump_clock: MockClock
) -> None:
    texts = [str(i) for i in range(200)]  # far more than a subscriber's buffer
    driver.script = [INIT, *({"type": "text", "text": t} for t in texts)]
    driver.script.append({"type": "result", "text": "done", "session_id": "s1"})
    driver.one_read = True
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=CliBackend())
        ref = rt.tell("a", "x")
        seen: list[str] = []
        async with rt.stream(ref) as stream:
            async for event in stream:
                await trio.sleep(1)  # the turn waits for this reader (backpressure)
                if isinstance(event, TextEvent):
                    seen.append(event.text)
        result = await rt.wait(ref)
    assert seen == texts
    assert not isinstance(result, Failed)


class Interrupter(Agent):
    """Interrupts its own turn from handle_stream_event, at the text "a"."""

    def __init__(self, runtime: Any, seen: list[str]) -> None:
        self.runtime = runtime
        self.seen = seen

    def handle_stream_event(self, event: Event) -> None:
        self.seen.append(type(event).__name__)
        if isinstance(event, TextEvent) and event.text == "a":
            assert self.runtime.interrupt("a")


@pytest.mark.parametrize("one_read", [True, False])
async def test_an_interrupt_from_a_handler_takes_effect_from_the_next_read(
    driver: types.SimpleNamespace, autojump_clock: object, one_read: bool
) -> None:
    # A read's events are recorded before they are delivered: a result in the read the
    # handler interrupted stands (printed before the interrupt, and delivered too); one in
    # a later read is only billed.
    driver.script = [
        INIT,
        {"type": "text", "text": "a"},
        {"type": "text", "text": "b"},
        {"type": "result", "text": "ab", "session_id": "s1", "cost": 0.5},
    ]
    driver.one_read = one_read
    seen: list[str] = []
    async with open_runtime() as rt:
        await rt.start_agent(Interrupter(rt, seen), name="a", backend=CliBackend())
        result = await rt.wait(rt.tell("a", "x"))
    assert driver.processes[0].interrupted_at is not None
    if one_read:
        assert isinstance(result, Completed) and result.response.text == "ab"
        assert seen == ["SessionEvent", "TextEvent", "TextEvent", "ResultEvent"]
    else:
        assert isinstance(result, Failed) and isinstance(result.error, TurnFailed)
        assert result.error.reason is StopReason.INTERRUPTED
        assert result.error.cost_usd == 0.5
        assert seen == ["SessionEvent", "TextEvent"]


class _Read(list[Any]):
    """A read's frames, as a batch a weak reference can follow."""


async def test_a_handled_read_is_released_before_the_turn_waits_for_the_next(
    monkeypatch: pytest.MonkeyPatch, autojump_clock: MockClock
) -> None:
    # With a hundred turns waiting on their pipes at once, a read each kept alive while
    # waiting is a hundred reads' worth of lines (see the concurrency pass in bench/README.md).
    reads: list[weakref.ref[_Read]] = []
    more = trio.Event()

    class Process(FakeProcess):
        async def batches(self, decode: Any = None) -> AsyncIterator[list[Any]]:
            first = _Read([INIT, {"type": "text", "text": "a"}])
            reads.append(weakref.ref(first))
            yield first
            del first
            await more.wait()
            yield _Read([{"type": "result", "text": "a", "session_id": "s1"}])

    @asynccontextmanager
    async def open_cli_process(
        command: Command, limits: ProcessLimits, *, tracker: object = None
    ) -> AsyncIterator[FakeProcess]:
        yield Process([], [])

    monkeypatch.setattr(agentrt._turn, "open_cli_process", open_cli_process)
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=CliBackend())
        ref = rt.tell("a", "x")
        await trio.testing.wait_all_tasks_blocked()
        assert len(reads) == 1
        assert reads[0]() is None  # handled, and nothing holds it while the turn waits
        more.set()
        result = await rt.wait(ref)
    assert isinstance(result, Completed)
    assert result.response.text == "a"


async def test_text_across_reads_keeps_every_character_and_its_segment(
    monkeypatch: pytest.MonkeyPatch, autojump_clock: MockClock
) -> None:
    # A segment's text is folded into UTF-8 after each read; non-ASCII text, a result in
    # the middle of a read and even lone surrogates (no JSON decoder makes one, a translator
    # could; retention off, as JSON cannot encode them) all come through.
    def text(value: str) -> dict[str, str]:
        return {"type": "text", "text": value}

    reads = [
        [INIT, text("a\ud800"), text("é")],
        [text("日本\r\n"), {"type": "result", "text": "", "session_id": "s1"}, text("next")],
        [text(" \udfff😀"), {"type": "result", "text": "", "session_id": "s1"}],
    ]

    class Process(FakeProcess):
        async def batches(self, decode: Any = None) -> AsyncIterator[list[Any]]:
            for read in reads:
                await trio.lowlevel.checkpoint()
                yield read

    @asynccontextmanager
    async def open_cli_process(
        command: Command, limits: ProcessLimits, *, tracker: object = None
    ) -> AsyncIterator[FakeProcess]:
        yield Process([], [])

    monkeypatch.setattr(agentrt._turn, "open_cli_process", open_cli_process)
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=CliBackend(), max_events=0)
        response = await rt.ask("a", "x")
    assert response.text == "next \udfff😀"
    assert response.event_coverage.observed == 8


async def test_a_finished_turn_lets_go_of_its_event_log_before_the_store_writes(
    driver: types.SimpleNamespace, monkeypatch: pytest.MonkeyPatch, autojump_clock: MockClock
) -> None:
    # The Response has its own copy of the events; turns that end together and wait on the
    # store must not each hold their log's buffer as well.
    logs: list[weakref.ref[EventLog]] = []
    alive_at_record: list[bool] = []

    class Log(EventLog):
        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            logs.append(weakref.ref(self))

    class Store(MemoryStore):
        async def record_turn(self, name: str, **fields: Any) -> None:
            alive_at_record.append(logs[-1]() is not None)
            await super().record_turn(name, **fields)

    monkeypatch.setattr(agentrt._turn, "EventLog", Log)
    driver.script = [INIT, {"type": "text", "text": "hi"}, {"type": "result", "text": "hi"}]
    async with open_runtime(store=Store()) as rt:
        await rt.start_agent(Agent, name="a", backend=CliBackend())
        response = await rt.ask("a", "x")
    assert alive_at_record == [False]
    assert len(response.events) == 3 and response.event_coverage.retained == 3


class _Watcher(Agent):
    def __init__(self) -> None:
        self.seen: list[Event] = []

    def handle_stream_event(self, event: Event) -> None:
        self.seen.append(event)


@pytest.mark.parametrize("one_read", [True, False])
async def test_events_nobody_watches_count_and_fold_as_watched_ones(
    driver: types.SimpleNamespace, autojump_clock: MockClock, one_read: bool
) -> None:
    # Past what compact retention keeps, a text event nobody watches is only folded into
    # the text and counted; the Response must not tell the difference.
    texts = [f"t{i} " for i in range(40)]
    driver.script = [INIT, *({"type": "text", "text": t} for t in texts), {"type": "x"}]
    driver.script.append({"type": "result", "text": "", "session_id": "s1"})
    driver.one_read = one_read
    responses = []
    async with open_runtime() as rt:
        watcher = _Watcher()
        await rt.start_agent(lambda: watcher, name="w", backend=CliBackend(), max_events=5)
        await rt.start_agent(Agent, name="s", backend=CliBackend(), max_events=5)
        await rt.start_agent(Agent, name="u", backend=CliBackend(), max_events=5)
        responses.append(await rt.ask("w", "x"))
        ref = rt.tell("s", "x")
        async with rt.stream(ref) as stream:
            streamed = [event async for event in stream]
        result = await rt.wait(ref)
        assert isinstance(result, Completed)
        responses.append(result.response)
        responses.append(await rt.ask("u", "x"))
    watched, subscribed, unwatched = responses
    assert unwatched.text == "".join(texts)
    assert unwatched.event_coverage.observed == 1 + 40 + 1 + 1  # session, texts, raw, result
    for other in (watched, subscribed):
        assert (other.text, other.final_message) == (unwatched.text, unwatched.final_message)
        assert other.event_coverage == unwatched.event_coverage
        assert [type(e) for e in other.events] == [type(e) for e in unwatched.events]
    assert [e.text for e in watcher.seen if isinstance(e, TextEvent)] == texts
    assert [e.text for e in streamed if isinstance(e, TextEvent)] == texts
