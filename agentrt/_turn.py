"""One turn: Command -> frames (in-process, or a CLI process) -> events -> Response.

The turn enforces the bounds that are not the process driver's: the total watchdog, the
first-event bound, event retention; and it takes ``interrupt``. How it stops early, for
each of these reasons, is `agentrt._turn_stop`'s; how it reads a CLI's channel,
`agentrt._turn_channel`'s.

Terminal events. A terminal `ResultEvent` does not end the reading: a CLI may print a
result and go on (Claude Code waits for a background task, then prints another init and
another result), so the turn reads until the process exits and a later terminal event
replaces the earlier one; the Response is built from the last result and the text of its
segment (what came after the previous terminal), and earlier results stay in its events.
The time after a result has its own bound, ``after_result`` (from the latest result): when
it runs out the CLI is interrupted and the turn completes with the last result. That result
is never lost to a bound or an interrupt either (the watchdog, an idle CLI, one that closed
its output and lingers): only a fault of the turn's own (``turn_crashed``,
``event_capture_overflow``) fails a turn that has a result. A terminal `ErrorEvent` ends
the turn at once.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from typing import Any, cast

import attrs
import msgspec
import trio

from ._alarm import Alarm
from ._driver._process import BadLine
from ._errors import StoreError, TurnFailed, usd
from ._events import (
    ErrorEvent,
    Event,
    InitEvent,
    PermissionDenial,
    RawEvent,
    Response,
    ResultEvent,
    SessionEvent,
    SessionTotals,
    StopReason,
    TextEvent,
    TextRetractedEvent,
    ToolResultEvent,
    ToolUseEvent,
    Usage,
    UsageEvent,
)
from ._options import AgentOptions
from ._redact import redact
from ._retention import CaptureOverflow, EventLog
from ._segment import SegmentText
from ._stuck import LoopWatch
from ._telemetry._otel import TurnTrace
from ._turn_bounds import Bounds
from ._turn_channel import ChannelReading
from ._turn_response import Failure, completed, failed
from ._turn_source import Channel, FrameSource, InProcessSource, TurnHost, go_on, run_until_wait
from ._versions import accepts
from .backend import Command, ExitStatus, Translator

logger = logging.getLogger("agentrt")

# Events that do not show the model is answering, so do not satisfy the first-event bound.
_NOT_CONTENT: frozenset[type[Event]] = frozenset((SessionEvent, InitEvent, RawEvent))


@attrs.define(eq=False)
class Turn(ChannelReading):
    """One turn of one agent. ``run`` returns the outcome; ``stop`` ends it early.

    Its bases are parts of it, on its fields: `Stopping` (``stop``, the bounds' alarm) and
    `ChannelReading` (a CLI's channel read); what stays here turns frames into events."""

    # None: a turn the agent's live CLI started by itself (no prompt to write).
    prompt: str | None
    options: AgentOptions
    session_id: str | None
    # What the resumed session's earlier turns reported (see Backend.translator).
    baseline: SessionTotals | None
    source: FrameSource
    host: TurnHost
    # The turn's span and metrics, when telemetry records (agentrt._telemetry).
    trace: TurnTrace | None = None
    # The CLI's version as its version_command printed it, for a backend whose CLI does
    # not report it (Capabilities.version_probe): known, and checked, before the turn runs.
    probed_version: str | None = None
    version_probed: bool = False
    # USD the turn may spend, by the estimate its stream reports (UsageEvent), before it
    # is stopped (budget_exceeded): what its budgets had left when it started, where the
    # CLI's own per-run limit does not hold. None: no such bound.
    cost_limit: float | None = None

    # The host's methods a read calls, bound once.
    _checkpoint: Callable[[str], Awaitable[None]] = attrs.field(init=False)
    _deliver: Callable[[Sequence[Event]], Awaitable[None]] = attrs.field(init=False)
    _watched: Callable[[], bool] = attrs.field(init=False)
    # trio.current_time(), from the run's clock without the per-call wrapper (a scripted
    # turn asks it several times).
    _now: Callable[[], float] = attrs.field(init=False)
    command: Command | None = None
    translator: Translator | None = None
    waiting_for_process: bool = False
    # The event that ended the turn: the stream's terminal, or one made for the failure.
    final: Event | None = None
    _failure: Failure | None = None
    _terminal: Event | None = None
    # Where the terminal event sits in the retained events, if it was retained.
    _terminal_index: int | None = None
    # The terminal event decides the outcome (a terminal ErrorEvent, or a result a stop
    # settled on): the rest is read for session ids only.
    _ended: bool = False
    _scope: trio.CancelScope | None = None
    # The CLI's channel, while the turn has one: a stop interrupts it.
    _channel: Channel | None = None
    # While its frames are read: an interrupt bounds the rest of the reading.
    _drain_scope: trio.CancelScope | None = None
    _drain_bound: float = 0.0
    _started: float = 0.0
    _bounds: Bounds = attrs.field(factory=Bounds)
    # What watches the bounds while a process is read: a result brings its deadline nearer.
    _alarm: Alarm | None = None
    _awaiting_content: bool = False
    _log: EventLog | None = None
    # A terminal event the current read recorded: what it starts (the after-result bound,
    # or the end of the run) waits until it has been delivered.
    _undelivered_terminal: Event | None = None
    # Text of the current segment (since the previous terminal result), and what the
    # latest result closed: its text (UTF-8, as the Response keeps it) and last message.
    _segment: SegmentText = attrs.field(factory=SegmentText)
    _result_text: bytes = b""
    _result_message: str = ""
    _usage: Usage | None = None
    # What the latest terminal event said the turn cost, whatever the turn's outcome; and
    # the stream's estimate, for a turn that ends without one.
    _cost: float | None = None
    _estimate: float | None = None
    _model: str | None = None
    _init: InitEvent | None = None
    # The CLI's version, once known (its InitEvent, or the probe), and whether it was
    # held against the agent's cli_versions yet.
    _cli_version: str | None = None
    _version_checked: bool = False
    # The tools the agent's approve_tool denied (a CLI's result may not list them).
    _denials: list[PermissionDenial] = attrs.field(factory=list)
    # The Task call each subagent's tool call came from, by tool-use id.
    _parents: dict[str, str] = attrs.field(factory=dict)
    # Repeats of the model's tool calls (stuck_repeats, stuck_errors), unless both are off;
    # made at the first tool call.
    _loops: LoopWatch | None = None

    def __attrs_post_init__(self) -> None:
        host = self.host
        self._checkpoint = host.checkpoint
        self._deliver = host.deliver
        self._watched = host.watched
        self._now = trio.lowlevel.current_clock().current_time

    ################
    # Running: in process, or a CLI process
    ################

    async def run(self) -> Response | TurnFailed:
        """Run the turn to its outcome.

        Cancellation: propagates; the backend run is cancelled and a CLI process is
        cleaned up by the driver (shielded and bounded)."""
        slots = self.source.turn_slots
        if slots is None:  # none, or a live CLI holds a slot of its own
            return await self._run()
        if not slots.take_now(self):  # a scope only for a turn that has to wait
            self.waiting_for_process = True
            with trio.CancelScope() as self._scope:
                await slots.acquire(self)
            self.waiting_for_process = False
            if self._scope.cancelled_caught:  # stopped while waiting for a process slot
                return await self._finish(None, "")
        try:
            return await self._run()
        finally:
            slots.release(self)

    async def _run(self) -> Response | TurnFailed:
        options = self.options
        self._started = now = self._now()
        self._bounds.start(now, options)
        # A version to check must be known before the first content: the CLI reports it
        # before it asks the model (its InitEvent), or the probe did before the turn.
        self._awaiting_content = (
            options.first_event is not None
            or self.trace is not None
            or options.cli_versions is not None
        )
        if self.version_probed:
            self._version_known(self.probed_version)
        self._log = EventLog(options.retention, options.max_events, options.max_event_bytes)
        status: ExitStatus | None = None
        stderr_tail = ""
        if self._failure is None:
            try:
                source = self.source
                if isinstance(source, InProcessSource):
                    status = await self._run_in_process(source)
                else:
                    # A live CLI that turns out to have died before it printed a line of
                    # this turn never answered the prompt: the turn runs once more, on a
                    # new process, under the bounds that count from the turn's start.
                    ended = await self._run_channel(source, retry=True)
                    if ended is None and self._failure is None:
                        ended = await self._run_channel(source, retry=False)
                    status, stderr_tail = ended or (None, "")
            except Exception as exc:
                self._crash(exc)
        return await self._finish(status, stderr_tail)

    async def _run_in_process(self, source: InProcessSource) -> ExitStatus | None:
        assert self.prompt is not None  # only a live CLI starts turns by itself
        self.command, self.translator = source.open(self.prompt, self.session_id, self.baseline)
        await self.host.started()
        if self._failure is not None:  # stopped meanwhile
            return None
        # Most runs never wait (a script's frames, one after another): the scope's deadline
        # and `stop` reach a run only once it waits, so it has none until then (a deadline
        # set, then moved at the result, cost some 6 µs of a scripted ask's 150). A stop
        # meanwhile takes effect as the run waits, as it would at its next checkpoint.
        # The runner's emit is the read itself: it hands the frames it has as one batch.
        steps = source.runner.run(self.command, self._handle).__await__()
        with trio.CancelScope() as scope:
            ended, waiting = run_until_wait(steps)
            if ended:
                return cast(ExitStatus, waiting)
            scope.deadline = self._bounds.nearest()
            self._scope = scope
            if self._failure is not None or self._ended:
                scope.cancel()
            return await go_on(steps, waiting)
        if self._failure is None:  # no stop() cancelled the scope: a deadline did
            self._stop_for_bound(trio.current_time())
        return None

    ################
    # Frames to events: the checkpoint, delivery, retention, the text
    ################

    def _bad_line(self, frame: BadLine) -> Sequence[Event]:
        # Its text comes redacted.
        note = f"unreadable line ({frame.size} bytes): {frame.error}"
        return (RawEvent(data=frame.text, note=note),)

    async def _handle(self, frames: Iterable[Any], events: Sequence[Event] = ()) -> None:
        """Translate ``frames`` (after ``events``) and record their events in order, each
        new session id checkpointed before its event and everything after it; what was
        recorded goes to ``deliver`` if anyone watches."""
        frames = iter(frames)
        pending: Iterator[Event] = iter(events)
        while True:
            recorded: list[Event] | None = [] if self._watched() else None
            pending, session_id = self._record(frames, pending, recorded)
            if recorded:
                try:
                    await self._deliver(recorded)
                except Exception as exc:
                    self._crash(exc)
            terminal, self._undelivered_terminal = self._undelivered_terminal, None
            if terminal is not None:
                self._terminal_delivered(terminal)
            if session_id is None:
                return
            try:
                await self._checkpoint(session_id)
            except StoreError as exc:
                message = f"the session store could not keep session {session_id}: {exc}"
                self._stop(Failure(StopReason.STORE_FAILED, redact(message), cause=exc))
                pending = iter(())
            except Exception as exc:
                self._crash(exc)
                pending = iter(())  # as before: the rest of that frame is dropped

    def _record(
        self, frames: Iterator[Any], pending: Iterator[Event], recorded: list[Event] | None
    ) -> tuple[Iterator[Event], str | None]:
        """Translate and record (stamp, log, fold) ``pending`` and then the events of
        ``frames``, appending each logged event to ``recorded`` unless it is None. Stops
        early at a new session id, to be checkpointed before its event: returns the events
        left (that one first) and the id, else an empty iterator and None."""
        # This runs for every line of a stream, so the common case (a text event) is handled
        # inline. Event classes are compared by identity (`Event` refuses subclasses): an
        # isinstance check on a msgspec Struct class takes its metaclass's slow path.
        assert self.translator is not None and self._log is not None
        feed = self.translator.feed
        log = self._log
        texts = self._segment.parts
        replace = msgspec.structs.replace
        now = self._now()
        # A text event that nobody will see and retention will not keep only adds to the
        # turn's text and to the count of events: no timestamp, no log entry.
        unseen = 0
        skip_text = recorded is None and not (log.keeping or self._awaiting_content)
        try:
            while True:
                for event in pending:
                    if (
                        skip_text
                        and type(event) is TextEvent
                        and self._failure is None
                        and not self._ended
                    ):
                        unseen += 1
                    else:
                        if (
                            type(event) is SessionEvent
                            or type(event) is ResultEvent
                            or type(event) is ErrorEvent
                        ):
                            session_id = event.session_id
                            if session_id is not None and session_id != self.session_id:
                                self.session_id = session_id
                                return itertools.chain((event,), pending), session_id
                        if self._failure is not None or self._ended:
                            # Stopped: the rest is read for session ids, and for what the
                            # turn cost (a CLI interrupted mid-turn still prints its bill).
                            if event.is_terminal:
                                self._spent(event)
                            continue
                        event = replace(event, timestamp=now)
                        if self._awaiting_content and type(event) not in _NOT_CONTENT:
                            self._content_arrived()
                        try:
                            retained = log.add(event)
                        except CaptureOverflow as overflow:
                            reason = StopReason.EVENT_CAPTURE_OVERFLOW
                            self.stop(reason, str(overflow), detail=overflow.detail)
                            continue
                        if recorded is not None:
                            recorded.append(event)
                        if type(event) is not TextEvent:
                            self._fold(event, retained)
                            continue
                    # The text fold, for both kinds of text event above.
                    texts.append(event.text)
                    if event.message_boundary:
                        self._segment.end_message()
                for frame in frames:
                    if type(frame) is BadLine:
                        events = self._bad_line(frame)
                    else:
                        try:
                            events = feed(frame)
                        except Exception as exc:
                            self._crash(exc)
                            continue
                    if events:
                        break
                else:
                    return pending, None
                pending = iter(events)
        finally:
            if unseen:
                log.skipped(unseen)

    @property
    def cli_version(self) -> str | None:
        """The CLI's version as far as the turn knows it (reported, or probed)."""
        return self._cli_version

    def _version_known(self, version: str | None) -> None:
        # Each time the CLI says it (Claude Code prints init again after a background task).
        self._version_checked = True
        self._cli_version = version
        if self.trace is not None and version is not None:
            self.trace.cli_version(version)
        accepted = self.options.cli_versions
        if accepted is not None and not accepts(accepted, version):
            shown = "no version" if version is None else f"version {version}"
            self.stop(
                StopReason.CLI_VERSION_MISMATCH,
                f"the CLI reported {shown}; this agent accepts cli_versions={accepted!r}",
            )

    def _content_arrived(self) -> None:
        # The first content event lifts the first-event bound; a CLI that has not said its
        # version by now cannot be held against cli_versions before the model works.
        self._awaiting_content = False
        if not self._version_checked and self.options.cli_versions is not None:
            self._version_known(None)
        if self.trace is not None:
            self.trace.first_event()
        self._bounds.first = math.inf
        self._reschedule()

    def _fold(self, event: Event, retained: bool) -> None:
        """Fold a logged event other than text into the turn's state."""
        if type(event) is UsageEvent:
            self._usage = event.usage
            if event.estimated_cost_usd is not None:
                self._estimated(event.estimated_cost_usd)
        elif type(event) is SessionEvent:
            self._model = event.model or self._model
        elif type(event) is TextRetractedEvent:
            self._segment.retract(event.text)
        elif event.is_terminal:
            self._terminal = event
            self._spent(event)
            assert self._log is not None
            self._terminal_index = self._log.retained - 1 if retained else None
            self._undelivered_terminal = event
            if type(event) is ResultEvent:
                self._result_text, self._result_message = self._segment.close()
            else:
                self._ended = True
        elif type(event) is InitEvent:
            self._init = event
            if event.cli_version is not None:
                self._version_known(event.cli_version)
            missing = _unavailable(self.options.required_mcp, event)
            if missing is not None:
                server, status = missing
                self.stop(
                    StopReason.MCP_UNAVAILABLE,
                    f"the required MCP server {server!r} is {status} (required_mcp)",
                    detail={"server": server, "status": status},
                )
        elif type(event) is ToolUseEvent or type(event) is ToolResultEvent:
            if type(event) is ToolUseEvent and event.parent_tool_use_id is not None:
                self._parents[event.id] = event.parent_tool_use_id
            loops = self._loops
            if loops is None:  # made at the turn's first tool call: most turns make none
                options = self.options
                loops = self._loops = LoopWatch.of(options.stuck_repeats, options.stuck_errors)
            stuck = None if loops is None else loops.saw(event)
            if stuck is not None:
                self.stop(StopReason.STUCK, stuck.message, detail=stuck.detail)

    def _estimated(self, cost: float) -> None:
        self._estimate = cost
        limit = self.cost_limit
        if limit is not None and cost >= limit:
            self.stop(
                StopReason.BUDGET_EXCEEDED,
                f"the turn's estimated cost ({usd(cost)}) reached what its budgets had left "
                f"when it started ({usd(limit)})",
                detail={"estimated_cost_usd": cost, "budget_left_usd": limit},
            )

    def _terminal_delivered(self, terminal: Event) -> None:
        # Not before: cancelling first would cut an async handler's checkpoint, and the
        # after-result bound would run while a slow subscriber still reads what came before.
        if type(terminal) is ResultEvent:
            if self.options.after_result is not None:
                # From the latest result: a later one (a background task's) restarts it.
                self._bounds.result = self._now() + self.options.after_result
                if self._alarm is not None or self._scope is not None:
                    # Else nothing watches the bounds yet: an in-process run that has not
                    # waited takes the nearest deadline when it first does.
                    self._reschedule()
        elif self._failure is None:
            self._end_run()

    def _spent(self, terminal: Event) -> None:
        # A CLI's terminal events each report the turn so far: the latest one is the bill.
        if type(terminal) is ResultEvent or type(terminal) is ErrorEvent:
            self._cost = terminal.cost_usd if terminal.cost_usd is not None else self._cost
            self._usage = terminal.usage or self._usage

    ################
    # The outcome: a Response or a TurnFailed
    ################

    async def _finish(self, status: ExitStatus | None, stderr_tail: str) -> Response | TurnFailed:
        if self._failure is None and self._terminal is None and status is not None:
            assert self.translator is not None
            try:
                last = self.translator.finish(status, stderr_tail)
            except Exception as exc:
                self._crash(exc)
            else:
                if last is not None and last.is_terminal:
                    await self._handle((), (last,))
        now = self._now()
        terminal = self._terminal
        failure = self._failure
        # The log is done: the Response takes a copy of its events, and the buffer goes now
        # rather than with the Turn (the actor keeps that through the store writes that
        # follow, and turns that end together would each hold both).
        log, self._log = self._log, None
        if failure is None and terminal is None:
            failure = Failure(
                StopReason.MALFORMED_OUTPUT, "the stream ended without a terminal event"
            )
        if failure is None and isinstance(terminal, ResultEvent):
            self.final = terminal
            assert log is not None
            return completed(
                terminal,
                log,
                terminal_index=self._terminal_index,
                text=self._result_text,
                message=self._result_message,
                usage=self._usage,
                model=self._model,
                duration=now - self._started,
                session_id=self.session_id,
                init=self._init,
                cli_version=self._cli_version,
                denials=self._denials,
            )
        self.final, error = failed(
            failure,
            terminal,
            now=now,
            status=status,
            stderr_tail=stderr_tail,
            session_id=self.session_id,
            cost=self._cost,
            estimate=self._estimate,
            usage=self._usage,
            cli_version=self._cli_version,
            accepted=self.options.cli_versions,
        )
        return error


# What an MCP server's status is, as Claude Code reports it, when the turn cannot use it;
# "pending" may still connect.
_UNUSABLE = frozenset({"failed", "needs-auth"})


def _unavailable(required: tuple[str, ...], init: InitEvent) -> tuple[str, str] | None:
    """The first of the ``required`` MCP servers the CLI's ``init`` reports it cannot use,
    and its status ("not configured" where it lists none of that name), or None."""
    reported = {server.name: server.status for server in init.mcp_servers}
    for name in required:
        status = reported.get(name, "not configured")
        if status in _UNUSABLE or name not in reported:
            return name, status
    return None
