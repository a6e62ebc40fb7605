"""An agent's requests on a store that keeps them (`agentrt.store.RequestStore`): accepted
into the store before ``tell`` returns, claimed by the owner before their turn starts,
settled with the turn's record, and read back by any program on the store.

The owner's mailbox stays the one in-process view of the queue (its waiters, streams and
bounds on what it keeps); the store is what outlives the program. An owner's start adopts
what the store holds for its name: the request a dead owner was running ends `OwnerDied`
(or is queued again, ``on_owner_death="retry"``), then the queued ones enter the mailbox
in their order.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, NoReturn

import attrs
import trio

from ._arguments import unstorable
from ._errors import (
    AgentNotFound,
    AgentRTError,
    AgentStopped,
    InvalidOptions,
    LeaseLost,
    OwnerDied,
    RoutingError,
    StoreError,
    TurnFailed,
)
from ._events import ErrorEvent, Event, EventCoverage, Response, ResultEvent, StopReason, Usage
from ._follow import Fetch, FollowedStream
from ._logs import log_error
from ._options import AgentOptions
from ._records import OWNER_DIED, WITHDRAWN, RequestOutcome, StoredRequest, StoredTurn
from ._redact import redact
from ._requests import (
    STORED_ORIGINS,
    Completed,
    Failed,
    NotFound,
    Pending,
    PollResult,
    Ref,
    Request,
    Settled,
    Withdrawn,
    ref_of,
)
from ._stores._protocols import TurnHistoryStore
from ._stores._request_store import RequestStore
from ._stores._route_codec import EventBatch
from ._stream import EventStream

if TYPE_CHECKING:
    from ._mailbox import Mailbox

logger = logging.getLogger("agentrt")

# A waiter on a request another program runs reads the store this often at most: from the
# first interval, doubling to the last (a result is seen within that of its settlement).
FIRST_POLL = 0.05
LAST_POLL = 1.0
# A settlement the store could not make (the database went down under it, so it may or
# may not have been written) is tried again this often, once the store tells that the
# request is still running, for up to SETTLE_BOUND seconds: until then its callers here
# wait, so they are told what every other program reads, not an answer the store lacks.
# The bound is short: within it the fence (half of lease_ttl, 5 s by default) has not
# stopped the agent for a store that stays down, and its stop (shielded) waits for it.
SETTLE_AGAIN = 0.5
SETTLE_BOUND = 3.0


def new_stored_id() -> str:
    """The id of a new request: decimal, as its `Ref`'s int, and unique per agent across
    every program on the store (62 random bits)."""
    return str(secrets.randbits(62))


# The most UTF-8 bytes of an idempotency key: with the agent's name (at most 255
# characters) it fits a PostgreSQL index row (2704 bytes), on every store alike.
MAX_KEY_BYTES = 1024


def check_key(key: object) -> None:
    """Refuse an idempotency key that is not a non-empty str (or None), or one that some
    store cannot keep: a NUL or a lone surrogate (`unstorable`), more than `MAX_KEY_BYTES`."""
    if key is None:
        return
    if not isinstance(key, str) or not key:
        raise InvalidOptions("key", key, "an idempotency key is a non-empty str, or None")
    if (why := unstorable(key)) is not None:
        raise InvalidOptions("key", key[:40], why)
    size = len(key.encode())
    if size > MAX_KEY_BYTES:
        why = f"is {size} bytes long in UTF-8; an idempotency key has at most {MAX_KEY_BYTES}"
        raise InvalidOptions("key", f"{key[:40]}...", why)


def refuse_key(key: object) -> NoReturn:
    """Refuse a key on a store that keeps no requests (nothing outlives the program)."""
    raise InvalidOptions(
        "key",
        key,
        "idempotency keys need a store that keeps requests (SQLiteStore, PostgresStore); "
        "this runtime's store keeps them in memory",
    )


async def find_by_key(store: RequestStore, name: str, key: str) -> Ref | None:
    """The `Ref` of the request of ``name`` kept under ``key``; None if none is kept."""
    check_key(key)
    stored = await store.find_request(name, key=key)
    return None if stored is None else ref_of(name, stored.id)


def settled(result: PollResult) -> Settled | NotFound:
    """``result``, which a wait has seen settled."""
    assert not isinstance(result, Pending)
    return result


def answer_of(result: Settled | NotFound) -> Response:
    """What an ask returns (or raises) for a request that settled as ``result``."""
    if isinstance(result, Completed):
        return result.response
    if isinstance(result, Failed):
        raise result.error
    why = "withdrawn while queued" if isinstance(result, Withdrawn) else "no longer kept"
    raise TurnFailed(StopReason.CANCELLED, f"the request with this key was {why}")


def stored_outcome(outcome: Response | AgentRTError) -> RequestOutcome:
    """How ``outcome`` is kept in the store."""
    if isinstance(outcome, Response):
        return RequestOutcome(
            outcome=outcome.stop_reason.value,
            answer=redact(outcome.text),
            session_id=outcome.session_id,
        )
    if isinstance(outcome, TurnFailed):
        return RequestOutcome(
            outcome=outcome.reason.value, error=outcome.message, session_id=outcome.session_id
        )
    if isinstance(outcome, AgentStopped):
        return RequestOutcome(outcome=StopReason.CANCELLED.value, error=str(outcome))
    reason = getattr(outcome, "reason", None)  # BudgetExceeded and its kin
    stop = reason.value if isinstance(reason, StopReason) else StopReason.TURN_CRASHED.value
    return RequestOutcome(outcome=stop, error=str(outcome))


def poll_result(stored: StoredRequest | None) -> PollResult:
    """What `poll` reports of a request as the store holds it."""
    if stored is None:
        return NotFound()
    ended = stored.outcome
    if ended is None:
        return Pending()
    if ended.outcome == WITHDRAWN:
        return Withdrawn()
    if ended.outcome == OWNER_DIED:
        return Failed(OwnerDied(stored.name, ended.session_id, ended.error or ""))
    try:
        reason = StopReason(ended.outcome)
    except ValueError:
        reason = StopReason.TURN_CRASHED
    if reason is StopReason.COMPLETE:
        return Completed(_response(ended, stored.settled_at or 0.0))
    return Failed(TurnFailed(reason, ended.error or "", session_id=ended.session_id))


def _response(ended: RequestOutcome, at: float) -> Response:
    # What the store keeps of an answer: its text and session, not its events or counts.
    text = ended.answer or ""
    return Response(
        text=text,
        final_message=text,
        events=(),
        terminal=ResultEvent(timestamp=at, text=text, session_id=ended.session_id),
        event_coverage=EventCoverage("compact", 0, 0, 0, 0),
        usage=None,
        cost_usd=None,
        duration=0.0,
        num_turns=None,
        session_id=ended.session_id,
        model=None,
        stop_reason=StopReason.COMPLETE,
    )


async def wait_stored(store: RequestStore, name: str, id: str) -> PollResult:
    """Wait until the stored request ``id`` of ``name`` settles (reading the store at a
    bounded interval); what `poll` then reports (`NotFound` once it is gone).

    Cancellation: safe; waiting changes nothing."""
    interval = FIRST_POLL
    while True:
        result = poll_result(await store.find_request(name, id=id))
        if not isinstance(result, Pending):
            return result
        await trio.sleep(interval)
        interval = min(2 * interval, LAST_POLL)


def terminal_event(result: Settled) -> Event:
    """The one event a stream of a settled stored request gives (the store keeps no other
    of its turn's): the answer's `ResultEvent` (its text and session id), or an
    `ErrorEvent` saying why it failed (its stop reason; ``cancelled`` for an owner's death
    or a stop, as a live stream of an agent that stops ends) or was withdrawn."""
    if isinstance(result, Completed):
        return result.response.terminal
    now = trio.current_time()
    if isinstance(result, Withdrawn):
        why = "the request was withdrawn while queued"
        return ErrorEvent(timestamp=now, reason=StopReason.CANCELLED, message=why)
    error = result.error
    reason = error.reason if isinstance(error, TurnFailed) else StopReason.CANCELLED
    session_id = getattr(error, "session_id", None)
    return ErrorEvent(timestamp=now, reason=reason, message=str(error), session_id=session_id)


async def stored_events(store: RequestStore, ref: Ref, after: int) -> EventBatch[Event]:
    """A stream's read of the stored request ``ref`` (as a routed follower reads its
    owner's): its terminal event (`terminal_event`) once it settles, waiting for that as
    `wait_stored` does; nothing for a request the store does not keep.

    Cancellation: safe; reading changes nothing."""
    if after == 0:
        result = settled(await wait_stored(store, ref.name, str(ref.id)))
        if not isinstance(result, NotFound):
            return EventBatch((terminal_event(result),), 1, 0, True)
    await trio.lowlevel.checkpoint()
    return EventBatch((), after, 0, True)


def reattached(store: RequestStore, ref: Ref, live: Fetch | None) -> EventStream:
    """The stream of ``ref``, a request this runtime does not hold: its owner's events
    through ``live`` (a routed read; None where no other runtime can be reached), or,
    where its owner holds it no longer or cannot be reached, what the store keeps of it
    (`stored_events`). An owner that ended (or gave the name up) before answering the
    first read, the request still unsettled, ends the stream as it does a later read."""

    async def fetch(after: int) -> EventBatch[Event]:
        unreached: AgentRTError | None = None
        if live is not None:
            try:
                batch = await live(after)
            except (AgentNotFound, AgentStopped, RoutingError) as exc:
                if after > 0:  # the owner went away under its reader: as a live stream
                    raise
                unreached = exc
            else:
                if after > 0 or batch.events or not batch.ended:
                    return batch
        if isinstance(unreached, AgentStopped) and isinstance(
            poll_result(await store.find_request(ref.name, id=str(ref.id))), Pending
        ):
            # Its owner died with it unsettled: nothing settles it before a runtime takes
            # the name again (a lease_ttl at least, or never), so the stream ends now, as
            # it does when the owner dies after the first read.
            raise unreached
        kept = await stored_events(store, ref, after)
        if unreached is not None and not kept.events:
            raise unreached  # neither an owner nor the store knows it
        return kept

    return FollowedStream(fetch)


@attrs.define(eq=False)
class Durable:
    """The stored requests of the agent ``name``, for its owner (its `Slot`)."""

    store: RequestStore
    name: str
    options: AgentOptions
    # Held from a request's store write to its entry in the mailbox, so the mailbox's
    # order is the store's, and one request at a time is started at its acceptance.
    accepting: trio.Lock = attrs.field(factory=trio.Lock)

    async def accept(self, request: Request, key: str | None, *, start: bool) -> str:
        """Store ``request``: with ``start`` (its owner runs it at once) started already
        under the owner's lease where the store holds nothing before it, else at the end
        of the queue (the mailbox's bounds checked by the store); ``request.claimed`` says
        which. Returns the id of the request kept under ``key`` if there is one already,
        else its own. Shielded (bounded by the store's own timeouts): a request is stored
        or not, never cut off half way; the caller sees the cancellation after it returns.
        Call it holding `accepting`."""
        assert request.stored_id is not None
        options, store, name = self.options, self.store, self.name
        # Redacted: secrets never reach stored data. This program's turn runs the prompt
        # as given (it holds it); only a later owner runs the stored one.
        prompt = redact(request.prompt)
        with trio.CancelScope(shield=True):
            if start:
                try:
                    started = await store.start_request(
                        name, id=request.stored_id, prompt=prompt, key=key, origin=request.origin
                    )
                except LeaseLost:
                    started = None  # the owner is being fenced: the request is its caller's
                if started is not None:
                    request.claimed = started == request.stored_id
                    return started
            id = await store.enqueue_request(
                name,
                id=request.stored_id,
                prompt=prompt,
                key=key,
                origin=request.origin,
                max_pending=options.max_pending,
                max_pending_bytes=options.max_pending_bytes,
            )
        return id

    async def release(self, request: Request) -> None:
        """Hand the started ``request`` back to the store's queue, unstarted: its owner
        cannot run it at once after all. A store that cannot is logged, and ``request``
        keeps its claim (it runs when its turn comes, without claiming again)."""
        assert request.stored_id is not None
        try:
            with trio.CancelScope(shield=True):
                await self.store.release_request(self.name, request.stored_id)
        except StoreError as exc:
            log_error(f"agent {self.name!r}: the store could not queue a request", exc, self.name)
            return
        request.claimed = False

    async def adopt(
        self,
        mailbox: Mailbox,
        history: TurnHistoryStore | None,
        node: str,
        *,
        claim: Callable[[], Awaitable[None]] | None = None,
    ) -> tuple[StoredRequest, ...]:
        """What a new owner (on ``node``) does before its first turn: the requests a dead
        owner was running end `OwnerDied` (or queue again, ``on_owner_death="retry"``),
        each such end entered in the agent's turn history (``history``: the store's, None
        where it keeps none), expired results are purged, and the queued requests enter
        ``mailbox`` in their order. Returns the dead owner's requests as they are now.

        ``claim`` writes the agent's session row, where the store holds none: the dead
        owner's first turn was started (its request stored running) but died before its
        claim of the row was written, and an entry in the history needs the row. The turn
        had then named no session (that write claims the row too), so it had answered
        nothing: the request's `OwnerDied` is all there is to record."""
        store, options = self.store, self.options
        orphans = await store.end_orphaned_requests(
            self.name, retry=options.on_owner_death == "retry", result_ttl=options.result_ttl
        )
        deaths = [orphan for orphan in orphans if orphan.state == "settled"]
        for orphan in deaths:
            logger.warning(
                "agent %r: request %s ended owner_died: its owner ended while its turn ran",
                self.name,
                orphan.id,
                extra={"agent": self.name},
            )
        if deaths and history is not None and options.turn_history > 0:
            if claim is not None:
                await claim()
            for orphan in deaths:
                await self._enter_death(history, node, orphan)
        try:
            await store.purge_requests()
        except StoreError as exc:
            # Housekeeping: on PostgreSQL it may meet a settlement deleting some of the same
            # expired rows (a deadlock, one of the two given up); the next start purges.
            log_error(f"agent {self.name!r}: the store could not purge expired requests", exc)
        for stored in await store.queued_requests(self.name):
            mailbox.adopt(self.request_of(stored, mailbox))
        return tuple(orphans)

    async def _enter_death(
        self, history: TurnHistoryStore, node: str, orphan: StoredRequest
    ) -> None:
        """The turn history's entry for ``orphan``, ended `OwnerDied`: its turn never
        recorded itself, so the people reading the history would not see it ran. Its end
        is when this owner found it (the dead one's times died with it); the session id,
        the record of what the turn did, is in its answer. A store that cannot write it is
        logged: the request's outcome stands."""
        assert orphan.outcome is not None and orphan.settled_at is not None
        session = orphan.outcome.session_id
        ran_on = "no session yet" if session is None else f"session {session}"
        entry = StoredTurn(
            name=self.name,
            node=node,
            started_at=orphan.settled_at,
            ended_at=orphan.settled_at,
            duration=0.0,
            outcome=OWNER_DIED,
            cost_usd=None,
            usage=Usage(),
            prompt=None,
            answer=(
                f"owner died mid-turn ({ran_on})"
                + (f": {orphan.outcome.error}" if orphan.outcome.error else "")
            ),
        )
        try:
            await history.record_turn_with_history(
                entry, session_id=session, keep=self.options.turn_history
            )
        except StoreError as exc:
            log_error(
                f"agent {self.name!r}: the store could not record an owner's death", exc, self.name
            )

    def request_of(self, stored: StoredRequest, mailbox: Mailbox) -> Request:
        """The mailbox's request for ``stored`` (made by another program, or an earlier
        one): a tell, whoever made it, as no caller of this program waits for it; a fire of
        a schedule or of a wake-up stays one (its turn's `Response.origin` says so)."""
        assert stored.prompt is not None  # a queued or running request keeps its prompt
        ref = ref_of(self.name, stored.id) or Ref(self.name, mailbox.new_id())
        size = len(stored.prompt.encode())
        # Its age counts from its acceptance in the store, on trio's clock.
        accepted_at = trio.current_time() - max(0.0, time.time() - stored.accepted_at)
        return Request(
            ref,
            stored.prompt,
            size,
            STORED_ORIGINS.get(stored.origin, "tell"),  # any other is a tell
            stored_id=stored.id,
            key=stored.key,
            accepted_at=accepted_at,
        )

    async def claim(self, mailbox: Mailbox, taken: Request) -> Request | None:
        """Claim the head of the stored queue, which ``taken`` (just taken from
        ``mailbox``) should be: the request to run now, claimed. Where the store says
        otherwise, it wins: another program withdrew ``taken`` (it settles `Withdrawn`;
        None), or queued one before it (``taken`` goes back, that one runs)."""
        stored = await self.store.claim_request(self.name)
        if stored is None:
            mailbox.settle_withdrawn(taken, None)
            return None
        if stored.id == taken.stored_id:
            taken.claimed = True
            return taken
        mailbox.put_back(taken)
        request = mailbox.take_stored(stored.id)
        if request is None:
            request = self.request_of(stored, mailbox)
            mailbox.track(request)
        request.claimed = True
        return request

    async def settle(
        self,
        request: Request,
        outcome: Response | AgentRTError,
        *,
        turn: StoredTurn | None = None,
        session_id: str | None = None,
        keep: int = 1,
    ) -> None:
        """Keep ``outcome`` as the claimed ``request``'s, with ``turn``'s record in the same
        transaction where given. A store that cannot is tried again (`SETTLE_AGAIN`) while
        it tells that the request still runs, for up to `SETTLE_BOUND`; past that it is
        logged (the next owner ends the request `OwnerDied`: it is never run twice
        silently). Where the store refuses it because another owner has settled the
        request (this one's lease passed while the turn ran), or a write that failed was
        made after all, what the store holds is the request's outcome
        (`Request.overruled`), so its callers here are told what every other program
        reads."""
        assert request.stored_id is not None
        with trio.move_on_after(SETTLE_BOUND):
            while True:
                try:
                    done = await self.store.settle_request(
                        self.name,
                        request.stored_id,
                        stored_outcome(outcome),
                        result_ttl=self.options.result_ttl,
                        turn=turn,
                        session_id=session_id,
                        keep=keep,
                    )
                except LeaseLost as exc:
                    why = "the store refused a request's outcome"
                    log_error(f"agent {self.name!r}: {why}", exc, self.name)
                    done = False
                except StoreError as exc:
                    why = "the store could not settle a request (trying again)"
                    log_error(f"agent {self.name!r}: {why}", exc, self.name)
                    # Settled again only if it still runs: a write made twice would
                    # record its turn twice.
                    if await self._still_running(request.stored_id):
                        continue
                    done = False
                if not done:
                    await self._overrule(request, outcome)
                return
        logger.warning(
            "agent %r: request %s was not settled within %g s: the store keeps it running "
            "until the next owner of the name ends it owner_died",
            self.name,
            request.stored_id,
            SETTLE_BOUND,
            extra={"agent": self.name},
        )

    async def _still_running(self, id: str) -> bool:
        """Whether the store holds the request ``id`` running, asked until it answers."""
        while True:
            await trio.sleep(SETTLE_AGAIN)
            try:
                stored = await self.store.find_request(self.name, id=id)
            except StoreError:
                continue
            return stored is not None and stored.state == "running"

    async def _overrule(self, request: Request, outcome: Response | AgentRTError) -> None:
        assert request.stored_id is not None
        try:
            stored = await self.store.find_request(self.name, id=request.stored_id)
        except StoreError as exc:
            log_error(f"agent {self.name!r}: the store could not be read", exc, self.name)
            return
        result = poll_result(stored)
        if isinstance(result, Failed):
            request.overruled = result.error
        elif isinstance(result, Pending):
            # Refused, and not settled yet: the name's owner now (a newer epoch) ends it
            # as it ends every request a dead owner ran, so this turn's outcome is never
            # the store's. Its callers here are told what it will be: `OwnerDied`, or,
            # where it runs again, that they are not told here (they re-attach).
            if self.options.on_owner_death == "retry":
                why = "its lease passed to another owner, which runs the request again"
                request.overruled = AgentStopped(self.name, why)
            else:
                why = "its lease passed to another owner while the turn ran"
                session_id = getattr(outcome, "session_id", None)
                request.overruled = OwnerDied(self.name, session_id, why)

    async def withdraw_all(self, ids: list[str]) -> None:
        """Withdraw the queued requests ``ids`` (their agent ended for good); a store that
        cannot is logged (the next owner of the name runs them)."""
        try:
            for id in ids:
                await self.withdraw(id)
        except StoreError as exc:
            log_error(
                f"agent {self.name!r}: the store could not withdraw its queue", exc, self.name
            )

    async def withdraw(self, id: str) -> bool:
        """Withdraw the queued request ``id`` in the store; False if it is not queued."""
        with trio.CancelScope(shield=True):
            withdrawn = await self.store.withdraw_request(
                self.name, id, result_ttl=self.options.result_ttl
            )
        return withdrawn
