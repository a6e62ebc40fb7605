"""One lifecycle for every CLI process of an agent instance: one per turn, or a live one.

`CliLifecycle` opens each turn a `Channel` (what `agentrt._turn.Turn` reads). Whatever the
mode, one function spawns the process (`CliLifecycle._process`, stdin kept open for a live
CLI), and records it (`ProcessRecords.spawned`) and traces it (`TurnWatch.spawned`) before
anything is read; and, once it is gone, clears its record (`ProcessRecords.gone`). What
differs is only what the mode asks for:

- one process per turn (``live`` None): the turn holds a process slot (`turn_slots`, taken
  by the turn); an interrupt is the driver's signal ladder; at the turn's end the process
  is waited for and its whole group killed;
- a live CLI (`LiveSettings`, see agentrt._driver._live): the process holds its slot for its life
  and lives in the instance's nursery; an interrupt goes in band first; at a turn's end
  what the turn started is killed (`kill_others` of the resident set), and the process
  lives on between turns (its record says idle) unless it must end: recycling, a doubt,
  ``keep_alive`` None. One that died between turns before it printed a line of the next
  turn never heard the prompt: `Channel.finish` says so (None), and the turn runs once
  more on a new process.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from types import TracebackType
from typing import Any, Protocol

import trio

from .._alarm import Alarm
from .._asks import Ask
from .._channel import BackgroundTask, ChannelCall
from .._events import SessionTotals
from .._telemetry._otel import record_warm_process
from ..backend import Backend, Command, ExitStatus, LiveBackend, Translator
from ._background import background_work
from ._channel_calls import ChannelCalls
from ._live import LiveSettings, WarmCli
from ._process import CliProcess, FrameBatch, ProcessLimits, ProcessTracker, open_cli_process
from ._process_slots import ProcessSlots

__all__ = ["CliLifecycle", "LiveSettings", "ProcessRecords", "TurnWatch"]

logger = logging.getLogger("agentrt")

# After the driver's SIGKILL, time for the last lines in the pipe to be read.
_DRAIN_MARGIN = 1.0
# Bound on waiting for an ended live process to be gone (its kill ladder), beyond the grace.
_GONE_MARGIN = 5.0
# How long before a wake-up's stored due time its CLI may fire it: Claude Code (2.1.332)
# sets it at least its delay on from the tool call, at a whole minute; the copy is due
# that delay after the turn's end, which comes later than the call.
WAKEUP_EARLY = 60.0


class ProcessRecords(Protocol):
    """Where the instance's live CLI process is recorded (the store's live record, which the
    reaper of a later program reads, and the status's ``cli_pid``)."""

    async def spawned(self, pid: int, pgid: int, start_time: int, marker: str | None) -> None:
        """A process runs now, before its first frame is read."""
        ...

    async def idle(self, idle: bool) -> None:
        """The live process waits between turns (True), or runs a turn again (False)."""
        ...

    async def gone(self) -> None:
        """The process is gone; runs after a cancelled turn too, so the implementation
        shields and bounds it."""
        ...


class TurnWatch(Protocol):
    """The turn a channel is opened for, as the lifecycle tells it what happens."""

    # The turn waits for a process slot (AgentStatus.current.waiting_for_process).
    waiting_for_process: bool

    def spawned(self, process: CliProcess) -> None:
        """A process was spawned for the turn (its trace)."""
        ...


class CliLifecycle:
    """The CLI processes of one agent instance, for its turns one after another.

    With ``live`` its process runs in ``nursery`` (the instance's: the instance's end ends
    it too), and `aclose` ends it."""

    __slots__ = (
        "_agent",
        "_alarm",
        "_backend",
        "_backend_options",
        "_calls",
        "_cli",
        "_limits",
        "_live",
        "_nursery",
        "_on_own_turn",
        "_records",
        "_slots",
        "_tracker",
        "_turn_options",
    )

    def __init__(
        self,
        *,
        agent: str,
        backend: Backend,
        backend_options: Any,
        live: LiveSettings | None,
        limits: ProcessLimits,
        slots: ProcessSlots,
        tracker: ProcessTracker | None,
        records: ProcessRecords,
        nursery: trio.Nursery | None = None,
        turn_options: Callable[[Any], Any] | None = None,
        settings: dict[ChannelCall, Any] | None = None,
        own_turn: Callable[[], None] | None = None,
    ) -> None:
        assert live is None or (nursery is not None and isinstance(backend, LiveBackend))
        self._agent = agent
        self._backend = backend
        self._backend_options = backend_options
        self._live = live
        self._limits = limits
        self._slots = slots
        self._tracker = tracker
        self._records = records
        self._nursery = nursery
        # The options of a CLI process starting now, from the instance's (its budget left,
        # a fork): the agent's to say.
        self._turn_options = turn_options
        # The live process, while one runs; and the one task that watches the bounds of
        # every turn on it (started with the first turn).
        self._cli: WarmCli | None = None
        self._alarm: Alarm | None = None
        self._calls = ChannelCalls(agent, settings)
        # Told when the live CLI starts a turn by itself (the agent runs it next).
        self._on_own_turn = own_turn

    def _own_turn(self) -> None:
        if self._on_own_turn is not None:
            self._on_own_turn()

    @property
    def background(self) -> tuple[BackgroundTask, ...]:
        """The background tasks the live CLI reports running (none without one)."""
        cli = self._cli
        work = None if cli is None or cli.ending is not None else cli.background
        return () if work is None else tuple(work.tasks.values())

    @property
    def own_turn_held(self) -> bool:
        """Whether the live CLI runs a turn it started by itself that no turn has read yet
        (a turn of the agent's that began meanwhile read it instead)."""
        cli = self._cli
        return cli is not None and cli.ending is None and bool(cli.held)

    def hold_wakeups(self, due: dict[str, float]) -> None:
        """The live CLI, which just scheduled the wake-ups ``due`` (stored copies' ids, due
        times on the wall clock), fires them itself while it lives: it is read between
        turns for their turns (`holds_wakeup`, `take_wakeup`). None without a live CLI."""
        cli = self._cli
        if cli is not None and cli.ending is None and due:
            cli.wakeups.update(due)
            cli._poke()  # an idle one starts reading

    def holds_wakeup(self, schedule_id: str) -> bool:
        """Whether the live CLI that scheduled wake-up ``schedule_id`` still lives, to fire it."""
        cli = self._cli
        return (
            cli is not None
            and cli.ending is None
            and cli.proc is not None
            and cli.proc.exit_status is None
            and schedule_id in cli.wakeups
        )

    def take_wakeup(self, now: float) -> str | None:
        """The wake-up a turn the live CLI started by itself at ``now`` (wall clock) is:
        the one it holds that is due soonest, if that is due within `WAKEUP_EARLY` of
        ``now`` (the CLI fires at a whole minute, maybe before the stored due time); no
        longer held. None: the turn is another (a background task's end). By time, as the
        CLI's turn names no wake-up (claude 2.1.332: its init, the answer, the result)."""
        cli = self._cli
        if cli is None or not cli.wakeups:
            return None
        schedule_id, due = min(cli.wakeups.items(), key=lambda item: item[1])
        if due > now + WAKEUP_EARLY:
            return None
        del cli.wakeups[schedule_id]
        return schedule_id

    def end_background(self, why: str) -> None:
        """End the live CLI, and its background work with it, if it has any, runs a turn
        of its own or holds a wake-up (the agent halts: nobody would take such a turn; a
        wake-up's stored copy queues instead); a running turn's end ends it."""
        cli = self._cli
        work = None if cli is None else cli.background
        if cli is not None and (cli.held or cli.wakeups or (work is not None and work.tasks)):
            cli.end(why)

    @property
    def turn_slots(self) -> ProcessSlots | None:
        """The slots a turn takes for itself: one process per turn holds one for the turn; a
        live process holds its own."""
        return self._slots if self._live is None else None

    def channel(
        self,
        prompt: str | None,
        session_id: str | None,
        baseline: SessionTotals | None,
        watch: TurnWatch,
        *,
        retry: bool,
    ) -> _OneShotChannel | _LiveChannel:
        """The channel of one turn, to open with ``async with`` (spawning, or taking the
        live process). ``retry``: a live process that turns out to have died unheard is
        reported by `finish` (None) instead of failing the turn."""
        if self._live is None:
            assert prompt is not None  # a turn the CLI starts by itself runs on a live one
            return _OneShotChannel(self, prompt, session_id, baseline, watch)
        return _LiveChannel(self, self._live, prompt, session_id, baseline, watch, retry)

    def options_now(self) -> Any:
        """The backend options for a CLI process starting now."""
        if self._turn_options is None:
            return self._backend_options
        return self._turn_options(self._backend_options)

    async def call(self, call: ChannelCall, argument: Any) -> Any:
        """The runtime's ``call`` to the live CLI (`ChannelCalls.call`): its answer's value.
        A setting (``set_model``, ``set_permission_mode``) holds for every later process too;
        without a live process now it is only kept for the next one, and a call that reads
        the process's state (``context_usage``) or acts on it (``stop_task``) returns None."""
        return await self._calls.call(self._cli, call, argument)

    async def aclose(self) -> None:
        """End the live process, if any (the instance ends)."""
        if self._cli is not None:
            await self._retire(self._cli, "the agent stopped")

    ################
    # Every process: spawn, record, trace; the record cleared once it is gone
    ################

    @asynccontextmanager
    async def _process(
        self, command: Command, watch: TurnWatch, *, stdin_open: bool
    ) -> AsyncIterator[CliProcess]:
        spawned = False
        try:
            async with open_cli_process(
                command, self._limits, tracker=self._tracker, stdin_open=stdin_open
            ) as proc:
                tracker = self._tracker
                # Before any checkpoint: a fence that runs next kills it with the agent's.
                with nullcontext() if tracker is None else tracker._own(self._agent, proc):
                    # Set first: a cancelled write may still have reached the store, and
                    # clearing a record that is not there is harmless.
                    spawned = True
                    watch.spawned(proc)
                    await self._records.spawned(proc.pid, proc.pgid, proc.start_time, proc.marker)
                    yield proc
        finally:
            if spawned:
                await self._records.gone()

    ################
    # A live process: taken for a turn, kept between turns
    ################

    def _alarm_task(self) -> Alarm:
        # One task for the bounds of all of the instance's turns, not one per turn.
        if self._alarm is None:
            assert self._nursery is not None
            self._alarm = Alarm()
            self._nursery.start_soon(self._alarm.run)
        return self._alarm

    async def _begin_turn(self, session_id: str | None, watch: TurnWatch) -> WarmCli:
        """The process for the next turn: the live one if it fits, else a new one (waiting
        for a process slot, which the turn's status shows).

        Raises `ProcessFailure` when a new process cannot be spawned or made ready."""
        cli = self._cli
        if cli is not None:
            # After a call that reads its answer between turns; without one, no checkpoint
            # (an interrupt made as the turn begins finds it the way it always did).
            try:
                cli.reader.acquire_nowait()
            except trio.WouldBlock:
                cli._poke()  # a reading between turns gives way
                await cli.reader.acquire()
            try:
                why = cli.usable(session_id)
                if why is None and cli.proc is not None and cli.proc.has_unread_output():
                    why = await cli.catch_up()
                if why is None:
                    cli.in_turn = True
            finally:
                cli.reader.release()
            if why is None:
                self._slots.busy(cli)
                logger.debug("warm CLI pid %s takes the next turn", cli.pid)
                await self._records.idle(False)
                return cli
            await self._retire(cli, why)
        live = self._live
        backend = self._backend
        assert live is not None and isinstance(backend, LiveBackend)
        protocol = backend.live(
            self.options_now(),
            session_id=session_id,
            approvals=live.approvals,
            hooks=live.hooks,
        )
        # The instance runs live only where its options can (asked once at its start), and
        # the answer depends on the options alone.
        assert protocol is not None
        cli = WarmCli(
            protocol=protocol,
            session_id=session_id,
            slots=self._slots,
            in_turn=True,
            background=background_work(live.background, protocol),
            own_turn=self._own_turn,
        )
        watch.waiting_for_process = True
        try:
            await self._slots.acquire(cli)
        finally:
            watch.waiting_for_process = False
        self._cli = cli
        assert self._nursery is not None
        try:
            await self._nursery.start(self._hold, cli, watch)
        except BaseException:
            if self._cli is cli:
                self._cli = None
            raise
        return cli

    async def _end_turn(self, cli: WarmCli, clean: bool) -> None:
        # After each turn on ``cli``: what the turn started is killed; the process lives on
        # (and its record says it idles), or has ended before this returns.
        assert self._live is not None
        with trio.CancelScope(shield=True):
            await cli.end_turn(clean, self._live)
            if cli.ending is not None:
                await self._retire(cli, cli.ending)
        if cli.ending is None:
            await self._records.idle(True)

    async def _retire(self, cli: WarmCli, why: str) -> None:
        assert self._live is not None
        cli.end(why)
        with trio.move_on_after(2 * self._live.kill_grace + _GONE_MARGIN, shield=True):
            await cli.ended.wait()

    async def _hold(
        self, cli: WarmCli, watch: TurnWatch, *, task_status: trio.TaskStatus[None]
    ) -> None:
        # The process's life: spawn, handshake, turns, idling; its slot after.
        live = self._live
        assert live is not None
        slots = self._slots
        try:
            async with self._process(cli.protocol.command, watch, stdin_open=True) as proc:
                cli.proc = proc
                cli._nursery = self._nursery
                await cli.handshake(self._limits)
                cli.resident = proc.members()
                await self._calls.reapply(cli)
                task_status.started()
                async with trio.open_nursery() as watchers:
                    watchers.start_soon(cli.watch_exit)
                    await cli.serve(live.keep_alive or 0.0)
                    watchers.cancel_scope.cancel()
                logger.debug("warm CLI pid %d ends: %s", proc.pid, cli.ending or "it exited")
        finally:
            slots.busy(cli)
            slots.release(cli)
            if self._cli is cli:
                self._cli = None
            cli.ended.set()


class _OneShotChannel:
    """One turn's own process: its command's, read to its exit, then its group killed."""

    __slots__ = ("_opened", "_proc", "_watch", "command", "drain_bound", "translator")

    alarm: Alarm | None = None  # the turn watches its bounds for this read itself

    def __init__(
        self,
        lifecycle: CliLifecycle,
        prompt: str,
        session_id: str | None,
        baseline: SessionTotals | None,
        watch: TurnWatch,
    ) -> None:
        backend, options = lifecycle._backend, lifecycle.options_now()
        self.command: Command = backend.command(options, prompt, session_id=session_id)
        self.translator: Translator | None = backend.translator(options, baseline=baseline)
        limits = lifecycle._limits
        # The driver's ladder: the interrupt signal, SIGTERM, SIGKILL.
        self.drain_bound = limits.interrupt_grace + limits.term_grace + _DRAIN_MARGIN
        self._opened: AbstractAsyncContextManager[CliProcess] = lifecycle._process(
            self.command, watch, stdin_open=False
        )
        self._proc: CliProcess | None = None
        self._watch = watch

    async def __aenter__(self) -> _OneShotChannel:
        self._proc = await self._opened.__aenter__()
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool | None:
        return await self._opened.__aexit__(kind, error, traceback)

    def batches(self, decode: Callable[[bytes], Any] | None) -> AsyncIterator[FrameBatch]:
        assert self._proc is not None
        return self._proc.batches(decode)

    def asking(self) -> trio.CancelScope:
        raise AssertionError("a process of one turn asks nothing")

    async def answer(self, data: bytes) -> None:
        raise AssertionError("a process of one turn asks nothing")

    def interrupt(self, gently: bool) -> None:
        # Before the spawn there is nothing to stop: the turn interrupts it when it reads.
        if self._proc is not None:
            self._proc.interrupt()

    async def finish(
        self, clean: bool, session_id: str | None
    ) -> tuple[ExitStatus | None, str] | None:
        assert self._proc is not None
        status = await self._proc.wait()
        self._proc.check_oom()
        return status, self._proc.stderr_tail


class _LiveChannel:
    """One turn on the instance's live CLI: its prompt written, read up to its end frame."""

    __slots__ = (
        "_baseline",
        "_clean",
        "_lifecycle",
        "_opening",
        "_prompt",
        "_ran",
        "_retry",
        "_session_id",
        "_settings",
        "_stopped",
        "_watch",
        "cli",
        "command",
        "drain_bound",
        "translator",
    )

    def __init__(
        self,
        lifecycle: CliLifecycle,
        settings: LiveSettings,
        prompt: str | None,
        session_id: str | None,
        baseline: SessionTotals | None,
        watch: TurnWatch,
        retry: bool,
    ) -> None:
        self._lifecycle = lifecycle
        self._settings = settings
        self._prompt = prompt
        self._session_id = session_id
        self._baseline = baseline
        self._watch = watch
        self._retry = retry
        self.cli: WarmCli | None = None
        self.command: Command | None = None
        self.translator: Translator | None = None
        limits = lifecycle._limits
        # In band for kill_grace, then the driver's ladder.
        self.drain_bound = (
            settings.kill_grace + limits.interrupt_grace + limits.term_grace + _DRAIN_MARGIN
        )
        # While the process is being taken (a slot, a spawn, a handshake): a stop cancels it.
        self._opening: trio.CancelScope | None = None
        self._stopped = False
        self._clean = False
        # This process ran the turn (it was not given up for a new one).
        self._ran = True

    @property
    def alarm(self) -> Alarm:
        return self._lifecycle._alarm_task()

    async def __aenter__(self) -> _LiveChannel:
        cli: WarmCli | None = None
        with trio.CancelScope() as self._opening:
            cli = await self._lifecycle._begin_turn(self._session_id, self._watch)
        self._opening = None
        if cli is not None:  # else stopped meanwhile: the channel stays empty
            self.cli = cli
            try:
                self.command = cli.protocol.command
                self.translator = cli.translator(self._baseline)
                await cli.start_turn(self._prompt)
            except BaseException as exc:
                await self.__aexit__(type(exc), exc, exc.__traceback__)
                raise
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        cli = self.cli
        if cli is None:
            return
        if self._ran:  # a hit if the process was warm
            lifecycle = self._lifecycle
            record_warm_process(lifecycle._agent, lifecycle._backend.name, hit=cli.turns > 0)
        await self._lifecycle._end_turn(cli, self._clean)

    def batches(self, decode: Callable[[bytes], Any] | None) -> AsyncIterator[Iterator[Any] | Ask]:
        assert self.cli is not None
        return self.cli.batches(decode)

    def asking(self) -> trio.CancelScope:
        cli = self.cli
        assert cli is not None and cli.proc is not None
        cli.asking = scope = trio.CancelScope()
        if self._stopped or cli.proc.exit_status is not None:
            scope.cancel()  # stopped, or exited, before the question came to be answered
        return scope

    async def answer(self, data: bytes) -> None:
        assert self.cli is not None
        await self.cli.answer(data)

    def interrupt(self, gently: bool) -> None:
        self._stopped = True
        if self.cli is not None:
            self.cli.interrupt(gently, self._settings.kill_grace)
        elif self._opening is not None:
            self._opening.cancel()

    async def finish(
        self, clean: bool, session_id: str | None
    ) -> tuple[ExitStatus | None, str] | None:
        cli = self.cli
        if cli is None:  # stopped while waiting for a process slot or its spawn
            return None, ""
        cli.session_id = session_id
        self._clean = clean
        if cli.turn_over:
            return None, ""
        cli.kill("the turn's stream ended before its end frame")
        assert cli.proc is not None
        proc = cli.proc
        status = await proc.wait()
        proc.check_oom()
        if self._retry and not self._stopped and cli.died_unheard():
            logger.info(
                "agent %r: warm CLI pid %d ended before it printed a line of the turn;"
                " the turn runs on a new process",
                self._lifecycle._agent,
                proc.pid,
                extra={"agent": self._lifecycle._agent},
            )
            self._ran = False
            return None
        return status, proc.stderr_tail
