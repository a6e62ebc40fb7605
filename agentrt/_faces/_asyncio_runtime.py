"""``agentrt.asyncio``: the runtime awaited from asyncio, over a `RuntimeThread`.

Each awaited call is a task in the runtime's trio thread; its outcome comes back to the
caller's loop with ``call_soon_threadsafe``. Cancelling the asyncio task cancels the trio
call's scope, then waits (shielded, as trio's own ask does) until the runtime has undone
the work, before the `asyncio.CancelledError` goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Coroutine
from concurrent.futures import Future
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar

import outcome

from .. import _runtime as trio_runtime
from .. import _supervisor as trio_supervisor
from .._events import Event
from .._operations import Awaiting, make_operations
from .._requests import Ref
from .._stream import EventStream as TrioEventStream
from .._unsolicited import UnsolicitedTurn
from .._unsolicited import UnsolicitedTurns as TrioUnsolicitedTurns
from .._util import ClosingReader, NoPublicConstructor
from ._forwarding import AgentCallsBase, same_face
from ._runtime_thread import (
    Block,
    HeldBlock,
    RuntimeFacts,
    RuntimeThread,
    SupervisorFacts,
    cause_of_failure,
)

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")
TrioRuntime = trio_runtime.Runtime
TrioSupervisor = trio_supervisor.Supervisor


class _Delivery(Generic[R]):
    """Where a call's outcome lands on the caller's loop: the future its task awaits (a
    second one once a cancellation has cancelled the first), and the outcome itself, kept
    for a task that was cancelled just before it came."""

    __slots__ = ("future", "outcome")

    def __init__(self, future: asyncio.Future[None]) -> None:
        self.future = future
        self.outcome: outcome.Outcome[R] | None = None

    def __call__(self, result: outcome.Outcome[R]) -> None:
        self.outcome = result
        if not self.future.done():
            self.future.set_result(None)


async def _settle(thread: RuntimeThread, function: Callable[[], Coroutine[Any, Any, R]]) -> R:
    """Run ``function()`` in the runtime's thread and await its outcome on this loop."""
    loop = asyncio.get_running_loop()
    delivery: _Delivery[R] = _Delivery(loop.create_future())

    def on_done(result: outcome.Outcome[R]) -> None:  # in the runtime's thread
        # A closed loop (RuntimeError): nobody waits for this outcome.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(delivery, result)

    call = thread.submit(function, on_done)
    try:
        # Awaited bare, not shielded: a shield costs a future and a loop iteration per call.
        await delivery.future
    except asyncio.CancelledError:
        if delivery.outcome is None:
            call.cancel()
            # As trio's ask: the cancellation reaches the caller once the work is undone
            # (the runtime bounds that wait); further cancellations do not cut it short.
            delivery.future = settled = loop.create_future()
            while delivery.outcome is None:
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.shield(settled)
        raise
    assert delivery.outcome is not None
    return delivery.outcome.unwrap()


def _awaited(
    method: Callable[Concatenate[T, P], Coroutine[Any, Any, R]],
) -> Callable[Concatenate[Any, P], Coroutine[Any, Any, R]]:
    async def forward(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> R:
        target, thread = self._target, self._thread
        return await _settle(thread, lambda: method(target, *args, **kwargs))

    same_face(forward, method)
    return forward


def _immediate(
    method: Callable[Concatenate[T, P], R],
) -> Callable[Concatenate[Any, P], R]:
    # A synchronous method reads the runtime's state: in its thread, where it is kept
    # (the loop waits for one scheduling step of that thread, never for a turn).
    def forward(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> R:
        target, thread = self._target, self._thread
        assert isinstance(thread, RuntimeThread)
        return thread.run_sync(lambda: method(target, *args, **kwargs))

    same_face(forward, method)
    return forward


def _holding(
    method: Callable[Concatenate[TrioRuntime, P], AbstractAsyncContextManager[TrioSupervisor]],
) -> Callable[Concatenate[Runtime, P], AbstractAsyncContextManager[Supervisor]]:
    # A nested supervisor's block is owned by a trio task: one of the runtime's thread
    # holds it open for the asyncio ``async with``.
    def forward(
        self: Runtime, /, *args: P.args, **kwargs: P.kwargs
    ) -> AbstractAsyncContextManager[Supervisor]:
        runtime, thread = self._target, self._thread
        block = HeldBlock(thread, lambda: method(runtime, *args, **kwargs))
        return _held(block, lambda: Supervisor._create(thread, block.value))

    same_face(forward, method)
    return forward


class EventStream(ClosingReader, metaclass=NoPublicConstructor):
    """`agentrt.EventStream` read from asyncio: an async iterator over one request's events,
    in order, ending after its terminal event; also an async context manager that closes it.
    Backpressure is the trio stream's: a reader that stops reading makes the turn wait.
    Cancelling a read leaves the event it waited for in the stream."""

    _made_by = "rt.stream(ref)"

    __slots__ = ("_stream", "_thread")

    def __init__(self, thread: RuntimeThread, stream: TrioEventStream) -> None:
        self._thread = thread
        self._stream = stream

    async def __anext__(self) -> Event:
        return await _settle(self._thread, self._stream.__anext__)

    @property
    def dropped(self) -> int:
        """`agentrt.EventStream.dropped`: the events this stream skipped (of an agent
        another runtime owns only)."""
        return self._stream.dropped

    def close(self) -> None:
        """Stop reading; the turn no longer waits for this stream. Raises nothing; closing
        twice is fine. Dropping the stream (breaking out of a loop over it) closes it too."""
        # In the runtime's thread, where the turn waits on the stream's channel.
        self._thread.run_soon(self._stream.close)

    async def aclose(self) -> None:
        """Async spelling of `close`."""
        self.close()

    def __del__(self) -> None:
        # A reader that breaks out of its loop drops the stream unclosed: the turn must not
        # stay blocked on a full buffer.
        self.close()


class UnsolicitedTurns(ClosingReader, metaclass=NoPublicConstructor):
    """`agentrt.UnsolicitedTurns` read from asyncio: an async iterator over the turns an
    agent runs that nobody asked for, each as it ends; also an async context manager that
    closes it. It never makes the agent wait (a reader far behind loses the oldest turns,
    counted in `dropped`). Cancelling a read takes no turn."""

    _made_by = "rt.unsolicited(name)"

    __slots__ = ("_thread", "_turns")

    def __init__(self, thread: RuntimeThread, turns: TrioUnsolicitedTurns) -> None:
        self._thread = thread
        self._turns = turns

    async def __anext__(self) -> UnsolicitedTurn:
        return await _settle(self._thread, self._turns.__anext__)

    @property
    def dropped(self) -> int:
        """`agentrt.UnsolicitedTurns.dropped`: the turns this reader lost by falling behind."""
        return self._turns.dropped

    def close(self) -> None:
        """Stop reading. Raises nothing; closing twice is fine."""
        # In the runtime's thread, where the agent's mailbox fills it.
        self._thread.run_soon(self._turns.close)

    async def aclose(self) -> None:
        """Async spelling of `close`."""
        self.close()


class Runtime(RuntimeFacts, Awaiting, AgentCallsBase, metaclass=NoPublicConstructor):
    """`agentrt.Runtime` awaited from asyncio: the same methods, the same arguments, the
    same results and errors (the exception objects themselves), run in the runtime's trio
    thread. Cancelling the asyncio task that awaits a call cancels it as trio cancellation
    does (an ``ask``'s request leaves the queue or its turn stops, and the
    `asyncio.CancelledError` goes on once the turn's processes are gone). The synchronous
    methods (``agents``, ``whereis``, ``statistics``, ``stream``, ``unsolicited``) wait for
    one scheduling step of the runtime's thread. Made by `agentrt.asyncio.open_runtime`."""

    _made_by = "agentrt.asyncio.open_runtime()"

    def __init__(self, thread: RuntimeThread) -> None:
        self._thread = thread
        self._target = thread.runtime

    start_agent = _awaited(TrioRuntime.start_agent)
    workspaces = _awaited(TrioRuntime.workspaces)
    remove_workspace = _awaited(TrioRuntime.remove_workspace)
    agents = _immediate(TrioRuntime.agents)
    whereis = _immediate(TrioRuntime.whereis)
    statistics = _immediate(TrioRuntime.statistics)

    def stream(self, ref: Ref) -> EventStream:
        runtime = self._target
        return EventStream._create(self._thread, self._thread.run_sync(lambda: runtime.stream(ref)))

    same_face(stream, TrioRuntime.stream)

    def unsolicited(self, name: str) -> UnsolicitedTurns:
        runtime = self._target
        turns = self._thread.run_sync(lambda: runtime.unsolicited(name))
        return UnsolicitedTurns._create(self._thread, turns)

    same_face(unsolicited, TrioRuntime.unsolicited)

    open_supervisor = _holding(TrioRuntime.open_supervisor)


# The awaited agent operations, each made from its `Runtime` method (`agentrt._operations`).
make_operations(Runtime, _awaited, TrioRuntime)


class Supervisor(SupervisorFacts, metaclass=NoPublicConstructor):
    """`agentrt.Supervisor` from asyncio: a nested supervisor, made by
    `Runtime.open_supervisor`; ``start_agent`` is awaited, ``agents`` waits for one
    scheduling step of the runtime's thread."""

    _made_by = "rt.open_supervisor()"

    __slots__ = ()

    start_agent = _awaited(TrioSupervisor.start_agent)
    agents = _immediate(TrioSupervisor.agents)


async def _wait_future(future: Future[None]) -> None:
    await asyncio.wrap_future(future)


def _opening(
    open_trio: Callable[P, AbstractAsyncContextManager[TrioRuntime]],
) -> Callable[P, AbstractAsyncContextManager[Runtime]]:
    def open_runtime(*args: P.args, **kwargs: P.kwargs) -> AbstractAsyncContextManager[Runtime]:
        thread = RuntimeThread(lambda: open_trio(*args, **kwargs))
        return _held(thread, lambda: Runtime._create(thread))

    same_face(open_runtime, open_trio)
    open_runtime.__doc__ = OPEN_RUNTIME_DOC
    return open_runtime


@asynccontextmanager
async def _held(block: Block, made: Callable[[], T]) -> AsyncIterator[T]:
    """Open ``block`` in the runtime's thread, give ``made()`` to the ``async with``, and
    leave the block when the ``async with`` is left. A failure that ends the block while
    held (the runtime or the supervisor gave up) cancels the task in the ``async with``
    and comes out of it, in place of that cancellation or of what the block's code met
    meanwhile (`cause_of_failure`)."""
    loop = asyncio.get_running_loop()
    owner = asyncio.current_task()

    def on_failure(error: BaseException) -> None:  # the block gave up, in the runtime's thread
        # Queued before the block's end is: it reaches the task before _left returns.
        if owner is not None:
            loop.call_soon_threadsafe(owner.cancel)

    # Set before the block opens: a failure just after it opened cancels the task too.
    block.on_failure = on_failure
    try:
        await _wait_future(block.start())
        yield made()
    except BaseException as exc:
        cancelled = await _left(block)
        if block.failure is not None and owner is not None:
            owner.uncancel()  # that cancellation was ours: it stood for the failure
            if not isinstance(exc, KeyboardInterrupt | SystemExit):
                met = None if isinstance(exc, asyncio.CancelledError) else exc
                raise block.failure from cause_of_failure(block.failure, met)
        if cancelled:
            raise asyncio.CancelledError  # noqa: B904 (what the block raised is its context)
        raise
    cancelled = await _left(block)
    if block.failure is not None and owner is not None:
        owner.uncancel()
        raise block.failure
    if cancelled:
        raise asyncio.CancelledError


OPEN_RUNTIME_DOC = """`agentrt.open_runtime` for an asyncio program: ``async with
agentrt.asyncio.open_runtime(...) as rt:`` takes the same arguments and gives a runtime
whose methods are awaited from asyncio (`agentrt.asyncio.Runtime`).

The runtime runs in a trio thread of its own, opened here (its errors, such as
`InvalidOptions`, come out of the ``async with`` as themselves). Leaving the block stops
every agent and kills every turn's processes before the block is left, however often the
task is cancelled meanwhile. When the runtime gives up (`RestartLimitExceeded`), the task
in the block is cancelled and the error comes out of the block, as the trio form cancels
its block (in place of that cancellation, or of the error a call the block awaited met
meanwhile). Agent callbacks still run in the agent's trio task (docs/asyncio.md says what
they may do there)."""


async def _left(block: Block) -> bool:
    """Leave ``block`` and wait until it is left, however often the caller is cancelled
    meanwhile (closing kills every turn's processes, within its bounds); whether it was."""
    ended = asyncio.ensure_future(_wait_future(block.close()))
    cancelled = False
    while not ended.done():
        try:
            await asyncio.shield(ended)
        except asyncio.CancelledError:
            cancelled = True
    block.join()
    return cancelled


open_runtime = _opening(trio_runtime.open_runtime)
