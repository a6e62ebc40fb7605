"""`ProcessSlots`: the runtime's ``max_processes``, one slot per live CLI process.

A turn's process holds a slot for the turn; a warm CLI (``keep_alive``) holds one for as
long as it lives, between turns too. When a turn has to wait for a slot while warm CLIs
sit idle, the one idle the longest hibernates (its process ends; its conversation resumes
on a new one later), so idle agents never starve working ones.
"""

from __future__ import annotations

from typing import Protocol

import trio


class Hibernating(Protocol):
    """An idle warm process that can give its slot back."""

    def hibernate(self) -> None:
        """End the process soon; its slot is released once it is gone."""
        ...


class ProcessSlots:
    """``total`` slots (None: as many as asked for, only counted)."""

    def __init__(self, total: int | None) -> None:
        self._limiter = None if total is None else trio.CapacityLimiter(total)
        self._in_use = 0
        # Idle warm processes, least recently used first (dicts keep insertion order).
        self._idle: dict[Hibernating, None] = {}

    @property
    def in_use(self) -> int:
        return self._in_use

    @property
    def waiting(self) -> int:
        return 0 if self._limiter is None else self._limiter.statistics().tasks_waiting

    async def acquire(self, holder: object) -> None:
        """Take a slot for ``holder`` (any object; `release` names it again), waiting for
        one if need be; an idle warm process hibernates to make room.

        Cancellation: safe; nothing is taken."""
        limiter = self._limiter
        if limiter is not None:  # unbounded, a turn need not wait here at all
            if limiter.available_tokens == 0 and self._idle:
                self._evict()
            await limiter.acquire_on_behalf_of(holder)
        self._in_use += 1

    def take_now(self, holder: object) -> bool:
        """Take a slot for ``holder`` if one is free now (True), without waiting: a turn
        that gets one needs no cancel scope for the wait (`acquire`)."""
        limiter = self._limiter
        if limiter is not None:
            try:
                # Refused while tasks queue for one, even with a token free: they come first.
                limiter.acquire_on_behalf_of_nowait(holder)
            except trio.WouldBlock:
                return False
        self._in_use += 1
        return True

    def release(self, holder: object) -> None:
        self._in_use -= 1
        if self._limiter is not None:
            self._limiter.release_on_behalf_of(holder)

    def idle(self, process: Hibernating) -> None:
        """``process`` waits between turns, holding its slot: if turns wait for slots now,
        it hibernates at once, else it is the first to go when one does."""
        if self.waiting:
            process.hibernate()
        else:
            self._idle[process] = None

    def busy(self, process: Hibernating) -> None:
        """``process`` runs a turn again (or is gone): no longer one to evict."""
        self._idle.pop(process, None)

    def _evict(self) -> None:
        process = next(iter(self._idle))
        del self._idle[process]
        process.hibernate()
