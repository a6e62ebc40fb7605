"""An agent's mailbox: queued prompts, prompts the agent chained to itself, deferred
notifications, results kept for ``poll``.

The mailbox belongs to the agent's name, not to one `Actor`: a supervisor that restarts
an agent hands the same mailbox to the new instance, so queued work survives the crash.
Every request is made, queued, taken, withdrawn and settled here. Its structures are
created on first use; an idle agent's mailbox is a few fields.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Any

import attrs
import trio

from ._errors import AgentRTError, AgentStopped, MailboxFull
from ._events import ErrorEvent, Event, Response, StopReason, TurnOrigin, text_size
from ._follow import KEPT_ENDED, LINGER, Tap
from ._options import AgentOptions
from ._requests import NotFound, Origin, Pending, PollResult, Ref, Request, Settled
from ._stream import EventStream
from ._telemetry._otel import capture_context
from ._unsolicited import UnsolicitedTurn, UnsolicitedTurns

# Notifications waiting for an agent (while it processes a request) before notify refuses.
MAX_NOTIFICATIONS = 1000

# The origins of the requests nobody asked for, as their `Response.origin` says
# (`Runtime.unsolicited`).
UNSOLICITED: dict[Origin, TurnOrigin] = {
    "task": "task",
    "schedule": "schedule",
    "wakeup": "wakeup",
    "cron": "cron",
}


def result_size(outcome: Response | AgentRTError) -> int:
    """Bytes a kept result counts against ``max_result_bytes``: its text and its retained
    events (Response), or its message (error)."""
    if isinstance(outcome, Response):
        return (
            outcome.event_coverage.retained_bytes
            + text_size(outcome)  # not decoded to be measured
            + len(outcome.final_message.encode())
        )
    return len(str(outcome).encode())


@attrs.define(eq=False)
class Mailbox:
    name: str
    options: AgentOptions
    # Ref ids, unique across the runtime.
    new_id: Callable[[], int]
    queue: deque[Request] | None = None
    queued_bytes: int = 0
    # Prompts the agent chained to itself: they run before queued work.
    chained: deque[Request] | None = None
    notifications: deque[Any] | None = None
    # Tells, self-chained prompts and stored asks that are queued or running, by ref id.
    live: dict[int, Request] | None = None
    # Settled tells, oldest first, with the bytes each counts.
    results: OrderedDict[int, tuple[Settled, int]] | None = None
    result_bytes: int = 0
    # The taps routed followers read, by ref id: of live requests, and of a few just ended.
    taps: dict[int, Tap] | None = None
    # The open readers of its unsolicited turns; one a reader dropped unclosed goes by itself.
    feeds: weakref.WeakSet[UnsolicitedTurns] | None = None

    @property
    def queued(self) -> int:
        return len(self.queue) if self.queue else 0

    @property
    def chained_count(self) -> int:
        return len(self.chained) if self.chained else 0

    def request(self, prompt: str, origin: Origin, stored_id: str | None = None) -> Request:
        """A new request for ``prompt``, not queued yet; with ``stored_id`` (decimal), one
        for a store that keeps requests, named by that id."""
        ref = Ref(self.name, self.new_id() if stored_id is None else int(stored_id))
        return Request(
            ref,
            prompt,
            len(prompt.encode()),
            origin,
            trace_context=capture_context(),
            stored_id=stored_id,
            accepted_at=trio.current_time(),
        )

    def admit(
        self, request: Request, *, idle: bool, bounded: bool = True, first: bool = False
    ) -> None:
        """Queue ``request``, or raise `MailboxFull` (an idle agent with nothing queued
        takes one prompt even with ``max_pending=0``); not ``bounded``: the store that
        keeps requests has checked the bounds as it accepted it; ``first``: at the head of
        the queue (it runs next)."""
        queue = self.queue
        if queue is None:
            queue = self.queue = deque()
        if bounded and (queue or not idle):
            options = self.options
            if len(queue) >= options.max_pending:
                self._overloaded("max_pending", options.max_pending)
            if self.queued_bytes + request.size > options.max_pending_bytes:
                self._overloaded("max_pending_bytes", options.max_pending_bytes)
        if first:
            queue.appendleft(request)
        else:
            queue.append(request)
        self.queued_bytes += request.size
        self.track(request)

    def _overloaded(self, limit: str, maximum: int) -> None:
        raise MailboxFull(self.name, limit, maximum, self.queued, self.queued_bytes)

    def adopt(self, request: Request) -> None:
        """Queue a request a store kept (accepted by an earlier owner or another program)."""
        self.admit(request, idle=True, bounded=False)

    def take_stored(self, stored_id: str) -> Request | None:
        """Take the queued request whose stored id is ``stored_id`` out of the queue."""
        for request in self.queue or ():
            if request.stored_id == stored_id:
                self.remove(request)
                return request
        return None

    def track(self, request: Request) -> None:
        # An ask has no ref of its own, but a stored one's is found by its key.
        if request.origin != "ask" or request.stored_id is not None:
            if self.live is None:
                self.live = {}
            self.live[request.ref.id] = request

    def chain(self, prompt: str) -> None:
        """Queue a prompt the agent chained to itself, after the chained ones before it."""
        request = self.request(prompt, "self_chain")
        self.track(request)
        if self.chained is None:
            self.chained = deque()
        self.chained.append(request)

    def own_turn(self) -> Request:
        """A turn the agent's CLI started by itself (origin ``task``): it runs next, before
        chained and queued work (the CLI runs it already)."""
        request = self.request("", "task")
        self.track(request)
        if self.chained is None:
            self.chained = deque()
        self.chained.appendleft(request)
        return request

    def take(self) -> Request | None:
        """The next request to run: a chained prompt, else the head of the queue."""
        # An emptied deque is dropped: it costs about 600 bytes for the agent's idle life.
        if self.chained:
            request = self.chained.popleft()
            if not self.chained:
                self.chained = None
            return request
        if not self.queue:
            return None
        request = self.queue.popleft()
        if not self.queue:
            self.queue = None
        self.queued_bytes -= request.size
        return request

    def head(self) -> Request | None:
        """The request `take` returns next, left where it is."""
        if self.chained:
            return self.chained[0]
        return self.queue[0] if self.queue else None

    def put_back(self, request: Request) -> None:
        """Put a request that was taken but not run back where `take` found it."""
        if request.origin == "self_chain" or request.origin == "task":
            if self.chained is None:
                self.chained = deque()
            self.chained.appendleft(request)
            return
        if self.queue is None:
            self.queue = deque()
        self.queue.appendleft(request)
        self.queued_bytes += request.size

    def is_queued(self, request: Request) -> bool:
        """Whether ``request`` waits in the queue (not taken, settled or chained)."""
        return request in (self.queue or ())

    def remove(self, request: Request) -> bool:
        """Take a queued request out of the queue; False if it is not queued."""
        if not self.queue:
            return False
        try:
            self.queue.remove(request)
        except ValueError:
            return False
        self.queued_bytes -= request.size
        return True

    def withdraw(self, ref: Ref, session_id: str | None) -> bool:
        """Settle the queued or chained request ``ref`` as `Withdrawn`; False if it is not
        waiting (running, settled or unknown)."""
        request = self.find(ref)
        if request is None:
            return False
        if not self.remove(request):
            if not self.chained or request not in self.chained:
                return False
            self.chained.remove(request)
        self.settle_withdrawn(request, session_id)
        return True

    def settle_withdrawn(self, request: Request, session_id: str | None) -> None:
        """Settle ``request``, out of the queue, as `Withdrawn`."""
        request.cancelled = True
        terminal = ErrorEvent(
            timestamp=trio.current_time(),
            reason=StopReason.CANCELLED,
            message="cancelled while queued",
            session_id=session_id,
        )
        self.settle(request, terminal)

    def subscribe(self, ref: Ref) -> EventStream:
        """The live events of the queued or running request ``ref`` (empty if neither)."""
        request = self.find(ref)
        if request is None:
            return EventStream(None)
        stream, subscription = EventStream._open()
        if request.subscriptions is None:
            request.subscriptions = []
        request.subscriptions.append(subscription)
        return stream

    def tap(self, ref: Ref) -> Tap | None:
        """The tap routed followers of the queued or running request ``ref`` share (made
        on first use), or of one that ended moments ago (`LINGER`); None if neither."""
        taps = self.taps
        if taps is not None and ref.name == self.name and (tap := taps.get(ref.id)):
            return tap
        request = self.find(ref)
        if request is None:
            return None
        tap = Tap()
        if request.subscriptions is None:
            request.subscriptions = []
        request.subscriptions.append(tap)
        if taps is None:
            taps = self.taps = {}
        taps[ref.id] = tap
        return tap

    def _forget_taps(self) -> None:
        taps = self.taps
        if not taps:
            return
        now = trio.current_time()
        ended = [ref_id for ref_id, tap in taps.items() if tap.ended_at is not None]
        for count, ref_id in enumerate(reversed(ended)):  # newest first
            ended_at = taps[ref_id].ended_at
            assert ended_at is not None
            if count >= KEPT_ENDED or now - ended_at > LINGER:
                del taps[ref_id]

    def find(self, ref: Ref) -> Request | None:
        """The queued or running tell (or chained prompt, or stored ask) ``ref`` names."""
        if self.live is None or ref.name != self.name:
            return None
        return self.live.get(ref.id)

    def settle(self, request: Request, terminal: Event | None) -> None:
        """``request`` has its outcome: end its event streams with ``terminal``, wake its
        waiters, keep its result for ``poll``."""
        subscriptions = request.subscriptions
        if subscriptions:
            request.subscriptions = None
            for subscription in subscriptions:
                subscription.close(terminal)
            self._forget_taps()
        waiters = request.waiters
        if waiters is not None:
            request.waiters = None
            for task in waiters:
                trio.lowlevel.reschedule(task)
        if self.live is not None:
            self.live.pop(request.ref.id, None)
        if request.origin == "ask":
            return
        self._keep(request)

    def unsolicited(self) -> UnsolicitedTurns:
        """A new reader of the requests of an `UNSOLICITED` origin, from now, as they settle."""
        feed = UnsolicitedTurns()
        if self.feeds is None:
            self.feeds = weakref.WeakSet()
        self.feeds.add(feed)
        return feed

    def end_feeds(self) -> None:
        """The agent has ended for good: its unsolicited readers end after what they hold."""
        feeds, self.feeds = self.feeds, None
        for feed in feeds or ():
            feed._end()

    def _keep(self, request: Request) -> None:
        options = self.options
        if self.results is None:
            self.results = OrderedDict()
        results = self.results
        outcome = request.outcome
        size = 0 if outcome is None else result_size(outcome)
        settled = request.result()
        origin = UNSOLICITED.get(request.origin)
        if self.feeds and origin is not None:
            turn = UnsolicitedTurn(request.ref, origin, settled)
            for feed in self.feeds:
                feed._put(turn, size)
        results[request.ref.id] = (settled, size)
        self.result_bytes += size
        # Oldest results go first; one result larger than the byte bound is not kept.
        while results and (
            len(results) > options.max_results or self.result_bytes > options.max_result_bytes
        ):
            _, (_, evicted) = results.popitem(last=False)
            self.result_bytes -= evicted

    def poll(self, ref: Ref) -> PollResult:
        if ref.name == self.name:
            if self.live is not None and ref.id in self.live:
                return Pending()
            if self.results is not None:
                kept = self.results.get(ref.id)
                if kept is not None:
                    return kept[0]
        return NotFound()

    def notify(self, event: Any) -> None:
        """Queue a notification; `MailboxFull` beyond ``MAX_NOTIFICATIONS`` waiting."""
        if self.notifications is None:
            self.notifications = deque()
        elif len(self.notifications) >= MAX_NOTIFICATIONS:
            raise MailboxFull(
                self.name, "notifications", MAX_NOTIFICATIONS, len(self.notifications), 0
            )
        self.notifications.append(event)

    def fail(self, request: Request, error: AgentStopped) -> None:
        # One exception object per waiter: each raise adds its own traceback to it.
        request.outcome = own = AgentStopped(error.name, error.reason)
        own.__cause__ = error.__cause__
        terminal = ErrorEvent(
            timestamp=trio.current_time(), reason=StopReason.CANCELLED, message=str(error)
        )
        self.settle(request, terminal)

    def fail_chained(self, error: AgentStopped) -> None:
        """Fail the prompts the agent chained to itself (its instance has ended)."""
        chained, self.chained = self.chained, None
        for request in chained or ():
            if not request.settled:
                self.fail(request, error)

    def fail_queued(self, error: AgentStopped) -> list[str]:
        """Fail every queued request (the agent has ended and nobody takes over); the
        stored ids of those a store keeps."""
        stored: list[str] = []
        while self.queue:
            request = self.queue.popleft()
            if request.stored_id is not None:
                stored.append(request.stored_id)
            self.fail(request, error)
        self.queued_bytes = 0
        return stored
