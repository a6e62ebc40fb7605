"""The actor: one task per agent that takes prompts from its mailbox and runs turns.

States: ``idle`` (parked, nothing to do), ``processing`` (one request taken: pre_turn, the
turn, the callbacks), ``halted`` (no new turns until ``resume``). Notifications wait
while a request is processed and are applied before the next one; prompts an agent
chains to itself run before queued work.
"""

from __future__ import annotations

import inspect
import logging
import traceback
from collections import deque
from collections.abc import Callable
from typing import Any

import attrs
import trio

from ._agent import Agent, Halt, Prompt, Reaction, overridden
from ._errors import AgentBusy, AgentRTError, AgentStopped, TurnFailed
from ._events import ErrorEvent, Event, Response, StopReason
from ._mailbox import Mailbox
from ._options import AgentOptions
from ._process import ProcessTracker
from ._redact import redact
from ._requests import Origin, Ref, Request
from ._status import AgentHandle, AgentState, AgentStatus, CurrentRequest
from ._store import SessionStore
from ._stream import EventStream
from ._turn import Turn
from .backend import Backend, InProcessBackend

logger = logging.getLogger("agentrt")

# Bound on terminate_agent: it runs shielded while the agent stops.
TERMINATE_GRACE = 5.0


class _AgentCrashed(Exception):
    def __init__(self, callback: str, error: Exception) -> None:
        self.callback = callback
        self.error = error
        super().__init__(redact(f"{callback} raised {type(error).__name__}: {error}"))


def _log_error(message: str, error: BaseException) -> None:
    # The traceback goes into the message, redacted: an exception's text may carry secrets.
    trace = "".join(traceback.format_exception(error))
    logger.error("%s\n%s", message, redact(trace.rstrip()))


def _reaction(callback: str, value: object) -> Reaction:
    if value is None or isinstance(value, Prompt | Halt):
        return value
    raise TypeError(f"{callback} returned {value!r}; expected Prompt, Halt or None")


@attrs.define(eq=False)
class Actor:
    name: str
    agent: Agent
    backend: Backend
    backend_options: Any
    options: AgentOptions
    mailbox: Mailbox
    handle: AgentHandle
    new_id: Callable[[], int]
    # Called once the actor has ended; decides what becomes of the queued requests.
    on_exit: Callable[[Actor, AgentStopped], None]
    limiter: trio.CapacityLimiter | None = None
    tracker: ProcessTracker | None = None
    store: SessionStore | None = None
    session_id: str | None = None

    current: Request | None = None
    turn: Turn | None = None
    turns: int = 0
    halted: bool = False
    halt_pending: bool = False
    _current_since: float = 0.0
    _runner: InProcessBackend | None = attrs.field(init=False)
    _overrides: frozenset[str] = attrs.field(init=False)
    _chained: deque[Request] | None = None
    _parked: trio.lowlevel.Task | None = None
    _scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    _stop_reason: str = "stopped"
    _exited: trio.Event | None = None
    _done: bool = False
    # The store has a row for this agent (written by this actor's first checkpoint); turns
    # are recorded only then, so a row from an earlier run is never overwritten blindly.
    _stored: bool = False
    _cwd: str | None = None

    def __attrs_post_init__(self) -> None:
        self._runner = self.backend if isinstance(self.backend, InProcessBackend) else None
        self._overrides = overridden(type(self.agent))

    # --- the task -------------------------------------------------------------------

    async def run(self) -> None:
        """The actor's task: runs until stopped or until a callback crashes it.

        Cancellation: ends the actor like ``stop``; cleanup is shielded and bounded."""
        crash: _AgentCrashed | None = None
        try:
            with self._scope:
                await self._loop()
        except _AgentCrashed as exc:
            crash = exc
            _log_error(f"agent {self.name!r} stopped: {crash}", crash.error)
        finally:
            with trio.CancelScope(shield=True):
                await self._shutdown(crash)

    async def _loop(self) -> None:
        mailbox = self.mailbox
        while True:
            if self.current is None and mailbox.notifications:
                await self._apply(mailbox.notifications.popleft())
                continue
            request = self.current or self._take()
            if request is None:
                await self._park()
                continue
            await self._process(request)
            if self.mailbox.queue or self._chained:
                # Scripted turns may never block: let other tasks run between turns.
                await trio.lowlevel.checkpoint()

    def _take(self) -> Request | None:
        if self.halted:
            return None
        if self._chained:
            request: Request | None = self._chained.popleft()
        else:
            request = self.mailbox.pop()
        if request is not None:
            self._begin(request)
        return request

    def _begin(self, request: Request) -> None:
        self.current = request
        self._current_since = trio.current_time()

    async def _park(self) -> None:
        self._parked = trio.lowlevel.current_task()

        def abort(_: Any) -> trio.lowlevel.Abort:
            self._parked = None
            return trio.lowlevel.Abort.SUCCEEDED

        await trio.lowlevel.wait_task_rescheduled(abort)

    def _wake(self) -> None:
        task = self._parked
        if task is not None:
            self._parked = None
            trio.lowlevel.reschedule(task)

    async def _process(self, request: Request) -> None:
        prompt = request.prompt
        if "pre_turn" in self._overrides:
            decision = await self._decide("pre_turn", prompt)
            if isinstance(decision, Halt):
                self.current = None
                if request.origin == "self_chain":
                    self._chain(request, front=True)
                else:
                    self.mailbox.push_front(request)
                self.halted = True
                return
            if isinstance(decision, Prompt):
                prompt = decision.text
        self.turn = turn = Turn(
            backend=self.backend,
            backend_options=self.backend_options,
            prompt=prompt,
            options=self.options,
            on_session=self._on_session,
            deliver=self._deliver,
            runner=self._runner,
            limiter=self.limiter,
            tracker=self.tracker,
            session_id=self.session_id,
        )
        try:
            outcome = await turn.run()
        finally:
            self.turn = None
        self.turns += 1
        if self._stored:
            await self._record_turn(outcome)
        ref = request.ref
        if isinstance(outcome, Response):
            reaction = await self._decide("handle_response", ref, outcome)
        else:
            reaction = await self._contained("handle_error", ref, outcome)
        if "post_turn" in self._overrides:
            await self._decide("post_turn", ref, outcome)
        self.current = None
        self._settle(request, outcome, turn.final)
        self._react(reaction)
        if self.halt_pending:
            self.halt_pending = False
            self.halted = True

    async def _on_session(self, session_id: str) -> None:
        self.session_id = session_id
        if self.store is not None:
            turn = self.turn
            if turn is not None and turn.command is not None:
                self._cwd = turn.command.cwd
            await self.store.checkpoint_session(
                self.name, backend=self.backend.name, session_id=session_id, cwd=self._cwd
            )
            self._stored = True

    async def _record_turn(self, outcome: Response | TurnFailed) -> None:
        assert self.store is not None
        if isinstance(outcome, Response):
            stop_reason, cost, usage = outcome.stop_reason, outcome.cost_usd, outcome.usage
        else:
            stop_reason, cost, usage = outcome.reason, None, outcome.usage
        try:
            await self.store.record_turn(
                self.name,
                stop_reason=stop_reason.value,
                cost_usd=cost,
                usage=usage,
                session_id=self.session_id,
            )
        except Exception as exc:
            # The turn's outcome stands; a store that cannot record it is reported.
            _log_error(f"agent {self.name!r}: the session store could not record a turn", exc)

    async def _deliver(self, event: Event) -> None:
        if "handle_stream_event" in self._overrides:
            result = self.agent.handle_stream_event(event)
            if inspect.isawaitable(result):
                await result
        request = self.current
        subscriptions = request.subscriptions if request is not None else None
        if subscriptions and not event.is_terminal:
            for subscription in tuple(subscriptions):
                if not await subscription.send(event):
                    subscriptions.remove(subscription)

    async def _apply(self, event: Any) -> None:
        if "handle_event" in self._overrides:
            self._react(await self._decide("handle_event", event))

    def _react(self, reaction: Reaction) -> None:
        if isinstance(reaction, Prompt):
            text = reaction.text
            request = Request(Ref(self.name, self.new_id()), text, len(text.encode()), "self_chain")
            self.mailbox.track(request)
            self._chain(request, front=False)
        elif isinstance(reaction, Halt):
            self.halted = True

    def _chain(self, request: Request, *, front: bool) -> None:
        if self._chained is None:
            self._chained = deque()
        if front:
            self._chained.appendleft(request)
        else:
            self._chained.append(request)

    async def _callback(self, name: str, *args: Any) -> Any:
        result = getattr(self.agent, name)(*args)
        if inspect.isawaitable(result):
            result = await result
        return result

    async def _decide(self, name: str, *args: Any) -> Reaction:
        """Call a callback whose failure stops the agent."""
        if name not in self._overrides:
            return None
        try:
            return _reaction(name, await self._callback(name, *args))
        except Exception as exc:
            raise _AgentCrashed(name, exc) from exc

    async def _contained(self, name: str, *args: Any) -> Reaction:
        """Call a callback whose failure is logged and otherwise ignored."""
        if name not in self._overrides:
            return None
        try:
            return _reaction(name, await self._callback(name, *args))
        except Exception as exc:
            _log_error(f"agent {self.name!r}: {name} raised; the agent goes on", exc)
            return None

    def _settle(
        self, request: Request, outcome: Response | AgentRTError | None, terminal: Event | None
    ) -> None:
        if outcome is None:
            request.cancelled = True
        else:
            request.outcome = outcome
        self.mailbox.settle(request, terminal)

    async def _shutdown(self, crash: _AgentCrashed | None) -> None:
        error = AgentStopped(self.name, self._stop_reason if crash is None else str(crash))
        if crash is not None:
            error.__cause__ = crash.error
        requests = [self.current] if self.current is not None else []
        if self._chained:
            requests.extend(self._chained)
            self._chained = None
        self.current = None
        for request in requests:
            if not request.settled:
                self.mailbox.fail(request, error)
        if "terminate_agent" in self._overrides:
            reason = self._stop_reason if crash is None else crash.error
            with trio.move_on_after(TERMINATE_GRACE):
                try:
                    await self._callback("terminate_agent", reason)
                except Exception as exc:
                    _log_error(f"agent {self.name!r}: terminate_agent raised", exc)
        self.on_exit(self, error)
        self._done = True
        if self._exited is not None:
            self._exited.set()

    # --- called by the runtime (other tasks) ------------------------------------------

    def submit(self, prompt: str, origin: Origin) -> Request:
        """Hand the agent a prompt: it starts at once if the agent is idle, else queues.

        Raises `Overloaded` if the queue is full by count or bytes."""
        request = Request(Ref(self.name, self.new_id()), prompt, len(prompt.encode()), origin)
        if self._parked is not None and not self.halted:
            self.mailbox.track(request)
            self._begin(request)
            self._wake()
        else:
            self.mailbox.admit(request, idle=self.current is None and not self.halted)
        return request

    def withdraw(self, request: Request) -> None:
        """The asker went away: a queued request leaves the queue; a running one runs on
        and its result is dropped."""
        if request.settled:
            return
        if self.mailbox.remove(request):
            request.cancelled = True
        else:
            request.abandoned = True

    def cancel(self, ref: Ref) -> bool:
        request = self.mailbox.find(ref)
        if request is None or request is self.current:
            return False
        if not self.mailbox.remove(request):
            if not self._chained or request not in self._chained:
                return False
            self._chained.remove(request)
        terminal = ErrorEvent(
            timestamp=trio.current_time(),
            reason=StopReason.CANCELLED,
            message="cancelled while queued",
            session_id=self.session_id,
        )
        self._settle(request, None, terminal)
        return True

    def notify(self, event: Any) -> None:
        self.mailbox.notify(event)
        if self.current is None:
            self._wake()

    def interrupt(self) -> bool:
        turn = self.turn
        if turn is None:
            return False
        turn.stop(StopReason.INTERRUPTED, "interrupted")
        return True

    def interrupt_request(self, ref: Ref) -> bool:
        current = self.current
        if current is None or current.ref != ref:
            return False
        return self.interrupt()

    def halt(self) -> None:
        if self.current is not None:
            self.halt_pending = True
        else:
            self.halted = True

    def resume(self) -> None:
        self.halted = self.halt_pending = False
        self._wake()

    async def reset_session(self) -> None:
        if self.current is not None:
            raise AgentBusy(self.name, "processing")
        self.session_id = None
        if self.store is not None:
            await self.store.checkpoint_session(
                self.name, backend=self.backend.name, session_id=None, cwd=self._cwd
            )
            self._stored = True

    def subscribe(self, ref: Ref) -> EventStream:
        request = self.mailbox.find(ref)
        if request is None:
            return EventStream(None)
        stream, subscription = EventStream.open()
        if request.subscriptions is None:
            request.subscriptions = []
        request.subscriptions.append(subscription)
        return stream

    def status(self) -> AgentStatus:
        current = self.current
        info: CurrentRequest | None = None
        state: AgentState
        if current is not None:
            turn = self.turn
            info = CurrentRequest(
                ref=current.ref,
                origin=current.origin,
                elapsed=trio.current_time() - self._current_since,
                waiting_for_process=turn is not None and turn.waiting_for_process,
            )
            state = "processing"
        else:
            state = "halted" if self.halted else "idle"
        notifications = self.mailbox.notifications
        return AgentStatus(
            name=self.name,
            state=state,
            halt_pending=self.halt_pending,
            queued=self.mailbox.queued,
            queued_bytes=self.mailbox.queued_bytes,
            chained=len(self._chained) if self._chained else 0,
            pending_notifications=len(notifications) if notifications else 0,
            current=info,
            turns=self.turns,
            session_id=self.session_id,
        )

    def stop(self, reason: str) -> None:
        self._stop_reason = reason
        self._scope.cancel()

    async def wait_exited(self) -> None:
        if not self._done:
            if self._exited is None:
                self._exited = trio.Event()
            await self._exited.wait()
