"""Warm sessions: one agent's live CLI process, kept between the turns of its conversation.

With ``keep_alive`` an agent runs its turns on one CLI process (a backend's `LiveProtocol`):
the first turn spawns it and does the handshake; each turn writes its prompt and reads up
to the turn's end frame; between turns the process waits, holding a process slot, for at
most ``keep_alive`` seconds (then it hibernates: it ends, and the next turn resumes the
conversation on a new process with ``--resume``). The transcript stays the source of truth,
so any doubt ends the process and the next turn starts cold:

- the turn did not end at its end frame: a bound, a crash, an exit, a kill, an interrupt
  the CLI did not answer within ``kill_grace``;
- an unreadable line, a protocol error, output between turns or after a turn's end;
- another conversation (a new session; other options come only with a new instance of the
  agent, whose end ended this process);
- a tool process of the turn that survived its kill; recycling (``recycle_turns``,
  ``recycle_rss_bytes``); a turn that waits for a slot while this process idles.

A warm process may also die between turns (a kill, an OOM kill) unnoticed until the next
turn writes its prompt. If it dies before printing a line of that turn (news of its
background tasks aside, which it prints whether it read the prompt or not), no CLI answered
the prompt: the turn runs once more on a new process, resuming the conversation
(`WarmCli.died_unheard`). Once any line of the turn was read, the CLI may have acted on the
prompt, and a death fails the turn as for a one-process turn.

What may outlive a turn is the CLI's resident set: the CLI itself and what its tree held
when it became ready (its MCP servers); everything else is killed at each turn's end, unless
the agent keeps background work (agentrt._driver._background): then the process is read
between turns, and a turn the CLI starts by itself (a background task ended, and it runs
the model on the notification) is held (`WarmCli.held`) and handed to the agent
(``own_turn``), whose next turn reads it instead of writing a prompt, and asks its questions.

The runtime's own requests (`WarmCli.call`: a model, a permission mode, the context usage,
a task to stop) are written at once; during a turn the turn's reads bring the answer,
between turns the caller reads until it comes (holding the process's reader, so the next
turn waits for it). Whatever the CLI asks meanwhile between turns is answered as if
nobody had an opinion (a hook goes on, a tool is denied): no turn runs to ask the agent.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import attrs
import trio

from .._asks import Ask, Deny, HookCall
from .._channel import ControlAnswer, ControlRequest
from .._events import StopReason
from ..backend import HookKind, LiveProtocol, ProtocolError, Translator
from ._background import BackgroundWork
from ._process import BadLine, CliProcess, ProcessFailure, ProcessLimits
from ._process_slots import ProcessSlots

# How long the rest of a line printed between turns may take to arrive.
_CATCH_UP = 0.5


@attrs.frozen
class LiveSettings:
    """What a live CLI's life follows: ``keep_alive`` (None: one turn per process), the
    channel's callbacks (``approvals``, ``hooks``), ``kill_grace`` for an interrupt in band,
    and when it is recycled."""

    keep_alive: float | None
    approvals: bool
    hooks: frozenset[HookKind]
    kill_grace: float
    recycle_turns: int
    recycle_rss_bytes: int
    # Seconds a background task may run (math.inf: no bound of its own); None: a turn's
    # end kills what it started.
    background: float | None = None


@attrs.define(eq=False)
class WarmCli:
    """One live CLI process, from its spawn to its end, and the turn it runs."""

    protocol: LiveProtocol
    # The conversation it holds: the session it resumed, then what its turns reported.
    session_id: str | None
    # The runtime's process slots, one of which it holds.
    slots: ProcessSlots
    proc: CliProcess | None = None
    turns: int = 0
    # What its tree held once it was ready, pid -> start time: spared at each turn's end.
    resident: dict[int, int] = attrs.field(factory=dict)
    in_turn: bool = False
    # The running turn's end frame came.
    turn_over: bool = False
    # A line of the turn was read since its prompt was written: the CLI may have acted on
    # it. (News of a background task is no such line: the CLI prints it whether it read
    # the prompt or not.)
    heard: bool = False
    # Why it must end (None while it may live on).
    ending: str | None = None
    idle_since: float = 0.0
    ended: trio.Event = attrs.field(factory=trio.Event)
    _wake: trio.Event = attrs.field(factory=trio.Event)
    # Set at the turn's end frame; made only for an in-band interrupt, which waits for it.
    _turn_over_event: trio.Event | None = None
    # Questions for the agent (tool approvals, hooks), answered before the next read.
    asks: deque[Ask] = attrs.field(factory=deque)
    # The running turn's wait for the agent's answer to one of them: while it waits nothing
    # reads the CLI, so its exit and the turn's end in band would go unseen until the agent
    # answered or ``approval_timeout`` passed. Cancelled by either: no answer is wanted then.
    asking: trio.CancelScope | None = None
    _nursery: trio.Nursery | None = None
    _interrupt_scope: trio.CancelScope | None = None
    # The runtime's requests waiting for their answers, by request id.
    _calls: dict[str, _Pending] = attrs.field(factory=dict)
    # Held by whoever reads the process's output outside a turn (a call between turns),
    # and taken by a turn before it starts.
    reader: trio.Lock = attrs.field(factory=trio.Lock)
    # None: no background work outlives a turn.
    background: BackgroundWork | None = None
    # The frames of a turn the CLI started by itself, read before a turn of the agent's
    # took them (`own_turn` was told once, at the first).
    held: list[Any] = attrs.field(factory=list)
    own_turn: Callable[[], None] | None = None
    # The wake-ups this process scheduled and fires itself while it lives, by the id of
    # their stored copy, each with when it is due (wall clock): it is read between turns
    # meanwhile, as for background work, so that the turn it starts reaches the agent.
    wakeups: dict[str, float] = attrs.field(factory=dict)
    # The holder task waits out an idle (until its end: no later than a later idle's end).
    _resting: bool = False

    @property
    def reads_own_turns(self) -> bool:
        """Whether a turn it starts by itself is the agent's (else output between turns
        ends it): it keeps background work, or holds a wake-up."""
        return self.background is not None or bool(self.wakeups)

    @property
    def pid(self) -> int | None:
        return None if self.proc is None else self.proc.pid

    def end(self, why: str) -> None:
        """End the process: at once between turns, at the end of a running turn."""
        if self.ending is None:
            self.ending = why
        self._poke()
        self._wake_calls()

    def hibernate(self) -> None:
        self.end("hibernating: a turn waits for a process slot")

    def _poke(self) -> None:
        self._wake.set()

    @property
    def steerable(self) -> bool:
        """Whether a message may join the running turn: the CLI has its prompt (a line of
        the turn was read) and has not ended it."""
        return self.in_turn and self.heard and not self.turn_over and self.ending is None

    def usable(self, session_id: str | None) -> str | None:
        """Why this process cannot run the next turn, or None if it can. (Its options are
        its agent instance's: other options come with a new instance, and a new process.)"""
        proc = self.proc
        if self.ending is not None:
            return self.ending
        if proc is None or proc.exit_status is not None:
            return "it exited"
        if session_id != self.session_id:
            return "the agent's session changed"
        return None

    async def catch_up(self) -> str | None:
        """Take what the CLI printed between turns: control frames (codex's status
        notifications) are the protocol's; anything else is why the process must end."""
        proc = self.proc
        assert proc is not None
        batches = proc.batches()
        while proc.has_unread_output():
            with trio.move_on_after(_CATCH_UP):
                try:
                    batch = await batches.__anext__()
                except StopAsyncIteration:
                    return "it exited"
                except ProcessFailure as exc:
                    return f"its output between turns: {exc.message}"
                for frame in batch:
                    if why := self._between(frame):
                        return why
                if self.held:
                    return None  # the rest is the CLI's own turn's
                continue
            return "it left a partial line between turns"
        if self.asks:
            return "it asked a question between turns"
        return self.ending

    # --- one turn ----------------------------------------------------------------------

    async def start_turn(self, prompt: str | None) -> None:
        """Start a turn: write ``prompt``, or (None) read the turn the CLI started by itself,
        its frames read so far first."""
        assert self.proc is not None
        self.turn_over = False
        self.heard = bool(self.held)
        self._turn_over_event = None
        self.proc.begin_turn()
        if prompt is None:
            if not self.held:  # a new process, the old one's turn gone with it: none comes
                self.kill("the turn it started by itself was lost")
            return
        if not await self.proc.send(self.protocol.prompt(prompt)):
            self.end("it no longer reads its input")

    def died_unheard(self) -> bool:
        """Whether this process, warm from an earlier turn, ended before it printed a line
        of the running one (a background task's news is none): it did not answer the
        prompt, which may then run on a new process. (A process spawned for the turn is not
        retried: that is a cold start's crash, and fails the turn as a one-process turn's
        would.)"""
        proc = self.proc
        return (
            self.turns > 0 and not self.heard and proc is not None and proc.exit_status is not None
        )

    def translator(self, baseline: Any) -> Translator:
        return self.protocol.translator(baseline=baseline)

    def batches(self, decode: Callable[[bytes], Any] | None) -> _TurnBatches:
        """The turn's frames, one iterator per read, up to the turn's end frame (or EOF);
        what the CLI asked comes first, as an `Ask` of its own (it waits for the answer)."""
        assert self.proc is not None
        return _TurnBatches(self, self.proc.batches(decode))

    async def answer(self, data: bytes) -> None:
        """Write the answer to a question; the CLI was waiting, so ``idle`` starts again."""
        assert self.proc is not None
        await self._send(data)
        self.proc.restart_idle()

    def frames(self, batch: Iterable[Any]) -> Iterator[Any]:
        """The frames of ``batch`` that belong to the turn; control frames are answered."""
        classify = self.protocol.classify
        for frame in batch:
            if type(frame) is BadLine:
                self.heard = True
                self.end("it printed an unreadable line")
                yield frame
                continue
            role = classify(frame)
            if role != "task":
                self.heard = True
            if role == "control":
                self._control(frame)
            elif role == "task":
                self._task_news(frame)
                if not self.turn_over:
                    yield frame
            elif self.turn_over:
                if not self.reads_own_turns:
                    self.end("it printed output after the end of a turn")
                else:
                    self.held.append(frame)  # a turn it starts by itself, told at the turn's end
            else:
                if role == "end":
                    self.turn_over = True
                    if self._turn_over_event is not None:
                        self._turn_over_event.set()
                yield frame

    def _between(self, frame: Any) -> str | None:
        """Take a frame read between turns; why the process must end, or None."""
        if type(frame) is BadLine:
            return "it printed an unreadable line between turns"
        role = self.protocol.classify(frame)
        if role == "control":  # a call's answer is its caller's, its own turn begun or not
            self._control(frame)
        elif self.held:
            self.held.append(frame)  # the rest of the CLI's own turn
        elif role == "task":
            self._task_news(frame)
        elif not self.reads_own_turns:
            return "it printed output between turns"
        else:
            self._hold(frame)
        return None

    def _hold(self, frame: Any) -> None:
        # The first frame of a turn the CLI started by itself: the agent runs it next.
        self.held.append(frame)
        if self.own_turn is not None:
            self.own_turn()

    def _task_news(self, frame: Any) -> None:
        # Without background work each turn's end kills what it started: nothing to count.
        if self.background is not None and self.background.news(self.protocol, frame):
            self._poke()

    def _control(self, frame: Any) -> None:
        try:
            reply = self.protocol.control(frame)
        except ProtocolError as exc:
            self.kill(f"it broke the live protocol: {exc}")
            return
        if isinstance(reply, ControlAnswer):
            pending = self._calls.get(reply.request_id)
            if pending is not None:  # else not the runtime's (an interrupt's acknowledgement)
                pending.answer = reply
                pending.wake.set()
        elif not isinstance(reply, bytes):
            self.asks.append(reply)
        elif reply:
            assert self._nursery is not None
            self._nursery.start_soon(self._send, reply)

    async def _send(self, data: bytes) -> None:
        assert self.proc is not None
        if not await self.proc.send(data):
            self.end("it no longer reads its input")

    async def call(self, request: ControlRequest, bound: float) -> ControlAnswer | str:
        """Write the runtime's ``request`` and wait for the CLI's answer: the answer, or why
        none came (the process ended; no answer within ``bound`` seconds ends it)."""
        pending = self._calls[request.request_id] = _Pending()
        try:
            with trio.move_on_after(bound):
                await self._send(request.line)
                while pending.answer is None and self.ending is None:
                    if self.in_turn:  # the turn's reads bring it; or, once over, read it here
                        await pending.wake.wait()
                        pending.wake = trio.Event()
                        continue
                    self._poke()  # a reading between turns gives way
                    async with self.reader:
                        if not self.in_turn:
                            await self._read_for(pending)
                if pending.answer is not None:
                    return pending.answer
                return self.ending or "it ended"
            self.kill(f"it did not answer {request!r} within {bound:g} s")
            return f"the CLI did not answer within {bound:g} s"
        finally:
            del self._calls[request.request_id]

    async def _read_for(self, pending: _Pending) -> None:
        # Between turns: read control frames until the answer comes; anything else ends the
        # process, as output between turns does.
        assert self.proc is not None
        batches = self.proc.batches()
        while pending.answer is None and self.ending is None:
            try:
                batch = await batches.__anext__()
            except StopAsyncIteration:
                self.end("it exited")
                return
            except ProcessFailure as exc:
                self.end(f"its output between turns: {exc.message}")
                return
            for frame in batch:
                if why := self._between(frame):
                    self.end(why)
                    return
            while self.asks and not self.held:  # held: the CLI's own turn's, asked in it
                ask = self.asks.popleft()
                go_on = (
                    ask.answer(None)
                    if isinstance(ask, HookCall)
                    else ask.answer(Deny("no turn is running to ask the agent"))
                )
                await self._send(go_on)

    def _wake_calls(self) -> None:
        for pending in self._calls.values():
            pending.wake.set()

    def stop_asking(self) -> None:
        """End the running turn's wait for the agent's answer (see ``asking``)."""
        if self.asking is not None:
            self.asking.cancel()

    def interrupt(self, gently: bool, grace: float) -> None:
        """Stop the running turn: ``gently`` in band (the CLI's own interrupt request, the
        kill ladder if the turn has not ended within ``grace``), else at once by the ladder.
        A wait for the agent's answer ends: the CLI withdraws its question as it stops."""
        self.stop_asking()
        if self.turn_over:
            return
        if not gently:
            self.kill("the turn was stopped")
        elif self._interrupt_scope is None:
            assert self._nursery is not None
            self._interrupt_scope = trio.CancelScope()
            over = self._turn_over_event = self._turn_over_event or trio.Event()
            self._nursery.start_soon(self._interrupt_in_band, self._interrupt_scope, over, grace)

    async def _interrupt_in_band(
        self, scope: trio.CancelScope, over: trio.Event, grace: float
    ) -> None:
        # ``over`` is the interrupted turn's end: once it came, the next turn may have begun
        # before this task runs again (``when_busy="interrupt"`` writes its prompt at once),
        # and that turn's state is not this one's (the CLI was killed under the new prompt).
        with scope:
            assert self.proc is not None
            if not over.is_set() and await self.proc.send(self.protocol.interrupt()):
                with trio.move_on_after(grace):
                    await over.wait()
            if not over.is_set():
                self.kill(f"the CLI did not end its turn within {grace:g} s of the interrupt")

    def kill(self, why: str) -> None:
        self.end(why)
        if self.proc is not None:
            self.proc.interrupt()

    async def end_turn(self, clean: bool, settings: LiveSettings) -> None:
        """The turn is over: kill what it started and keep the process, or end it."""
        assert self.proc is not None
        self.in_turn = False
        if not self.held:  # else asked after the result: its own turn's, asked in that turn
            self.asks.clear()
        if settings.keep_alive is None:
            self.end("one process per turn (keep_alive is None)")
        if self._interrupt_scope is not None:
            self._interrupt_scope.cancel()
            self._interrupt_scope = None
        if not clean or not self.turn_over:
            self.end("the turn did not end cleanly")
        elif self.ending is None:
            self.turns += 1
            self.proc.end_turn()
            if self.background is not None and self.background.tasks:
                pass  # its background tasks live on, in the tree, until they end or it does
            elif not await self.proc.kill_others(self.resident):
                self.end("a process of the turn survived its kill")
            elif self.turns >= settings.recycle_turns:
                self.end(f"recycled after {self.turns} turns")
            elif (rss := self.proc.rss_bytes()) is not None and rss > settings.recycle_rss_bytes:
                self.end(f"recycled at {rss:,} bytes resident")
        self.idle_since = trio.current_time()
        if self.held and self.ending is None and self.own_turn is not None:
            self.own_turn()  # it went on with a turn of its own after this one's end
        if self._resting and not self._wake.is_set() and not self.slots.waiting:
            # The holder task would only mark it idle and wait again (nothing poked it; no
            # turn waits for its slot): left asleep, not woken (a task switch) every turn.
            self.slots.idle(self)
        else:
            self._poke()
        self._wake_calls()  # a call waiting for the turn's reads now reads for itself

    # --- the holder task ---------------------------------------------------------------

    async def serve(self, keep_alive: float) -> None:
        """Keep the process until it must end: between turns for at most ``keep_alive``."""
        assert self.proc is not None
        self.idle_since = trio.current_time()
        while True:
            deadline = math.inf
            resting = False
            if not self.in_turn:
                if self.ending is not None or self.proc.exit_status is not None:
                    return
                work = self.background
                if self.held or (work is not None and work.tasks):
                    # Background work runs, or the CLI's own turn waits for the agent: busy.
                    self.slots.busy(self)
                    self.idle_since = trio.current_time()
                    if work is not None and await work.stop_overdue(self):
                        continue
                else:
                    if trio.current_time() >= self.idle_since + keep_alive:
                        self.ending = f"hibernating after {keep_alive:g} s idle"
                        return
                    self.slots.idle(self)
                    deadline = self.idle_since + keep_alive
                    resting = True
                if self.reads_own_turns and not self.held:
                    # Read what the CLI prints as it comes: its tasks' news, a turn it
                    # starts by itself (after a task's end, even once none runs; a
                    # wake-up's).
                    due = math.inf if work is None else work.next_due()
                    await self._listen(min(deadline, due))
                    continue
            with trio.move_on_at(deadline):
                self._resting = resting
                try:
                    await self._wake.wait()
                finally:
                    self._resting = False
            self._wake = trio.Event()

    async def _listen(self, deadline: float) -> None:
        # Between turns: read until a turn or a call takes the reading, or ``deadline``.
        assert self.proc is not None
        wake = self._wake
        async with self.reader:
            if self.in_turn:
                return
            batches = self.proc.batches()
            with trio.move_on_at(deadline) as scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(_cancel_at, wake, scope)
                    while not self.held and self.ending is None:
                        try:
                            batch = await batches.__anext__()
                        except StopAsyncIteration:
                            self.end("it exited")
                            break
                        except ProcessFailure as exc:
                            self.end(f"its output between turns: {exc.message}")
                            break
                        for frame in batch:
                            if why := self._between(frame):
                                self.end(why)
                                break
                    scope.cancel()
        if wake is self._wake:
            self._wake = trio.Event()

    async def watch_exit(self) -> None:
        assert self.proc is not None
        await self.proc.wait()
        self.stop_asking()
        self._poke()

    async def handshake(self, limits: ProcessLimits) -> None:
        """Write the opening and answer control frames until the CLI is ready (or exits:
        the turn then reads that end and classifies it, as a one-process turn would)."""
        proc = self.proc
        assert proc is not None
        protocol = self.protocol
        deadline = math.inf if limits.startup is None else trio.current_time() + limits.startup
        if opening := protocol.opening():
            await proc.send(opening)
        with trio.move_on_at(deadline):
            async for batch in proc.batches():
                for frame in batch:
                    if type(frame) is not BadLine and protocol.classify(frame) == "control":
                        try:
                            reply = protocol.control(frame)
                        except ProtocolError as exc:
                            raise ProcessFailure(
                                exc.reason, f"the CLI refused its handshake: {exc}"
                            ) from exc
                        if isinstance(reply, ControlAnswer):
                            continue  # no request of the runtime's is out yet
                        if not isinstance(reply, bytes):
                            raise ProcessFailure(
                                StopReason.MALFORMED_OUTPUT,
                                "the CLI asked a question before its handshake was answered",
                            )
                        if reply:
                            await proc.send(reply)
                    else:
                        raise ProcessFailure(
                            StopReason.MALFORMED_OUTPUT,
                            "the CLI printed a turn's output before its handshake was answered",
                        )
                if protocol.ready:
                    return
            return  # EOF
        raise ProcessFailure(
            StopReason.STARTUP_TIMEOUT,
            f"the CLI did not answer its handshake within {limits.startup:g} s of spawn",
        )


async def _cancel_at(event: trio.Event, scope: trio.CancelScope) -> None:
    await event.wait()
    scope.cancel()


@attrs.define(eq=False)
class _Pending:
    """A request of the runtime's, until its answer comes."""

    # Set when the answer came, or the process's state changed (its turn ended, it must
    # end): look again.
    wake: trio.Event = attrs.field(factory=trio.Event)
    answer: ControlAnswer | None = None


class _TurnBatches:
    __slots__ = ("_batches", "_cli")

    def __init__(self, cli: WarmCli, batches: Any) -> None:
        self._cli = cli
        self._batches = batches

    def __aiter__(self) -> _TurnBatches:
        return self

    async def __anext__(self) -> Iterator[Any] | Ask:
        cli = self._cli
        if cli.asks and not cli.turn_over:
            return cli.asks.popleft()
        if cli.turn_over:
            raise StopAsyncIteration
        if cli.held:  # the turn the CLI started by itself, as far as it was read
            held, cli.held = cli.held, []
            return cli.frames(held)
        return cli.frames(await self._batches.__anext__())
