"""Starting an agent: the checks of its options, its mode, workspace, session and budgets,
and the hand-over of the durable requests a dead owner left.

`Supervisor.start_agent` runs these steps in their order (the order decides which error a
bad start gets): `check_start`, what needs no await, then `prepare_agent`, the rest; the
supervisor launches what they prepared and keeps the restart rules.
"""

from __future__ import annotations

import functools
import inspect
import logging
import os
import sys
from collections.abc import Callable, Mapping
from typing import Any

import attrs
import msgspec

from ._agent import Agent, hook_kinds, overridden
from ._arguments import check_directory
from ._backends import check_binary, resolve_backend
from ._budget_spending import counted_tokens
from ._budgets import NO_BUDGETS, Budget, Budgets
from ._callbacks import restore_state
from ._cluster._ownership import Ownership, check_kill_grace
from ._cluster._reaper import reap_stale_turn
from ._driver._limits import Limits
from ._driver._process import ProcessTracker
from ._durable import Durable
from ._errors import InvalidOptions, SessionMismatch
from ._events import NO_TOTALS
from ._failover import stored_spec
from ._foreign_awaits import check_callbacks
from ._forks import check_fork_from, fork_source
from ._mailbox import Mailbox
from ._mode import Mode, choose_mode
from ._options import (
    AgentOptions,
    app_tools_option,
    backend_options,
    resume_option,
    split_options,
)
from ._portable import portable_options
from ._records import SessionRecord, StoredWorkspace
from ._slot import Slot
from ._stores._protocols import (
    LiveProcessStore,
    SessionStore,
    SpecStore,
    StoreCapabilities,
    TranscriptStore,
    WorkspaceStore,
    lacks,
)
from ._tool_server import ToolBinding, ToolHost
from ._workspaces import prepare_workspace
from .backend import AppToolsBackend, Backend

AgentFactory = type[Agent] | Callable[[], Agent] | Agent

logger = logging.getLogger("agentrt")


def working_directory(backend_options: Any) -> str:
    """Where the CLI of these options runs: their ``cwd`` (a mapping key or an attribute,
    as both built-in backends have) or ours, resolved as the CLI sees it; `InvalidOptions`
    if it is missing or not a directory (every turn would fail to start)."""
    raw = (
        backend_options.get("cwd")
        if isinstance(backend_options, Mapping)
        else getattr(backend_options, "cwd", None)
    )
    # Interned: many agents share a directory, and each keeps it (memory per idle agent).
    if isinstance(raw, str) and raw:
        return sys.intern(os.path.realpath(check_directory("cwd", raw)))
    return sys.intern(os.path.realpath(os.getcwd()))


@attrs.frozen
class AgentSpec:
    """How to start one more instance of an agent."""

    agent: AgentFactory
    backend: Backend
    init_options: Mapping[str, Any]
    options: AgentOptions

    def mode_of(self, cls: type[Agent], backend_options: Any) -> Mode:
        """The mode of an instance of ``cls`` on these backend options (`choose_mode`)."""
        return choose_mode(
            self.backend,
            backend_options,
            self.options,
            overridden(cls),
            agent_class=cls.__name__,
            hook_kinds=hook_kinds(cls),
        )

    async def instantiate(
        self, name: str, tools: ToolHost
    ) -> tuple[Agent, Any, Mode, ToolBinding | None]:
        """A new instance (a given one is reused) after ``init_agent``, its backend options,
        its mode (`InvalidOptions` for one the backend cannot honour), and the binding of
        its application tools, if it has any (the caller closes it)."""
        agent = self.agent
        instance = agent if isinstance(agent, Agent) else agent()
        if not isinstance(instance, Agent):
            raise TypeError(f"{instance!r} is not an agentrt.Agent")
        check_callbacks(type(instance))
        raw = instance.init_agent(**self.init_options)
        if inspect.isawaitable(raw):
            raw = await raw
        if not isinstance(raw, Mapping):
            raise TypeError(f"init_agent returned {raw!r}; expected a mapping of options")
        options = backend_options(self.backend, raw)
        if self.options.portable:
            options = portable_options(self.backend, options, name, self.options.cli_homes)
        cls = type(instance)
        # Before the tool server starts for it: application tools change no capability.
        mode = self.mode_of(cls, options)
        chosen = self.options.app_tools
        if chosen is None:
            chosen = app_tools_option(f"{cls.__name__}.app_tools", cls.app_tools)
        if not chosen:
            return instance, options, mode, None
        backend = self.backend
        if not isinstance(backend, AppToolsBackend):
            names = [t.name for t in chosen]
            raise InvalidOptions(
                "app_tools", names, f"the {backend.name!r} backend cannot serve application tools"
            )
        binding = (await tools.server()).bind(name, instance, chosen)
        return instance, backend.with_app_tools(options, binding.endpoint), mode, binding


@attrs.frozen
class StartArguments:
    """The arguments of one `Supervisor.start_agent`, checked (`check_start`): the backend
    resolved, the runtime's options split from ``init_agent``'s, and the spec the store
    keeps for failover (None: none, or a store that keeps no specs)."""

    name: str
    agent: AgentFactory
    backend: Backend
    init_options: Mapping[str, Any]
    options: AgentOptions
    resume: str | bool
    fork_from: str | None
    stored_spec: str | None


def check_start(
    store: SessionStore,
    capabilities: StoreCapabilities,
    defaults: AgentOptions,
    lease_ttl: float,
    *,
    agent: AgentFactory,
    name: str,
    backend: str | Backend,
    resume: str | bool,
    fork_from: str | None,
    options: Mapping[str, Any],
) -> StartArguments:
    """The checks of a start's arguments that need no await, in the order that decides
    which error a bad start gets (after the agent, its name and whether the name is
    taken, which the supervisor checks); ``defaults`` are the options of an agent that
    gives none."""
    if fork_from is not None:
        fork_from = check_fork_from(fork_from, resume)
    checked_resume = resume_option(resume)
    agent_options, rest = split_options(options, defaults)
    check_kill_grace(agent_options.kill_grace, lease_ttl)
    resolved = resolve_backend(backend)
    specs = check_store(store, capabilities, name, agent_options)
    if agent_options.workspace is not None and "cwd" in rest:
        raise InvalidOptions(
            "workspace",
            agent_options.workspace,
            f"cwd={rest['cwd']!r} and workspace together: the agent's CLI runs in its "
            "workspace's worktree; give one of them",
        )
    stored = None
    if specs is not None:
        stored = stored_spec(name, agent, backend, options, agent_options.failover)
    return StartArguments(
        name, agent, resolved, rest, agent_options, checked_resume, fork_from, stored
    )


def check_store(
    store: SessionStore, capabilities: StoreCapabilities, name: str, options: AgentOptions
) -> SpecStore | None:
    """Refuse an agent whose options need what the store lacks, naming both
    (`InvalidOptions`); the store's specs, or None for a store that keeps none (then
    nothing is stored)."""
    if options.portable and capabilities.transcripts is None:
        why = lacks(store, TranscriptStore, f"agent {name!r}: portable=True")
        raise InvalidOptions("portable", True, why)
    if options.failover and capabilities.specs is None:
        raise InvalidOptions("failover", True, lacks(store, SpecStore, f"agent {name!r}: failover"))
    return capabilities.specs


async def workspace_of(
    store: SessionStore,
    capabilities: StoreCapabilities,
    node: str,
    name: str,
    options: AgentOptions,
    fork_from: str | None,
) -> StoredWorkspace | None:
    """The worktree the agent's record owns (made now, or found again), or None without
    ``workspace``; a store that cannot keep one refuses it. A fork's new worktree branches
    from the original agent's branch, unless the workspace names its own base."""
    asked = options.workspace
    if asked is None:
        return None
    workspaces = capabilities.workspaces
    if workspaces is None:
        why = lacks(store, WorkspaceStore, f"agent {name!r}: workspace")
        raise InvalidOptions("workspace", asked, why)
    if fork_from is not None and asked.base is None:
        original = next((w for w in await workspaces.workspaces() if w.name == fork_from), None)
        if original is not None:
            asked = attrs.evolve(asked, base=original.branch)
    return await prepare_workspace(workspaces, name, asked, node=node)


def check_limits(name: str, limits: Limits, tracker: ProcessTracker) -> None:
    """Enable what ``limits`` need for the runtime's turns, or refuse them (`InvalidOptions`
    saying why) unless they are ``best_effort`` (then a warning, and the turns run
    unlimited): a limit asked for and silently not held would be found out by the OOM it
    was there to contain."""
    why = tracker.limits_refused(limits)
    if why is None:
        return
    if not limits.best_effort:
        raise InvalidOptions(
            "limits",
            limits,
            f"cannot be held here: {why} (Limits(..., best_effort=True) runs the agent "
            "unlimited where they cannot be)",
        )
    logger.warning(
        "agent %r: its limits are not held, its turns run unlimited: %s",
        name,
        why,
        extra={"agent": name},
    )


def check_live_records(
    store: SessionStore, capabilities: StoreCapabilities, name: str, mode: Mode
) -> None:
    """Refuse an agent whose mode runs CLI processes on a store that cannot record them."""
    if mode.runs_processes and capabilities.live is None:
        why = lacks(store, LiveProcessStore, f"agent {name!r} runs CLI processes, which")
        raise InvalidOptions("store", type(store).__name__, why + " (the reaper would miss them)")


def resumed(
    name: str, backend: Backend, cwd: str, record: SessionRecord | None, resume: str | bool
) -> tuple[str | None, bytes | None]:
    """The session id and state blob a start resumes, or `SessionMismatch`."""
    if resume is False:
        return None, None
    session_id = (record.session_id if record is not None else None) if resume == "auto" else resume
    assert session_id is None or isinstance(session_id, str)
    if record is None:
        return session_id, None
    if session_id is not None and session_id == record.session_id:
        fresh = "or start it with resume=False for a new session"
        if record.backend != backend.name:
            raise SessionMismatch(
                name,
                f"its stored session {session_id} belongs to backend {record.backend!r}, "
                f"not {backend.name!r}; {fresh}",
            )
        if record.cwd is not None and record.cwd != cwd:
            raise SessionMismatch(
                name,
                f"its stored session {session_id} was made in {record.cwd!r}, not {cwd!r}: "
                f"the CLI finds a transcript by its working directory; start it with "
                f"cwd={record.cwd!r} to resume, {fresh}",
            )
    return session_id, record.state


async def session_of(
    store: SessionStore,
    name: str,
    spec: AgentSpec,
    instance: Agent,
    backend_options: Any,
    cwd: str,
    loaded: SessionRecord | None,
    record: SessionRecord | None,
    resume: str | bool,
    fork_from: str | None,
) -> tuple[str | None, bytes | None, str | None]:
    """The session id and state blob the start resumes (`resumed`; ``record`` is None for
    ``resume=False``), or, for a fork, none and the session it forks (`fork_source`)."""
    if fork_from is None:
        session_id, blob = resumed(name, spec.backend, cwd, record, resume)
        return session_id, blob, None
    source = await store.load(fork_from) if fork_from != name else None
    forked = await fork_source(
        name,
        fork_from,
        backend=spec.backend,
        options=backend_options,
        choose=functools.partial(spec.mode_of, type(instance)),
        cwd=cwd,
        own=loaded,
        source=source,
    )
    return None, None, forked


async def restore_stored_state(name: str, instance: Agent, blob: bytes) -> None:
    """Give ``instance`` the state its name checkpointed, or `SessionMismatch` if it does
    not decode as the agent's ``state_type``."""
    try:
        await restore_state(instance, blob)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise SessionMismatch(
            name,
            f"its stored state does not decode as {type(instance).__name__}"
            f".state_type ({exc}); start it with resume=False to drop it",
        ) from exc


async def claim_session(
    store: SessionStore,
    name: str,
    backend: Backend,
    cwd: str,
    record: SessionRecord | None,
    session_id: str | None,
    resume: str | bool,
) -> bool:
    """Write the start's session to the name's row when the row is on the same backend;
    whether it is unclaimed (then the first turn that starts writes it). ``resume=False``
    drops the stored state."""
    # The row names the backend its session is on; a start on a new name or on another
    # backend writes it only when a turn has started (one that fails to spawn leaves the
    # row as it was).
    unclaimed = record is None or record.backend != backend.name
    if not unclaimed:
        await store.checkpoint_session(name, backend=backend.name, session_id=session_id, cwd=cwd)
    if resume is False and record is not None and record.state is not None:
        await store.save_state(name, None)
    return unclaimed


def agent_budgets(
    name: str, options: AgentOptions, record: SessionRecord | None, above: tuple[Budget, ...]
) -> Budgets:
    """The budgets an agent's turns count against: its own (if it has a limit), then
    ``above`` (its supervisors' and its runtime's), entered with what ``record`` spent."""
    own = Budget(f"agent {name!r}", options.budget_usd, options.budget_tokens)
    chain = (own, *above) if own.limited else above
    if not chain:
        return NO_BUDGETS  # shared: an agent without limits holds none of its own
    budgets = Budgets(chain)
    budgets.enter(name, record)
    return budgets


@attrs.frozen
class Prepared:
    """An agent ready to launch (`prepare_agent`): its spec, its first instance with that
    instance's backend options and mode, the binding of its application tools (None
    without any; the caller closes it if the launch fails), and its slot."""

    spec: AgentSpec
    instance: Agent
    backend_options: Any
    mode: Mode
    binding: ToolBinding | None
    slot: Slot


async def prepare_agent(
    store: SessionStore,
    capabilities: StoreCapabilities,
    ownership: Ownership,
    tools: ToolHost,
    tracker: ProcessTracker,
    start: StartArguments,
    *,
    budgets: tuple[Budget, ...],
    new_id: Callable[[], int],
    check_open: Callable[[], None],
) -> Prepared:
    """The steps of `Supervisor.start_agent` once its arguments are checked (``start``), in
    their order: the workspace, the first instance and its mode, the checks the mode needs,
    the name's lease (the caller gives it back if the start fails), the stale CLI reaped,
    the session resumed or forked and claimed, the spec and budgets stored, and the slot,
    with the durable requests a dead owner left handed over to its mailbox. ``check_open``
    (`NoRuntime` once the runtime or the supervisor closed) is called after the store's
    writes; ``budgets`` are those of the supervisors above the agent."""
    name, options, resume, fork_from = start.name, start.options, start.resume, start.fork_from
    init_options = start.init_options
    binding: ToolBinding | None = None
    try:
        workspace = await workspace_of(
            store, capabilities, ownership.owner.node, name, options, fork_from
        )
        if workspace is not None:
            init_options = {**init_options, "cwd": workspace.path}
        spec = AgentSpec(start.agent, start.backend, init_options, options)
        # The mode first: what the store must hold for it, and whether the fence guard
        # must watch this agent's processes.
        instance, backend_options, mode, binding = await spec.instantiate(name, tools)
        check_live_records(store, capabilities, name, mode)
        cwd = working_directory(backend_options)
        if mode.runs_processes:  # a missing CLI named now, not by the first turn
            check_binary(spec.backend, backend_options)
            if options.limits is not None:
                check_limits(name, options.limits, tracker)
        background = options.background is not None
        await ownership.acquire(name, runs_processes=mode.runs_processes, background=background)
        # Loaded whatever ``resume`` says: a fresh session keeps the name's totals, which
        # its budgets count.
        loaded = await store.load(name)
        if mode.runs_processes and loaded is not None:
            # The CLI a dead owner left running goes before this one's starts: one live
            # CLI per agent (a lease taken over at once, from a dead runtime of this node,
            # comes before any reaper at a program's start).
            await reap_stale_turn(store, capabilities.live, loaded, term_grace=options.kill_grace)
        record = None if resume is False else loaded
        if workspace is not None and cwd != workspace.path:
            why = f"init_agent returned cwd {cwd!r}, not its worktree {workspace.path!r}"
            raise InvalidOptions("workspace", options.workspace, why)
        session_id, blob, forked = await session_of(
            store, name, spec, instance, backend_options, cwd, loaded, record, resume, fork_from
        )
        resumes_record = record is not None and session_id == record.session_id
        totals = record.session_totals if record and resumes_record else NO_TOTALS
        if blob is not None:
            await restore_stored_state(name, instance, blob)
        unclaimed = await claim_session(store, name, spec.backend, cwd, record, session_id, resume)
        if (specs := capabilities.specs) is not None:
            await specs.save_spec(name, start.stored_spec)
        agent_budget = agent_budgets(name, options, loaded, budgets)
        if (budget_store := capabilities.budgets) is not None:
            # Each budget with its key, so that a reader of the store adds up the names it
            # covers as it does (`agentrt status`).
            await budget_store.save_budgets(name, agent_budget.stored())
        check_open()
        slot = Slot(
            Mailbox(name, options, new_id),
            store,
            spec.backend.name,
            cwd,
            session_id=session_id,
            session_totals=totals,
            state_blob=blob,
            unclaimed=unclaimed,
            spent_usd=0.0 if loaded is None else loaded.cost_usd,
            spent_tokens=0 if loaded is None else counted_tokens(loaded.usage),
            budgets=agent_budget,
            fork_source=forked,
            when_busy=options.when_busy,
        )
        if (requests := capabilities.requests) is not None:
            # This runtime owns the name now: what a dead owner left is settled, and the
            # stored queue is the agent's before any new request.
            slot.requests = Durable(requests, name, options)
            # No row at all: a dead owner's death is entered in the history on one.
            await slot.requests.adopt(
                slot.mailbox,
                capabilities.turn_history,
                ownership.owner.node,
                claim=slot.claim if loaded is None else None,
            )
            check_open()
    except BaseException:
        if binding is not None:
            binding.close()
        raise
    return Prepared(spec, instance, backend_options, mode, binding, slot)
