"""``agentrt.sync``: the runtime called from plain threads, over a `RuntimeThread`.

Each call blocks its thread until the call's task in the runtime's trio thread settles;
any number of threads may call at once. Nothing here touches asyncio, so a notebook cell
(whose thread runs the kernel's asyncio loop) may call it too.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Coroutine, Iterator
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar

import outcome

from .. import _runtime as trio_runtime
from .. import _supervisor as trio_supervisor
from .._events import Event
from .._operations import Blocking, make_operations
from .._requests import Ref
from .._stream import EventStream as TrioEventStream
from .._unsolicited import UnsolicitedTurn
from .._unsolicited import UnsolicitedTurns as TrioUnsolicitedTurns
from .._util import NoPublicConstructor
from ._forwarding import AgentCallsBase, same_face
from ._runtime_thread import (
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


def _check_thread(thread: RuntimeThread) -> None:
    if thread.is_current:
        raise RuntimeError(
            "agentrt.sync called from the runtime's own thread (an agent callback), where "
            "it would wait for itself; a callback is trio code: await the trio API there"
        )


def _blocking(thread: RuntimeThread, function: Callable[[], Coroutine[Any, Any, R]]) -> R:
    """Run ``function()`` in the runtime's thread and wait for its outcome. An exception
    that interrupts the wait (KeyboardInterrupt) cancels the call as trio cancellation
    would, and goes on once the call has settled."""
    _check_thread(thread)
    # A lock held until the outcome comes: a cheaper one-shot signal than threading.Event
    # (which builds a Condition and a waiter lock per wait), and as interruptible.
    settled = threading.Lock()
    settled.acquire()
    box: list[outcome.Outcome[R]] = []

    def on_done(result: outcome.Outcome[R]) -> None:
        box.append(result)
        settled.release()

    call = thread.submit(function, on_done)
    try:
        settled.acquire()
    except BaseException:
        if not box:  # else the outcome came just before the interruption
            call.cancel()
            _waited(settled.acquire)
        raise
    return box[0].unwrap()


def _waited(wait: Callable[[], object]) -> BaseException | None:
    """Call ``wait()`` until it returns, however often an exception (a Ctrl-C) interrupts
    it: what it waits for (a call undone, a runtime closed, each bounded by the runtime)
    must not be left half done. Returns the first interruption, for the caller to raise
    once the wait is over."""
    interrupted: BaseException | None = None
    while True:
        try:
            wait()
            return interrupted
        except BaseException as exc:
            if interrupted is None:
                interrupted = exc


def _awaited(
    method: Callable[Concatenate[T, P], Coroutine[Any, Any, R]],
) -> Callable[Concatenate[Any, P], R]:
    def forward(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> R:
        target, thread = self._target, self._thread
        return _blocking(thread, lambda: method(target, *args, **kwargs))

    same_face(forward, method)
    return forward


def _immediate(
    method: Callable[Concatenate[T, P], R],
) -> Callable[Concatenate[Any, P], R]:
    def forward(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> R:
        target, thread = self._target, self._thread
        assert isinstance(thread, RuntimeThread)
        _check_thread(thread)
        return thread.run_sync(lambda: method(target, *args, **kwargs))

    same_face(forward, method)
    return forward


def _holding(
    method: Callable[Concatenate[TrioRuntime, P], AbstractAsyncContextManager[TrioSupervisor]],
) -> Callable[Concatenate[Runtime, P], AbstractContextManager[Supervisor]]:
    # A nested supervisor's block is owned by a trio task: one of the runtime's thread
    # holds it open for the ``with`` block.
    @contextlib.contextmanager
    def forward(self: Runtime, /, *args: P.args, **kwargs: P.kwargs) -> Iterator[Supervisor]:
        runtime, thread = self._target, self._thread
        _check_thread(thread)
        block = HeldBlock(thread, lambda: method(runtime, *args, **kwargs))
        entered = block.start()
        try:
            entered.result()
        except BaseException:
            _left(block)
            raise
        try:
            yield Supervisor._create(thread, block.value)
        except Exception as exc:
            if (interrupted := _left(block)) is not None:
                raise interrupted  # noqa: B904 (what the block raised is its context)
            if block.failure is not None:  # what the code met was its agents stopping
                raise block.failure from cause_of_failure(block.failure, exc)
            raise
        except BaseException:
            _left(block)
            raise
        if (interrupted := _left(block)) is not None:
            raise interrupted
        if block.failure is not None:
            raise block.failure

    same_face(forward, method)
    forward.__doc__ = OPEN_SUPERVISOR_DOC
    return forward


OPEN_SUPERVISOR_DOC = """`agentrt.Runtime.open_supervisor` from a thread: ``with
rt.open_supervisor(...) as sup:`` takes the same arguments and opens a nested supervisor,
held open by a task of the runtime's thread until the block is left (which stops its agents
before it returns); start agents under it with `Supervisor.start_agent`. Raises, on
opening, what the trio form raises (`InvalidOptions`, `NoRuntime`), as itself. When it
gives up (more than ``max_restarts`` restarts in ``period`` seconds) it stops its agents,
which the block's calls to them then say (`AgentStopped`, `AgentNotFound`): a thread
cannot be cancelled as the trio form cancels its block. `RestartLimitExceeded` (with the
crash history) comes out of the block when it is left, in place of an error the block's
code met (its ``__cause__``); the rest of the runtime goes on."""


def _left(block: HeldBlock[Any]) -> BaseException | None:
    """Leave ``block`` and wait until it is left; the first interruption (a Ctrl-C)
    meanwhile, for the caller to raise."""
    return _waited(block.close().result)


class EventStream(metaclass=NoPublicConstructor):
    """`agentrt.EventStream` read from a thread: an iterator over one request's events, in
    order, ending after its terminal event; also a context manager that closes it.
    Backpressure is the trio stream's: a reader that stops reading makes the turn wait."""

    _made_by = "rt.stream(ref)"

    __slots__ = ("_stream", "_thread")

    def __init__(self, thread: RuntimeThread, stream: TrioEventStream) -> None:
        self._thread = thread
        self._stream = stream

    def __iter__(self) -> EventStream:
        return self

    def __next__(self) -> Event:
        try:
            return _blocking(self._thread, self._stream.__anext__)
        except StopAsyncIteration:
            raise StopIteration from None

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

    def __enter__(self) -> EventStream:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        # A reader that breaks out of its loop drops the stream unclosed: the turn must not
        # stay blocked on a full buffer.
        self.close()


class UnsolicitedTurns(metaclass=NoPublicConstructor):
    """`agentrt.UnsolicitedTurns` read from a thread: an iterator over the turns an agent
    runs that nobody asked for, each as it ends; also a context manager that closes it.
    It never makes the agent wait (a reader far behind loses the oldest turns, counted in
    `dropped`)."""

    _made_by = "rt.unsolicited(name)"

    __slots__ = ("_thread", "_turns")

    def __init__(self, thread: RuntimeThread, turns: TrioUnsolicitedTurns) -> None:
        self._thread = thread
        self._turns = turns

    def __iter__(self) -> UnsolicitedTurns:
        return self

    def __next__(self) -> UnsolicitedTurn:
        try:
            return _blocking(self._thread, self._turns.__anext__)
        except StopAsyncIteration:
            raise StopIteration from None

    @property
    def dropped(self) -> int:
        """`agentrt.UnsolicitedTurns.dropped`: the turns this reader lost by falling behind."""
        return self._turns.dropped

    def close(self) -> None:
        """Stop reading. Raises nothing; closing twice is fine."""
        # In the runtime's thread, where the agent's mailbox fills it.
        self._thread.run_soon(self._turns.close)

    def __enter__(self) -> UnsolicitedTurns:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class Runtime(RuntimeFacts, Blocking, AgentCallsBase, metaclass=NoPublicConstructor):
    """`agentrt.Runtime` called from plain threads: the same methods, the same arguments,
    the same results and errors (the exception objects themselves), each blocking its
    thread until it settles; safe from any number of threads at once. A KeyboardInterrupt
    during a call cancels it as trio cancellation does (an ``ask``'s turn stops) and goes on
    once the turn's processes are gone. Made by `agentrt.sync.open_runtime`."""

    _made_by = "agentrt.sync.open_runtime()"

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
        _check_thread(self._thread)
        runtime = self._target
        return EventStream._create(self._thread, self._thread.run_sync(lambda: runtime.stream(ref)))

    same_face(stream, TrioRuntime.stream)

    def unsolicited(self, name: str) -> UnsolicitedTurns:
        _check_thread(self._thread)
        runtime = self._target
        turns = self._thread.run_sync(lambda: runtime.unsolicited(name))
        return UnsolicitedTurns._create(self._thread, turns)

    same_face(unsolicited, TrioRuntime.unsolicited)

    open_supervisor = _holding(TrioRuntime.open_supervisor)

    def __enter__(self) -> Runtime:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._close(exc)

    def close(self) -> None:
        """Close the runtime (what leaving the ``with`` block does): every agent stops and
        every turn's processes are killed; returns once they are. Idempotent. A
        KeyboardInterrupt meanwhile does not cut it short: it goes on once they are."""
        self._close(None)

    def _close(self, met: BaseException | None) -> None:
        # ``met``: what the block raised, in whose place a give-up comes out.
        _check_thread(self._thread)
        if (interrupted := _closed(self._thread)) is not None:
            raise interrupted  # once every turn's processes are gone
        if (failure := self._thread.failure) is not None:
            self._thread.failure = None
            if met is None or isinstance(met, Exception):  # a KeyboardInterrupt goes on
                raise failure from cause_of_failure(failure, met)


# The awaited agent operations, each made from its `Runtime` method (`agentrt._operations`).
make_operations(Runtime, _awaited, TrioRuntime)


class Supervisor(SupervisorFacts, metaclass=NoPublicConstructor):
    """`agentrt.Supervisor` from a thread: a nested supervisor, made by
    `Runtime.open_supervisor`; ``start_agent`` blocks until the agent has started."""

    _made_by = "rt.open_supervisor()"

    __slots__ = ()

    start_agent = _awaited(TrioSupervisor.start_agent)
    agents = _immediate(TrioSupervisor.agents)


def _closed(thread: RuntimeThread) -> BaseException | None:
    """Close the runtime and wait until its thread has ended; the first interruption (a
    Ctrl-C) meanwhile, for the caller to raise. Waited for on the runtime's own signal:
    ``Thread.join`` interrupted on CPython 3.11 marks the thread ended while it still
    runs, and the interpreter would then exit without waiting for it."""
    interrupted = _waited(thread.close().result)
    joined = _waited(thread.join)  # its run has ended: a moment at most
    return joined if interrupted is None else interrupted


def _opening(
    open_trio: Callable[P, AbstractAsyncContextManager[TrioRuntime]],
) -> Callable[P, Runtime]:
    def open_runtime(*args: P.args, **kwargs: P.kwargs) -> Runtime:
        thread = RuntimeThread(lambda: open_trio(*args, **kwargs))
        opened = thread.start()
        try:
            opened.result()
        except BaseException:
            _closed(thread)
            raise
        return Runtime._create(thread)

    same_face(open_runtime, open_trio)
    open_runtime.__doc__ = OPEN_RUNTIME_DOC
    return open_runtime


OPEN_RUNTIME_DOC = """`agentrt.open_runtime` for programs without an event loop of their
own (scripts, threads, a notebook cell): takes the same arguments, blocks until the
runtime is open (its errors, such as `InvalidOptions`, come out as themselves) and returns
an `agentrt.sync.Runtime`, whose methods block until they settle.

Use it as a context manager, ``with agentrt.sync.open_runtime(...) as rt:``, or call
``rt.close()``: either stops every agent and kills every turn's processes before it
returns (and raises `RestartLimitExceeded` if the runtime gave up meanwhile, in place of
the error the block met, which becomes its ``__cause__`` unless the give-up caused it). A
KeyboardInterrupt while it closes goes on once every turn's processes are gone. A runtime
left open is closed when the main thread ends. The runtime runs in a trio thread of its
own; nothing here uses asyncio, so a notebook cell (where an asyncio loop runs) may call
it. Agent callbacks run in that thread: they must not call ``agentrt.sync`` (a
`RuntimeError` says so)."""


open_runtime = _opening(trio_runtime.open_runtime)
