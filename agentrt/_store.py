"""Durable session records, one per agent name: the record, the lease that says which runtime
owns the name, the SessionStore protocol, and what its stores (_store_memory, _store_sqlite)
share."""

from __future__ import annotations

import abc
from collections.abc import Sequence, Set
from types import TracebackType
from typing import TYPE_CHECKING, Protocol, Self

import attrs

from ._errors import AgentAlreadyStarted, LeaseLost, StoreError
from ._events import NO_TOTALS, SessionTotals, StopReason, Usage
from ._redact import redact

if TYPE_CHECKING:
    from ._store_transcripts import StoredTranscript

NO_USAGE = Usage()


@attrs.define(kw_only=True)
class SessionRow:
    """The fields of a `SessionRecord`, mutable: a store's own row (MemoryStore keeps these),
    updated field by field, so a misspelled field fails where a dict key would pass."""

    name: str
    backend: str
    session_id: str | None
    cwd: str | None
    turns: int
    cost_usd: float
    usage: Usage
    last_stop_reason: str | None
    created_at: float
    updated_at: float
    live_pgid: int | None
    live_pid: int | None
    live_start_time: int | None
    runtime_id: str | None
    state: bytes | None
    live_marker: str | None = None
    # The live process is a warm CLI idling between turns (kept for the next), not a turn's.
    live_idle: bool = False
    # The figures the turns of the current session reported, summed; zero when the session
    # id changes. A backend whose CLI reports running session totals subtracts them.
    session_totals: SessionTotals = NO_TOTALS


@attrs.frozen(kw_only=True)
class SessionRecord(SessionRow):
    """What the store keeps about one agent name.

    ``created_at`` / ``updated_at`` are wall-clock seconds (``time.time()``). The ``live_*``
    fields and ``runtime_id`` describe the process group of a turn that was running when
    they were written (``live_start_time`` is the leader's start time in clock ticks, from
    ``/proc/<pid>/stat``, to tell a reused pid apart; ``live_marker`` is the turn's
    ``AGENTRT_TURN`` env marker, which finds its setsid'd orphans once the leader is gone);
    all of them are ``None`` when no turn runs. A warm CLI (``keep_alive``) keeps its
    ``live_*`` fields between turns, with ``live_idle`` True while it waits for the next
    turn (False while a turn runs). ``state`` is the agent's own checkpoint blob,
    stored as given.
    """


@attrs.frozen(kw_only=True)
class LeaseOwner:
    """The runtime a lease belongs to: its node (`open_runtime`'s ``node``), the pid and
    start time (clock ticks, from ``/proc/<pid>/stat``) of its process, and its id."""

    node: str
    pid: int
    start_time: int
    runtime_id: str


@attrs.frozen(kw_only=True)
class Lease:
    """Which runtime owns an agent name, as the store saw it when read.

    ``epoch`` grows by one each time the lease is granted; ``owner`` is None once it was
    released. ``age`` is the time since it was granted or last renewed and ``remaining``
    the time until it expires (at most 0: expired), both in seconds on the store's lease
    clock (see each store), never on the reader's wall clock.
    """

    name: str
    epoch: int
    owner: LeaseOwner | None
    age: float
    remaining: float

    @property
    def held(self) -> bool:
        """Whether an owner holds it now: granted, not released, not expired."""
        return self.owner is not None and self.remaining > 0


class SessionStore(Protocol):
    """Where agents' session ids, totals and live process groups survive a restart.

    A store is opened by entering it (``async with store:``) and closed by leaving it or by
    :meth:`aclose`; ``open_runtime`` does both for the store it is given. Opening a store
    that is already open raises :class:`StoreError`; a closed store may be opened again and
    sees what it held. Every other method raises :class:`StoreError` on a store that is not
    open.

    A row is created by :meth:`checkpoint_session`; :meth:`record_turn`,
    :meth:`set_live_process` and :meth:`save_state` need that row and raise
    :class:`StoreError` naming the agent without it.

    Ownership: at most one runtime owns an agent name, through its lease
    (:meth:`acquire_lease`, :meth:`renew_leases`, :meth:`release_lease`). A store handle (one
    opened store object, one runtime's) that acquired the lease of a name fences every
    write it makes for that name: the write carries the lease's epoch and is refused with
    `LeaseLost`, writing nothing, once another handle holds a newer epoch or the lease was
    released. Writes for names the handle holds no lease on (the reaper's, the ``agentrt``
    command's) are not fenced. Opening a handle starts it with no leases.

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
        reset); turns, totals and state are kept.
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
        """Count one finished turn: add its cost and usage, keep its stop reason (redacted).

        A ``session_id`` replaces the stored one; ``None`` keeps it.
        """
        ...

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

    async def save_state(self, name: str, state: bytes | None) -> None:
        """Store (or with ``None`` drop) the agent's checkpoint blob."""
        ...

    async def forget(self, name: str) -> bool:
        """Delete the row of ``name``; whether there was one."""
        ...

    async def list(self) -> Sequence[SessionRecord]:
        """Every record, by name."""
        ...

    async def save_spec(self, name: str, spec: str | None) -> None:
        """Store (or with ``None`` drop) the supervisor spec of ``name`` (`_failover`'s
        JSON), which a runtime hosting agents starts it again from; a name keeps its place
        in start order while its spec is replaced. Needs no session row."""
        ...

    async def specs(self) -> Sequence[tuple[str, str]]:
        """Every stored ``(name, spec)``, in the order the specs were first stored."""
        ...

    async def acquire_lease(
        self, name: str, owner: LeaseOwner, *, ttl: float, replacing: int | None = None
    ) -> Lease:
        """Grant ``owner`` the lease of ``name`` for ``ttl`` seconds, with the next epoch;
        this handle then fences its writes for ``name`` with it.

        Granted when no lease exists, it was released or it has expired, or when
        ``replacing`` is the epoch of the lease held now (a holder the caller found dead:
        only the caller can see processes of its own node). Otherwise raises
        `AgentAlreadyStarted` carrying the holder's `Lease`.
        """
        ...

    async def renew_leases(self, *, ttl: float) -> Set[str]:
        """Extend every lease this handle holds to ``ttl`` seconds from now; return the
        names whose lease it no longer holds (taken by another handle, or released), which
        stay fenced until :meth:`release_lease`."""
        ...

    async def release_lease(self, name: str) -> None:
        """Give up the lease of ``name`` if this handle's epoch is still the current one;
        the handle stops fencing ``name`` either way."""
        ...

    async def leases(self) -> Sequence[Lease]:
        """Every agent name's lease (held, expired or released), by name."""
        ...

    # Portable sessions (`AgentOptions.portable`; see _store_transcripts): a store without
    # these methods serves every agent that is not portable.

    async def append_transcript(
        self, name: str, *, session_id: str, path: str, offset: int, data: bytes
    ) -> None:
        """Append ``data`` to the stored CLI transcript of ``name``, which must be
        ``offset`` bytes of session ``session_id`` long (``offset=0`` replaces what is
        stored); else `StoreError`, writing nothing. ``path`` is the file's path relative
        to the CLI's home. Fenced as every write for ``name``."""
        ...

    async def load_transcript(self, name: str) -> StoredTranscript | None:
        """The stored CLI transcript of ``name``, or None."""
        ...


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
    # A StopReason's value carries nothing to redact; anything else is redacted.
    return str(stop_reason) if stop_reason in _STOP_REASONS else redact(str(stop_reason))
