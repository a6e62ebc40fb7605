"""A runtime in a trio thread of its own, called from other threads: the mechanism under
``agentrt.asyncio`` and ``agentrt.sync``.

One thread runs ``trio.run`` around ``open_runtime``; each call from outside is a trio task
of that thread, started through the run's `trio.lowlevel.TrioToken` (thread-safe, FIFO) in a
cancel scope of its own, so cancelling a call is cancelling that scope: the runtime's own
cancellation semantics, unchanged. A call settles by handing its `outcome.Outcome` (the
exception object itself, never wrapped) to the caller's ``on_done``, in the trio thread; the
caller passes it on to its own thread (an asyncio loop, a blocked thread).

Why a thread rather than trio's guest mode on the asyncio loop: a thread serves asyncio, plain
threads and a notebook's blocked loop alike; the runtime's bounds do not wait for a busy
asyncio loop, nor the application's loop for the runtime's parsing; and guest mode measured
slower per call (bench/asyncio_bridge.py).
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from contextlib import AbstractAsyncContextManager
from typing import Any, Generic, Protocol, TypeVar

import outcome
import trio

from .._errors import NoRuntime
from .._exceptiongroups import collapse_exception_groups
from .._restart import Strategy
from .._runtime import Runtime
from .._supervisor import Supervisor

R = TypeVar("R")

CLOSED = "this runtime is closed"


class Call(Generic[R]):
    """One call running in the runtime's thread; `cancel` from any thread."""

    __slots__ = ("_cancelled", "_function", "_on_done", "_owner", "_scope")

    def __init__(
        self,
        owner: RuntimeThread,
        function: Callable[[], Coroutine[Any, Any, R]],
        on_done: Callable[[outcome.Outcome[R]], None],
    ) -> None:
        self._owner = owner
        self._function = function
        self._on_done = on_done
        self._scope: trio.CancelScope | None = None
        self._cancelled = False

    async def run(self) -> None:
        result: outcome.Outcome[R] | None = None
        with trio.CancelScope() as self._scope:
            if self._cancelled:  # cancelled before it started: as a trio caller cancelled at once
                self._scope.cancel()
            try:
                result = outcome.Value(await self._function())
            except trio.Cancelled:
                raise
            except BaseException as exc:
                result = outcome.Error(exc)
        if result is None:
            # Cancelled: by the caller (it does not read the outcome), or by the runtime's end.
            result = outcome.Error(NoRuntime(CLOSED))
        self._on_done(result)

    def cancel(self) -> None:
        """Cancel the call as trio cancellation would; its outcome still comes to
        ``on_done`` (after the work is undone, as trio's shielded waits say), while the
        runtime closes too. Raises nothing."""
        self._owner.run_soon(self._cancel)

    def _cancel(self) -> None:
        self._cancelled = True
        if self._scope is not None:
            self._scope.cancel()


Opener = Callable[[], AbstractAsyncContextManager[Runtime]]


class RuntimeFacts:
    """What the asyncio and sync faces of a `Runtime` read from it without a call into
    its thread (fixed once it is open)."""

    __slots__ = ()
    _target: Runtime

    @property
    def runtime_id(self) -> str:
        """This runtime's id, as the store records it with the process of a running turn."""
        return self._target.runtime_id

    @property
    def node(self) -> str:
        """The node (host) this runtime names itself as in the leases of its agents."""
        return self._target.node


class SupervisorFacts:
    """The asyncio and sync faces of a nested `Supervisor`: its thread, the supervisor, and
    what they read from it without a call into the thread (fixed when it is made)."""

    __slots__ = ("_target", "_thread")

    def __init__(self, thread: RuntimeThread, supervisor: Supervisor) -> None:
        self._thread = thread
        self._target = supervisor

    @property
    def strategy(self) -> Strategy:
        """How a crash of one of its agents restarts the others (as `open_runtime` says)."""
        return self._target.strategy

    @property
    def max_restarts(self) -> int:
        """More restarts than this within ``period`` seconds, and it gives up."""
        return self._target.max_restarts

    @property
    def period(self) -> float:
        """The window, in seconds, ``max_restarts`` counts restarts in."""
        return self._target.period


class RuntimeThread:
    """A runtime (what ``open()`` opens: ``open_runtime`` with the caller's arguments) in
    a thread of its own. `start` returns once it is open (or raises
    what opening raised); `close` stops every agent, kills every turn's processes and
    joins the thread. An exception that ends the runtime early (`RestartLimitExceeded`)
    is given to ``on_failure`` (in the runtime's thread) and kept in `failure`."""

    def __init__(self, open: Opener) -> None:
        self._open = open
        self._opened: Future[None] = Future()
        self._ended: Future[None] = Future()
        self._token: trio.lowlevel.TrioToken | None = None
        self._calls: trio.Nursery | None = None
        self._stop: trio.Event | None = None
        self._runtime: Runtime | None = None
        self._lock = threading.Lock()
        self._closing = False
        self.on_failure: Callable[[BaseException], None] | None = None
        self.failure: BaseException | None = None
        # Not a daemon: the interpreter waits for it, and it closes the runtime when the
        # main thread ends (a notebook or script that never closed it still kills its trees).
        self._thread = threading.Thread(target=self._run, name="agentrt runtime", daemon=False)
        _close_at_exit(self)

    @property
    def runtime(self) -> Runtime:
        assert self._runtime is not None
        return self._runtime

    def start(self) -> Future[None]:
        """Open the runtime; the future settles once it is open (or failed to open)."""
        self._thread.start()
        return self._opened

    def close(self) -> Future[None]:
        """Close the runtime; the future settles once the thread has ended. Idempotent."""
        with self._lock:
            self._closing = True
        token = self._token
        if token is not None:
            with contextlib.suppress(trio.RunFinishedError):  # it has ended already
                token.run_sync_soon(self._set_stop)
        return self._ended

    def join(self) -> None:
        self._thread.join()

    @property
    def is_current(self) -> bool:
        """Whether the calling thread is the runtime's own (where a blocking call would
        wait for itself)."""
        return threading.current_thread() is self._thread

    def submit(
        self,
        function: Callable[[], Coroutine[Any, Any, R]],
        on_done: Callable[[outcome.Outcome[R]], None],
    ) -> Call[R]:
        """Run ``function()`` as a task of the runtime's thread; `NoRuntime` once it is
        closing."""
        call = Call(self, function, on_done)
        self._post(self._start, call)
        return call

    def run_sync(self, function: Callable[[], R]) -> R:
        """Run ``function()`` in the runtime's thread and wait for it (it must not block)."""
        box: Future[R] = Future()

        def run() -> None:
            try:
                box.set_result(function())
            except BaseException as exc:
                box.set_exception(exc)

        self._post(run)
        return box.result()

    def run_soon(self, function: Callable[[], object]) -> None:
        """Run ``function()`` in the runtime's thread soon, without waiting for it: what undoes
        a call or releases a turn (cancelling, closing a stream), so unlike a new call it
        runs while the runtime closes too; once the runtime's thread has ended, nothing is
        left for it to undo. Safe from any thread and from ``__del__``."""
        token = self._token
        if token is not None:
            with contextlib.suppress(trio.RunFinishedError):
                token.run_sync_soon(function)

    def _post(self, function: Callable[..., object], *args: object) -> None:
        with self._lock:
            if self._closing or self._token is None:
                raise NoRuntime(CLOSED)
            try:
                self._token.run_sync_soon(function, *args)
            except trio.RunFinishedError:
                raise NoRuntime(CLOSED) from None

    def _start(self, call: Call[Any]) -> None:
        assert self._calls is not None
        self._calls.start_soon(call.run)

    def _set_stop(self) -> None:
        if self._stop is not None:
            self._stop.set()

    def _run(self) -> None:
        try:
            trio.run(self._main)
        except BaseException as exc:
            if not self._opened.done():
                self._opened.set_exception(exc)
            else:
                self.failure = exc
                if self.on_failure is not None:
                    self.on_failure(exc)
        finally:
            with self._lock:
                self._closing = True
            if not self._opened.done():
                self._opened.set_exception(NoRuntime(CLOSED))
            self._ended.set_result(None)

    async def _main(self) -> None:
        self._stop = trio.Event()
        with collapse_exception_groups():
            async with trio.open_nursery() as calls:
                try:
                    async with self._open() as runtime:
                        self._runtime, self._calls = runtime, calls
                        with self._lock:
                            self._token = trio.lowlevel.current_trio_token()
                            closing = self._closing  # closed while it opened
                        self._opened.set_result(None)
                        try:
                            if not closing:
                                await self._stop.wait()
                        finally:
                            with self._lock:
                                self._closing = True
                finally:
                    # The runtime has closed: its asks got AgentStopped as their agents
                    # stopped; what still waits on it ends now (with NoRuntime).
                    calls.cancel_scope.cancel()


T = TypeVar("T")


class Block(Protocol):
    """What the asyncio and sync forms open and leave: a `RuntimeThread` (the runtime's
    block) or a `HeldBlock` (a nested supervisor's)."""

    on_failure: Callable[[BaseException], None] | None
    failure: BaseException | None

    def start(self) -> Future[None]: ...

    def close(self) -> Future[None]: ...

    def join(self) -> None: ...


class HeldBlock(Generic[T]):
    """An async context manager entered by a task of the runtime's thread and held open
    until `close`: a block that trio code owns (a nested supervisor's), opened and left
    from another thread. The same protocol as `RuntimeThread`'s own: `start` settles once
    the block is entered (``value`` is what it gave) or failed to enter; an exception that
    ends the block while held (the supervisor gave up) goes to ``on_failure`` (in the
    runtime's thread) and is kept in `failure`; `close` leaves it."""

    def __init__(self, thread: RuntimeThread, open: Callable[[], AbstractAsyncContextManager[T]]):
        self._thread = thread
        self._open = open
        self._entered: Future[None] = Future()
        self._ended: Future[None] = Future()
        self._leave = trio.Event()
        self.value: T
        self.on_failure: Callable[[BaseException], None] | None = None
        self.failure: BaseException | None = None

    def start(self) -> Future[None]:
        """Enter the block; the future's error is `NoRuntime` once the runtime is closing."""
        try:
            self._thread.submit(self._hold, self._done)
        except NoRuntime as exc:
            self._done(outcome.Error(exc))
        return self._entered

    def close(self) -> Future[None]:
        """Leave the block; the future settles once it is left. Idempotent."""
        with contextlib.suppress(NoRuntime):  # the runtime's end has left it already
            self._thread._post(self._leave.set)
        return self._ended

    def join(self) -> None:
        """Nothing to join: the block's task has ended once `close`'s future settles."""

    async def _hold(self) -> None:
        async with self._open() as self.value:
            self._entered.set_result(None)
            await self._leave.wait()

    def _done(self, result: outcome.Outcome[None]) -> None:  # in the runtime's thread
        if isinstance(result, outcome.Error):
            if not self._entered.done():
                self._entered.set_exception(result.error)
            elif not isinstance(result.error, NoRuntime):
                # (The runtime's own end is the runtime's block's to report.)
                self.failure = result.error
                if self.on_failure is not None:
                    self.on_failure(result.error)
        self._ended.set_result(None)


def cause_of_failure(failure: BaseException, met: BaseException | None) -> BaseException | None:
    """What a block's give-up (``failure``) is raised from when it comes out in place of
    ``met``, the error the block's code met meanwhile: ``met``, unless the give-up caused it
    (the `AgentStopped` of a call to an agent it stopped), which would only point back."""
    return None if met is None or met.__cause__ is failure else met


# The runtimes still open, closed when the main thread ends (one watcher for them all).
_open: weakref.WeakSet[RuntimeThread] = weakref.WeakSet()
_watcher: threading.Thread | None = None
_watcher_lock = threading.Lock()


def _close_at_exit(thread: RuntimeThread) -> None:
    global _watcher
    with _watcher_lock:
        _open.add(thread)
        if _watcher is None:
            _watcher = threading.Thread(target=_close_all, name="agentrt exit", daemon=True)
            _watcher.start()


def _close_all() -> None:
    # The interpreter's shutdown marks the main thread ended before it joins the others.
    threading.main_thread().join()
    with _watcher_lock:
        threads = list(_open)
    for thread in threads:
        thread.close()
