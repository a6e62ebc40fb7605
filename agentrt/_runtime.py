"""``open_runtime()``: the root nursery and supervisor, the registry of names, the store, the
process limiter."""

from __future__ import annotations

import contextvars
import inspect
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any, Never

import trio

from ._agent_calls import AgentCalls
from ._arguments import check_name, check_ref, wrong_type
from ._cluster._ownership import Ownership
from ._cluster._reaper import reap_stale_approvals, reap_stale_turns
from ._driver._process import ProcessTracker
from ._driver._process_slots import ProcessSlots
from ._driver._runtimes import new_runtime_id, register, unregister
from ._errors import (
    InvalidOptions,
    NoRuntime,
    WorkspaceError,
    did_you_mean,
)
from ._exceptiongroups import collapse_exception_groups
from ._opening import check_ownership, host_for, runtime_options, stop_lost
from ._operations import Awaiting
from ._options import (
    DEFAULT_OPTIONS,
    budget_tokens_option,
    budget_usd_option,
    intensity_option,
    strategy_option,
)
from ._records import StoredWorkspace
from ._requests import Ref
from ._scheduler import Scheduler
from ._starting import AgentFactory
from ._status import AgentHandle, RuntimeStatistics
from ._stores._protocols import (
    Router,
    SessionStore,
    StoreCapabilities,
    WorkspaceStore,
    lacks,
)
from ._stores._sqlite import SQLiteStore, default_store_path
from ._stream import EventStream
from ._supervisor import Context, Supervisor
from ._telemetry._otel import track_runtime
from ._tool_server import ToolHost
from ._unsolicited import UnsolicitedTurns
from ._util import NoPublicConstructor
from ._workspaces import Workspace, list_workspaces, remove_workspace
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


def _default_store() -> SessionStore:
    return SQLiteStore(default_store_path())


def _store_argument(store: object) -> SessionStore:
    if store is None:
        return _default_store()
    if isinstance(store, str | os.PathLike):
        return SQLiteStore(store)
    if not isinstance(store, SessionStore):
        raise wrong_type("store", "a SessionStore or the path of an SQLite store", store)
    return store


class Runtime(AgentCalls, Awaiting, metaclass=NoPublicConstructor):
    """A set of named agents sharing one store, one process limit and one root supervisor.

    Made by `open_runtime`. Every method naming an agent (or a `Ref`, which names its
    agent) reaches it the same way whether this runtime runs it or, on a store that routes
    calls (a `PostgresStore`), another runtime owns it; those are async, since such a call
    may wait (``stream`` alone is synchronous: its stream's reads wait). Each raises
    `AgentNotFound` for a name that is not running (an agent its supervisor is restarting
    still counts as running: work sent to it waits for the new instance), and `NoRuntime`
    once the runtime is closed. Arguments of the wrong type raise `TypeError` naming them;
    a prompt that is empty or blank raises `ValueError`. The module-level ``agentrt.ask``
    etc. are these methods.

    A call to an agent another runtime owns may also raise `RoutingError` (the call could
    not be carried), `AgentStopped` (its owner died or gave the name up while the call
    waited) and `StoreError` (the database failed under it: the call may or may not have
    been made). Cancelling such a call takes it back if its owner has not taken it yet, and
    otherwise cancels the owner's work on it; what the owner had done by then stays done.
    """

    _made_by = "agentrt.open_runtime()"

    def __init__(
        self,
        context: Context,
        root: Supervisor,
        router: Router | None = None,
        scheduler: Scheduler | None = None,
    ) -> None:
        self._context = context
        self._root = root
        # On a store with routing (a `RoutingStore`): reaches the agents other runtimes own.
        self._router = router
        # On a store that keeps schedules: fires this runtime's agents' when due.
        self._scheduler = scheduler

    @property
    def runtime_id(self) -> str:
        """This runtime's id, as the store records it with the process of a running turn."""
        return self._context.runtime_id

    @property
    def node(self) -> str:
        """The node (host) this runtime names itself as in the leases of its agents."""
        return self._context.ownership.owner.node

    @property
    def store(self) -> SessionStore:
        """The session store the agents checkpoint into."""
        return self._context.store

    @property
    def store_capabilities(self) -> StoreCapabilities:
        """What the store can do (`agentrt.store.StoreCapabilities`), asked once as the
        runtime opened it: the store as each capability protocol it implements, or None."""
        return self._context.capabilities

    @property
    def root(self) -> Supervisor:
        """The root supervisor: the one `start_agent` starts agents under."""
        return self._root

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
        """Start an agent named ``name`` under the root supervisor; see
        `Supervisor.start_agent` for the arguments and what it raises.

        Cancellation: safe; a cancelled start leaves no agent behind."""
        return await self._root.start_agent(
            agent, name=name, backend=backend, resume=resume, fork_from=fork_from, **options
        )

    @asynccontextmanager
    async def open_supervisor(
        self,
        /,
        *,
        strategy: str = "one_for_one",
        max_restarts: int = 3,
        period: float = 5.0,
        backoff: float = 0.1,
        max_backoff: float = 5.0,
        budget_usd: float | None = None,
        budget_tokens: int | None = None,
    ) -> AsyncIterator[Supervisor]:
        """Open a nested supervisor, owned by the calling task; start agents under it with
        `Supervisor.start_agent`. ``strategy``, the intensity arguments and the budgets
        (``budget_usd``, ``budget_tokens``: for the agents started under it, on top of the
        runtime's) are as for `open_runtime`.

        On leaving the block its agents are stopped (waiters get `AgentStopped`). When it
        gives up (more than ``max_restarts`` restarts in ``period`` seconds) it stops its
        agents, the block is cancelled and `RestartLimitExceeded` (with the crash history)
        is raised out of it, as itself (not beside the `AgentStopped` a call the block
        awaited got from it): the owner decides what follows, as an OTP supervisor's parent
        does. The rest of the runtime goes on. Raises `InvalidOptions` for a ``strategy`` or
        an intensity argument out of range, `NoRuntime` on a closed runtime.

        Cancellation: cancelling the block stops its agents; their cleanup is shielded and
        bounded.
        """
        context = self._context
        if context.closed:
            raise NoRuntime("this runtime is closed")
        chosen = strategy_option(strategy)
        intensity = intensity_option(max_restarts, period, backoff, max_backoff)
        budgets = self._root._budget(
            usd=budget_usd_option("budget_usd", budget_usd),
            tokens=budget_tokens_option("budget_tokens", budget_tokens),
            scope="supervisor",
        )
        with collapse_exception_groups():
            async with trio.open_nursery() as nursery:
                supervisor = Supervisor._create(context, nursery, chosen, intensity, budgets)
                await nursery.start(supervisor._run)
                try:
                    yield supervisor
                finally:
                    supervisor._close("supervisor closed")

    def stream(self, ref: Ref) -> EventStream:
        """The live events of the tell ``ref``, in order, ending after its terminal event
        (for a failed or cancelled request, an `ErrorEvent` saying why). A reader that
        falls behind makes the turn wait. A ref that is no longer queued or running gives
        an empty stream (use `poll` for its result). Raises `AgentNotFound`.

        On a `PostgresStore`, for an agent another runtime owns, the stream reads the
        events there through the routing, a batch per read, and never makes that turn
        wait: its owner holds the latest 1,000 events (4 MiB) for such readers, and a
        reader that falls further behind skips the oldest, counted in
        `EventStream.dropped`. The first read raises `AgentNotFound` if no live runtime
        owns the name; a read may raise `RoutingError` or `StoreError` as any routed call
        does. If the owner dies or gives the name up, the stream ends with an `ErrorEvent`
        (``cancelled``) saying so, as a local stream of an agent that stops does. See
        docs/deployment.md, "Following a turn on another runtime".

        Cancellation: the call itself does not wait. Cancelling a reader of the stream ends
        its reading only (leave it with ``async with`` or `EventStream.aclose`); the
        request goes on. A cancelled read of a routed stream loses no event.

        On a store that keeps requests (`SQLiteStore`, `PostgresStore`), a ref that no
        runtime holds queued or running (settled, or an earlier program's: found again with
        `request`, say) gives what the store keeps of it, once it settles (waited for as
        `wait` does): one terminal event, a `ResultEvent` with the answer's text and
        session id, or an `ErrorEvent` with the stop reason and the error's message (an
        owner's death `OwnerDied`, or a withdrawal: ``cancelled``), also where no runtime
        runs the agent now; a ref the store does not keep still gives an empty stream (or
        `AgentNotFound` where no runtime runs the agent)."""
        return self._resolve(check_ref(ref).name).stream(ref)

    def unsolicited(self, name: str) -> UnsolicitedTurns:
        """The turns agent ``name`` runs that nobody asked for with ``ask`` or ``tell``,
        each as it ends, from now on: an async iterator of `UnsolicitedTurn` (its `Ref`,
        its ``origin`` and its result: `Completed` with the `Response`, `Failed` with the
        error, or `Withdrawn`), also an async context manager that closes it. Those are
        the turns its warm CLI starts by itself (origin ``task``), the wake-ups its CLI
        scheduled (``wakeup``), the fires of the cron jobs its CLI made (``cron``) and of
        its schedules (``schedule``); each also
        goes through the agent's callbacks, and ``poll`` and ``wait`` take its ref. Any
        number of readers may be open, each with every turn.

        A reader never makes the agent wait: one that falls more than 100 turns (or 8 MiB
        of results) behind loses the oldest it has not read, counted in
        `UnsolicitedTurns.dropped`. It ends once the agent has ended for good
        (`stop_agent`, its supervisor gave up, the runtime closed), after the turns that
        ended before; a supervised restart does not end it. What ended while no reader
        was open (before this program started, say) is not replayed: a schedule's
        ``last_ref`` (`schedules`) gives its last fire's ref for `wait`.

        Raises `InvalidOptions` for a name that is not one of this runtime's agents
        (another runtime's: read them in that runtime), which is all it can tell without
        waiting on a store that routes calls; on one that routes none, `AgentNotFound`.

        Cancellation: the call itself does not wait; a cancelled read takes no turn."""
        check_name(name)
        return self._resolve(name).unsolicited()

    def agents(self) -> tuple[str, ...]:
        """The names of the running agents (restarting ones too), in start order. Raises
        nothing; it does not wait, so there is nothing to cancel."""
        return tuple(self._context.children)

    def whereis(self, name: str) -> AgentHandle | None:
        """The handle of the running instance of agent ``name``; None if there is no such
        agent or its supervisor is restarting it. Raises `TypeError` for a ``name`` that is
        not a str; it does not wait, so there is nothing to cancel."""
        child = self._context.children.get(name)
        return None if child is None else child.slot.handle

    async def workspaces(self) -> Sequence[Workspace]:
        """Every agent's workspace the store holds (`Workspace`: its record, whether its
        worktree exists on this node, its uncommitted changes), by name: those of agents
        that are not running, or that a dead program left, too (nothing deletes one but
        `remove_workspace`). Raises `InvalidOptions` on a store without workspaces,
        `NoRuntime` once the runtime is closed.

        Cancellation: git is killed and nothing changes; only the listing is lost."""
        return await list_workspaces(self._workspace_store())

    async def remove_workspace(self, name: str, *, force: bool = False) -> StoredWorkspace:
        """Remove agent ``name``'s worktree and forget it; its branch stays, with every
        commit. Returns what was removed. Raises `WorkspaceError` while the agent runs
        (here, or in another live runtime that holds its lease: one of this node that has
        ended does not count, its lease left as it is) and, unless ``force``,
        `UncommittedChanges` while the worktree has uncommitted changes (listing them);
        `WorkspaceError` also when the store holds no workspace for ``name`` or git refuses.

        Cancellation: git is killed; the worktree is either kept and recorded, or removed
        (forgotten once the store is written)."""
        store = self._workspace_store()
        check_name(name)
        if name in self._context.children or name in self._context.starting:
            raise WorkspaceError(
                f"of agent {name!r}", "the agent is running in this runtime; stop_agent first"
            )
        leases = self._context.capabilities.leases
        if leases is not None:
            lease = next((lease for lease in await leases.leases() if lease.name == name), None)
            # A holder that has ended on this node runs nothing (start_agent takes such a
            # name over at once), whatever its lease has left.
            gone = self._context.ownership.holder_gone
            if lease is not None and lease.held and lease.owner is not None and not gone(lease):
                owner = lease.owner
                raise WorkspaceError(
                    f"of agent {name!r}",
                    f"the agent is running on node {owner.node!r} (pid {owner.pid}); stop it "
                    "there first",
                )
        return await remove_workspace(store, name, force=force)

    def _workspace_store(self) -> WorkspaceStore:
        if self._context.closed:
            raise NoRuntime("this runtime is closed")
        store = self._context.capabilities.workspaces
        if store is None:
            why = lacks(self.store, WorkspaceStore, "workspaces")
            raise InvalidOptions("store", type(self.store).__name__, why)
        return store

    def statistics(self) -> RuntimeStatistics:
        """How many agents run, how many turns hold a process slot, how many wait for one.
        Raises nothing; it does not wait, so there is nothing to cancel."""
        slots = self._context.slots
        return RuntimeStatistics(
            agents=len(self._context.children),
            processes_in_use=slots.in_use,
            turns_waiting=slots.waiting,
        )

    def _close(self) -> None:
        self._context.closed = True
        self._root._close("runtime closed")
        # Agents of nested supervisors whose blocks are still open; reverse start order,
        # as OTP stops children. Each actor's cleanup is shielded.
        for child in reversed(list(self._context.children.values())):
            child.supervisor._discard(child, "runtime closed")


def _refuse_unknown(unknown: Mapping[str, object]) -> None:
    key, value = next(iter(unknown.items()))
    taken = inspect.signature(open_runtime).parameters.values()
    known = tuple(p.name for p in taken if p.kind is inspect.Parameter.KEYWORD_ONLY)
    why = "not an option of open_runtime" + did_you_mean(key, known)
    raise InvalidOptions(key, value, why, known_options=known)


@asynccontextmanager
async def open_runtime(
    *,
    store: SessionStore | str | os.PathLike[str] | None = None,
    max_processes: int | None = None,
    strategy: str = "one_for_one",
    max_restarts: int = 3,
    period: float = 5.0,
    backoff: float = 0.1,
    max_backoff: float = 5.0,
    cgroups: bool = True,
    node: str | None = None,
    lease_ttl: float | None = None,
    kill_grace: float = DEFAULT_OPTIONS.kill_grace,
    host_agents: bool = False,
    budget_usd: float | None = None,
    budget_tokens: int | None = None,
    on_usage_limit: str = DEFAULT_OPTIONS.on_usage_limit,
    on_credential_expired: str = DEFAULT_OPTIONS.on_credential_expired,
    **unknown: Never,
) -> AsyncIterator[Runtime]:
    """Open a runtime; on exit every agent is stopped (waiters get `AgentStopped`).

    ``store`` (default: ``SQLiteStore()`` at `default_store_path`, i.e. ``$AGENTRT_STORE``
    or under ``$XDG_STATE_HOME/agentrt/``; a path, ``str`` or ``os.PathLike``, is an
    ``SQLiteStore`` there) is opened with the runtime and closed after its
    agents have stopped; a store file that is corrupt or not agentrt's raises `StoreError`
    naming it. Agents checkpoint their session ids into it the moment they appear, record
    their turns, their state, and the process group of each running CLI turn. On opening,
    turns that a runtime which has since died left running (by those records) are killed
    and logged.

    ``max_processes`` bounds how many turns run at once across all agents (the others
    wait, shown in `Runtime.status`).

    The runtime is the root supervisor of the agents `Runtime.start_agent` starts:
    ``strategy`` (``"one_for_one"``, ``"one_for_all"``, ``"rest_for_one"``) says which of
    them restart with a crashed one; at most ``max_restarts`` restarts in any ``period``
    seconds, the first after ``backoff`` seconds, each further one in the window after
    twice the previous delay, at most ``max_backoff``. Past that the runtime gives up:
    every agent is stopped, the block is cancelled and `RestartLimitExceeded` is raised
    out of it, as itself (not beside the `AgentStopped` a call the block awaited got from
    it). Nested supervisors: `Runtime.open_supervisor`.

    Each turn's processes get a cgroup of their own where cgroup v2 lets the runtime create
    one (as root, or in a delegated subtree), so nothing a turn starts outlives it;
    ``cgroups=False`` (or ``AGENTRT_CGROUP=off`` in the environment) uses the /proc walk
    instead, as on machines without that permission.

    Ownership: at most one runtime owns an agent name at a time, across the programs and
    hosts sharing the store. `Runtime.start_agent` takes the name's lease in the store
    and raises `AgentAlreadyStarted` (naming the owner's node and pid) while another live
    runtime holds it. A dead owner's lease is taken at once on the same node (its pid and
    start time are checked), from another node once it has expired. ``node`` names this
    runtime's host (default: the machine's hostname; runtimes on one machine may name
    themselves apart); ``lease_ttl`` (default 10 s) is how long a lease lasts without
    renewal, measured on the store's clock. Both, and ``host_agents``, need a store with
    leases (`agentrt.store.LeaseStore`; `InvalidOptions` naming them otherwise): on a
    store without, the runtime's names are a table of its own. The runtime renews its leases every
    ``lease_ttl / 5``; without a renewal for ``lease_ttl / 2`` it stops the agent (its CLI is
    killed, its waiters get `AgentStopped` with a ``"lease lost: ..."`` reason, it is not
    restarted), so an agent's ``kill_grace`` must fit: ``2 * kill_grace + 1 <= lease_ttl /
    2``, that is ``lease_ttl >= 4 * kill_grace + 2``. ``kill_grace`` (default 2 s) is the
    option of that name of the agents that do not give their own; a ``lease_ttl`` it does not
    fit raises `InvalidOptions` here (the default needs at least 10 s), an agent's own
    ``kill_grace`` that does not fit raises it at `Runtime.start_agent`. Every store write
    of an owned agent carries its lease's epoch and is refused (`LeaseLost`) once another
    runtime has taken the lease.

    Budgets: ``budget_usd`` (US dollars) and ``budget_tokens`` (input, output and cache
    writes) cover every agent started in the runtime, counted from what the store holds for
    each name plus its turns since; an agent's own (``start_agent(budget_usd=...)``) and a
    supervisor's (`open_supervisor`) count beside them. No turn starts once one is spent: the
    request fails with `BudgetExceeded` and the agent halts, its queue kept. A turn of a
    backend with a per-run limit (Claude's ``--max-budget-usd``) gets what is left; where
    that does not hold (a warm CLI, a backend without one), a turn whose streamed cost (the
    backend's estimate) reaches what was left when it started fails with
    ``budget_exceeded``. A turn killed before its result counts that estimate.

    Credentials: ``on_usage_limit`` (``"park"``) and ``on_credential_expired`` (``"halt"``)
    are the options of those names of the agents that do not give their own: a usage limit
    parks every agent of the credential until it resets, an expired login halts them until
    it works again; ``"fail"`` opts the runtime's agents out (their turn fails, nothing
    else). See docs/howto/unattended-fleets.md.

    Failover: `Runtime.start_agent` stores the agent's spec (its class as
    ``module:qualname``, its backend's name, its options as JSON; ``failover=False`` opts
    an agent out, ``failover=True`` refuses one whose spec cannot be stored). With
    ``host_agents=True`` the runtime takes over, under its root supervisor, every stored
    agent whose lease is free (its owner died, or closed), in start order, while it runs
    fewer agents than ``max_processes``, and resumes its session. `Runtime.stop_agent` and
    an agent that ends for good remove the spec.

    Inside the block, the module-level ``agentrt.ask`` etc. act on this runtime. An
    exception leaves the block as itself (the runtime's own nurseries do not wrap it in an
    `ExceptionGroup`); a group leaves only when several exceptions happened at once.

    A keyword it does not take raises `InvalidOptions` naming it and the closest it takes
    (``unknown`` only catches it: a type checker refuses it already).

    Cancellation: cancelling the block stops every agent; their cleanup is shielded and
    bounded. Opening may wait for the store and for killing stale turns (bounded).
    """
    if unknown:
        _refuse_unknown(unknown)
    checked = runtime_options(
        max_processes=max_processes,
        strategy=strategy,
        max_restarts=max_restarts,
        period=period,
        backoff=backoff,
        max_backoff=max_backoff,
        node=node,
        lease_ttl=lease_ttl,
        kill_grace=kill_grace,
        host_agents=host_agents,
        budget_usd=budget_usd,
        budget_tokens=budget_tokens,
        on_usage_limit=on_usage_limit,
        on_credential_expired=on_credential_expired,
    )
    slots = ProcessSlots(max_processes)
    opened = _store_argument(store)
    capabilities = StoreCapabilities.of(opened)
    check_ownership(opened, capabilities, checked.ownership_given)
    runtime_id = new_runtime_id()
    with collapse_exception_groups():
        async with AsyncExitStack() as stack:
            await stack.enter_async_context(opened)
            register(runtime_id)
            stack.callback(unregister, runtime_id)
            await reap_stale_turns(opened, capabilities.live)
            await reap_stale_approvals(capabilities.approvals)
            # The tracker outlives the agents: their turns' cleanup may still need it.
            async with trio.open_nursery() as services:
                tracker = ProcessTracker(cgroups=cgroups, runtime_id=runtime_id)
                await services.start(tracker.run)
                ownership = Ownership(
                    capabilities.leases,
                    capabilities.specs,
                    node=checked.node,
                    runtime_id=runtime_id,
                    ttl=checked.ttl,
                    on_lost=lambda name, reason: stop_lost(context, name, reason),
                )
                await services.start(ownership.run)
                try:
                    async with trio.open_nursery() as nursery:
                        context = Context(
                            opened,
                            capabilities,
                            runtime_id,
                            slots,
                            tracker,
                            ToolHost(services),
                            ownership,
                            checked.agent_defaults,
                        )
                        track_runtime(context)
                        budget = checked.budget
                        budgets = (budget,) if budget.limited else ()
                        root = Supervisor._create(
                            context, nursery, checked.strategy, checked.intensity, budgets
                        )
                        await nursery.start(root._run)
                        router = None
                        if capabilities.routing is not None:
                            router = capabilities.routing.router(
                                ownership.owner, ended=ownership.owner_ended
                            )
                        scheduler = None
                        if capabilities.schedules is not None:
                            scheduler = Scheduler(context, capabilities.schedules)
                            context.schedules_changed = scheduler.poke
                            await services.start(scheduler.run)
                        runtime = Runtime._create(context, root, router, scheduler)
                        if router is not None:
                            await services.start(router.run, runtime._serve_routed)
                        if checked.host_agents:
                            services.start_soon(
                                host_for(runtime.start_agent, context, max_processes).run,
                                name="agentrt host_agents",
                            )
                        token = _current.set(runtime)
                        try:
                            yield runtime
                        finally:
                            _current.reset(token)
                            runtime._close()
                finally:
                    # Every agent has ended: its processes are gone.
                    with trio.move_on_after(_RELEASE_GRACE, shield=True):
                        await ownership.release_all()
                services.cancel_scope.cancel()


# Bound on giving the leases back as a runtime closes; an unreleased lease expires.
_RELEASE_GRACE = 10.0
