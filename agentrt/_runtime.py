"""``open_runtime()``: the root nursery, the registry of named agents, the process limiter."""

from __future__ import annotations

import contextvars
import inspect
import itertools
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import attrs
import trio

from ._actor import Actor
from ._agent import Agent
from ._backends import resolve_backend
from ._errors import AgentAlreadyStarted, AgentNotFound, AgentStopped, InvalidOptions, NoRuntime
from ._events import Response
from ._mailbox import Mailbox
from ._options import split_options
from ._process import ProcessTracker
from ._requests import Cancelled, Completed, Failed, NotFound, Pending, PollResult, Ref
from ._status import AgentHandle, AgentStatus, RuntimeStatistics
from ._store import SessionStore
from ._stream import EventStream
from .backend import Backend

_current: contextvars.ContextVar[Runtime] = contextvars.ContextVar("agentrt_runtime")


def current_runtime() -> Runtime:
    """The innermost open runtime; raises `NoRuntime` outside ``open_runtime()``."""
    try:
        return _current.get()
    except LookupError:
        raise NoRuntime(
            "no agentrt runtime is open here; use `async with agentrt.open_runtime():`"
        ) from None


@attrs.define(eq=False)
class Runtime:
    """A set of named agents sharing one nursery, one store and one process limit.

    Made by `open_runtime`; every method naming an agent raises `AgentNotFound` for a
    name that is not running.
    """

    _nursery: trio.Nursery
    _store: SessionStore | None
    _limiter: trio.CapacityLimiter | None
    _tracker: ProcessTracker
    _agents: dict[str, Actor] = attrs.field(factory=dict)
    _ids: itertools.count[int] = attrs.field(factory=itertools.count)
    _incarnations: itertools.count[int] = attrs.field(factory=lambda: itertools.count(1))
    _closed: bool = False

    async def start_agent(
        self,
        agent: type[Agent] | Agent,
        *,
        name: str,
        backend: str | Backend,
        **options: Any,
    ) -> AgentHandle:
        """Start an agent named ``name`` and return its handle.

        ``agent`` is an `Agent` subclass (instantiated with no arguments) or an instance.
        ``backend`` is a backend name (entry point group ``agentrt.backends``) or a backend
        object. The runtime's options are ``watchdog``, ``first_event``, ``retention``,
        ``max_events``, ``max_event_bytes``, ``max_pending``, ``max_pending_bytes``,
        ``max_results``, ``max_result_bytes`` and ``restart``; every other keyword goes
        to ``init_agent``, whose result the backend validates. Raises `InvalidOptions`
        naming the offending key, `AgentAlreadyStarted`, `BackendNotFound`.

        Cancellation: safe; a cancelled start leaves no agent behind.
        """
        if self._closed:
            raise NoRuntime("this runtime is closed")
        if not isinstance(name, str) or not name:
            raise InvalidOptions("name", name, "must be a non-empty string")
        if name in self._agents:
            raise AgentAlreadyStarted(name)
        agent_options, rest = split_options(options)
        resolved = resolve_backend(backend)
        instance = agent() if isinstance(agent, type) else agent
        if not isinstance(instance, Agent):
            raise TypeError(f"{instance!r} is not an agentrt.Agent")
        raw = instance.init_agent(**rest)
        if inspect.isawaitable(raw):
            raw = await raw
        if not isinstance(raw, Mapping):
            raise TypeError(f"init_agent returned {raw!r}; expected a mapping of options")
        backend_options = resolved.parse_options(raw)
        if self._closed:
            raise NoRuntime("this runtime is closed")
        if name in self._agents:
            raise AgentAlreadyStarted(name)
        actor = Actor(
            name=name,
            agent=instance,
            backend=resolved,
            backend_options=backend_options,
            options=agent_options,
            mailbox=Mailbox(name, agent_options),
            handle=AgentHandle(name, next(self._incarnations), resolved.name),
            new_id=self._ids.__next__,
            on_exit=self._actor_exited,
            limiter=self._limiter,
            tracker=self._tracker,
            store=self._store,
        )
        self._agents[name] = actor
        self._nursery.start_soon(actor.run, name=f"agentrt agent {name!r}")
        # The agent is started: a cancellation arriving now must not hide that.
        await trio.lowlevel.cancel_shielded_checkpoint()
        return actor.handle

    def _actor(self, name: str) -> Actor:
        actor = self._agents.get(name)
        if actor is None:
            raise AgentNotFound(name)
        return actor

    def _actor_exited(self, actor: Actor, error: AgentStopped) -> None:
        if self._agents.get(actor.name) is actor:
            del self._agents[actor.name]
        # Without a supervisor to hand the mailbox to, queued work fails now.
        actor.mailbox.fail_queued(error)

    async def ask(self, name: str, prompt: str) -> Response:
        """Send ``prompt`` to agent ``name`` and wait for the turn's `Response`.

        Asks to a busy agent queue in FIFO order. Raises `TurnFailed` (with its
        `StopReason`) when the turn fails, `Overloaded` when the queue is full (by count
        or bytes), `AgentStopped` when the agent stops first, `AgentNotFound`.

        Cancellation: a caller cancelled while its ask is queued takes it out of the
        queue; cancelled while its turn runs, the turn goes on and its result is dropped.
        """
        request = self._actor(name).submit(prompt, "ask")
        try:
            await request.wait()
        except BaseException:
            actor = self._agents.get(name)
            if actor is not None:
                actor.withdraw(request)
            raise
        outcome = request.outcome
        if isinstance(outcome, Response):
            return outcome
        assert outcome is not None
        raise outcome

    def tell(self, name: str, prompt: str) -> Ref:
        """Queue ``prompt`` for agent ``name`` and return its `Ref` at once; collect the
        result with `poll` or `wait`. Raises `Overloaded` at once when the queue is full,
        `AgentNotFound`."""
        return self._actor(name).submit(prompt, "tell").ref

    def poll(self, name: str, ref: Ref) -> PollResult:
        """`Pending`, `Completed`, `Failed` or `Cancelled` for a tell; `NotFound` for an
        unknown ref or one whose result was evicted (oldest first, beyond ``max_results``
        or ``max_result_bytes``)."""
        return self._actor(name).mailbox.poll(ref)

    async def wait(self, ref: Ref) -> Completed | Failed | Cancelled | NotFound:
        """Wait for the tell ``ref`` to settle; returns what `poll` then returns
        (`Completed`, `Failed` or `Cancelled`; `NotFound` for an unknown or evicted ref).

        Cancellation: safe; the tell itself is not affected."""
        mailbox = self._actor(ref.name).mailbox
        request = mailbox.find(ref)
        if request is None:
            await trio.lowlevel.checkpoint()
            result = mailbox.poll(ref)
            assert not isinstance(result, Pending)
            return result
        await request.wait()
        return request.result()

    def events(self, ref: Ref) -> EventStream:
        """The live events of the tell ``ref``, in order, ending after its terminal event
        (for a failed or cancelled request, an `ErrorEvent` saying why). A reader that
        falls behind makes the turn wait. A ref that is no longer queued or running gives
        an empty stream (use `poll` for its result). Raises `AgentNotFound`."""
        return self._actor(ref.name).subscribe(ref)

    def notify(self, name: str, event: Any) -> None:
        """Deliver ``event`` to the agent's ``handle_event``; while a turn runs it waits
        until the turn is over. Raises `Overloaded` beyond ``max_pending`` waiting
        notifications, `AgentNotFound`."""
        self._actor(name).notify(event)

    def interrupt(self, name: str) -> bool:
        """End the agent's running turn (its caller gets `TurnFailed` with
        ``interrupted``); False if no turn was running."""
        return self._actor(name).interrupt()

    def interrupt_request(self, name: str, ref: Ref) -> bool:
        """Like `interrupt`, only if ``ref`` is the request being processed now."""
        return self._actor(name).interrupt_request(ref)

    def cancel(self, name: str, ref: Ref) -> bool:
        """Take a queued tell out of the queue (it polls as `Cancelled`); False if it is
        running, finished or unknown."""
        return self._actor(name).cancel(ref)

    def halt(self, name: str) -> None:
        """Stop the agent taking turns (after the running one) until `resume`; queued
        work waits and new work is still accepted."""
        self._actor(name).halt()

    def resume(self, name: str) -> None:
        """Undo `halt` (or a handler's `Halt`): the agent takes its queued work again."""
        self._actor(name).resume()

    async def reset_session(self, name: str) -> None:
        """Forget the agent's conversation: its next turn starts a new session. Only while
        no request is being processed; raises `AgentBusy` otherwise.

        Cancellation: safe; the stored session may or may not be forgotten yet."""
        await self._actor(name).reset_session()

    def status(self, name: str) -> AgentStatus:
        """A content-free snapshot of the agent: state, queue, current request, turns."""
        return self._actor(name).status()

    def agents(self) -> tuple[str, ...]:
        """The names of the running agents, in start order."""
        return tuple(self._agents)

    def whereis(self, name: str) -> AgentHandle | None:
        """The handle of the running agent ``name``, or None."""
        actor = self._agents.get(name)
        return None if actor is None else actor.handle

    async def stop_agent(self, name: str) -> None:
        """Stop agent ``name``: its running turn is cancelled, its active and queued asks
        get `AgentStopped`, then ``terminate_agent`` runs. Returns once it has ended.

        Cancellation: the agent still stops; only the wait for it is cut short."""
        actor = self._actor(name)
        del self._agents[name]
        actor.stop("stopped")
        await actor.wait_exited()

    def statistics(self) -> RuntimeStatistics:
        limiter = self._limiter
        if limiter is None:
            in_use = sum(1 for actor in self._agents.values() if actor.turn is not None)
            waiting = 0
        else:
            in_use = int(limiter.borrowed_tokens)
            waiting = limiter.statistics().tasks_waiting
        return RuntimeStatistics(
            agents=len(self._agents), processes_in_use=in_use, turns_waiting=waiting
        )

    def _close(self) -> None:
        self._closed = True
        # Stop in reverse start order, as OTP does; each actor's cleanup is shielded.
        for actor in reversed(list(self._agents.values())):
            actor.stop("runtime closed")


@asynccontextmanager
async def open_runtime(
    *, store: SessionStore | None = None, max_processes: int | None = None
) -> AsyncIterator[Runtime]:
    """Open a runtime; on exit every agent is stopped (waiters get `AgentStopped`).

    ``store`` is opened with the runtime and closed after its agents have stopped; agents
    checkpoint their session ids into it the moment they appear and record their turns.
    ``max_processes`` bounds how many turns run at once across all agents (the others
    wait, shown in `Runtime.status`).
    Inside the block, the module-level ``agentrt.ask`` etc. act on this runtime.

    Cancellation: cancelling the block stops every agent; their cleanup is shielded and
    bounded.
    """
    if max_processes is not None and (
        isinstance(max_processes, bool) or not isinstance(max_processes, int) or max_processes < 1
    ):
        raise InvalidOptions("max_processes", max_processes, "must be an int >= 1, or None")
    limiter = None if max_processes is None else trio.CapacityLimiter(max_processes)
    async with AsyncExitStack() as stack:
        if store is not None:
            await stack.enter_async_context(store)
        # The tracker outlives the agents: their turns' cleanup may still need it.
        async with trio.open_nursery() as services:
            tracker = ProcessTracker()
            await services.start(tracker.run)
            async with trio.open_nursery() as nursery:
                runtime = Runtime(nursery, store, limiter, tracker)
                token = _current.set(runtime)
                try:
                    yield runtime
                finally:
                    _current.reset(token)
                    runtime._close()
            services.cancel_scope.cancel()
