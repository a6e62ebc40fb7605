"""Durable session records, one per agent name: the record and the SessionStore protocol,
and what its two stores (_store_memory, _store_sqlite) share."""

from __future__ import annotations

import abc
from collections.abc import Sequence
from types import TracebackType
from typing import Protocol, Self

import attrs

from ._errors import StoreError
from ._events import NO_TOTALS, SessionTotals, StopReason, Usage
from ._redact import redact

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
    all of them are ``None`` when no turn runs. ``state`` is the agent's own checkpoint blob,
    stored as given.
    """


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
        the reaper."""
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
