"""The turns nobody asked for, as they end (``Runtime.unsolicited``): an agent's turns of
origin ``task``, ``wakeup``, ``cron`` and ``schedule``, for the application beside the agent's own
callbacks.

A reader's feed is filled by the agent's mailbox as each such request settles, and never
makes the agent wait: past `HELD_TURNS` (or `HELD_BYTES` of results) the oldest turn not
read yet goes, counted in `UnsolicitedTurns.dropped`.
"""

from __future__ import annotations

from collections import deque

import attrs
import trio

from ._events import TurnOrigin
from ._requests import Ref, Settled
from ._util import ClosingReader

# The most ended turns (and bytes of their results) a reader may fall behind by: as many as
# an agent keeps for ``poll`` by default (``max_results``, ``max_result_bytes``).
HELD_TURNS = 100
HELD_BYTES = 8 * 1024 * 1024


@attrs.frozen
class UnsolicitedTurn:
    """One ended turn of agent ``ref.name`` that nobody asked for with ``ask`` or ``tell``:
    ``origin`` says who started it (``"task"``: its warm CLI by itself, ``"wakeup"``: a
    wake-up its CLI scheduled, ``"cron"``: a cron job its CLI made, ``"schedule"``: one of
    its schedules), and ``result`` is
    what ``poll(ref)`` says of it then: `Completed` with its `Response`, `Failed` with the
    error, or `Withdrawn`."""

    ref: Ref
    origin: TurnOrigin
    result: Settled


class UnsolicitedTurns(ClosingReader):
    """An async iterator over the turns agent ``name`` runs that nobody asked for
    (`UnsolicitedTurn`), each as it ends, from the moment it was opened; returned by
    `Runtime.unsolicited`. Also an async context manager that closes it.

    It never makes the agent wait: a reader that falls more than 100 turns (or 8 MiB of
    results) behind loses the oldest it has not read, counted in `dropped`. It ends once
    the agent has ended for good (`Runtime.stop_agent`, its supervisor gave up, the
    runtime closed), after the turns that ended before; a supervised restart does not end
    it."""

    __slots__ = ("__weakref__", "_bytes", "_changed", "_closed", "_dropped", "_ended", "_held")

    def __init__(self) -> None:
        self._held: deque[tuple[UnsolicitedTurn, int]] = deque()
        self._bytes = 0
        self._changed: trio.Event | None = None
        self._ended = False
        self._closed = False
        self._dropped = 0

    @property
    def dropped(self) -> int:
        """How many ended turns this reader lost so far by falling behind (the oldest it
        had not read went first)."""
        return self._dropped

    def _put(self, turn: UnsolicitedTurn, size: int) -> None:
        # The mailbox's, as a request of such an origin settles.
        if self._closed:
            return
        held = self._held
        held.append((turn, size))
        self._bytes += size
        while len(held) > 1 and (len(held) > HELD_TURNS or self._bytes > HELD_BYTES):
            self._bytes -= held.popleft()[1]
            self._dropped += 1
        self._wake()

    def _end(self) -> None:
        # The mailbox's, once its agent has ended for good.
        self._ended = True
        self._wake()

    def _wake(self) -> None:
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    async def __anext__(self) -> UnsolicitedTurn:
        """The next turn that ended, waiting for one. Raises `StopAsyncIteration` once the
        agent has ended for good and every turn before was read, or once closed.

        Cancellation: safe; no turn is taken."""
        await trio.lowlevel.checkpoint()
        while not self._held:
            if self._ended or self._closed:
                raise StopAsyncIteration
            if self._changed is None:
                self._changed = trio.Event()
            await self._changed.wait()
        turn, size = self._held.popleft()
        self._bytes -= size
        return turn

    def close(self) -> None:
        """Stop reading: the turns held are let go and no more are kept. Raises nothing;
        closing twice is fine."""
        self._closed = True
        self._held.clear()
        self._bytes = 0
        self._wake()

    async def aclose(self) -> None:
        """Async spelling of `close`. Raises nothing.

        Cancellation: it is closed even when the call is cancelled."""
        self.close()
        await trio.lowlevel.checkpoint()
