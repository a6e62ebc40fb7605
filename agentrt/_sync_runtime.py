"""``agentrt.sync``: the runtime called from plain threads, over a `RuntimeThread`.

Each call blocks its thread until the call's task in the runtime's trio thread settles;
any number of threads may call at once. Nothing here touches asyncio, so a notebook cell
(whose thread runs the kernel's asyncio loop) may call it too.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Coroutine
from contextlib import AbstractAsyncContextManager
from typing import Any, Concatenate, ParamSpec, TypeVar

import outcome

from . import _runtime as trio_runtime
from ._errors import NoRuntime
from ._events import Event
from ._forwarding import same_face
from ._requests import Ref
from ._runtime_thread import RuntimeThread
from ._stream import EventStream as TrioEventStream
from ._util import NoPublicConstructor

P = ParamSpec("P")
R = TypeVar("R")
TrioRuntime = trio_runtime.Runtime


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
    settled = threading.Event()
    box: list[outcome.Outcome[R]] = []

    def on_done(result: outcome.Outcome[R]) -> None:
        box.append(result)
        settled.set()

    call = thread.submit(function, on_done)
    try:
        settled.wait()
    except BaseException:
        call.cancel()
        _wait_uninterrupted(settled)
        raise
    return box[0].unwrap()


def _wait_uninterrupted(settled: threading.Event) -> None:
    # The runtime bounds how long undoing a call takes; a second Ctrl-C must not leave
    # the turn's processes running.
    while True:
        try:
            settled.wait()
            return
        except BaseException:
            continue


def _awaited(
    method: Callable[Concatenate[TrioRuntime, P], Coroutine[Any, Any, R]],
) -> Callable[Concatenate[Runtime, P], R]:
    def forward(self: Runtime, /, *args: P.args, **kwargs: P.kwargs) -> R:
        runtime = self._thread.runtime
        return _blocking(self._thread, lambda: method(runtime, *args, **kwargs))

    same_face(forward, method)
    return forward


def _immediate(
    method: Callable[Concatenate[TrioRuntime, P], R],
) -> Callable[Concatenate[Runtime, P], R]:
    def forward(self: Runtime, /, *args: P.args, **kwargs: P.kwargs) -> R:
        _check_thread(self._thread)
        runtime = self._thread.runtime
        return self._thread.run_sync(lambda: method(runtime, *args, **kwargs))

    same_face(forward, method)
    return forward


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
        """Stop reading; the turn no longer waits for this stream."""
        with contextlib.suppress(NoRuntime):  # the runtime is gone, and its turns with it
            self._thread.run_sync(self._stream.close)

    def __enter__(self) -> EventStream:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class Runtime(metaclass=NoPublicConstructor):
    """`agentrt.Runtime` called from plain threads: the same methods, the same arguments,
    the same results and errors (the exception objects themselves), each blocking its
    thread until it settles; safe from any number of threads at once. A KeyboardInterrupt
    during a call cancels it as trio cancellation does (an ``ask``'s turn stops) and goes on
    once the turn's processes are gone. Made by `agentrt.sync.open_runtime`."""

    _made_by = "agentrt.sync.open_runtime()"

    def __init__(self, thread: RuntimeThread) -> None:
        self._thread = thread

    @property
    def runtime_id(self) -> str:
        """This runtime's id, as the store records it with the process of a running turn."""
        return self._thread.runtime.runtime_id

    @property
    def node(self) -> str:
        """The node (host) this runtime names itself as in the leases of its agents."""
        return self._thread.runtime.node

    start_agent = _awaited(TrioRuntime.start_agent)
    ask = _awaited(TrioRuntime.ask)
    tell = _awaited(TrioRuntime.tell)
    poll = _awaited(TrioRuntime.poll)
    wait = _awaited(TrioRuntime.wait)
    notify = _awaited(TrioRuntime.notify)
    interrupt = _awaited(TrioRuntime.interrupt)
    interrupt_request = _awaited(TrioRuntime.interrupt_request)
    withdraw = _awaited(TrioRuntime.withdraw)
    halt = _awaited(TrioRuntime.halt)
    unhalt = _awaited(TrioRuntime.unhalt)
    reset_session = _awaited(TrioRuntime.reset_session)
    status = _awaited(TrioRuntime.status)
    set_model = _awaited(TrioRuntime.set_model)
    set_permission_mode = _awaited(TrioRuntime.set_permission_mode)
    context_usage = _awaited(TrioRuntime.context_usage)
    stop_task = _awaited(TrioRuntime.stop_task)
    stop_agent = _awaited(TrioRuntime.stop_agent)
    workspaces = _awaited(TrioRuntime.workspaces)
    remove_workspace = _awaited(TrioRuntime.remove_workspace)
    agents = _immediate(TrioRuntime.agents)
    whereis = _immediate(TrioRuntime.whereis)
    statistics = _immediate(TrioRuntime.statistics)

    def stream(self, ref: Ref) -> EventStream:
        _check_thread(self._thread)
        runtime = self._thread.runtime
        return EventStream._create(self._thread, self._thread.run_sync(lambda: runtime.stream(ref)))

    same_face(stream, TrioRuntime.stream)

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the runtime (what leaving the ``with`` block does): every agent stops and
        every turn's processes are killed; returns once they are. Idempotent."""
        _check_thread(self._thread)
        self._thread.close()
        _wait_uninterrupted_join(self._thread)
        if (failure := self._thread.failure) is not None:
            self._thread.failure = None
            raise failure


def _wait_uninterrupted_join(thread: RuntimeThread) -> None:
    while True:
        try:
            thread.join()
            return
        except BaseException:
            continue


def _opening(
    open_trio: Callable[P, AbstractAsyncContextManager[TrioRuntime]],
) -> Callable[P, Runtime]:
    def open_runtime(*args: P.args, **kwargs: P.kwargs) -> Runtime:
        thread = RuntimeThread(lambda: open_trio(*args, **kwargs))
        opened = thread.start()
        try:
            opened.result()
        except BaseException:
            thread.close()
            _wait_uninterrupted_join(thread)
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
returns (and raises `RestartLimitExceeded` if the runtime gave up meanwhile). A runtime
left open is closed when the main thread ends. The runtime runs in a trio thread of its
own; nothing here uses asyncio, so a notebook cell (where an asyncio loop runs) may call
it. Agent callbacks run in that thread: they must not call ``agentrt.sync`` (a
`RuntimeError` says so)."""


open_runtime = _opening(trio_runtime.open_runtime)
