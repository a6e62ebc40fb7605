"""A request's live events followed from another runtime, through the routing the store
already has: both sides.

The owner keeps a `Tap` on the request, one shared by all its routed followers: a bounded
ring of the events (encoded once, for the wire) numbered from 1, which never makes the
turn wait. A follower's `FollowedStream` reads it with routed ``events`` calls, each
asking for what came after the last number it has; the owner answers at once if there is
something, or when something comes. What fell out of the ring before the follower asked
for it is counted in the answer, so the follower knows how many events it missed and
where. Nothing runs between two reads: no task, no connection, on either side.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable

import trio

from ._errors import AgentNotFound, AgentStopped
from ._events import ErrorEvent, Event, StopReason
from ._stores._route_codec import EventBatch, encode_event
from ._stream import EventStream

# The ring of one tap: the most events (and bytes of them) a follower may fall behind by.
HELD_EVENTS = 1000
HELD_BYTES = 4 * 1024 * 1024
# One answer carries at most this many events (bytes: at least one event, however large).
BATCH_EVENTS = 500
BATCH_BYTES = 1024 * 1024
# The longest an owner holds a read with nothing to send: a follower that died without
# withdrawing its call costs a waiting task no longer than this.
HOLD = 30.0
# A tap stays this long after its request ended, for a follower between two reads; a
# mailbox keeps at most KEPT_ENDED of them.
LINGER = 60.0
KEPT_ENDED = 4

# A read of a tap, as the owner answers it and as the follower receives it.
EncodedBatch = EventBatch[bytes]
Fetch = Callable[[int], Awaitable[EventBatch[Event]]]


class Tap:
    """The owner's side: one request's events for its routed followers, a subscriber of
    the request (`agentrt._stream.Subscriber`) whose buffer is never full: past
    `HELD_EVENTS` or `HELD_BYTES` the oldest events go."""

    __slots__ = ("_bytes", "_changed", "_first", "_ring", "ended_at")

    def __init__(self) -> None:
        # Encoded events, None for one that cannot travel; ``_first`` is ring[0]'s number.
        self._ring: deque[bytes | None] = deque()
        self._first = 1
        self._bytes = 0
        self._changed: trio.Event | None = None
        self.ended_at: float | None = None

    def send_nowait(self, event: Event) -> bool:
        self._hold(encode_event(event))
        return True

    async def send(self, event: Event) -> bool:
        await trio.lowlevel.checkpoint()
        return self.send_nowait(event)

    def close(self, terminal: Event | None) -> None:
        if self.ended_at is None:
            if terminal is not None:
                self._hold(encode_event(terminal))
            self.ended_at = trio.current_time()
            self._wake()

    def _hold(self, data: bytes | None) -> None:
        ring = self._ring
        ring.append(data)
        self._bytes += len(data or b"")
        while len(ring) > 1 and (len(ring) > HELD_EVENTS or self._bytes > HELD_BYTES):
            self._bytes -= len(ring.popleft() or b"")
            self._first += 1
        self._wake()

    def _wake(self) -> None:
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    async def read(self, after: int) -> EncodedBatch:
        """The events after number ``after`` (0: from the first), waiting for one (at most
        `HOLD`) while there are none and the request goes on; those no longer held are
        counted as dropped.

        Cancellation: safe; nothing is taken from the ring."""
        await trio.lowlevel.checkpoint()
        with trio.move_on_after(HOLD):
            while self.ended_at is None and self._first + len(self._ring) <= self._start(after):
                if self._changed is None:
                    self._changed = trio.Event()
                await self._changed.wait()
        return self._batch(after)

    def _start(self, after: int) -> int:
        """The number of the first event a read after ``after`` may get."""
        return max(after + 1, self._first)

    def _batch(self, after: int) -> EncodedBatch:
        ring, first = self._ring, self._first
        start = self._start(after)
        dropped = max(start - after - 1, 0)
        index = start - first
        events: list[bytes] = []
        size = 0
        while index < len(ring) and len(events) < BATCH_EVENTS:
            data = ring[index]
            if data is None:
                dropped += 1
            elif events and size + len(data) > BATCH_BYTES:
                break
            else:
                events.append(data)
                size += len(data)
            index += 1
        ended = self.ended_at is not None and index >= len(ring)
        return EventBatch(tuple(events), first + index - 1, dropped, ended)


def ended(after: int) -> EncodedBatch:
    """The answer for a request that is neither queued, running nor just ended: nothing."""
    return EventBatch((), after, 0, True)


class FollowedStream(EventStream):
    """The follower's side: `Runtime.stream` of a request another runtime runs. Reads
    the owner's tap a batch at a time, when the reader wants an event and has none."""

    __slots__ = ("_after", "_dropped", "_ended", "_fetch", "_reached", "_ready")

    def __init__(self, fetch: Fetch) -> None:
        super().__init__(None)
        self._finished = False
        self._fetch = fetch
        self._after = 0  # the number of the last event read: none yet
        self._reached = False
        self._dropped = 0
        self._ended = False
        self._ready: deque[Event] = deque()

    @property
    def dropped(self) -> int:
        return self._dropped

    async def __anext__(self) -> Event:
        ready = self._ready
        while not ready:
            if self._finished or self._ended:
                self._finished = True
                await trio.lowlevel.checkpoint()
                raise StopAsyncIteration
            try:
                batch = await self._fetch(self._after)
            except AgentNotFound as exc:
                if not self._reached:  # no live runtime runs the agent
                    raise
                return self._gone(str(exc))
            except AgentStopped as exc:
                return self._gone(str(exc))
            self._reached = True
            if self._finished:  # closed while it read
                continue
            self._after = batch.last
            self._dropped += batch.dropped
            self._ended = batch.ended
            ready.extend(batch.events)
        return ready.popleft()

    def _gone(self, why: str) -> Event:
        # As a local stream ends when its agent stops: with an error event saying so.
        self._finished = True
        return ErrorEvent(timestamp=trio.current_time(), reason=StopReason.CANCELLED, message=why)

    def close(self) -> None:
        super().close()
        self._ready.clear()
