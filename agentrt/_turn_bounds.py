"""A turn's time bounds (`agentrt._turn.Turn`): the watchdog, the first event, the time
after a result; as deadlines on the run's clock, and the stop each one calls for."""

from __future__ import annotations

import math

import attrs

from ._events import StopReason
from ._options import AgentOptions


@attrs.define
class Bounds:
    """The deadlines of one turn's bounds; inf where none applies (yet, or any more)."""

    total: float = math.inf
    # Lifted (set to inf) by the first content event.
    first: float = math.inf
    # Set by each result, from the latest one.
    result: float = math.inf
    # While the CLI waits for the agent's answer: what was left of the first-event bound.
    _first_left: float | None = attrs.field(default=None, init=False)

    def start(self, now: float, options: AgentOptions) -> None:
        """The turn starts ``now``: its watchdog and first-event bound count from here."""
        if options.watchdog is not None:
            self.total = now + options.watchdog
        if options.first_event is not None:
            self.first = now + options.first_event

    def pause_first(self, now: float) -> None:
        """The CLI waits for the agent's answer from ``now`` (an approval, a hook): the
        first-event bound times the model's silence, not the agent's, so it stops counting."""
        if self.first != math.inf:
            self._first_left = self.first - now
            self.first = math.inf

    def resume_first(self, now: float) -> None:
        """The agent answered ``now``: the first-event bound counts on from where it stopped."""
        if self._first_left is not None:
            self.first = now + self._first_left
            self._first_left = None

    def nearest(self) -> float:
        return min(self.total, self.first, self.result)

    def passed(self, now: float, options: AgentOptions) -> tuple[StopReason, str] | None:
        """What a bound that ``now`` is past calls for: COMPLETE for the after-result bound
        (the turn settles on its result), else the reason and message to stop the turn
        with; None when no bound has passed."""
        if now >= self.result:
            return StopReason.COMPLETE, ""
        if now >= self.total:
            return (
                StopReason.TOTAL_TIMEOUT,
                f"the turn ran longer than its watchdog ({options.watchdog:g} s)",
            )
        if now >= self.first:
            return (
                StopReason.FIRST_EVENT_TIMEOUT,
                f"no content within {options.first_event:g} s of the turn's start",
            )
        return None
