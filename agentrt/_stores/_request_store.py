"""The durable requests' capability (`RequestStore`): each agent's requests kept in the
store, queued, claimed once under the owner's lease and settled with their outcome. One of
the store protocols (`_protocols.py` lists them all and resolves them into
`StoreCapabilities`); the SQL stores implement it in `_requests.py`, and the runtime's side
is `agentrt._durable`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from .._records import RequestOutcome, StoredRequest, StoredTurn


@runtime_checkable
class RequestStore(Protocol):
    """Each agent's requests, durable: accepted into a queue in the store before the call
    that made them returns, started at most once by the owner of the name (fenced by its
    lease epoch), settled with their outcome, which any program sharing the store reads
    by id or idempotency key until ``result_ttl`` has passed. `MemoryStore` lacks it: its
    runtime keeps each mailbox in memory, as nothing it holds outlives the program anyway.

    Requests are named by ``(name, id)``; ``id`` is the caller's (unique per agent). A
    ``key`` is an idempotency key, unique per agent while its request is kept. Times are
    the store's wall clock (``clock``). The start, the claim, the release, the settlement
    and the owner's clean-up are owner writes: they need this handle to hold the lease of
    ``name`` (`LeaseStore`), and are refused with `LeaseLost`, writing nothing, once its
    epoch is stale. Withdraw,
    the reads and the purge are anyone's (a withdraw fenced as every write of a handle
    holding the lease). Enqueue is never fenced, the one exception to `LeaseStore`'s rule:
    a request is its caller's, not its owner's, and whoever owns the name next runs it.

    A prompt is stored as given (it is the work to do) until its request settles; an
    answer as given (it is the result the caller waits for) until ``result_ttl``; an error
    message redacted.
    """

    async def enqueue_request(
        self,
        name: str,
        *,
        id: str,
        prompt: str,
        key: str | None,
        origin: str,
        max_pending: int,
        max_pending_bytes: int,
    ) -> str:
        """Queue a request for ``name`` after every other queued one, accepted now, and
        return its id; or, when a kept request of ``name`` has ``key``, store nothing and
        return that request's id. Refused with `MailboxFull`, storing nothing, when ``name``
        has ``max_pending`` requests queued already or the prompt's UTF-8 bytes would take
        the queued ones past ``max_pending_bytes``; an id ``name`` already has is
        `StoreError`. The check and the write are one transaction: of enqueues racing from
        any handle, the bounds hold and one key is stored once."""
        ...

    async def start_request(
        self, name: str, *, id: str, prompt: str, key: str | None, origin: str
    ) -> str | None:
        """What `enqueue_request` and then `claim_request` do, in one transaction, for a
        request the owner of ``name`` runs at once: when ``name`` has no request queued or
        running, store this one running under this handle's lease epoch (``attempts`` 1)
        and return its id. When a kept request of ``name`` has ``key``, store nothing and
        return that request's id (as `enqueue_request`); when ``name`` has a request queued
        or running, store nothing and return None: the caller enqueues it then, behind
        them. The mailbox's bounds count queued requests, so they hold. An id ``name`` has
        already is `StoreError`. Fenced, as `claim_request`: it needs the lease (else
        `StoreError`), and a stale epoch is `LeaseLost`, storing nothing."""
        ...

    async def release_request(self, name: str, id: str) -> bool:
        """Put the request ``id`` of ``name``, running under this handle's epoch, back in
        the queue in its place, as never started (``attempts`` one less): what an owner does
        with a request it started (`start_request`) but cannot run at once after all. False,
        changing nothing, if this handle's epoch is not running it. Fenced."""
        ...

    async def queued_requests(self, name: str) -> Sequence[StoredRequest]:
        """The queued (not started) requests of ``name``, in the order they will start."""
        ...

    async def withdraw_request(self, name: str, id: str, *, result_ttl: float) -> bool:
        """Settle the queued request ``id`` of ``name`` as ``"withdrawn"`` (kept for
        ``result_ttl`` seconds); False, changing nothing, if it is not queued (running,
        settled or unknown)."""
        ...

    async def claim_request(self, name: str) -> StoredRequest | None:
        """Start the next queued request of ``name``: it becomes ``"running"`` under this
        handle's lease epoch (its ``attempts`` one more), and is returned; None when none
        is queued. Needs this handle to hold the lease (else `StoreError`); a stale epoch
        is `LeaseLost` and claims nothing, so a request starts at most once per epoch,
        and an epoch's owner starts each request once."""
        ...

    async def settle_request(
        self,
        name: str,
        id: str,
        outcome: RequestOutcome,
        *,
        result_ttl: float,
        turn: StoredTurn | None = None,
        session_id: str | None = None,
        keep: int = 1,
    ) -> bool:
        """End the running request ``id`` of ``name`` with ``outcome``, kept for
        ``result_ttl`` seconds; False if this handle's epoch is not running it (settled
        already, say, as ``"owner_died"``). With ``turn``, what
        `TurnHistoryStore.record_turn_with_history` does with ``turn``, ``session_id``
        and ``keep`` is written in the same transaction: the turn's record and its
        request's outcome are one write, both or neither; ``keep=0`` (an agent that keeps
        no turn history) writes what `SessionStore.record_turn` does only, no entry, and
        needs no `TurnHistoryStore`. Fenced."""
        ...

    async def end_orphaned_requests(
        self, name: str, *, retry: bool, result_ttl: float
    ) -> Sequence[StoredRequest]:
        """What a new owner of ``name`` does first: every request of ``name`` that an
        earlier lease epoch started and never settled (its owner died mid-turn) is settled
        ``"owner_died"`` (with the session id of ``name``'s row), or, with ``retry``,
        queued again at the head, in its place, to start once more, only once: a request
        already started twice ends ``"owner_died"``. Returns them as they are now, in
        queue order. Needs the lease, as `claim_request`."""
        ...

    async def find_request(
        self, name: str, *, id: str | None = None, key: str | None = None
    ) -> StoredRequest | None:
        """The request of ``name`` with ``id`` (or else ``key``): queued, running, or
        settled and not yet expired; None otherwise."""
        ...

    async def purge_requests(self) -> int:
        """Delete every settled request whose ``result_ttl`` has passed; how many."""
        ...
