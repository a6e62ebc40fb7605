"""How a turn (`agentrt._turn.Turn`) reads a CLI's `Channel`: the frames of its process
with the bounds watched beside them, the CLI's asks answered between reads (the tool call's
parent filled in, the denials kept for the Response), and a process failure as a stop."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any

import attrs
import trio

from ._alarm import Alarm
from ._asks import Ask, HookCall, ToolApproval
from ._driver._process import CliProcess, ProcessFailure
from ._events import PermissionDenial, SessionTotals, ToolDecisionEvent
from ._segment import SegmentText
from ._turn_source import Channel, ChannelSource, TurnHost
from ._turn_stop import Stopping
from .backend import Command, ExitStatus, Translator


class ChannelReading(Stopping):
    """The part of `agentrt._turn.Turn` that reads a CLI's channel. A base class rather
    than an object of its own, so that a read makes no extra call."""

    # Turn's fields and the method this part uses (declared, with their meaning, on Turn).
    prompt: str | None
    session_id: str | None
    baseline: SessionTotals | None
    host: TurnHost
    command: Command | None
    translator: Translator | None
    waiting_for_process: bool
    _segment: SegmentText
    _denials: list[PermissionDenial]
    _parents: dict[str, str]
    _handle: Callable[..., Awaitable[None]]
    _now: Callable[[], float]

    async def _run_channel(
        self, source: ChannelSource, *, retry: bool
    ) -> tuple[ExitStatus | None, str] | None:
        self._channel = channel = source.channel(
            self.prompt, self.session_id, self.baseline, self, retry=retry
        )
        try:
            async with channel:
                self.command, self.translator = channel.command, channel.translator
                if self.translator is not None:  # else stopped while it opened
                    preamble = getattr(self.translator, "preamble", None)
                    if preamble is not None:
                        await self._handle((), preamble())
                    await self._read(channel)
                return await channel.finish(self._ended_cleanly(), self.session_id)
        except* ProcessFailure as group:
            self._process_failed(group)
        finally:
            self._channel = None  # gone: a terminal made by finish() stops nothing
        return None, ""

    def spawned(self, process: CliProcess) -> None:
        """A process was spawned for this turn (`agentrt._driver._lifecycle.TurnWatch`)."""
        if self.trace is not None:
            self.trace.spawned(process)

    async def _answer(self, channel: Channel, ask: Ask) -> None:
        # In the turn's task, between reads: the CLI waits for this answer.
        if isinstance(ask, ToolApproval) and ask.request.parent_tool_use_id is None:
            # The CLI's request does not say; the tool call it is about did.
            parent = self._parents.get(ask.request.tool_use_id)
            if parent is not None:
                request = attrs.evolve(ask.request, parent_tool_use_id=parent)
                ask = attrs.evolve(ask, request=request)
        # The CLI waits for the agent, not the model: not time without a first event.
        self._bounds.pause_first(self._now())
        self._reschedule()
        with channel.asking() as asking:
            answer, events = await self.host.answer(ask)
        self._bounds.resume_first(self._now())
        self._reschedule()
        if asking.cancelled_caught:
            return  # nothing reads the CLI while the agent is asked: back to reading it
        for event in events:
            if type(event) is ToolDecisionEvent and not event.allowed:
                assert isinstance(ask, ToolApproval)
                request = ask.request
                denial = PermissionDenial(
                    tool_name=request.tool_name,
                    tool_use_id=request.tool_use_id,
                    input=request.input,
                )
                self._denials.append(denial)
        await channel.answer(answer)
        if events:
            await self._handle((), events)

    def _decode(self) -> Callable[[bytes], Any] | None:
        assert self.translator is not None
        return self.translator.decode  # its typed line decoder, if any

    async def _read(self, channel: Channel) -> None:
        # The frames of a process, with the bounds watched beside them: by the channel's
        # alarm (a live CLI's, whose task outlives its turns), else by one for this read.
        self._drain_scope = trio.CancelScope()
        if self._failure is not None:  # stopped while it opened
            self._interrupt_cli()
        try:
            alarm = channel.alarm
            batches = channel.batches(self._decode())
            if alarm is not None:
                await self._read_bounded(channel, batches, alarm)
                return
            async with trio.open_nursery() as nursery:
                alarm = Alarm()
                nursery.start_soon(alarm.run)
                await self._read_bounded(channel, batches, alarm)
                nursery.cancel_scope.cancel()
        finally:
            self._drain_scope = None

    async def _read_bounded(
        self, channel: Channel, batches: AsyncIterator[Iterable[Any] | Ask], alarm: Alarm
    ) -> None:
        assert self._drain_scope is not None
        self._alarm = alarm
        self._arm()
        try:
            with self._drain_scope:
                # One read, one delivery (unless a checkpoint or a full subscriber has to be
                # waited for).
                async for batch in batches:
                    if type(batch) is ToolApproval or type(batch) is HookCall:
                        await self._answer(channel, batch)
                        continue
                    await self._handle(batch)
                    self._segment.fold()
                    # Not kept while waiting for the next read: with many turns waiting on
                    # their pipes, a read's lines each add up.
                    del batch
        finally:
            self._alarm = None
            alarm.clear()

    def _process_failed(self, group: BaseExceptionGroup[ProcessFailure]) -> None:
        # The process is gone already (the driver cleaned up before raising).
        self._channel = None
        for failure in group.exceptions:
            if isinstance(failure, ProcessFailure):
                self.stop(failure.reason, failure.message, cause=failure)
