"""Supervisors: which agents come back after a crash, with which siblings, how often, how soon.

Every agent name has a `Child` that outlives the agent's instances: how to start one (its
`AgentSpec`) and its `Slot`, the agent's state (its mailbox, so queued work waits through
a restart; its session id, cwd and state blob; its counts), which every instance borrows.
An `Actor` is one instance; when it ends, its supervisor applies OTP's rules (agentrt's
`RestartType`, `Strategy`, `RestartIntensity`): it stops the affected siblings in reverse
start order, sleeps the backoff delay, and starts new instances in start order. Past the
intensity it stops all its agents and raises `RestartLimitExceeded` out of the block that
owns it: the supervisor's task fails, trio cancels its owner's block, and the error
surfaces there, as OTP escalates to the parent.

The runtime is the root supervisor (its strategy and intensity are `open_runtime`'s
arguments); `Runtime.open_supervisor` opens nested ones, owned by the task that opens them.
"""

from __future__ import annotations

import itertools
import logging
from collections import deque
from collections.abc import Callable
from typing import Any, NoReturn

import attrs
import trio

from ._actor import Actor
from ._address import LocalAgent, cancel_grace
from ._agent import Agent
from ._arguments import check_agent, check_name
from ._backends import backend_info
from ._budgets import Budget
from ._callbacks import restore_state
from ._cluster._ownership import Ownership
from ._cluster._specs import forget_spec
from ._credentials import CredentialGroup, CredentialGroups, identify
from ._driver._process import ProcessTracker
from ._driver._process_slots import ProcessSlots
from ._errors import (
    AgentAlreadyStarted,
    AgentStopped,
    NoRuntime,
    RestartLimitExceeded,
    SessionMismatch,
)
from ._held_credentials import save_hold
from ._instance_end import Exit
from ._logs import log_error
from ._mode import Mode
from ._options import AgentOptions
from ._recovery import check_compaction
from ._restart import Crash, RestartIntensity, RestartType, Strategy
from ._slot import Slot
from ._starting import (
    AgentFactory,
    AgentSpec,
    check_start,
    prepare_agent,
    working_directory,
)
from ._status import AgentHandle
from ._stores._protocols import (
    SessionStore,
    StoreCapabilities,
)
from ._telemetry._otel import restart_span
from ._tool_server import ToolBinding, ToolHost
from ._util import NoPublicConstructor
from .backend import Backend

logger = logging.getLogger("agentrt")


@attrs.define(eq=False)
class Context:
    """What the supervisors of one runtime share."""

    store: SessionStore
    # What the store can do beyond the core, asked once at open_runtime.
    capabilities: StoreCapabilities
    runtime_id: str
    slots: ProcessSlots
    tracker: ProcessTracker
    # Serves application tools; started when the first agent that has some starts.
    tools: ToolHost
    ownership: Ownership
    # The options of an agent that gives none (open_runtime's kill_grace among them).
    agent_defaults: AgentOptions
    # Every agent name of the runtime, in start order, under whichever supervisor.
    children: dict[str, Child] = attrs.field(factory=dict)
    # Its agents by the credential they use (usage limits, expired logins, admission).
    credentials: CredentialGroups = attrs.field(factory=CredentialGroups)
    # Names whose start_agent is under way (it awaits the store and init_agent), each with
    # the event set when that start has ended, started or not.
    starting: dict[str, trio.Event] = attrs.field(factory=dict)
    ids: itertools.count[int] = attrs.field(factory=itertools.count)
    incarnations: itertools.count[int] = attrs.field(factory=lambda: itertools.count(1))
    closed: bool = False
    # Makes the runtime's scheduler read the store at once (an agent stored a wake-up its
    # CLI scheduled); nothing on a store that keeps no schedules.
    schedules_changed: Callable[[], None] = lambda: None

    # What telemetry observes of the runtime (its Gauges), read in the metric reader's
    # thread: each in one step.
    def live_processes(self) -> int:
        return self.tracker.live_count()

    def queued(self) -> list[tuple[str, int]]:
        return [(name, child.slot.mailbox.queued) for name, child in list(self.children.items())]

    def budgets_left(self) -> list[tuple[str, float]]:
        slots = [(name, child.slot.budgets) for name, child in list(self.children.items())]
        return [(name, left) for name, budgets in slots if (left := budgets.left_usd()) is not None]


@attrs.define(eq=False)
class Child:
    """One agent name under a supervisor, across its instances."""

    spec: AgentSpec
    supervisor: Supervisor
    slot: Slot
    actor: Actor | None = None
    # Out for good (stopped, or its supervisor closed or gave up).
    removed: bool = False
    # Being stopped by its supervisor to be restarted with a sibling: its exit is expected.
    stopping: bool = False
    _address: LocalAgent | None = None

    def address(self) -> LocalAgent:
        """What a call naming it reaches: made at the first call and kept (an agent never
        called holds none), so an ask makes none."""
        address = self._address
        if address is None:
            address = self._address = LocalAgent(self, cancel_grace(self.spec.options))
        return address

    @property
    def name(self) -> str:
        return self.slot.name

    async def stop(self) -> None:
        """Stop it for good (see `Runtime.stop_agent`): its spec is forgotten first, so no
        host takes it over; returns once it has ended and its lease is given back."""
        context = self.supervisor._context
        await forget_spec(context.capabilities.specs, self.name)
        durable, queue = self.slot.requests, self.slot.mailbox.queue
        if durable is not None and queue:
            # Withdrawn before they fail here, so no later owner of the name runs them.
            await durable.withdraw_all([r.stored_id for r in queue if r.stored_id is not None])
        actor = self.supervisor._discard(self, "stopped")
        if actor is not None:
            await actor.wait_exited()
        await context.ownership.release(self.name)

    def exited(self, actor: Actor, exit: Exit) -> None:
        """An instance of it has ended (a bound method: its actor holds it as long as it
        runs)."""
        self.supervisor._exited(self, actor, exit)


class Supervisor(metaclass=NoPublicConstructor):
    """A set of agents restarted by one strategy within one restart intensity.

    Made by `open_runtime` (the root) and `Runtime.open_supervisor` (nested). Names are
    unique across the whole runtime, and every `Runtime` method works on an agent under
    any supervisor.
    """

    _made_by = "rt.open_supervisor() (the root one is rt.root)"

    def __init__(
        self,
        context: Context,
        nursery: trio.Nursery,
        strategy: Strategy,
        intensity: RestartIntensity,
        budgets: tuple[Budget, ...] = (),
    ) -> None:
        self._context = context
        # Its own budget (if it has one) and those of the supervisors above it.
        self._budgets = budgets
        self.strategy = strategy
        self._nursery = nursery
        self._intensity = intensity
        # Name -> child, in start order (the strategies' order); a dict so a child leaves
        # in O(1), not in a scan of its siblings.
        self._children: dict[str, Child] = {}
        self._pending: deque[tuple[Child, str]] = deque()
        self._wakeup = trio.Event()
        self._scope = trio.CancelScope()
        self._closed = False

    @property
    def max_restarts(self) -> int:
        """How many restarts this supervisor allows in any ``period`` seconds before it
        gives up (`RestartLimitExceeded`), as opened."""
        return self._intensity.max_restarts

    @property
    def period(self) -> float:
        """The window, in seconds, in which at most ``max_restarts`` restarts are allowed,
        as opened."""
        return self._intensity.period

    def agents(self) -> tuple[str, ...]:
        """The names of this supervisor's agents, in start order (restarting ones too).
        Raises nothing; it does not wait, so there is nothing to cancel."""
        return tuple(self._children)

    async def start_agent(
        self,
        /,
        agent: AgentFactory,
        *,
        name: str,
        backend: str | Backend,
        resume: str | bool = "auto",
        fork_from: str | None = None,
        **options: Any,
    ) -> AgentHandle:
        """Start an agent named ``name`` under this supervisor and return its handle.

        ``agent`` is an `Agent` subclass or a zero-argument factory (called again for each
        restart: a new instance), or an instance (reused by restarts: ``init_agent`` runs on
        it again and ``restore_state`` gives it back what it checkpointed, but attributes
        it does not checkpoint keep their values from before the crash).
        ``backend`` is a backend name (entry point group ``agentrt.backends``) or a backend
        object.

        ``resume`` picks the conversation: ``"auto"`` resumes the session the store holds
        for ``name`` (with its checkpointed state), if any; ``False`` starts a new session
        (the stored id and state are dropped; turn and cost totals stay); a session id
        resumes that session. The stored session is refused with `SessionMismatch` when it
        belongs to another backend or was made in another working directory (the CLI
        finds its transcript by cwd); ``resume=False`` is the way past that. The runtime's
        session id always wins over a backend's own first-turn option (Claude's
        ``resume``/``session_id``, which only ``init_agent`` can still return).

        ``fork_from`` (an agent's name, or a session id) starts the agent on a copy of that
        conversation (the backend must implement `agentrt.backend.ForkBackend`; the original
        is left as it was); see docs/workspaces.md, as for ``workspace`` (a `GitWorktree`:
        the agent's own git worktree and branch) and ``budget_usd`` / ``budget_tokens``.

        The runtime's own options are those of the runtime options table (the docs' options
        reference): the turn's bounds (``watchdog``, ``startup``, ...), retention, the
        mailbox's limits, ``on_session_lost`` and ``restart`` (``"permanent"``: restarted
        after a crash and after `Stop`; ``"transient"``: after a crash only;
        ``"temporary"``: never); every other keyword goes to ``init_agent``, whose result
        the backend validates. It raises, before anything runs: `TypeError` for an
        ``agent`` or ``name`` of the wrong type;
        `InvalidOptions` naming the offending key (an unknown one with the closest of the
        runtime's and the backend's options), also for a ``backend`` that is neither a
        name nor a backend object, for a ``name`` that is empty, over 255 characters or
        holds a control character (spaces, ``/``, ``..`` and non-ASCII are fine), for a
        ``cwd`` that does not exist or is not a directory, and for a ``kill_grace`` whose
        kill ladder does not fit in half the runtime's ``lease_ttl``; `CliNotFound` (an
        `InvalidOptions` for ``binary``, with its fix) when the CLI the agent would run is
        no executable file, found on the PATH of the CLI's own environment. Also
        `AgentAlreadyStarted` (also while another live runtime sharing the store owns the
        name: its message names that owner's node and pid), `BackendNotFound` (an
        `InvalidOptions` for ``backend``), `SessionMismatch`, `StoreError`.

        Cancellation: safe; a cancelled start leaves no agent behind (the store may hold
        its row already).
        """
        context = self._context
        self._check_open()
        check_agent(agent)
        check_name(name)
        if name in context.children or name in context.starting:
            raise AgentAlreadyStarted(name)
        ownership = context.ownership
        start = check_start(
            context.store,
            context.capabilities,
            context.agent_defaults,
            ownership.ttl,
            agent=agent,
            name=name,
            backend=backend,
            resume=resume,
            fork_from=fork_from,
            options=options,
        )
        context.starting[name] = trio.Event()
        started = False
        try:
            ready = await prepare_agent(
                context.store,
                context.capabilities,
                ownership,
                context.tools,
                context.tracker,
                start,
                budgets=self._budgets,
                new_id=context.ids.__next__,  # no Python call an ask
                check_open=self._check_open,
            )
            try:
                check_compaction(ready.spec.options, ready.mode)
                self._join_credential(
                    name, ready.spec, ready.backend_options, ready.mode, ready.slot
                )
                child = Child(ready.spec, self, ready.slot)
                context.children[name] = child
                self._children[name] = child
                actor = self._launch(
                    child, ready.instance, ready.backend_options, ready.mode, ready.binding
                )
            except BaseException:
                if ready.binding is not None:
                    ready.binding.close()
                if ready.slot.credential is not None:
                    context.credentials.leave(ready.slot.credential, name)
                raise
            started = True
            self._store_held(ready.slot)
        finally:
            context.starting.pop(name).set()
            if not started:
                ownership.release_soon(name)
        if not ownership.holds(name):  # fenced while it started, so nothing stopped it
            self._discard(child, "lease lost while it was starting")
        # The agent is started: a cancellation arriving now must not hide that.
        await trio.lowlevel.cancel_shielded_checkpoint()
        return actor.handle

    def _store_held(self, slot: Slot) -> None:
        """An agent started on a credential its park or halt holds already (`join`): the
        store names it among the credential's agents soon, for every program's status."""
        group, kept = slot.credential, self._context.capabilities.credentials
        if group is not None and kept is not None and (group.parked() or group.expired):
            self._nursery.start_soon(save_hold, group, kept)

    def _join_credential(
        self, name: str, spec: AgentSpec, backend_options: Any, mode: Mode, slot: Slot
    ) -> None:
        """The agent joins the group of the credential its CLI uses (`identify`, from the
        environment its turns get); an agent that runs no process is alone unless named."""
        options, backend = spec.options, spec.backend
        credentials, env = None, {}
        if mode.runs_processes:
            env = dict(backend.version_command(backend_options).env)
            credentials = backend_info(backend).credentials(env)
        identity = identify(backend.name, options.credential, credentials, env)
        halts = options.on_credential_expired == "halt"
        parks = options.on_usage_limit == "park"
        max_turns, per_minute = options.credential_turns, options.credential_turns_per_minute
        if identity is None:
            if max_turns is not None or per_minute is not None:
                group = slot.credential = CredentialGroup.alone(
                    name, slot, halts=halts, parks=parks
                )
                group.max_turns, group.turns_per_minute = max_turns, per_minute
            return  # else its group is made when it needs one (an idle agent holds none)
        slot.credential = self._context.credentials.join(
            identity,
            name,
            slot,
            halts=halts,
            parks=parks,
            max_turns=max_turns,
            turns_per_minute=per_minute,
        )

    def _budget(self, *, usd: float | None, tokens: int | None, scope: str) -> tuple[Budget, ...]:
        """The budgets of a supervisor opened under this one (its own, if it has a limit,
        then this one's). Raises nothing: ``usd`` and ``tokens`` are checked already."""
        own = Budget(scope, usd, tokens)
        return (own, *self._budgets) if own.limited else self._budgets

    def _check_open(self) -> None:
        if self._context.closed:
            raise NoRuntime("this runtime is closed")
        if self._closed:
            raise NoRuntime("this supervisor is closed")

    def _launch(
        self,
        child: Child,
        instance: Agent,
        backend_options: Any,
        mode: Mode,
        tools: ToolBinding | None,
    ) -> Actor:
        context = self._context
        spec = child.spec
        actor = Actor(
            slot=child.slot,
            agent=instance,
            backend=spec.backend,
            backend_options=backend_options,
            options=spec.options,
            mode=mode,
            handle=AgentHandle(child.name, next(context.incarnations), spec.backend.name),
            on_exit=child.exited,
            runtime_id=context.runtime_id,
            node=context.ownership.owner.node,
            capabilities=context.capabilities,
            ownership=context.ownership,
            slots=context.slots,
            tracker=context.tracker,
            tools=tools,
            schedules_changed=context.schedules_changed,
        )
        child.actor = actor
        child.slot.handle = actor.handle
        child.slot.mode = mode
        self._nursery.start_soon(actor.run, name=f"agentrt agent {child.name!r}")
        return actor

    def _exited(self, child: Child, actor: Actor, exit: Exit) -> None:
        if actor.tools is not None:
            actor.tools.close()  # its CLI is gone: so are its tools
        if child.actor is actor:
            child.actor = None
        if child.stopping:
            return  # the supervisor restarts it; its queue waits
        if (
            child.removed
            or self._closed
            or self._context.closed
            or exit.kind == "stopped"
            or not child.spec.options.restart.restarts_after(abnormal=exit.kind == "crashed")
        ):
            # Ended for good while the runtime stays open (on its own, or its supervisor
            # closed or gave up): no host is to start it again. A closing runtime's agents
            # keep their specs, for the hosts.
            self._remove(child)
            self._fail_queued(child, exit.error)
            self._context.ownership.release_soon(child.name, retire=not self._context.closed)
            return
        self._pending.append((child, exit.error.reason))
        self._wakeup.set()

    def _fail_queued(self, child: Child, error: AgentStopped) -> None:
        """Fail the queue of an agent that ended for good, and end the readers of its
        unsolicited turns. In a store that keeps requests
        they are withdrawn too while the runtime stays open (their callers were told
        `AgentStopped`); a closing runtime, and an agent stopped because its lease was
        lost (fenced), leave them queued for the name's next owner."""
        stored = child.slot.mailbox.fail_queued(error)
        child.slot.mailbox.end_feeds()
        durable, context = child.slot.requests, self._context
        if stored and durable is not None and not context.closed:
            if context.ownership.lost(child.name):
                return  # the work of the lease's next owner
            self._nursery.start_soon(durable.withdraw_all, stored)

    def _remove(self, child: Child) -> None:
        child.removed = True
        group = child.slot.credential
        if group is not None:
            self._context.credentials.leave(group, child.name)
        if self._context.children.get(child.name) is child:
            del self._context.children[child.name]
        if self._children.get(child.name) is child:
            del self._children[child.name]

    def _discard(
        self, child: Child, reason: str, cause: BaseException | None = None
    ) -> Actor | None:
        """Take ``child`` out for good: its actor stops (returned, to wait for), its queued
        work fails with `AgentStopped` (``reason``)."""
        self._remove(child)
        actor = child.actor
        if actor is not None:
            actor.stop(reason, cause)  # its exit fails the queue
        else:
            error = AgentStopped(child.name, reason)
            error.__cause__ = cause
            self._fail_queued(child, error)
            self._context.ownership.release_soon(child.name)
        return actor

    def _close(self, reason: str) -> None:
        """Stop every agent of this supervisor (in reverse start order) and its own task;
        returns at once (the owner's nursery waits for them)."""
        self._closed = True
        self._scope.cancel()
        for child in reversed(list(self._children.values())):
            self._discard(child, reason)

    async def _run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Handle the exits of this supervisor's agents until `_close`; start it with
        ``nursery.start``. Raises `RestartLimitExceeded` when it gives up.

        Cancellation: this is how it stops; a restart under way is abandoned (the agents
        it had not started yet stay out, and their queued work is failed by `close`)."""
        with self._scope:
            task_status.started()
            while True:
                while not self._pending:
                    self._wakeup = trio.Event()
                    await self._wakeup.wait()
                child, reason = self._pending.popleft()
                if not child.removed:
                    await self._restart(child, reason)

    async def _restart(self, crashed: Child, reason: str) -> None:
        delay = self._intensity.record(Crash(crashed.name, trio.current_time(), reason))
        if delay is None:
            await self._give_up(crashed)
        names = set(self.strategy.affected(self.agents(), crashed.name))
        affected = [child for name, child in self._children.items() if name in names]
        siblings = [child for child in affected if child is not crashed]
        why = f"restarting with {crashed.name!r}, which ended ({reason})"
        for sibling in reversed(siblings):
            if sibling.spec.options.restart is RestartType.TEMPORARY:
                actor = self._discard(sibling, f"{why}; a temporary agent is not restarted")
                if actor is not None:
                    await actor.wait_exited()
            else:
                await self._stop_for_restart(sibling, why)
        # Their own exits, if any are waiting, are handled by this restart.
        self._pending = deque(item for item in self._pending if item[0] not in affected)
        restarting = [child.name for child in affected if not child.removed]
        logger.warning(
            "agent %r ended (%s); restarting %s in %g s (%d of at most %d restarts in %g s)",
            crashed.name,
            reason,
            ", ".join(map(repr, restarting)),
            delay,
            len(self._intensity.history),
            self._intensity.max_restarts,
            self._intensity.period,
            extra={"agent": crashed.name},
        )
        with restart_span(crashed.name, restarting, delay, len(self._intensity.history)):
            await trio.sleep(delay)
            for child in affected:
                if not child.removed:
                    await self._start_again(child)

    async def _stop_for_restart(self, child: Child, reason: str) -> None:
        actor = child.actor
        if actor is None:
            return
        child.stopping = True
        try:
            actor.stop(reason)
            await actor.wait_exited()
        finally:
            child.stopping = False

    async def _start_again(self, child: Child) -> None:
        slot = child.slot
        binding: ToolBinding | None = None
        try:
            # init_agent may return other options: a mode they cannot run is one more crash.
            instance, backend_options, mode, binding = await child.spec.instantiate(
                child.name, self._context.tools
            )
            cwd = working_directory(backend_options)
            if slot.session_id is not None and cwd != slot.cwd:
                raise SessionMismatch(
                    child.name,
                    f"init_agent moved it from {slot.cwd!r} to {cwd!r}, away from its "
                    f"session {slot.session_id}",
                )
            if slot.state_blob is not None:
                await restore_state(instance, slot.state_blob)
        except Exception as exc:
            if binding is not None:
                binding.close()
            # A backend or an agent that cannot start is one more crash.
            log_error(f"agent {child.name!r} could not be restarted", exc, child.name)
            self._pending.append((child, f"restart failed: {type(exc).__name__}: {exc}"))
            return
        if child.removed or self._closed or self._context.closed:
            if binding is not None:
                binding.close()
            return
        slot.restarts += 1
        self._launch(child, instance, backend_options, mode, binding)

    async def _give_up(self, crashed: Child) -> NoReturn:
        error = RestartLimitExceeded(crashed.name, self._intensity.history)
        logger.error("supervisor gives up: %s", error, extra={"agent": crashed.name})
        self._closed = True
        reason = f"its supervisor gave up ({error})"
        children = reversed(list(self._children.values()))
        actors = [self._discard(child, reason, error) for child in children]
        with trio.CancelScope(shield=True):
            for actor in actors:
                if actor is not None:
                    await actor.wait_exited()
        raise error
