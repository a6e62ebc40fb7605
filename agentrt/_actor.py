"""The actor: one task per agent incarnation, taking prompts from its mailbox and running turns.

States: ``idle`` (parked, nothing to do), ``processing`` (one request taken: pre_turn, the
turn, the callbacks), ``halted`` (no new turns until ``unhalt``). Notifications wait
while a request is processed and are applied before the next one; prompts an agent
chains to itself run before queued work.

An actor ends when it is stopped, when a handler returns `Stop`, or when it crashes (a
decision callback raised or returned something invalid). It then fails the request it was
processing and its chained prompts, runs ``terminate_agent``, and reports an `Exit` to its
supervisor, which decides about the queued work: the mailbox belongs to the agent's name,
so a restarted instance takes it over.
"""

from __future__ import annotations

import inspect
import logging
import traceback
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, Literal

import attrs
import msgspec
import trio

from ._agent import Agent, Halt, Prompt, Reaction, Stop, overridden
from ._errors import AgentBusy, AgentRTError, AgentStopped, StoreError, TurnFailed
from ._events import (
    NO_TOTALS,
    ErrorEvent,
    Event,
    Response,
    SessionLostEvent,
    SessionTotals,
    StopReason,
)
from ._mailbox import Mailbox
from ._options import AgentOptions, SessionLostPolicy
from ._process import CliProcess, ProcessTracker
from ._redact import redact
from ._requests import Origin, Ref, Request
from ._status import AgentHandle, AgentState, AgentStatus, CurrentRequest
from ._store import SessionStore
from ._turn import Turn
from .backend import Backend, InProcessBackend

logger = logging.getLogger("agentrt")

# Bound on terminate_agent: it runs shielded while the agent stops.
TERMINATE_GRACE = 5.0
# Bound on the store write that clears a live process record after a stopped turn.
STORE_GRACE = 10.0
# Beyond the turn's own kill ladder (two ``kill_grace`` covers its drain and the driver's
# SIGTERM -> SIGKILL), how long a cancelled ask waits, shielded, for its turn to end.
CANCEL_MARGIN = 10.0


def cancel_grace(options: AgentOptions) -> float:
    """Bound on the shielded wait of a cancelled ask for its turn's processes to be gone."""
    return 2 * options.kill_grace + CANCEL_MARGIN


_state_encoder = msgspec.json.Encoder()

_ASK_CANCELLED = "the caller of ask was cancelled"


class _AgentCrashed(Exception):
    def __init__(self, callback: str, error: Exception) -> None:
        self.callback = callback
        self.error = error
        super().__init__(redact(f"{callback} raised {type(error).__name__}: {error}"))


def log_error(message: str, error: BaseException) -> None:
    """Log ``message`` with ``error``'s traceback, redacted (an exception's text may carry
    secrets)."""
    trace = "".join(traceback.format_exception(error))
    logger.error("%s\n%s", message, redact(trace.rstrip()))


def _log_turn_end(agent: str, outcome: Response | TurnFailed) -> None:
    # Content-free: the outcome's reason and figures, never the prompt or the answer.
    if isinstance(outcome, Response):
        reason, detail = outcome.stop_reason.value, f"{outcome.duration:.2f} s"
    else:
        reason, detail = outcome.reason.value, outcome.message
    logger.debug(
        "agent %r: turn ended, %s (%s), session %s",
        agent,
        reason,
        detail,
        outcome.session_id,
        extra={"agent": agent, "session_id": outcome.session_id, "outcome": reason},
    )


def _reaction(callback: str, value: object) -> Reaction:
    if value is None or isinstance(value, Prompt | Halt | Stop):
        return value
    raise TypeError(f"{callback} returned {value!r}; expected Prompt, Halt, Stop or None")


def encode_state(value: Any) -> bytes | None:
    """The store blob of what ``checkpoint_state`` returned (None: nothing to keep)."""
    return None if value is None else _state_encoder.encode(value)


async def restore_state(agent: Agent, blob: bytes) -> None:
    """Give ``agent`` its checkpointed state back, decoded as its ``state_type``."""
    if "restore_state" in overridden(type(agent)):
        result = agent.restore_state(msgspec.json.decode(blob, type=type(agent).state_type))
        if inspect.isawaitable(result):
            await result


ExitKind = Literal["crashed", "normal", "stopped"]


@attrs.frozen
class Exit:
    """How one actor ended: ``crashed`` (a callback failed), ``normal`` (it returned `Stop`)
    or ``stopped`` (from outside). ``error`` is what its unfinished requests got."""

    kind: ExitKind
    error: AgentStopped


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
    # Called once the actor has ended; the supervisor decides what becomes of the queue.
    on_exit: Callable[[Actor, Exit], None]
    store: SessionStore
    runtime_id: str
    # The working directory the CLI runs in (absolute): where it keeps the transcript.
    cwd: str | None = None
    limiter: trio.CapacityLimiter | None = None
    tracker: ProcessTracker | None = None
    session_id: str | None = None
    # What this session's turns reported so far; zero for a new session.
    session_totals: SessionTotals = NO_TOTALS
    # The last state blob saved (restored or checkpointed), so unchanged state is not
    # written again and a restart can hand it to the next instance.
    state_blob: bytes | None = None
    # The store's row does not name this backend yet (a new name, or a start on another
    # backend): the first turn that starts writes it, with the state; until then nothing
    # is written, so a turn that cannot even spawn its CLI changes nothing stored.
    unclaimed: bool = False

    current: Request | None = None
    turn: Turn | None = None
    turns: int = 0
    halted: bool = False
    halt_pending: bool = False
    _current_since: float = 0.0
    _runner: InProcessBackend | None = attrs.field(init=False)
    _overrides: frozenset[str] = attrs.field(init=False)
    _on_session_lost: SessionLostPolicy = attrs.field(init=False)
    _chained: deque[Request] | None = None
    _parked: trio.lowlevel.Task | None = None
    _scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    _stop_reason: str = "stopped"
    _stop_cause: BaseException | None = None
    _stop_normally: bool = False
    _exited: trio.Event | None = None
    _done: bool = False
    # A live process record is in the store for the running turn.
    _live: bool = False
    # Set when the running turn has ended (its processes gone), for a cancelled asker.
    _turn_over: trio.Event | None = None

    def __attrs_post_init__(self) -> None:
        self._runner = self.backend if isinstance(self.backend, InProcessBackend) else None
        self._overrides = overridden(type(self.agent))
        self._on_session_lost = self.options.on_session_lost or type(self.agent).on_session_lost

    # --- the task -------------------------------------------------------------------

    async def run(self) -> None:
        """The actor's task: runs until stopped, until a handler returns `Stop`, or until a
        callback crashes it.

        Cancellation: ends the actor like ``stop``; cleanup is shielded and bounded."""
        crash: _AgentCrashed | None = None
        try:
            with self._scope:
                await self._loop()
        except _AgentCrashed as exc:
            crash = exc
            log_error(f"agent {self.name!r} crashed: {crash}", crash.error)
        finally:
            with trio.CancelScope(shield=True):
                await self._shutdown(crash)

    async def _loop(self) -> None:
        mailbox = self.mailbox
        while not self._stop_normally:
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
            if isinstance(decision, Halt | Stop):
                self.current = None
                if request.origin == "self_chain":
                    self._chain(request, front=True)
                else:
                    self.mailbox.push_front(request)
                if isinstance(decision, Stop):
                    self._stop_normally = True
                else:
                    self.halted = True
                return
            if isinstance(decision, Prompt):
                prompt = decision.text
        outcome, final = await self._run_turn(prompt)
        if (
            isinstance(outcome, TurnFailed)
            and outcome.reason is StopReason.SESSION_LOST
            and self._on_session_lost == "fresh"
        ):
            # Once, on a new session; the caller (same ref) gets this answer instead.
            await self._forget_session()
            outcome, final = await self._run_turn(prompt)
        ref = request.ref
        if isinstance(outcome, Response):
            reaction = await self._decide("handle_response", ref, outcome)
        else:
            reaction = await self._contained("handle_error", ref, outcome)
        if "post_turn" in self._overrides:
            await self._decide("post_turn", ref, outcome)
        await self._save_state()
        self.current = None
        self._settle(request, outcome, final)
        self._react(reaction)
        if self.halt_pending:
            self.halt_pending = False
            self.halted = True

    async def _run_turn(self, prompt: str) -> tuple[Response | TurnFailed, Event | None]:
        self.turn = turn = Turn(
            backend=self.backend,
            backend_options=self.backend_options,
            prompt=prompt,
            options=self.options,
            on_session=self._on_session,
            deliver=self._deliver,
            watched=self._watched,
            runner=self._runner,
            limiter=self.limiter,
            tracker=self.tracker,
            session_id=self.session_id,
            baseline=self.session_totals if self.session_id is not None else None,
            on_spawn=self._on_spawn,
        )
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug(
                "agent %r: turn starts on %s, session %s",
                self.name,
                self.backend.name,
                self.session_id or "(new)",
                extra={"agent": self.name, "session_id": self.session_id},
            )
        if self.current is not None and self.current.abandoned:  # cancelled before its turn
            turn.stop(StopReason.CANCELLED, _ASK_CANCELLED)
        elif self._runner is not None:
            await self._turn_started()  # an in-process turn starts as it is called
        try:
            outcome = await turn.run()
        finally:
            self.turn = None
            if self._turn_over is not None:
                self._turn_over.set()
                self._turn_over = None
            if self._live:
                await self._clear_live()
        self.turns += 1
        if logger.isEnabledFor(logging.DEBUG):
            _log_turn_end(self.name, outcome)
        await self._record_turn(outcome)
        return outcome, turn.final

    async def _on_session(self, session_id: str) -> None:
        if session_id != self.session_id:
            self.session_totals = NO_TOTALS
        self.session_id = session_id
        try:
            if self.unclaimed:
                await self._claim()
            else:
                await self.store.checkpoint_session(
                    self.name, backend=self.backend.name, session_id=session_id, cwd=self.cwd
                )
        except StoreError as exc:
            log_error(
                f"agent {self.name!r}: the session store could not keep session {session_id}; "
                "the turn fails (store_failed)",
                exc,
            )
            raise

    async def _forget_session(self) -> None:
        self.session_id = None
        self.session_totals = NO_TOTALS
        try:
            await self.store.checkpoint_session(
                self.name, backend=self.backend.name, session_id=None, cwd=self.cwd
            )
        except Exception as exc:
            # The next session id overwrites the stored one anyway.
            log_error(f"agent {self.name!r}: the session store could not forget a session", exc)

    async def _claim(self) -> None:
        """Make the store's row this agent's: its backend, session, cwd and state."""
        self.unclaimed = False
        await self.store.checkpoint_session(
            self.name, backend=self.backend.name, session_id=self.session_id, cwd=self.cwd
        )
        await self.store.save_state(self.name, self.state_blob)

    async def _turn_started(self) -> None:
        if not self.unclaimed:
            return
        try:
            await self._claim()
        except Exception as exc:
            # The turn goes on; its session id is checkpointed (or fails it) on its own.
            log_error(f"agent {self.name!r}: the session store could not record the agent", exc)

    async def _on_spawn(self, proc: CliProcess) -> None:
        await self._turn_started()
        # Set first: a cancelled write may still have reached the store, and clearing a
        # record that is not there is harmless.
        self._live = True
        logger.debug(
            "agent %r: CLI started, pid %d", self.name, proc.pid, extra={"agent": self.name}
        )
        try:
            await self.store.set_live_process(
                self.name,
                pgid=proc.pgid,
                pid=proc.pid,
                start_time=proc.start_time,
                runtime_id=self.runtime_id,
                marker=proc.marker,
            )
        except Exception as exc:
            # The turn goes on; only a reaper after a crash of this program would miss it.
            log_error(f"agent {self.name!r}: the session store could not record a process", exc)

    async def _clear_live(self) -> None:
        self._live = False
        # Also after a stop: the process is gone, so its record must go too.
        with trio.move_on_after(STORE_GRACE, shield=True):
            try:
                await self.store.clear_live_process(self.name)
            except Exception as exc:
                log_error(f"agent {self.name!r}: the session store could not clear a process", exc)

    async def _record_turn(self, outcome: Response | TurnFailed) -> None:
        stop_reason = outcome.stop_reason if isinstance(outcome, Response) else outcome.reason
        # A failed turn is billed too; its cost is part of the session's running total.
        cost, usage = outcome.cost_usd, outcome.usage
        self.session_totals = self.session_totals.add(usage, cost)
        if self.unclaimed:
            return  # the turn never started: nothing to record
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
            log_error(f"agent {self.name!r}: the session store could not record a turn", exc)

    async def _save_state(self) -> None:
        if "checkpoint_state" not in self._overrides:
            return
        try:
            blob = encode_state(await self._callback("checkpoint_state"))
        except Exception as exc:
            raise _AgentCrashed("checkpoint_state", exc) from exc
        if blob == self.state_blob:
            return
        self.state_blob = blob
        if self.unclaimed:
            return  # written with the row, once a turn has started
        try:
            await self.store.save_state(self.name, blob)
        except Exception as exc:
            # A restart in this program still gets the state (state_blob); a new program not.
            log_error(f"agent {self.name!r}: the session store could not save its state", exc)

    def _watched(self) -> bool:
        """Whether anything looks at the current turn's events as they come."""
        if "handle_stream_event" in self._overrides:
            return True
        request = self.current
        return request is not None and bool(request.subscriptions)

    async def _deliver(self, events: Sequence[Event]) -> None:
        # The events of one read, recorded by the turn: this awaits only what must be
        # waited for (an async handler, a full subscriber), so a read costs one await
        # however many lines it held.
        handler = (
            self.agent.handle_stream_event if "handle_stream_event" in self._overrides else None
        )
        for event in events:
            # By identity: isinstance on a msgspec Struct class is slow, and this is per event.
            if type(event) is ErrorEvent and event.reason is StopReason.SESSION_LOST:
                lost = event.session_id or self.session_id
                if lost is not None:
                    await self._deliver(
                        (SessionLostEvent(timestamp=event.timestamp, session_id=lost),)
                    )
            if handler is not None:
                result = handler(event)
                if inspect.isawaitable(result):
                    await result
            request = self.current
            subscriptions = request.subscriptions if request is not None else None
            if subscriptions and not event.is_terminal:
                for subscription in tuple(subscriptions):
                    sent = subscription.send_nowait(event)
                    if sent is None:  # its buffer is full: the turn waits for the reader
                        sent = await subscription.send(event)
                    if not sent:
                        subscriptions.remove(subscription)

    async def _apply(self, event: Any) -> None:
        if "handle_event" in self._overrides:
            self._react(await self._decide("handle_event", event))
            await self._save_state()

    def _react(self, reaction: Reaction) -> None:
        if isinstance(reaction, Prompt):
            text = reaction.text
            request = Request(Ref(self.name, self.new_id()), text, len(text.encode()), "self_chain")
            self.mailbox.track(request)
            self._chain(request, front=False)
        elif isinstance(reaction, Halt):
            self.halted = True
        elif isinstance(reaction, Stop):
            self._stop_normally = True

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
        """Call a callback whose failure crashes the agent."""
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
            log_error(f"agent {self.name!r}: {name} raised; the agent goes on", exc)
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
        kind: ExitKind
        reason: str | BaseException
        if crash is not None:
            kind, reason = "crashed", crash.error
            error = AgentStopped(self.name, str(crash))
            error.__cause__ = crash.error
        elif self._stop_normally and not self._scope.cancel_called:
            kind = "normal"
            reason = self._stop_reason = "normal"
            error = AgentStopped(self.name, "normal")
        else:
            kind, reason = "stopped", self._stop_reason
            error = AgentStopped(self.name, self._stop_reason)
            error.__cause__ = self._stop_cause
        requests = [self.current] if self.current is not None else []
        if self._chained:
            requests.extend(self._chained)
            self._chained = None
        self.current = None
        for request in requests:
            if not request.settled:
                self.mailbox.fail(request, error)
        if "terminate_agent" in self._overrides:
            with trio.move_on_after(TERMINATE_GRACE):
                try:
                    await self._callback("terminate_agent", reason)
                except Exception as exc:
                    log_error(f"agent {self.name!r}: terminate_agent raised", exc)
        self.on_exit(self, Exit(kind, error))
        self._done = True
        if self._exited is not None:
            self._exited.set()

    # --- called by the runtime (other tasks) ------------------------------------------

    def submit(self, prompt: str, origin: Origin) -> Request:
        """Hand the agent a prompt: it starts at once if the agent is idle, else queues.

        Raises `MailboxFull` if the queue is full by count or bytes."""
        request = Request(Ref(self.name, self.new_id()), prompt, len(prompt.encode()), origin)
        if self._parked is not None and not self.halted:
            self.mailbox.track(request)
            self._begin(request)
            self._wake()
        else:
            self.mailbox.admit(request, idle=self.current is None and not self.halted)
        return request

    def withdraw(self, request: Request) -> trio.Event | None:
        """The asker was cancelled: a queued request leaves the queue and never runs; a
        running one's turn is stopped (``cancelled``). Returns what is set once that turn's
        processes are gone, or None when no turn runs."""
        if request.settled:
            return None
        if self.mailbox.remove(request):
            request.cancelled = True
            return None
        request.abandoned = True
        turn = self.turn
        if request is not self.current or turn is None:
            return None
        turn.stop(StopReason.CANCELLED, _ASK_CANCELLED)
        if self._turn_over is None:
            self._turn_over = trio.Event()
        return self._turn_over

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

    def unhalt(self) -> None:
        self.halted = self.halt_pending = False
        self._wake()

    async def reset_session(self) -> None:
        if self.current is not None:
            raise AgentBusy(self.name, "processing")
        self.session_id = None
        self.session_totals = NO_TOTALS
        if self.unclaimed:
            return  # the row is not this agent's yet
        await self.store.checkpoint_session(
            self.name, backend=self.backend.name, session_id=None, cwd=self.cwd
        )

    def status(self, restarts: int) -> AgentStatus:
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
            restarts=restarts,
        )

    def stop(self, reason: str, cause: BaseException | None = None) -> None:
        self._stop_reason = reason
        self._stop_cause = cause
        self._scope.cancel()

    async def wait_exited(self) -> None:
        if not self._done:
            if self._exited is None:
                self._exited = trio.Event()
            await self._exited.wait()
