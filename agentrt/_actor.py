"""The actor: one task per agent incarnation, taking prompts from its mailbox and running turns.

States: ``idle`` (parked, nothing to do), ``processing`` (one request taken: pre_turn, the
turn, the callbacks), ``halted`` (no new turns until ``unhalt``). Notifications wait
while a request is processed and are applied before the next one; prompts an agent
chains to itself run before queued work.

An actor ends when it is stopped, when a handler returns `Stop`, or when it crashes (a
decision callback raised or returned something invalid). It then fails the request it was
processing and its chained prompts, runs ``terminate_agent``, and reports an `Exit` to its
supervisor, which decides about the queued work. What outlives the instance (the
mailbox, the session, halted, its counts) is the agent's `Slot`, which each instance
borrows, so a restarted instance takes it over as it is.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

import attrs
import msgspec
import trio

from ._agent import Agent, Halt, Prompt, Reaction, Stop, overridden
from ._asks import AddContext, Allow, Ask, Block, Decision, Deny, HookAnswer, ToolApproval
from ._errors import AgentStopped, StoreError, TurnFailed
from ._events import (
    NO_TOTALS,
    ErrorEvent,
    Event,
    Response,
    SessionLostEvent,
    StopReason,
    ToolDecisionEvent,
)
from ._exceptiongroups import collapse_exception_groups
from ._logs import log_error
from ._options import AgentOptions, SessionLostPolicy
from ._portable import PortableSession
from ._process import CliProcess, ProcessTracker
from ._process_slots import ProcessSlots
from ._redact import redact
from ._requests import Request
from ._slot import ASK_CANCELLED, Slot
from ._status import AgentHandle
from ._store import SessionStore
from ._telemetry import AgentLogs, TurnTrace
from ._turn import Turn
from ._warm import WarmProcess
from .backend import Backend, InProcessBackend, LiveBackend, PortableBackend

if TYPE_CHECKING:
    from ._tool_server import ToolBinding

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


class _AgentCrashed(Exception):
    def __init__(self, callback: str, error: Exception) -> None:
        self.callback = callback
        self.error = error
        super().__init__(redact(f"{callback} raised {type(error).__name__}: {error}"))


# Failures whose message agentrt writes itself (a bound, a stop, a spawn, the store); the
# others carry what the CLI printed, which may quote the model or the prompt.
_OWN_MESSAGES = frozenset(
    (
        StopReason.INTERRUPTED,
        StopReason.CANCELLED,
        StopReason.STARTUP_TIMEOUT,
        StopReason.FIRST_EVENT_TIMEOUT,
        StopReason.IDLE_TIMEOUT,
        StopReason.TOTAL_TIMEOUT,
        StopReason.OUTPUT_LINE_TOO_LONG,
        StopReason.SPAWN_FAILED,
        StopReason.EVENT_CAPTURE_OVERFLOW,
        StopReason.STORE_FAILED,
    )
)


def _log_turn_end(agent: str, outcome: Response | TurnFailed) -> None:
    # Content-free: the outcome's reason and figures, never the prompt or the answer.
    if isinstance(outcome, Response):
        reason, detail = outcome.stop_reason.value, f"{outcome.duration:.2f} s"
    elif outcome.reason in _OWN_MESSAGES:
        reason, detail = outcome.reason.value, outcome.message
    else:
        reason, detail = outcome.reason.value, "the CLI's message is not logged"
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


_DECISIONS = (Allow, Deny)
_HOOK_ANSWERS = (Block, AddContext, type(None))

ExitKind = Literal["crashed", "normal", "stopped"]


@attrs.frozen
class Exit:
    """How one actor ended: ``crashed`` (a callback failed), ``normal`` (it returned `Stop`)
    or ``stopped`` (from outside). ``error`` is what its unfinished requests got."""

    kind: ExitKind
    error: AgentStopped


@attrs.define(eq=False)
class Actor:
    # The agent's state, borrowed from its name for the life of this instance.
    slot: Slot
    agent: Agent
    backend: Backend
    backend_options: Any
    options: AgentOptions
    handle: AgentHandle
    # Called once the actor has ended; the supervisor decides what becomes of the queue.
    on_exit: Callable[[Actor, Exit], None]
    runtime_id: str
    slots: ProcessSlots | None = None
    tracker: ProcessTracker | None = None
    # This instance's application tools on the runtime's MCP server (closed when it ends).
    tools: ToolBinding | None = None
    _runner: InProcessBackend | None = attrs.field(init=False)
    _overrides: frozenset[str] = attrs.field(init=False)
    _on_session_lost: SessionLostPolicy = attrs.field(init=False)
    _scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    _stop_reason: str = "stopped"
    _stop_cause: BaseException | None = None
    _stop_normally: bool = False
    _exited: trio.Event | None = None
    _done: bool = False
    # A live process record is in the store for the running turn (or the warm CLI).
    _live: bool = False
    # That record says the warm CLI idles between turns.
    _live_idle: bool = False
    # The live CLI (``keep_alive``, approvals, hooks), while the instance runs.
    _warm: WarmProcess | None = None
    # approve_tool or handle_hook raised during the turn: the agent crashes after it.
    _ask_crash: _AgentCrashed | None = None
    # The transcript carried in the store (``portable``); None when not portable.
    _portable: PortableSession | None = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self._runner = self.backend if isinstance(self.backend, InProcessBackend) else None
        self._overrides = overridden(type(self.agent))
        self._on_session_lost = self.options.on_session_lost or type(self.agent).on_session_lost
        self._portable = None
        if self.options.portable and isinstance(self.backend, PortableBackend):
            home = Path(self.backend.cli_home(self.backend_options))
            self._portable = PortableSession(self.store, self.name, self.backend, home)

    @property
    def name(self) -> str:
        return self.slot.name

    @property
    def store(self) -> SessionStore:
        return self.slot.store

    # --- the task -------------------------------------------------------------------

    async def run(self) -> None:
        """The actor's task: runs until stopped, until a handler returns `Stop`, or until a
        callback crashes it.

        Cancellation: ends the actor like ``stop``; cleanup is shielded and bounded."""
        crash: _AgentCrashed | None = None
        try:
            with self._scope, collapse_exception_groups():
                if self._runs_warm():
                    with AgentLogs(self.slot):
                        async with self._warm_process():
                            await self._loop()
                else:  # no context manager held for the idle agent's whole life
                    await self._loop()
        except _AgentCrashed as exc:
            crash = exc
            with AgentLogs(self.slot):
                log_error(f"agent {self.name!r} crashed: {crash}", crash.error)
        finally:
            with trio.CancelScope(shield=True), AgentLogs(self.slot):
                await self._shutdown(crash)

    def _runs_warm(self) -> bool:
        """Whether the instance keeps a live CLI (`_warm_process`). Approvals and hooks
        need the live channel even without keep_alive (then for one turn per process)."""
        backend = self.backend
        approvals = "approve_tool" in self._overrides
        hooks = "handle_hook" in self._overrides
        if (
            (self.options.keep_alive is None and not (approvals or hooks))
            or self._runner is not None
            or not isinstance(backend, LiveBackend)
            or self._live_protocol(None) is None
        ):
            if approvals or hooks:
                logger.warning(
                    "agent %r: the %s backend has no live channel here, so approve_tool "
                    "and handle_hook are not called",
                    self.name,
                    backend.name,
                    extra={"agent": self.name},
                )
            return False
        return True

    def _live_protocol(self, session_id: str | None) -> Any:
        backend = self.backend
        assert isinstance(backend, LiveBackend)
        return backend.live(
            self.backend_options,
            session_id=session_id,
            approvals="approve_tool" in self._overrides,
            hooks="handle_hook" in self._overrides,
        )

    @asynccontextmanager
    async def _warm_process(self) -> AsyncIterator[None]:
        # The instance's live CLI lives in a nursery of its own, inside the instance: its end
        # (a stop, a crash, a restart) ends the process too.
        async with trio.open_nursery() as nursery:
            self._warm = WarmProcess(
                live=self._live_protocol,
                options=self.options,
                slots=self.slots or ProcessSlots(None),
                tracker=self.tracker,
                nursery=nursery,
                on_spawn=self._on_spawn,
                on_gone=self._clear_live,
            )
            try:
                yield
            finally:
                await self._warm.close()
                self._warm = None
                nursery.cancel_scope.cancel()

    async def _loop(self) -> None:
        slot = self.slot
        mailbox = slot.mailbox
        while not self._stop_normally:
            if slot.current is None and mailbox.notifications:
                with AgentLogs(slot):
                    await self._apply(mailbox.notifications.popleft())
                continue
            request = slot.current or slot.take()
            if request is None:
                await slot.park()
                continue
            with AgentLogs(slot):
                await self._process(request)
            if mailbox.queue or mailbox.chained:
                # Scripted turns may never block: let other tasks run between turns.
                await trio.lowlevel.checkpoint()

    async def _process(self, request: Request) -> None:
        slot = self.slot
        prompt = request.prompt
        if "pre_turn" in self._overrides:
            decision = await self._decide("pre_turn", prompt)
            if isinstance(decision, Halt | Stop):
                slot.current = None
                slot.mailbox.put_back(request)
                if isinstance(decision, Stop):
                    self._stop_normally = True
                else:
                    slot.halted = True
                return
            if isinstance(decision, Prompt):
                prompt = decision.text
        outcome, final = await self._run_turn(prompt)
        if self._ask_crash is not None:
            raise self._ask_crash
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
        slot.current = None
        request.outcome = outcome
        slot.mailbox.settle(request, final)
        self._react(reaction)
        if slot.halt_pending:
            slot.halt_pending = False
            slot.halted = True

    async def _run_turn(self, prompt: str) -> tuple[Response | TurnFailed, Event | None]:
        slot = self.slot
        parent = slot.current.trace_context if slot.current is not None else None
        trace = TurnTrace.start(parent, self.name, self.backend.name, slot.session_id)
        if self._portable is not None:
            await self._portable.before_turn(slot.session_id)
        slot.turn = turn = Turn(
            backend=self.backend,
            backend_options=self.backend_options,
            prompt=prompt,
            options=self.options,
            on_session=self._on_session,
            deliver=self._deliver,
            watched=self._watched,
            runner=self._runner,
            slots=self.slots,
            tracker=self.tracker,
            warm=self._warm,
            decide=self._answer_ask,
            session_id=slot.session_id,
            baseline=slot.session_totals if slot.session_id is not None else None,
            on_spawn=self._on_spawn,
            trace=trace,
            agent_name=self.name,
        )
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug(
                "agent %r: turn starts on %s, session %s",
                self.name,
                self.backend.name,
                slot.session_id or "(new)",
                extra={"agent": self.name, "session_id": slot.session_id},
            )
        if slot.current is not None and slot.current.abandoned:  # cancelled before its turn
            turn.stop(StopReason.CANCELLED, ASK_CANCELLED)
        elif self._runner is not None:
            await self._turn_started()  # an in-process turn starts as it is called
        if self._live_idle:
            await self._set_live_idle(False)  # the warm CLI is this turn's now
        try:
            outcome = await turn.run()
            if trace is not None:
                trace.end(outcome)
        finally:
            if trace is not None:
                trace.close()  # a no-op after end(); else the actor stopped mid-turn
            slot.turn_ended()
            if self.tools is not None:
                self.tools.cancel_calls("its turn ended")
            if self._live and self._warm is None:
                await self._clear_live()
        if self._live and self._warm is not None and self._warm.pid is not None:
            await self._set_live_idle(True)  # the warm CLI outlived its turn
        slot.turns += 1
        if self._portable is not None:
            await self._portable.after_turn(slot.session_id)
        if logger.isEnabledFor(logging.DEBUG):
            _log_turn_end(self.name, outcome)
        await self._record_turn(outcome)
        return outcome, turn.final

    async def _on_session(self, session_id: str) -> None:
        slot = self.slot
        if session_id != slot.session_id:
            slot.session_totals = NO_TOTALS
        slot.session_id = session_id
        try:
            if slot.unclaimed:
                await self._claim()
            else:
                await self.store.checkpoint_session(
                    self.name, backend=slot.backend, session_id=session_id, cwd=slot.cwd
                )
        except StoreError as exc:
            log_error(
                f"agent {self.name!r}: the session store could not keep session {session_id}; "
                "the turn fails (store_failed)",
                exc,
            )
            raise

    async def _forget_session(self) -> None:
        try:
            await self.slot.forget_session()
        except Exception as exc:
            # The next session id overwrites the stored one anyway.
            log_error(f"agent {self.name!r}: the session store could not forget a session", exc)

    async def _claim(self) -> None:
        """Make the store's row this agent's: its backend, session, cwd and state."""
        slot = self.slot
        slot.unclaimed = False
        await self.store.checkpoint_session(
            self.name, backend=slot.backend, session_id=slot.session_id, cwd=slot.cwd
        )
        await self.store.save_state(self.name, slot.state_blob)

    async def _turn_started(self) -> None:
        if not self.slot.unclaimed:
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
        self._live, self._live_idle = True, False
        self.slot.cli_pid = proc.pid
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

    async def _set_live_idle(self, idle: bool) -> None:
        self._live_idle = idle
        try:
            await self.store.set_live_idle(self.name, idle)
        except Exception as exc:
            # Only what `agentrt status` shows is behind.
            log_error(f"agent {self.name!r}: the session store could not record its CLI idle", exc)

    async def _clear_live(self) -> None:
        self._live = self._live_idle = False
        self.slot.cli_pid = None
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
        slot = self.slot
        slot.session_totals = slot.session_totals.add(usage, cost)
        if slot.unclaimed:
            return  # the turn never started: nothing to record
        try:
            await self.store.record_turn(
                self.name,
                stop_reason=stop_reason.value,
                cost_usd=cost,
                usage=usage,
                session_id=slot.session_id,
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
        slot = self.slot
        if blob == slot.state_blob:
            return
        slot.state_blob = blob
        if slot.unclaimed:
            return  # written with the row, once a turn has started
        try:
            await self.store.save_state(self.name, blob)
        except Exception as exc:
            # A restart in this program still gets the state (state_blob); a new program not.
            log_error(f"agent {self.name!r}: the session store could not save its state", exc)

    async def _answer_ask(self, ask: Ask) -> tuple[bytes, Sequence[Event]]:
        """The agent's answer to what its live CLI asks, within ``approval_timeout``."""
        if isinstance(ask, ToolApproval):
            decision, by = await self._ask_agent("approve_tool", ask.request, _DECISIONS)
            if decision is None:
                decision = Deny(f"the agent did not allow the tool ({by})")
            assert isinstance(decision, Allow | Deny)
            request = ask.request
            event = ToolDecisionEvent(
                tool_use_id=request.tool_use_id,
                tool_name=request.tool_name,
                allowed=isinstance(decision, Allow),
                message=decision.message if isinstance(decision, Deny) else None,
                updated_input=decision.updated_input if isinstance(decision, Allow) else None,
                decided_by=by,
            )
            return ask.answer(decision), (event,)
        reply, _ = await self._ask_agent("handle_hook", ask.hook, _HOOK_ANSWERS)
        assert reply is None or isinstance(reply, Block | AddContext)
        return ask.answer(reply), ()

    async def _ask_agent(
        self, name: str, question: Any, answers: tuple[type, ...]
    ) -> tuple[Decision | HookAnswer, str]:
        # An answer that does not come in time is none; one that raises (or is of another
        # type) crashes the agent once the turn is over, and ends the turn now.
        timeout = self.options.approval_timeout
        with trio.move_on_after(timeout):
            try:
                value = await self._callback(name, question)
                if not isinstance(value, answers):
                    names = ("None" if t is type(None) else t.__name__ for t in answers)
                    expected = " or ".join(names)
                    raise TypeError(f"{name} returned {value!r}; expected {expected}")
            except Exception as exc:
                self._ask_crash = _AgentCrashed(name, exc)
                turn = self.slot.turn
                if turn is not None:
                    turn.stop(StopReason.TURN_CRASHED, str(self._ask_crash), cause=exc)
                return None, "error"
            return cast("Decision | HookAnswer", value), name
        logger.warning(
            "agent %r: %s did not answer within approval_timeout (%g s)",
            self.name,
            name,
            timeout,
            extra={"agent": self.name},
        )
        return None, "timeout"

    def _watched(self) -> bool:
        """Whether anything looks at the current turn's events as they come."""
        if "handle_stream_event" in self._overrides:
            return True
        request = self.slot.current
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
                lost = event.session_id or self.slot.session_id
                if lost is not None:
                    await self._deliver(
                        (SessionLostEvent(timestamp=event.timestamp, session_id=lost),)
                    )
            if handler is not None:
                result = handler(event)
                if inspect.isawaitable(result):
                    await result
            request = self.slot.current
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
            self.slot.mailbox.chain(reaction.text)
        elif isinstance(reaction, Halt):
            self.slot.halted = True
        elif isinstance(reaction, Stop):
            self._stop_normally = True

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
        slot = self.slot
        current, slot.current = slot.current, None
        if current is not None and not current.settled:
            slot.mailbox.fail(current, error)
        slot.mailbox.fail_chained(error)
        if "terminate_agent" in self._overrides:
            with trio.move_on_after(TERMINATE_GRACE):
                try:
                    await self._callback("terminate_agent", reason)
                except Exception as exc:
                    log_error(f"agent {self.name!r}: terminate_agent raised", exc)
        slot.instance_ended(self.handle)
        self.on_exit(self, Exit(kind, error))
        self._done = True
        if self._exited is not None:
            self._exited.set()

    # --- called by the runtime (other tasks) ------------------------------------------

    def stop(self, reason: str, cause: BaseException | None = None) -> None:
        self._stop_reason = reason
        self._stop_cause = cause
        self._scope.cancel()

    async def wait_exited(self) -> None:
        if not self._done:
            if self._exited is None:
                self._exited = trio.Event()
            await self._exited.wait()
