"""Live events of one request (``Runtime.stream``), with backpressure."""

from __future__ import annotations

from typing import Protocol

import attrs
import trio

from ._events import Event
from ._util import ClosingReader

# Events buffered per subscriber before the turn waits for it to read.
BUFFER = 64


class Subscriber(Protocol):
    """What a request hands its events to as its turn runs: a `Subscription`, or a routed
    follower's tap (`agentrt._follow.Tap`)."""

    def send_nowait(self, event: Event) -> bool | None: ...

    async def send(self, event: Event) -> bool: ...

    def close(self, terminal: Event | None) -> None: ...


@attrs.define(eq=False)
class Subscription:
    """The turn's side. Non-terminal events go through the bounded channel (the turn waits
    when it is full); the terminal event is handed over on close, so ending a turn never
    waits for a slow reader."""

    send_channel: trio.MemorySendChannel[Event]
    terminal: Event | None = None

    def send_nowait(self, event: Event) -> bool | None:
        """Deliver one event if there is room: True if delivered, False once the reader has
        gone away, None if its buffer is full (then `send` waits for room)."""
        try:
            self.send_channel.send_nowait(event)
        except trio.WouldBlock:
            return None
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return False
        return True

    async def send(self, event: Event) -> bool:
        """Deliver one event, waiting for room; False once the reader has gone away.

        Cancellation: safe; the event is not delivered."""
        try:
            await self.send_channel.send(event)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return False
        return True

    def close(self, terminal: Event | None) -> None:
        self.terminal = terminal
        self.send_channel.close()


class EventStream(ClosingReader):
    """An async iterator over one request's events, in order, ending after its terminal
    event. Returned by `Runtime.stream`; also an async context manager that closes it.

    A reader that stops reading makes the turn wait (backpressure; the watchdog still
    applies). Closing the stream, or dropping it, releases the turn. The stream of an
    agent another runtime owns never makes its turn wait: a reader that falls behind skips
    events instead, counted in `dropped`.
    """

    __slots__ = ("_finished", "_receive", "_subscription")

    def __init__(self, subscription: Subscription | None) -> None:
        self._subscription = subscription
        self._receive: trio.MemoryReceiveChannel[Event] | None = None
        self._finished = subscription is None

    @classmethod
    def _open(cls) -> tuple[EventStream, Subscription]:
        # The runtime's: the stream, and the subscription its request sends the events to.
        send, receive = trio.open_memory_channel[Event](BUFFER)
        subscription = Subscription(send)
        stream = cls(subscription)
        stream._receive = receive
        return stream, subscription

    async def __anext__(self) -> Event:
        """The next event. Raises `StopAsyncIteration` after the terminal event, or once the
        stream is closed; nothing else.

        Cancellation: safe; an event being waited for stays in the stream."""
        if self._finished or self._receive is None or self._subscription is None:
            await trio.lowlevel.checkpoint()
            raise StopAsyncIteration
        try:
            return await self._receive.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            pass
        self._finished = True
        self._receive.close()
        terminal = self._subscription.terminal
        if terminal is None:
            raise StopAsyncIteration
        return terminal

    @property
    def dropped(self) -> int:
        """How many of the request's events this stream has skipped so far: always 0 for
        an agent of this runtime (its reader holds the turn back instead); for one another
        runtime owns, those its owner no longer held when this stream asked for them. The
        count grows just before the first event after a gap."""
        return 0

    def close(self) -> None:
        """Stop reading; the turn no longer waits for this stream. Raises nothing; closing
        twice is fine."""
        self._finished = True
        if self._receive is not None:
            self._receive.close()

    async def aclose(self) -> None:
        """Async spelling of `close`, for ``contextlib.aclosing`` and friends. Raises nothing.

        Cancellation: the stream is closed even when the call is cancelled."""
        self.close()
        await trio.lowlevel.checkpoint()

    def __del__(self) -> None:
        # A reader that breaks out of its loop and drops the stream must not leave the
        # turn blocked on a full channel.
        if self._receive is not None:
            self._receive.close()
