"""Where a turn's frames come from, and the actor as the turn sees it: the protocols
`agentrt._turn.Turn` reads through (a CLI process's `Channel`, or an `InProcessSource`)."""

from __future__ import annotations

import types
from collections.abc import AsyncIterator, Callable, Generator, Iterable, Sequence
from types import TracebackType
from typing import Any, Protocol

import attrs
import trio

from ._alarm import Alarm
from ._asks import Ask
from ._driver._lifecycle import TurnWatch
from ._driver._process_slots import ProcessSlots
from ._events import Event, SessionTotals
from .backend import Backend, Command, ExitStatus, InProcessBackend, Translator


class TurnHost(Protocol):
    """The actor, as its turns see it."""

    async def started(self) -> None:
        """The turn starts (an in-process one: a CLI's starts at its spawn, which the
        process records see): the store's row becomes the agent's if it is not yet."""
        ...

    async def checkpoint(self, session_id: str) -> None:
        """Keep the new session id, before the next frame is fed; a StoreError fails the
        turn with store_failed."""
        ...

    def watched(self) -> bool:
        """Whether anything looks at the events as they come (asked once per read)."""
        ...

    async def deliver(self, events: Sequence[Event]) -> None:
        """handle_stream_event and subscribers, for the events of one read (up to a new
        session id) once the turn has recorded them. An exception fails the turn
        (turn_crashed); a stop meanwhile takes effect from the next read."""
        ...

    async def answer(self, ask: Ask) -> tuple[bytes, Sequence[Event]]:
        """The agent's answer to what a live CLI asks, with the events that record it."""
        ...


class Channel(Protocol):
    """One turn's frames from a CLI process (agentrt._driver._lifecycle), opened with ``async
    with``: a stop while it opens goes to `interrupt` too."""

    @property
    def command(self) -> Command | None:
        """The process's command, once open (None: stopped while it opened)."""
        ...

    @property
    def translator(self) -> Translator | None:
        """The turn's translator, once open (None: stopped while it opened)."""
        ...

    @property
    def drain_bound(self) -> float:
        """How long the frames are still read once it was interrupted."""
        ...

    @property
    def alarm(self) -> Alarm | None:
        """What watches the turn's bounds while it is read, if the channel has one."""
        ...

    async def __aenter__(self) -> Channel: ...

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool | None: ...

    def batches(self, decode: Callable[[bytes], Any] | None) -> AsyncIterator[Iterable[Any] | Ask]:
        """The frames, one iterable per read; what the CLI asks comes between reads, and
        waits for `answer`."""
        ...

    def asking(self) -> trio.CancelScope:
        """The scope to wait for the agent's answer in: cancelled when the CLI exits or the
        turn is stopped meanwhile, which want no answer (the CLI withdraws its question as
        it stops)."""
        ...

    async def answer(self, data: bytes) -> None: ...

    def interrupt(self, gently: bool) -> None:
        """Stop the turn: ``gently`` lets a live CLI end it in band."""
        ...

    async def finish(
        self, clean: bool, session_id: str | None
    ) -> tuple[ExitStatus | None, str] | None:
        """After the frames: how the process ended and its stderr tail, or (None, "") for
        a live CLI whose turn ended at its end frame; None when the turn must run again
        (a live CLI that died without a word of it, opened with ``retry``)."""
        ...


class ChannelSource(Protocol):
    """What opens a turn's `Channel`: the instance's `agentrt._driver._lifecycle.CliLifecycle`."""

    @property
    def turn_slots(self) -> ProcessSlots | None: ...

    def channel(
        self,
        prompt: str | None,
        session_id: str | None,
        baseline: SessionTotals | None,
        watch: TurnWatch,
        *,
        retry: bool,
    ) -> Channel: ...


@attrs.frozen
class InProcessSource:
    """Frames without a process (`InProcessBackend`): its runner feeds them to the turn as
    it makes them."""

    runner: InProcessBackend
    # The same backend, for its command and translator.
    backend: Backend
    backend_options: Any
    # The runtime's max_processes: an in-process turn holds a slot as a CLI turn does.
    turn_slots: ProcessSlots | None

    def open(
        self, prompt: str, session_id: str | None, baseline: SessionTotals | None
    ) -> tuple[Command, Translator]:
        backend, options = self.backend, self.backend_options
        command = backend.command(options, prompt, session_id=session_id)
        return command, backend.translator(options, baseline=baseline)


FrameSource = InProcessSource | ChannelSource

# The runner's steps, as trio drives a coroutine: what it yields to trio, and the run's end.
RunSteps = Generator[Any, Any, ExitStatus]


def run_until_wait(steps: RunSteps) -> tuple[bool, Any]:
    """Drive a runner's ``run`` (its ``__await__()``) in the calling task until it ends or
    waits, without awaiting it: (True, its status), or (False, what it yielded to trio as
    it began to wait, for `go_on`)."""
    try:
        return False, steps.send(None)
    except StopIteration as done:
        return True, done.value


@types.coroutine
def go_on(steps: RunSteps, waiting: object) -> RunSteps:
    """Await the run `run_until_wait` left waiting: ``waiting`` goes to trio, then what
    trio sends or throws goes to the run, as ``await run`` would have passed them."""
    while True:
        try:
            sent = yield waiting
        except BaseException as exc:  # the run's to handle (Cancelled too), as under await
            try:
                waiting = steps.throw(exc)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
            continue
        try:
            waiting = steps.send(sent)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
