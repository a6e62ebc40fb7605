"""The actor: one task per agent incarnation, taking prompts from its mailbox and running turns.

States: ``idle`` (parked, nothing to do), ``processing`` (one request taken: pre_turn, the
turn, the callbacks), ``halted`` (no new turns until ``unhalt``). Notifications wait
while a request is processed and are applied before the next one; prompts an agent
chains to itself run before queued work.

An actor ends when it is stopped, when a handler returns `Stop`, or when it crashes (a
decision callback raised or returned something invalid): see agentrt._instance_end. What
outlives the instance (the mailbox, the session, halted, its counts) is the agent's `Slot`,
which each instance borrows, so a restarted instance takes it over as it is.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import attrs
import trio

from . import _approvals
from ._agent import Agent, Halt, Prompt, Reaction, Stop, overridden
from ._callbacks import AgentCrashed, Callbacks, encode_state
from ._driver._lifecycle import CliLifecycle, LiveSettings
from ._driver._process import ProcessTracker
from ._driver._process_slots import ProcessSlots
from ._errors import BudgetExceeded, StoreError, TurnFailed
from ._events import (
    Event,
    Response,
    StopReason,
)
from ._exceptiongroups import collapse_exception_groups
from ._held_credentials import save_hold, take_stored, wait_for_admission, wait_while_halted
from ._instance_end import Exit, exit_of, fail_unfinished, terminate
from ._logs import log_error
from ._mailbox import UNSOLICITED
from ._mode import Mode
from ._options import AgentOptions
from ._portable import PortableSession
from ._recorder import Recorder
from ._recovery import Recovery, credential_outcome
from ._redact import redact
from ._requests import Request
from ._schedule import wall_now
from ._scheduling import CliSchedules, drop_woken
from ._slot import ASK_CANCELLED, Slot
from ._status import AgentHandle
from ._stores._protocols import SessionStore, StoreCapabilities, TranscriptStore
from ._telemetry._log_fields import AgentLogs
from ._telemetry._otel import TurnTrace, count_budget_refusal
from ._turn import Turn
from ._turn_host import AgentTurnHost
from ._turn_response import log_turn_end
from ._turn_source import FrameSource
from ._versions import probed_version
from .backend import Backend, ForkBackend, PortableBackend, RunBudgetBackend

if TYPE_CHECKING:
    from ._cluster._ownership import Ownership
    from ._tool_server import ToolBinding

logger = logging.getLogger("agentrt")

# Seconds before a claim the store refused is tried again.
CLAIM_RETRY = 1.0


@attrs.define(eq=False)
class Actor:
    # The agent's state, borrowed from its name for the life of this instance.
    slot: Slot
    agent: Agent
    backend: Backend
    backend_options: Any
    options: AgentOptions
    # How its turns run (in process, one process per turn, live), chosen at its start.
    mode: Mode
    handle: AgentHandle
    # Called once the actor has ended; the supervisor decides what becomes of the queue.
    on_exit: Callable[[Actor, Exit], None]
    runtime_id: str
    # The node of the runtime running it (its turn history names it).
    node: str
    # What its store can do, resolved as the runtime opened it.
    capabilities: StoreCapabilities
    # Its runtime's leases (`settle`; held, not a bound method of it: 64 bytes an agent).
    ownership: Ownership
    slots: ProcessSlots | None = None
    tracker: ProcessTracker | None = None
    # This instance's application tools on the runtime's MCP server (closed when it ends).
    tools: ToolBinding | None = None
    # Called once a turn has stored a wake-up its CLI scheduled (the scheduler reads it).
    schedules_changed: Callable[[], None] = lambda: None
    _overrides: frozenset[str] = attrs.field(init=False)
    _callbacks: Callbacks = attrs.field(init=False)
    # What runs again after a failed turn, and ahead of the next one.
    _recovery: Recovery = attrs.field(init=False)
    _scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    _stop_reason: str = "stopped"
    _stop_cause: BaseException | None = None
    _stop_normally: bool = False
    _exited: trio.Event | None = None
    _done: bool = False
    # Whether the store's hold of its credential was read once (at its first turn: what an
    # earlier program stored); an agent alone on its credential reads it no more.
    _read_store: bool = False
    # What the instance's turns write to the store (the claim, the session, its processes).
    _recorder: Recorder = attrs.field(
        init=False,
        default=attrs.Factory(
            lambda self: Recorder(
                self.slot,
                self.slot.store,
                self.runtime_id,
                self.node,
                self.options.turn_history,
                self.capabilities.turn_history,
            ),
            takes_self=True,
        ),
    )
    # What the instance's turns read: the runner, or its CLI processes (`_frame_source`);
    # made at the first turn and kept, so an agent that never ran one holds none.
    _source: FrameSource | None = None
    # approve_tool or handle_hook raised during the turn: the agent crashes after it.
    _ask_crash: AgentCrashed | None = None
    # The transcript carried in the store (``portable``); None when not portable.
    _portable: PortableSession | None = attrs.field(init=False)
    _cli_schedules: CliSchedules | None = attrs.field(init=False)
    name: str = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.name = self.slot.name
        self._overrides = overrides = overridden(type(self.agent))
        self._callbacks = Callbacks(self.agent, self.slot.name, overrides)
        self._recovery = Recovery(
            self.slot,
            self.options,
            self.options.on_session_lost or type(self.agent).on_session_lost,
            partial(self._run_turn, first=False),
            self._recorder.forget_session,
        )
        self._cli_schedules = CliSchedules.of(self.capabilities.schedules, self.backend, self.mode)
        self._portable = None
        if self.options.portable:  # start_agent refused it for any other backend or store
            backend = cast(PortableBackend, self.backend)
            home = Path(backend.cli_home(self.backend_options))
            transcripts = cast(TranscriptStore, self.store)
            self._portable = PortableSession(
                transcripts, self.name, backend, home, self.options.transcript_wait
            )

    @property
    def store(self) -> SessionStore:
        return self.slot.store

    # --- the task -------------------------------------------------------------------

    async def run(self) -> None:
        """The actor's task: runs until stopped, until a handler returns `Stop`, or until a
        callback crashes it.

        Cancellation: ends the actor like ``stop``; cleanup is shielded and bounded."""
        crash: AgentCrashed | None = None
        # It may have schedules stored already (an earlier program's): they are read now,
        # not at the scheduler's next reading of the store.
        self.schedules_changed()
        try:
            with self._scope, collapse_exception_groups():
                if self.mode.holds_cli:  # a live CLI, for one turn or kept warm
                    with AgentLogs(self.slot):
                        async with self._warm_process():
                            await self._loop()
                else:  # no context manager held for the idle agent's whole life
                    await self._loop()
        except AgentCrashed as exc:
            crash = exc
            with AgentLogs(self.slot):
                log_error(f"agent {self.name!r} crashed: {crash}", crash.error)
        finally:
            with trio.CancelScope(shield=True), AgentLogs(self.slot):
                await self._shutdown(crash)

    def _frame_source(self, nursery: trio.Nursery | None) -> FrameSource:
        """What the instance's turns read, as its mode says: its runner, one CLI process per
        turn, or (in the ``nursery`` of `_warm_process`) a live CLI."""
        options = self.options
        slots = self.slots or ProcessSlots(None)

        def open_cli(live: LiveSettings | None) -> CliLifecycle:
            assert (live is None) == (nursery is None)
            return CliLifecycle(
                agent=self.name,
                backend=self.backend,
                backend_options=self.backend_options,
                live=live,
                limits=options.process_limits,
                slots=slots,
                tracker=self.tracker,
                records=self._recorder,
                nursery=nursery,
                turn_options=self._turn_options,
                settings=self.slot.channel_settings(),
                own_turn=self.slot.own_turn,
            )

        return self.mode.frame_source(self.backend, self.backend_options, options, slots, open_cli)

    def _turn_options(self, options: Any) -> Any:
        """The options of a CLI process starting now: with what is left of the agent's
        budgets as the CLI's own limit, where the backend takes one (a warm CLI keeps the
        limit it started with: its turns are bounded by `_cost_limit` instead); forking
        the session it resumes while the agent is a fork that has no session of its own
        yet."""
        slot, backend = self.slot, self.backend
        left = slot.budgets.left_usd()
        if left is not None and isinstance(backend, RunBudgetBackend):
            options = backend.with_run_budget(options, left)
        if slot.forking and isinstance(backend, ForkBackend):
            options = backend.with_fork(options)
        return options

    @asynccontextmanager
    async def _warm_process(self) -> AsyncIterator[None]:
        # The instance's live CLI lives in a nursery of its own, inside the instance: its end
        # (a stop, a crash, a restart) ends the process too.
        async with trio.open_nursery() as nursery:
            self._source = lifecycle = self._frame_source(nursery)
            assert isinstance(lifecycle, CliLifecycle)
            self.slot.channel = lifecycle
            try:
                yield
            finally:
                self.slot.channel = None
                await lifecycle.aclose()
                self._source = None
                nursery.cancel_scope.cancel()

    async def _loop(self) -> None:
        slot = self.slot
        mailbox = slot.mailbox
        # Whether the store's hold of its credential was read for the request at the head.
        read_store = False
        while not self._stop_normally:
            if slot.current is None and mailbox.notifications:
                with AgentLogs(slot):
                    await self._apply(mailbox.notifications.popleft())
                continue
            # Read, not taken: the request stays queued until its turn may start.
            request = slot.next()
            group = slot.credential
            if request is None:
                if self._recorder.idle_due:  # the queued turn did not come
                    await self._recorder.parked()
                    continue
                if slot.halted and group is not None and group.expired is not None:
                    # Halted by its login's expiry: it looks now and then for a new login,
                    # and whether the store still holds the halt (`agentrt unhalt`).
                    kept = self.capabilities.credentials
                    await wait_while_halted(slot, group, kept, self.options.login_check)
                    continue
                await slot.park()
                continue
            kept = self.capabilities.credentials
            if kept is not None and not read_store and (group is not None or not self._read_store):
                # What the store holds of its credential first (another program's limit, an
                # earlier program's): a queued request stays at the head of the queue
                # meanwhile; one handed over as the agent idled stays current, its turn
                # starting, and joins the queue only if the agent must wait.
                halts = self.options.on_credential_expired == "halt"
                parks = self.options.on_usage_limit == "park"
                await take_stored(slot, kept, halts=halts, parks=parks)
                read_store = self._read_store = True
                if request is slot.current and slot.halt_pending:
                    # Halted meanwhile (the store's halt, or `halt`) before its turn began.
                    await slot.defer(request)
                    slot.halt_pending = False
                    slot.halt_now()
                continue
            if group is not None and not group.admit(parks=self.options.on_usage_limit == "park"):
                # Parked at a usage limit, or at its credential's admission: the request
                # waits at the head of the queue (withdrawn or cancelled as any queued one).
                await slot.defer(request)
                await wait_for_admission(slot, group)
                continue
            if request is not slot.current:
                slot.take()  # the head just read
            try:
                if request.stored_id is not None and not request.claimed:
                    with AgentLogs(slot):
                        claimed = await self._claim(request)
                    if claimed is None:
                        continue
                    request = claimed
                with AgentLogs(slot):
                    await self._process(request)
            finally:
                read_store = False
                if group is not None:
                    group.leave()
            if mailbox.queue or mailbox.chained:
                # Scripted turns may never block: let other tasks run between turns.
                await trio.lowlevel.checkpoint()

    async def _claim(self, request: Request) -> Request | None:
        """Claim the stored ``request`` just taken (the store's head) before its turn
        starts: the request to run now, current; None when there is none (withdrawn from
        elsewhere, or the store failed: it goes back and is tried again after a pause)."""
        slot = self.slot
        durable = slot.requests
        assert durable is not None
        slot.current = None
        try:
            claimed = await durable.claim(slot.mailbox, request)
        except StoreError as exc:
            # A lost lease stops the agent (its fence); a failing store is tried again.
            log_error(f"agent {self.name!r}: the store could not start a request", exc)
            if not request.settled and not request.claimed:
                slot.mailbox.put_back(request)
            await trio.sleep(CLAIM_RETRY)
            return None
        if claimed is not None:
            slot.begin(claimed)
        return claimed

    async def _process(self, request: Request) -> None:
        slot = self.slot
        # A turn the CLI started by itself runs already: no prompt, nothing to refuse.
        own = request.origin == "task"
        if own and (slot.channel is None or not slot.channel.own_turn_held):
            # Read already by the agent's turn that began as the CLI started it, or gone
            # with its process: nothing is left to run.
            slot.current = None
            slot.mailbox.settle_withdrawn(request, slot.session_id)
            return
        woken = None
        if own and slot.channel is not None:  # its CLI's own turn may be a wake-up it held
            woken = slot.channel.take_wakeup(wall_now())
            if woken is not None:
                request.origin = "wakeup"
        prompt: str | None = None if own else request.prompt
        spent = None if own or not slot.budgets.chain else slot.budgets.exceeded(slot.name)
        if spent is not None:
            await self._refuse(request, spent)
            return
        if "pre_turn" in self._overrides and prompt is not None:
            decision = await self._callbacks.decide("pre_turn", prompt)
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
        claimed = request if request.claimed else None
        outcome, final = await self._run_turn(prompt, claimed, first=True)
        if self._ask_crash is not None:
            raise self._ask_crash
        started_by = UNSOLICITED.get(request.origin)
        if isinstance(outcome, Response) and started_by is not None:
            outcome = attrs.evolve(outcome, origin=started_by)
        recovery = self._recovery
        if type(outcome) is TurnFailed and prompt is not None and recovery.runs_again(outcome):
            outcome, final = await recovery.run_again(prompt, claimed, outcome)
        if woken is not None:  # fired by the CLI: its stored copy must not run too
            await drop_woken(self.capabilities.schedules, self.name, woken)
        if isinstance(outcome, Response) and self._cli_schedules is not None:
            kept, stored = await self._cli_schedules.keep(self.name, outcome)
            # A warm CLI fires its own wake-ups while it lives (measured on claude 2.1.332: a
            # turn it starts itself); the stored copy fires only once that CLI has ended.
            if kept and slot.channel is not None:
                slot.channel.hold_wakeups({k.id: k.next_due for k in kept})
            if stored:
                self.schedules_changed()
        changed = credential_outcome(self.slot, self.options, outcome)
        if changed is not None and self.capabilities.credentials is not None:
            await save_hold(changed, self.capabilities.credentials)
        ref = request.ref
        reaction: Reaction = None
        if isinstance(outcome, Response):
            if "handle_response" in self._overrides:
                reaction = await self._callbacks.decide("handle_response", ref, outcome)
        else:
            reaction = await self._callbacks.contained("handle_error", ref, outcome)
        if "post_turn" in self._overrides:
            await self._callbacks.decide("post_turn", ref, outcome)
        if "checkpoint_state" in self._overrides:
            await self._save_state()
        slot.current = None
        request.outcome = request.overruled or outcome
        slot.mailbox.settle(request, final)
        if reaction is not None:
            self._react(reaction)
        if isinstance(outcome, Response) and self.options.compact_at is not None:
            await self._recovery.compact_ahead()
        if slot.halt_pending:
            slot.halt_pending = False
            slot.halt_now()

    async def _refuse(self, request: Request, spent: BudgetExceeded) -> None:
        """No turn past a budget: the request fails with it, the agent halts, the rest of
        its queue waits."""
        slot = self.slot
        logger.warning("%s", spent, extra={"agent": self.name})
        count_budget_refusal(self.name, self.backend.name)
        slot.current = None
        request.outcome = spent
        if request.claimed and slot.requests is not None:
            await slot.requests.settle(request, spent)
        slot.mailbox.settle(request, None)
        slot.halted = True

    def _cost_limit(self) -> float | None:
        """What the turn starting now may spend by its stream's estimate: what is left of
        the agent's budgets, unless the CLI's own per-run limit holds it (a process started
        for this turn, with `_turn_options`). A warm CLI keeps the limit it started with,
        which others' spending since does not lower."""
        left = self.slot.budgets.left_usd()
        if left is None or (isinstance(self.backend, RunBudgetBackend) and not self.mode.warm):
            return None
        return left

    async def _run_turn(
        self, prompt: str | None, claimed: Request | None, *, first: bool
    ) -> tuple[Response | TurnFailed, Event | None]:
        """Run one turn for ``prompt``; the ``claimed`` stored request (if any) is settled
        with the turn's record, unless the turn runs again (`Recovery.runs_again`)."""
        slot = self.slot
        parent = slot.current.trace_context if slot.current is not None else None
        trace = TurnTrace.start(parent, self.name, self.backend.name, slot.session_id)
        # No coroutine a turn for what the agent does not use.
        unrestored = None if self._portable is None else await self._restore_transcript()
        recorder = self._recorder
        source = self._source
        if source is None:
            source = self._source = self._frame_source(None)
        probes = self.mode.probe_version
        probed = None
        if probes:  # asked once per executable file, then cached
            probed = await probed_version(self.backend, self.backend_options)
        slot.turn = turn = Turn(
            prompt,
            self.options,
            slot.resumed_session,
            slot.session_totals if slot.session_id is not None else None,
            source,
            AgentTurnHost(
                slot,
                recorder,
                self._callbacks,
                self.capabilities.approvals,
                self.runtime_id,
                self.options.approval_timeout,
                self._ask_crashed,
            ),
            trace,
            probed_version=probed,
            version_probed=probes,
            cost_limit=self._cost_limit() if slot.budgets.chain else None,
        )
        if debug := logger.isEnabledFor(logging.DEBUG):
            logger.debug(
                "agent %r: turn starts on %s, session %s",
                self.name,
                self.backend.name,
                slot.session_id or "(new)",
                extra={"agent": self.name, "session_id": slot.session_id},
            )
        if slot.current is not None and slot.current.abandoned:  # cancelled before its turn
            turn.stop(StopReason.CANCELLED, ASK_CANCELLED)
        if unrestored is not None:  # the CLI must not resume a stale copy, or none
            turn.stop(
                StopReason.STORE_FAILED,
                redact(
                    f"session {slot.session_id}'s transcript could not be restored from the "
                    f"store, so the turn did not start (it may be asked again): {unrestored}"
                ),
                detail={"retryable": isinstance(unrestored, StoreError)},
                cause=unrestored,
            )
        now = trio.lowlevel.current_clock().current_time  # trio.current_time(), unwrapped
        started_at, started = time.time(), now()
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
        if type(outcome) is TurnFailed and outcome.reason is StopReason.PROCESS_CRASHED:
            # Killed by a signal agentrt did not send: maybe its fence guard's (a runtime
            # frozen past its lease). The lease is settled first; lost, the fence stopped
            # this instance (cancelled there): the turn ends `AgentStopped`, not a crash.
            await self.ownership.settle(self.name)
        slot.turns += 1
        if turn.cli_version is not None:
            slot.cli_version = turn.cli_version
        if self._portable is not None and unrestored is None:
            stored = await self._portable.after_turn(slot.session_id)
            if isinstance(outcome, Response):
                outcome = attrs.evolve(outcome, transcript_stored=stored)
        if debug:
            log_turn_end(self.name, outcome)
        duration = now() - started
        again = first and type(outcome) is TurnFailed and self._recovery.runs_again(outcome)
        settles = None if claimed is None or again else claimed
        await recorder.turn_ended(
            outcome, prompt=prompt or "", started_at=started_at, duration=duration, settles=settles
        )
        return outcome, turn.final

    async def _restore_transcript(self) -> Exception | None:
        """A portable agent's transcript made the stored one before its turn; why it could
        not be (within ``transcript_wait``), or None."""
        assert self._portable is not None
        session_id = self.slot.session_id
        try:
            await self._portable.before_turn(session_id)
        except (StoreError, OSError, ValueError) as exc:
            logger.warning(
                "agent %r: session %s's transcript could not be restored: %s",
                self.name,
                session_id,
                exc,
                extra={"agent": self.name, "session_id": session_id},
            )
            return exc
        return None

    async def _save_state(self) -> None:
        if "checkpoint_state" not in self._overrides:
            return
        try:
            blob = encode_state(await self._callbacks.call("checkpoint_state"))
        except Exception as exc:
            raise AgentCrashed("checkpoint_state", exc) from exc
        await self._recorder.save_state(blob)

    def _ask_crashed(self, crash: _approvals.Crash) -> None:
        # approve_tool or handle_hook failed: the turn ends now, the agent once it is over.
        self._ask_crash = error = AgentCrashed(crash.callback, crash.error)
        turn = self.slot.turn
        if turn is not None:
            turn.stop(StopReason.TURN_CRASHED, str(error), cause=crash.error)

    async def _apply(self, event: Any) -> None:
        if "handle_event" in self._overrides:
            self._react(await self._callbacks.decide("handle_event", event))
            await self._save_state()

    def _react(self, reaction: Reaction) -> None:
        if isinstance(reaction, Prompt):
            self.slot.mailbox.chain(reaction.text)
        elif isinstance(reaction, Halt):
            self.slot.halted = True
        elif isinstance(reaction, Stop):
            self._stop_normally = True

    async def _shutdown(self, crash: AgentCrashed | None) -> None:
        normally = self._stop_normally and not self._scope.cancel_called
        end, reason = exit_of(self.name, crash, normally, self._stop_reason, self._stop_cause)
        await fail_unfinished(self.slot, end.error)
        if "terminate_agent" in self._overrides:
            await terminate(self.name, self._callbacks, reason)
        self.slot.instance_ended(self.handle)
        self.on_exit(self, end)
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
