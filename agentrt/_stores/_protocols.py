"""What a session store is, by capability: the core protocol every store implements
(`SessionStore`), the optional ones the runtime asks for with ``isinstance`` (never by
class) when a feature needs them, and the helpers the stores share (fencing, errors).
`RequestStore`, the durable requests' protocol, has a module of its own
(`_request_store.py`), as has `ScheduleStore`, the scheduled prompts' (`_schedule_store.py`);
`StoreCapabilities` resolves them with the others.

=================== ============================================ =========================
protocol            methods                                      needed by
=================== ============================================ =========================
SessionStore        ``async with``, aclose, load,                every runtime
                    checkpoint_session, record_turn,
                    save_state, forget, list
LiveProcessStore    set_live_process, set_live_idle,             agents that run CLI
                    clear_live_process, live_processes           processes (the reaper)
LeaseStore          shared_between_programs, acquire_lease,      ``node``, ``lease_ttl``,
                    renew_leases, release_leases, leases         ``host_agents``
SpecStore           save_spec, specs                             failover, ``host_agents``
BudgetStore         save_budgets, budgets                        ``agentrt status``'s
                                                                 budgets
TranscriptStore     append_transcript, load_transcript           ``portable=True``
RoutingStore        router                                       calls to agents other
                                                                 runtimes own
WorkspaceStore      save_workspace, drop_workspace, workspaces   ``workspace=``
ApprovalStore       put_approval, pending_approvals,             ``AskOperator`` from
                    decide_approval, decision_of,                ``approve_tool``
                    remove_approval
TurnHistoryStore    record_turn_with_history, turn_history       the console's turn
                                                                 history and charts
RequestStore        enqueue_request, start_request,              durable requests
                    queued_requests, withdraw_request,
                    claim_request, release_request,
                    settle_request, end_orphaned_requests,
                    find_request, purge_requests
CredentialStore     save_credential, use_credential,             a park or a login's halt
                    credential, credentials                      across programs;
                                                                 ``agentrt status``
ScheduleStore       add_schedule, schedules, drop_schedule,      ``Runtime.schedule``
                    make_schedule_due, record_schedule_fire
=================== ============================================ =========================
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterable, Sequence, Set
from types import TracebackType
from typing import Any, Protocol, Self, runtime_checkable

import attrs
import trio

from .._errors import AgentAlreadyStarted, LeaseLost, StoreError
from .._events import StopReason, Usage
from .._records import (
    Lease,
    LeaseOwner,
    OperatorDecision,
    PendingApproval,
    SessionRecord,
    StoredBudget,
    StoredCredential,
    StoredTranscript,
    StoredTurn,
    StoredWorkspace,
)
from .._redact import redact
from ._request_store import RequestStore
from ._schedule_store import ScheduleStore

NO_USAGE = Usage()


@runtime_checkable
class SessionStore(Protocol):
    """Where agents' session ids, totals and state survive a restart: the core every store
    implements.

    A store is opened by entering it (``async with store:``) and closed by leaving it or by
    :meth:`aclose`; ``open_runtime`` does both for the store it is given. Opening a store
    that is already open raises :class:`StoreError`; a closed store may be opened again and
    sees what it held. Every other method raises :class:`StoreError` on a store that is not
    open.

    A row is created by :meth:`checkpoint_session`; :meth:`record_turn`,
    :meth:`save_state` (and `LiveProcessStore.set_live_process`) need that row and raise
    :class:`StoreError` naming the agent without it.

    Cancellation: a call that is cancelled before its write starts writes nothing; a write
    that has started is completed (see each implementation), so a checkpoint is never half
    done.
    """

    async def __aenter__(self) -> Self:
        """Open the store; raise :class:`StoreError` naming the file if it cannot be used."""
        ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...

    async def aclose(self) -> None:
        """Close the store; idempotent. Bounded and shielded, so safe in cleanup."""
        ...

    async def load(self, name: str) -> SessionRecord | None:
        """The record of ``name``, or ``None``."""
        ...

    async def checkpoint_session(
        self, name: str, *, backend: str, session_id: str | None, cwd: str | None
    ) -> None:
        """Create the row of ``name``, or set its backend, session id and cwd.

        ``session_id=None`` records that the agent has no conversation (a fresh start or a
        reset); turns, totals and state are kept. A new session id (another than the
        stored one) starts the session totals from zero.
        """
        ...

    async def record_turn(
        self,
        name: str,
        *,
        stop_reason: str,
        cost_usd: float | None,
        usage: Usage | None,
        session_id: str | None,
    ) -> None:
        """Count one finished turn: add its cost and usage, keep its stop reason (redacted,
        see `stored_reason`). A ``session_id`` replaces the stored one; ``None`` keeps it.
        """
        ...

    async def save_state(self, name: str, state: bytes | None) -> None:
        """Store (or with ``None`` drop) the agent's checkpoint blob."""
        ...

    async def forget(self, name: str) -> bool:
        """Delete the row of ``name`` (and its failover spec and turn history, if the store
        keeps those); whether there was a row."""
        ...

    async def list(self) -> Sequence[SessionRecord]:
        """Every record, by name."""
        ...


@runtime_checkable
class LiveProcessStore(Protocol):
    """The process group of each running CLI turn, which the reaper of the next runtime
    kills if this one dies. Needed by every agent that runs CLI processes: `start_agent`
    refuses one on a store without it."""

    async def set_live_process(
        self,
        name: str,
        *,
        pgid: int,
        pid: int,
        start_time: int,
        runtime_id: str,
        marker: str | None = None,
    ) -> None:
        """Record the process group (and env marker) of the turn ``name`` is running, for
        the reaper (``live_idle`` False: the process runs a turn)."""
        ...

    async def set_live_idle(self, name: str, idle: bool) -> None:
        """Record whether the live process of ``name`` is a warm CLI idling between turns
        (``idle``) or runs a turn; a no-op without a live process or without a row."""
        ...

    async def clear_live_process(self, name: str) -> None:
        """Forget the live process group of ``name``; a no-op without one or without a row."""
        ...

    async def live_processes(self) -> Sequence[SessionRecord]:
        """Every record with a live process group, by name."""
        ...


@runtime_checkable
class LeaseStore(Protocol):
    """Leases: at most one runtime owns an agent name. Without it a runtime's ownership is
    a table in its own memory, and ``open_runtime`` refuses ``node``, ``lease_ttl`` and
    ``host_agents``.

    A store handle (one opened store object, one runtime's) that acquired the lease of a
    name fences every write it makes for that name (the core's, the live process's, the
    spec's, the transcript's): the write carries the lease's epoch and is refused with
    `LeaseLost`, writing nothing, once another handle holds a newer epoch or the lease was
    released (`check_fence` decides). Writes for names the handle holds no lease on (the
    reaper's, the ``agentrt`` command's) are not fenced. Opening a handle starts it with no
    leases.
    """

    @property
    def shared_between_programs(self) -> bool:
        """Whether other programs may open the same data (a file, a database): then only
        they can take a lease from a runtime frozen past its ttl, and the runtime starts
        its fence guard (a process of its own) for agents that run CLI processes."""
        ...

    async def acquire_lease(
        self, name: str, owner: LeaseOwner, *, ttl: float, replacing: int | None = None
    ) -> Lease:
        """Grant ``owner`` the lease of ``name`` for ``ttl`` seconds, with the next epoch;
        this handle then fences its writes for ``name`` with it.

        Granted when no lease exists, it was released or it has expired, or when
        ``replacing`` is the epoch of the lease held now (a holder the caller found dead:
        only the caller can see processes of its own node). Otherwise raises
        `AgentAlreadyStarted` carrying the holder's `Lease` (`granted_epoch` decides).
        """
        ...

    async def renew_leases(self, *, ttl: float) -> Set[str]:
        """Extend every lease this handle holds to ``ttl`` seconds from now; return the
        names whose lease it no longer holds (taken by another handle, or released), which
        stay fenced until :meth:`release_leases`."""
        ...

    async def release_leases(self, names: Iterable[str]) -> None:
        """Give up the leases of ``names``, in one write: each one whose epoch is still
        this handle's; the handle stops fencing all of them either way. One that raises
        `StoreError` is called again for the same names before the runtime's next
        renewal, so a handle may keep (and renew) what it could not give up meanwhile.

        A name's first lease (epoch 1: no other handle ever held it) given back while the
        name has no session row is removed with its row, so that a start whose agent
        never ran a turn leaves the store as it was. Any later epoch stays, released, so
        that epochs never repeat while a handle may still hold an earlier one."""
        ...

    async def leases(self) -> Sequence[Lease]:
        """Every agent name's lease (held, expired or released, except a removed first
        lease: see `release_leases`), by name."""
        ...


@runtime_checkable
class SpecStore(Protocol):
    """The supervisor specs of agents, from which a runtime with ``host_agents=True``
    starts them again (failover). Without it ``failover=True`` and ``host_agents=True``
    are refused and the default stores nothing."""

    async def save_spec(self, name: str, spec: str | None) -> None:
        """Store (or with ``None`` drop) the supervisor spec of ``name`` (JSON), which a
        runtime hosting agents starts it again from; a name keeps its place in start
        order while its spec is replaced. Needs no session row. Fenced."""
        ...

    async def specs(self) -> Sequence[tuple[str, str]]:
        """Every stored ``(name, spec)``, in the order the specs were first stored."""
        ...


@runtime_checkable
class BudgetStore(Protocol):
    """The budgets that apply to each agent (its own, its supervisors', its runtime's),
    stored when it starts, so that any program reading the store (``agentrt status``) can
    show each with what its agents spent. Without it nothing is stored and budgets still
    hold in the runtime."""

    async def save_budgets(self, name: str, budgets: Sequence[StoredBudget]) -> None:
        """Store the budgets of ``name`` in their order, replacing what was stored (none:
        drop them). Needs no session row. Fenced."""
        ...

    async def budgets(self) -> Sequence[tuple[str, tuple[StoredBudget, ...]]]:
        """Every name's stored budgets (never none), by name."""
        ...


@runtime_checkable
class TranscriptStore(Protocol):
    """The CLI transcript of a portable agent's session (``portable=True``), so that a
    runtime on another node can write it back before resuming. One name has at most one
    stored transcript, of its current session. Without it ``portable=True`` is refused."""

    async def append_transcript(
        self, name: str, *, session_id: str, path: str, offset: int, data: bytes
    ) -> None:
        """Append ``data`` to the stored CLI transcript of ``name``, which must be
        ``offset`` bytes of session ``session_id`` long (``offset=0`` replaces what is
        stored); else `StoreError`, writing nothing. ``path`` is the file's path relative
        to the CLI's home (`check_transcript_path`: else `ValueError`). Fenced."""
        ...

    async def load_transcript(self, name: str) -> StoredTranscript | None:
        """The stored CLI transcript of ``name``, or None."""
        ...


@runtime_checkable
class WorkspaceStore(Protocol):
    """The git worktree each agent's record owns (``start_agent(workspace=...)``), which a
    restart, a resume and a host taking the agent over use again. Kept apart from the
    session row: `SessionStore.forget` leaves it (a worktree may hold work). Without it
    ``workspace=`` is refused."""

    async def save_workspace(self, workspace: StoredWorkspace) -> None:
        """Store (or replace) the workspace of ``workspace.name``. Needs no session row.
        Fenced. Raises `agentrt.BranchInUse` (``holder``: ``"agent 'x'"``) when another
        name's stored workspace has the same ``repo`` and ``branch``, checked and written
        atomically across every handle on the data: of saves racing for one branch,
        exactly one is stored (the runtime claims a branch this way before git makes the
        worktree)."""
        ...

    async def drop_workspace(self, name: str) -> bool:
        """Forget the workspace of ``name`` (the worktree itself is git's); whether there
        was one. Fenced."""
        ...

    async def workspaces(self) -> Sequence[StoredWorkspace]:
        """Every stored workspace, by name."""
        ...


# A local call the owner makes for a routed one: (call, name, arguments) -> the value of a
# synchronous call (made at once), or the awaitable of an async one.
Serve = Callable[[str, str, tuple[Any, ...]], object]


class Router(Protocol):
    """Calls for agents another runtime owns, sent through the store, and the serving of
    the calls sent to this runtime."""

    async def call(self, name: str, call: str, arguments: tuple[Any, ...]) -> Any:
        """Run ``call`` on the runtime that owns ``name`` and return what it returned (or
        raise what it raised): `AgentNotFound` when no live runtime owns ``name``,
        `AgentStopped` when its owner ends before answering."""
        ...

    async def run(
        self, serve: Serve, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Serve the calls sent to this runtime with ``serve`` until cancelled; started with
        ``nursery.start`` (it has started once calls can reach it)."""
        ...


@runtime_checkable
class RoutingStore(Protocol):
    """A store whose runtimes reach each other's agents (location transparency). Without
    it a runtime serves its own agents only, and a name it does not run is `AgentNotFound`
    saying the store reaches no other runtime's agents."""

    def router(self, owner: LeaseOwner, *, ended: Callable[[LeaseOwner], bool]) -> Router:
        """The router of the runtime ``owner`` (not started: the runtime runs it).
        ``ended(other)`` is the runtime's answer to whether the runtime ``other`` has
        certainly ended (one of this node whose process is gone); a caller waiting on
        ``other`` stops waiting then, rather than at the end of its lease."""
        ...


@runtime_checkable
class ApprovalStore(Protocol):
    """Tool calls waiting for a person (``approve_tool`` returned `AskOperator`), so that a
    console of any runtime sharing the store answers them. A decision is taken exactly
    once: `decide_approval` decides only a pending request, and `remove_approval` (the
    turn's, at its decision or its bound) takes the row away with whatever decision it
    holds, so a decision either reaches the turn or is refused. A request past its
    ``expires_at`` (on the store's wall clock) is neither pending nor decidable: its turn no
    longer waits, and a program that died waiting left its row behind."""

    async def put_approval(self, approval: PendingApproval) -> None:
        """Store ``approval``, pending (its id must be new: else `StoreError`)."""
        ...

    async def pending_approvals(self) -> Sequence[PendingApproval]:
        """Every stored request not decided yet and not past its ``expires_at``, oldest
        first."""
        ...

    async def decide_approval(self, id: str, decision: OperatorDecision) -> bool:
        """Decide the pending request ``id``: True if this call decided it, False if it was
        decided already, is past its ``expires_at`` or is gone (answered, or denied by its
        bound)."""
        ...

    async def decision_of(self, id: str) -> OperatorDecision | None:
        """The decision of request ``id``, or None while it is pending (or gone)."""
        ...

    async def remove_approval(self, id: str) -> OperatorDecision | None:
        """Take request ``id`` away; the decision it held (None: undecided, or no such
        request). A no-op for an unknown id."""
        ...


@runtime_checkable
class TurnHistoryStore(Protocol):
    """Each agent's finished turns, newest kept (`StoredTurn`), for the console's turn
    history and charts. Without it the runtime counts turns in the session row only
    (`SessionStore.record_turn`), and the console says the store keeps no history."""

    async def record_turn_with_history(
        self, turn: StoredTurn, *, session_id: str | None, keep: int
    ) -> None:
        """What `SessionStore.record_turn` does for ``turn.name`` (``turn.outcome`` as its
        stop reason, its cost and usage, ``session_id``), and ``turn`` added to that
        name's history, in one write (one transaction): then only the ``keep`` newest
        entries of the name stay (``keep >= 1``). Needs the session row (else
        `StoreError`, writing nothing). Fenced."""
        ...

    async def turn_history(
        self, name: str | None, *, limit: int, offset: int = 0
    ) -> Sequence[StoredTurn]:
        """At most ``limit`` entries of ``name``'s history (None: every agent's), newest
        first (in the order they were recorded), skipping the ``offset`` newest."""
        ...


@runtime_checkable
class CredentialStore(Protocol):
    """What holds each credential's agents (`StoredCredential`: a usage limit's park, an
    expired login's halt) and which agents use which credential, so that a restarted
    program, or another one on the store, holds them too and ``agentrt status`` shows
    why. Without it a park and a halt live in the memory of the program that saw them."""

    async def save_credential(self, credential: StoredCredential) -> None:
        """Store what holds ``credential.key`` (its park and halt fields), replacing what
        was stored; ``agents`` is not written (`use_credential`). Not fenced: a credential
        is every agent's of it, whichever runtime owns them."""
        ...

    async def use_credential(
        self, name: str, key: str, *, halts: bool = True, parks: bool = True
    ) -> None:
        """Agent ``name`` uses the credential ``key`` (replacing the one it used); its halt
        holds the agent unless not ``halts``, its park unless not ``parks`` (the agent's
        ``on_credential_expired``, ``on_usage_limit``: read back as
        `StoredCredential.ignore_halt`, ``ignore_park``)."""
        ...

    async def credential(self, key: str) -> StoredCredential | None:
        """What is stored of credential ``key`` (``agents`` left empty), or None."""
        ...

    async def credentials(self) -> Sequence[StoredCredential]:
        """Every stored credential, by key, each with the agents stored as using it
        (``agents``, ``ignore_halt``, ``ignore_park``)."""
        ...


@attrs.frozen
class StoreCapabilities:
    """What one store can do: the store itself as each capability protocol it implements,
    or None where it lacks one. `of` asks each protocol once (an ``isinstance`` on a
    runtime-checkable protocol costs microseconds); the runtime does so when it opens the
    store (`agentrt.Runtime.store_capabilities`), and nothing asks again."""

    live: LiveProcessStore | None
    leases: LeaseStore | None
    specs: SpecStore | None
    budgets: BudgetStore | None
    transcripts: TranscriptStore | None
    routing: RoutingStore | None
    workspaces: WorkspaceStore | None
    approvals: ApprovalStore | None
    turn_history: TurnHistoryStore | None
    requests: RequestStore | None
    credentials: CredentialStore | None
    schedules: ScheduleStore | None

    @classmethod
    def of(cls, store: SessionStore) -> StoreCapabilities:
        """What ``store`` can do, asked of it now."""
        return cls(
            live=store if isinstance(store, LiveProcessStore) else None,
            leases=store if isinstance(store, LeaseStore) else None,
            specs=store if isinstance(store, SpecStore) else None,
            budgets=store if isinstance(store, BudgetStore) else None,
            transcripts=store if isinstance(store, TranscriptStore) else None,
            routing=store if isinstance(store, RoutingStore) else None,
            workspaces=store if isinstance(store, WorkspaceStore) else None,
            approvals=store if isinstance(store, ApprovalStore) else None,
            turn_history=store if isinstance(store, TurnHistoryStore) else None,
            requests=store if isinstance(store, RequestStore) else None,
            credentials=store if isinstance(store, CredentialStore) else None,
            schedules=store if isinstance(store, ScheduleStore) else None,
        )

    def has(self, protocol: type) -> bool:
        """Whether the store implements ``protocol``: `SessionStore` (every store does) or
        one of the capability protocols; `ValueError` for another type."""
        if protocol is SessionStore:
            return True
        field = _CAPABILITIES.get(protocol)
        if field is None:
            raise ValueError(f"{protocol.__name__} is not a store capability protocol")
        return getattr(self, field) is not None


# The StoreCapabilities field of each capability protocol.
_CAPABILITIES: dict[type, str] = {
    LiveProcessStore: "live",
    LeaseStore: "leases",
    SpecStore: "specs",
    BudgetStore: "budgets",
    TranscriptStore: "transcripts",
    RoutingStore: "routing",
    WorkspaceStore: "workspaces",
    ApprovalStore: "approvals",
    TurnHistoryStore: "turn_history",
    RequestStore: "requests",
    CredentialStore: "credentials",
    ScheduleStore: "schedules",
}


def lacks(store: object, protocol: type, needed_for: str) -> str:
    """The reason of a refusal: what ``store`` lacks, and what needed it."""
    return (
        f"{needed_for} needs a store with the {protocol.__name__} methods "
        f"(agentrt.store.{protocol.__name__}); {type(store).__name__} has none"
    )


def lease_owner(
    node: str | None, pid: int | None, start_time: int | None, runtime_id: str | None
) -> LeaseOwner | None:
    """The owner of a stored lease's columns; None once released (no runtime id)."""
    if runtime_id is None:
        return None
    assert node is not None and pid is not None and start_time is not None
    return LeaseOwner(node=node, pid=pid, start_time=start_time, runtime_id=runtime_id)


def granted_epoch(name: str, current: Lease | None, replacing: int | None) -> int:
    """The epoch a new grant of ``name``'s lease gets, or `AgentAlreadyStarted` naming the
    live holder."""
    if current is None:
        return 1
    if current.held and current.epoch != replacing:
        raise AgentAlreadyStarted(name, current)
    return current.epoch + 1


def check_fence(path: str, name: str, epoch: int | None, current: Lease | None) -> None:
    """Refuse a write by a handle whose epoch for ``name`` is no longer the lease's (None:
    the handle holds no lease on it, so its write is not fenced)."""
    if epoch is None or (
        current is not None and current.epoch == epoch and current.owner is not None
    ):
        return
    if current is None or current.owner is None:
        why = "the lease was released"
    else:
        owner = current.owner
        why = f"epoch {current.epoch} is held by node {owner.node!r}, pid {owner.pid}"
    raise LeaseLost(path, name, epoch, why)


def no_row(path: str, name: str) -> StoreError:
    """The `StoreError` a store raises for a write that needs the row of agent ``name``
    that `SessionStore.checkpoint_session` has not made yet."""
    return StoreError(path, f"no session row for agent {name!r} (checkpoint_session creates it)")


class ClosedOnExit(abc.ABC):
    """Leaving ``async with store:`` closes the store."""

    @abc.abstractmethod
    async def aclose(self) -> None: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


_STOP_REASONS = frozenset(reason.value for reason in StopReason)


def stored_reason(stop_reason: str) -> str:
    """How a store keeps a turn's stop reason: a `StopReason` value as it is, anything
    else redacted."""
    # A StopReason's value carries nothing to redact; anything else is redacted.
    return str(stop_reason) if stop_reason in _STOP_REASONS else redact(str(stop_reason))
