"""A deadline that calls back when it passes, moved without a new task or cancel scope.

A turn's bounds (the watchdog, the first event, after a result) are one deadline that moves
as the turn goes; a warm agent runs turn after turn. One long-lived task waits in one cancel
scope whose deadline is reassigned, so a turn sets and clears the alarm instead of opening
a nursery, starting a task and entering a scope of its own.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import trio


class Alarm:
    """Calls ``callback(now)`` once its deadline (trio time) passes, from the task that
    awaits `run`."""

    __slots__ = ("_callback", "_deadline", "_scope")

    def __init__(self) -> None:
        self._deadline = math.inf
        self._callback: Callable[[float], None] | None = None
        self._scope: trio.CancelScope | None = None

    def set(self, deadline: float, callback: Callable[[float], None]) -> None:
        """Call ``callback`` once at ``deadline``, unless `move`d, `clear`ed or set again
        before."""
        self._callback = callback
        self.move(deadline)

    def move(self, deadline: float) -> None:
        """The deadline of what was set; nothing is called for it once cleared or called."""
        self._deadline = deadline
        # Assigning re-registers the scope's deadline: skipped when it does not change.
        scope = self._scope
        if self._callback is not None and scope is not None and scope.deadline != deadline:
            scope.deadline = deadline

    def clear(self) -> None:
        # The scope keeps its deadline (the next `set` moves it): should it pass first, the
        # task finds nothing to call and waits again.
        self._callback = None

    async def run(self) -> None:
        """Wait for the deadlines and call back.

        Cancellation: this is how it stops."""
        while True:
            # With nothing to call, no deadline: a bound moved into the past after its turn
            # stopped must not wake this task again and again.
            deadline = self._deadline if self._callback is not None else math.inf
            with trio.CancelScope(deadline=deadline) as self._scope:
                await trio.sleep_forever()
            now = trio.current_time()
            callback = self._callback
            # Moved later, or cleared, after the scope had fired: wait again.
            if callback is not None and now >= self._deadline:
                self._callback = None
                callback(now)
