"""`agentrt._turn`'s own unit test: a `Turn` reads a fake `Channel` (frames, interrupt,
finish) on the mock clock, for a fake host; the failures and bad lines are the real types.

The process lifecycle and the driver are tested with real processes in their own tests
(test_warm, test_process_*); these check the turn's side: frames become events, bounds and
interrupts go to the channel while reading continues, channel failures become stop reasons,
and the host sees checkpoints and deliveries in order.
"""

from __future__ import annotations

import weakref
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from types import TracebackType
from typing import Any

import pytest
import trio
import trio.testing
from trio.testing import MockClock

import agentrt._turn
from agentrt import (
    ErrorEvent,
    Event,
    RawEvent,
    Response,
    ResultEvent,
    SessionEvent,
    StopReason,
    TextEvent,
    TurnFailed,
)
from agentrt._options import AgentOptions
from agentrt._retention import EventLog
from agentrt._turn import Turn
from agentrt.backend import Ask, Command, ExitStatus
from agentrt.lowlevel import BadLine, ProcessFailure

HANG = object()  # the frames block here until the channel is interrupted


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


class FakeChannel:
    """A CLI process's frames as a script: a float sleeps, a `ProcessFailure` is raised, a
    list is one read (else each frame is a read of its own); after HANG, what the CLI prints
    once interrupted."""

    alarm = None  # the turn watches its bounds itself
    drain_bound = 3.0

    def __init__(self, script: Sequence[Any], on_interrupt: Sequence[Any]) -> None:
        self.command = Command(argv=("fake-cli", "-p"))
        self.translator: JsonTranslator | None = JsonTranslator()
        self.script = script
        self.on_interrupt = on_interrupt
        self.interrupted_at: float | None = None
        self._interrupted = trio.Event()
        self.opened = self.closed = False

    async def __aenter__(self) -> FakeChannel:
        self.opened = True
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.closed = True

    async def batches(self, decode: Any) -> AsyncIterator[Iterable[Any]]:
        for item in self.script:
            if item is HANG:
                await self._interrupted.wait()
                async for read in self._play(self.on_interrupt):
                    yield read
                return
            async for read in self._play([item]):
                yield read

    async def _play(self, items: Sequence[Any]) -> AsyncIterator[Iterable[Any]]:
        for item in items:
            if isinstance(item, float):
                await trio.sleep(item)
            elif isinstance(item, ProcessFailure):
                raise item
            elif isinstance(item, list):
                await trio.lowlevel.checkpoint()
                yield item
            else:
                # One frame per read: the turn must handle each before it asks for the next.
                yield [item]

    def asking(self) -> trio.CancelScope:
        raise AssertionError("nothing was asked")

    async def answer(self, data: bytes) -> None:
        raise AssertionError("nothing was asked")

    def interrupt(self, gently: bool) -> None:
        if self.interrupted_at is None:
            self.interrupted_at = trio.current_time()
        self._interrupted.set()

    async def finish(self, clean: bool, session_id: str | None) -> tuple[ExitStatus | None, str]:
        await trio.lowlevel.checkpoint()
        return ExitStatus(130 if self.interrupted_at is not None else 0), "stderr tail"


class FakeSource:
    """Opens one channel per turn, as the lifecycle of one process per turn does."""

    turn_slots = None

    def __init__(self, *channels: FakeChannel) -> None:
        self.channels = list(channels)
        self.session_ids: list[str | None] = []

    def channel(
        self, prompt: str, session_id: str | None, baseline: Any, watch: Turn, *, retry: bool
    ) -> FakeChannel:
        self.session_ids.append(session_id)
        return self.channels.pop(0)


class FakeHost:
    """The actor's side: logs checkpoints and what handle_stream_event would see; raises
    at the text ``fail_on``; ``on_event`` runs for each event delivered."""

    def __init__(
        self,
        log: list[str] | None = None,
        *,
        watched: bool = True,
        fail_on: str | None = None,
        on_event: Callable[[Event], Any] | None = None,
        slow: float = 0.0,
    ) -> None:
        self.log = [] if log is None else log
        self.is_watched = watched
        self.fail_on = fail_on
        self.on_event = on_event
        self.slow = slow
        self.delivered: list[Event] = []

    async def started(self) -> None:
        raise AssertionError("a CLI turn starts at its spawn, in the lifecycle")

    async def checkpoint(self, session_id: str) -> None:
        self.log.append(f"checkpoint {session_id}")

    def watched(self) -> bool:
        return self.is_watched

    async def deliver(self, events: Sequence[Event]) -> None:
        for event in events:
            self.delivered.append(event)
            if isinstance(event, SessionEvent):
                self.log.append(f"session {event.session_id}")
            elif isinstance(event, TextEvent):
                self.log.append(f"text {event.text}")
                if event.text == self.fail_on:
                    raise RuntimeError("handler failed")
            if self.on_event is not None:
                self.on_event(event)
            if self.slow:
                await trio.sleep(self.slow)  # the turn waits for this reader (backpressure)

    async def answer(self, ask: Ask) -> tuple[bytes, Sequence[Event]]:
        raise AssertionError("nothing was asked")


def new_turn(source: FakeSource, host: FakeHost | None = None, **options: Any) -> Turn:
    return Turn("x", AgentOptions(**options), None, None, source, host or FakeHost(watched=False))


async def run(
    script: Sequence[Any],
    on_interrupt: Sequence[Any] = (),
    host: FakeHost | None = None,
    **options: Any,
) -> tuple[Response | TurnFailed, FakeChannel, Turn]:
    channel = FakeChannel(script, on_interrupt)
    turn = new_turn(FakeSource(channel), host, **options)
    return await turn.run(), channel, turn


async def run_stopped_at(
    when: float, script: Sequence[Any], on_interrupt: Sequence[Any] = ()
) -> tuple[Response | TurnFailed, FakeChannel, Turn]:
    return await run_stopped_at_channel(FakeChannel(script, on_interrupt), when)


async def run_stopped_at_channel(
    channel: FakeChannel, when: float
) -> tuple[Response | TurnFailed, FakeChannel, Turn]:
    # The turn, and an interrupt at ``when``.
    turn = new_turn(FakeSource(channel))
    async with trio.open_nursery() as nursery:

        async def interrupt() -> None:
            await trio.sleep(when)
            turn.stop(StopReason.INTERRUPTED, "interrupted")

        nursery.start_soon(interrupt)
        outcome = await turn.run()
    return outcome, channel, turn


INIT = {"type": "init", "session_id": "s1"}
STARTED = {"type": "result", "text": "started", "session_id": "s1"}


async def test_frames_become_a_response(autojump_clock: MockClock) -> None:
    script = [
        INIT,
        BadLine(text="not json", size=40, error="invalid JSON"),
        {"type": "text", "text": "hi"},
        {"type": "result", "text": "hi", "session_id": "s1"},
    ]
    response, channel, _ = await run(script)
    assert isinstance(response, Response)
    assert response.text == "hi"
    assert response.session_id == "s1"
    raw = [event for event in response.events if isinstance(event, RawEvent)]
    assert len(raw) == 1
    assert raw[0].note == "unreadable line (40 bytes): invalid JSON"
    assert raw[0].data == "not json"
    assert channel.closed


async def test_interrupt_goes_to_the_channel_and_reading_continues(
    autojump_clock: MockClock,
) -> None:
    # Interrupted, the CLI still prints its session and a result; the turn is interrupted.
    on_interrupt = [INIT, {"type": "result", "text": "partial", "session_id": "s1"}]
    result, channel, turn = await run_stopped_at(
        3, [{"type": "text", "text": "w"}, HANG], on_interrupt
    )
    assert channel.interrupted_at == 3.0
    assert isinstance(result, TurnFailed)
    assert result.reason is StopReason.INTERRUPTED
    assert result.exit_status == ExitStatus(130)
    assert result.stderr_tail == "stderr tail"
    assert turn.session_id == result.session_id == "s1"  # printed after the interrupt, it counts


async def test_the_watchdog_interrupts_the_channel(autojump_clock: MockClock) -> None:
    result, channel, _ = await run([INIT, HANG], watchdog=20)
    assert isinstance(result, TurnFailed)
    assert result.reason is StopReason.TOTAL_TIMEOUT
    assert channel.interrupted_at == 20.0


async def test_the_first_event_bound_interrupts_the_channel(autojump_clock: MockClock) -> None:
    result, channel, _ = await run([INIT, HANG], first_event=4)
    assert isinstance(result, TurnFailed)
    assert result.reason is StopReason.FIRST_EVENT_TIMEOUT
    assert channel.interrupted_at == 4.0


async def test_channel_failures_are_stop_reasons(autojump_clock: MockClock) -> None:
    script = [INIT, 2.0, ProcessFailure(StopReason.IDLE_TIMEOUT, "no output for 2 s")]
    result, _, _ = await run(script)
    assert isinstance(result, TurnFailed)
    assert result.reason is StopReason.IDLE_TIMEOUT
    assert result.message == "no output for 2 s"
    assert result.session_id == "s1"
    assert isinstance(result.__cause__, ProcessFailure)


async def test_an_exit_without_a_result_is_classified_by_the_translator(
    autojump_clock: MockClock,
) -> None:
    result, _, _ = await run([INIT, {"type": "text", "text": "cut off"}])
    assert isinstance(result, TurnFailed)
    assert result.reason is StopReason.CLI_ERROR
    assert result.message == "exit 0"


async def test_a_cancelled_turn_leaves_the_channel_to_clean_up(autojump_clock: MockClock) -> None:
    channel = FakeChannel([INIT, HANG], [])
    turn = new_turn(FakeSource(channel))
    with trio.move_on_after(1):
        await turn.run()
    assert channel.closed
    assert channel.interrupted_at is None  # plain cancellation: the channel's exit kills


async def test_the_last_of_several_results_decides_and_reading_goes_on_until_exit(
    autojump_clock: MockClock,
) -> None:
    # A background task: a result, the CLI waits for the task, then a second init and result.
    script = [
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
    response, channel, _ = await run(script)
    assert isinstance(response, Response)
    assert response.duration == 20.0
    assert response.text == "The task printed done."
    assert response.final_message == "It printed done."
    assert (response.cost_usd, response.num_turns) == (0.25, 1)
    assert isinstance(response.terminal, ResultEvent)
    assert response.terminal.text == "It printed done."
    results = [e for e in response.events if isinstance(e, ResultEvent)]
    assert [r.text for r in results] == ["Started it.", "It printed done."]
    assert response.events[-1] is response.terminal
    assert channel.interrupted_at is None


async def test_an_empty_last_result_falls_back_to_the_text_after_the_previous_terminal(
    autojump_clock: MockClock,
) -> None:
    script = [
        {"type": "text", "text": "first"},
        {"type": "result", "text": "first"},
        {"type": "text", "text": "second"},
        {"type": "result", "text": ""},
    ]
    response, _, _ = await run(script)
    assert isinstance(response, Response)
    assert (response.text, response.final_message) == ("second", "second")


async def test_a_terminal_error_interrupts_the_cli_at_once_and_keeps_its_reason(
    autojump_clock: MockClock,
) -> None:
    script = [
        INIT,
        5.0,
        {"type": "error", "reason": "authentication_failed", "message": "401"},
        HANG,  # the CLI would retry for minutes
    ]
    # Interrupted, it prints its own result, another session id, then the driver gives up on
    # an idle bound: none of it changes the outcome, and the session id is still taken.
    on_interrupt = [
        {"type": "init", "session_id": "s2"},
        {"type": "result", "text": "aborted", "session_id": "s2"},
        {"type": "error", "reason": "cli_error", "message": "later"},
        1.0,
        ProcessFailure(StopReason.IDLE_TIMEOUT, "no output for 1 s"),
    ]
    result, channel, turn = await run(script, on_interrupt, watchdog=5.5)
    assert trio.current_time() == 6.0
    assert isinstance(result, TurnFailed)
    assert result.reason is StopReason.AUTHENTICATION_FAILED
    assert result.message == "401"
    assert turn.session_id == result.session_id == "s2"
    assert channel.interrupted_at == 5.0


async def test_an_interrupt_stays_interrupted_whatever_error_the_cli_prints_then(
    autojump_clock: MockClock,
) -> None:
    # Claude Code on SIGINT: a result with subtype error_during_execution.
    on_interrupt = [{"type": "error", "reason": "cli_error", "message": "ede"}]
    result, _, _ = await run_stopped_at(2, [INIT, HANG], on_interrupt)
    assert isinstance(result, TurnFailed)
    assert result.reason is StopReason.INTERRUPTED


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
    autojump_clock: MockClock, options: dict[str, Any], ends_at: float
) -> None:
    # Interrupted, Claude Code prints an error result: the earlier result stays the outcome.
    on_interrupt = [{"type": "error", "reason": "cli_error", "message": "ede"}]
    response, channel, _ = await run([INIT, 2.0, STARTED, HANG], on_interrupt, **options)
    assert isinstance(response, Response)
    assert response.text == "started"
    assert response.stop_reason is StopReason.COMPLETE
    assert response.duration == ends_at
    assert channel.interrupted_at == ends_at


async def test_a_later_result_restarts_the_after_result_bound(autojump_clock: MockClock) -> None:
    later = {"type": "result", "text": "the task is done", "session_id": "s1"}
    response, channel, _ = await run([INIT, STARTED, 20.0, later, HANG])
    assert isinstance(response, Response)
    assert response.text == "the task is done"
    assert channel.interrupted_at == 50.0


@pytest.mark.parametrize("how", ["interrupt", "idle"])
async def test_an_interrupt_or_a_driver_bound_after_a_result_keeps_it(
    autojump_clock: MockClock, how: str
) -> None:
    if how == "interrupt":
        outcome, _, _ = await run_stopped_at(3, [INIT, STARTED, HANG])
    else:
        idle = ProcessFailure(StopReason.IDLE_TIMEOUT, "idle")
        outcome, _, _ = await run([INIT, STARTED, 3.0, idle])
    assert isinstance(outcome, Response)
    assert outcome.text == "started"
    assert outcome.duration == 3.0


async def test_a_handler_crash_after_a_result_still_fails_the_turn(
    autojump_clock: MockClock,
) -> None:
    script = [INIT, STARTED, {"type": "text", "text": "boom"}, HANG]
    result, _, _ = await run(script, host=FakeHost(fail_on="boom"))
    assert isinstance(result, TurnFailed)
    assert result.reason is StopReason.TURN_CRASHED


ONE_READ = [
    [
        INIT,
        {"type": "text", "text": "a"},
        {"type": "init", "session_id": "s2"},
        {"type": "text", "text": "b"},
        {"type": "init", "session_id": "s3"},
        {"type": "result", "text": "ab", "session_id": "s3"},
    ]
]


async def test_events_of_one_read_are_delivered_in_order_each_session_checkpointed_first(
    autojump_clock: MockClock,
) -> None:
    host = FakeHost()
    await run(ONE_READ, host=host)
    assert host.log == [
        "checkpoint s1",
        "session s1",
        "text a",
        "checkpoint s2",
        "session s2",
        "text b",
        "checkpoint s3",
        "session s3",
    ]
    kinds = [(type(event).__name__, getattr(event, "session_id", None)) for event in host.delivered]
    assert kinds == [
        ("SessionEvent", "s1"),
        ("TextEvent", None),
        ("SessionEvent", "s2"),
        ("TextEvent", None),
        ("SessionEvent", "s3"),
        ("ResultEvent", "s3"),
    ]


async def test_a_handler_failing_mid_read_delivers_nothing_further_but_session_ids_count(
    autojump_clock: MockClock,
) -> None:
    host = FakeHost(fail_on="a")
    result, _, _ = await run(ONE_READ, host=host)
    assert isinstance(result, TurnFailed)
    assert result.reason is StopReason.TURN_CRASHED
    # Stopped at "a": the later session ids of the same read are still checkpointed.
    assert host.log == ["checkpoint s1", "session s1", "text a", "checkpoint s2", "checkpoint s3"]
    assert result.session_id == "s3"


async def test_a_slow_reader_gets_every_event_of_a_long_read_in_order(
    autojump_clock: MockClock,
) -> None:
    texts = [str(i) for i in range(200)]
    script = [[INIT, *({"type": "text", "text": t} for t in texts), STARTED]]
    host = FakeHost(slow=1.0)
    result, _, _ = await run(script, host=host)
    assert [e.text for e in host.delivered if isinstance(e, TextEvent)] == texts
    assert isinstance(result, Response)


@pytest.mark.parametrize("one_read", [True, False])
async def test_an_interrupt_from_a_handler_takes_effect_from_the_next_read(
    autojump_clock: MockClock, one_read: bool
) -> None:
    # A read's events are recorded before they are delivered: a result in the read the
    # handler interrupted stands (printed before the interrupt, and delivered too); one in
    # a later read is only billed.
    frames = [
        INIT,
        {"type": "text", "text": "a"},
        {"type": "text", "text": "b"},
        {"type": "result", "text": "ab", "session_id": "s1", "cost": 0.5},
    ]
    channel = FakeChannel([frames] if one_read else frames, [])
    turn: Turn

    def interrupt_at_a(event: Event) -> None:
        if isinstance(event, TextEvent) and event.text == "a":
            turn.stop(StopReason.INTERRUPTED, "interrupted")

    host = FakeHost(on_event=interrupt_at_a)
    turn = new_turn(FakeSource(channel), host)
    result = await turn.run()
    seen = [type(event).__name__ for event in host.delivered]
    assert channel.interrupted_at is not None
    if one_read:
        assert isinstance(result, Response) and result.text == "ab"
        assert seen == ["SessionEvent", "TextEvent", "TextEvent", "ResultEvent"]
    else:
        assert isinstance(result, TurnFailed)
        assert result.reason is StopReason.INTERRUPTED
        assert result.cost_usd == 0.5
        assert seen == ["SessionEvent", "TextEvent"]


class _Read(list[Any]):
    """A read's frames, as a batch a weak reference can follow."""


async def test_a_handled_read_is_released_before_the_turn_waits_for_the_next(
    autojump_clock: MockClock,
) -> None:
    # With a hundred turns waiting on their pipes at once, a read each kept alive while
    # waiting is a hundred reads' worth of lines (see the concurrency pass in bench/README.md).
    reads: list[weakref.ref[_Read]] = []
    more = trio.Event()

    class Channel(FakeChannel):
        async def batches(self, decode: Any) -> AsyncIterator[Iterable[Any]]:
            first = _Read([INIT, {"type": "text", "text": "a"}])
            reads.append(weakref.ref(first))
            yield first
            del first
            await more.wait()
            yield _Read([{"type": "result", "text": "a", "session_id": "s1"}])

    turn = new_turn(FakeSource(Channel([], [])))
    async with trio.open_nursery() as nursery:
        outcomes: list[Response | TurnFailed] = []

        async def run_turn() -> None:
            outcomes.append(await turn.run())

        nursery.start_soon(run_turn)
        await trio.testing.wait_all_tasks_blocked()
        assert len(reads) == 1
        assert reads[0]() is None  # handled, and nothing holds it while the turn waits
        more.set()
    [result] = outcomes
    assert isinstance(result, Response)
    assert result.text == "a"


async def test_text_across_reads_keeps_every_character_and_its_segment(
    autojump_clock: MockClock,
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
    response, _, _ = await run(reads, max_events=0)
    assert isinstance(response, Response)
    assert response.text == "next \udfff😀"
    assert response.event_coverage.observed == 8


async def test_a_finished_turn_lets_go_of_its_event_log(
    monkeypatch: pytest.MonkeyPatch, autojump_clock: MockClock
) -> None:
    # The Response has its own copy of the events; turns that end together and wait on the
    # store (the actor keeps the Turn through those writes) must not each hold their log's
    # buffer as well.
    logs: list[weakref.ref[EventLog]] = []

    class Log(EventLog):
        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            logs.append(weakref.ref(self))

    monkeypatch.setattr(agentrt._turn, "EventLog", Log)
    script = [INIT, {"type": "text", "text": "hi"}, {"type": "result", "text": "hi"}]
    response, _, turn = await run(script)
    assert turn.final is not None  # the turn is still held here
    assert len(logs) == 1 and logs[0]() is None
    assert isinstance(response, Response)
    assert len(response.events) == 3 and response.event_coverage.retained == 3


@pytest.mark.parametrize("one_read", [True, False])
async def test_events_nobody_watches_count_and_fold_as_watched_ones(
    autojump_clock: MockClock, one_read: bool
) -> None:
    # Past what compact retention keeps, a text event nobody watches is only folded into
    # the text and counted; the Response must not tell the difference.
    texts = [f"t{i} " for i in range(40)]
    frames = [INIT, *({"type": "text", "text": t} for t in texts), {"type": "x"}]
    frames.append({"type": "result", "text": "", "session_id": "s1"})
    script = [frames] if one_read else frames
    watching = FakeHost()
    watched, _, _ = await run(script, host=watching, max_events=5)
    unwatched, _, _ = await run(script, host=FakeHost(watched=False), max_events=5)
    assert isinstance(watched, Response) and isinstance(unwatched, Response)
    assert unwatched.text == "".join(texts)
    assert unwatched.event_coverage.observed == 1 + 40 + 1 + 1  # session, texts, raw, result
    assert (watched.text, watched.final_message) == (unwatched.text, unwatched.final_message)
    assert watched.event_coverage == unwatched.event_coverage
    assert [type(e) for e in watched.events] == [type(e) for e in unwatched.events]
    assert [e.text for e in watching.delivered if isinstance(e, TextEvent)] == texts


async def test_a_stop_while_the_channel_opens_goes_to_the_channel(
    autojump_clock: MockClock,
) -> None:
    # A live CLI's channel waits for a slot or a spawn as it opens: a stop then must reach
    # it (it cancels the wait), and the turn ends with the stop's reason.
    class Opening(FakeChannel):
        async def __aenter__(self) -> FakeChannel:
            with trio.CancelScope() as self.scope:
                await trio.sleep_forever()
            self.translator = None  # stopped while it opened
            return self

        def interrupt(self, gently: bool) -> None:
            self.gently = gently
            self.scope.cancel()

        async def finish(
            self, clean: bool, session_id: str | None
        ) -> tuple[ExitStatus | None, str]:
            return None, ""

    channel = Opening([], [])
    with trio.fail_after(60):
        result, _, _ = await run_stopped_at_channel(channel, 5)
    assert isinstance(result, TurnFailed)
    assert result.reason is StopReason.INTERRUPTED
    assert channel.gently and channel.closed
