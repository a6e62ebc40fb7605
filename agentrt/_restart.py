"""OTP restart rules as plain data: restart types, strategies, intensity and backoff."""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Sequence

import attrs


class RestartType(enum.StrEnum):
    """When a crashed or stopped agent comes back (OTP's child restart types)."""

    PERMANENT = "permanent"  # always
    TRANSIENT = "transient"  # after an abnormal end only
    TEMPORARY = "temporary"  # never

    def restarts_after(self, *, abnormal: bool) -> bool:
        if self is RestartType.PERMANENT:
            return True
        return abnormal and self is RestartType.TRANSIENT


class Strategy(enum.StrEnum):
    """Which siblings restart with a crashed agent (OTP's supervisor strategies)."""

    ONE_FOR_ONE = "one_for_one"
    ONE_FOR_ALL = "one_for_all"
    REST_FOR_ONE = "rest_for_one"

    def affected(self, children: Sequence[str], crashed: str) -> list[str]:
        """The children to restart, in start order, when ``crashed`` crashes."""
        if self is Strategy.ONE_FOR_ONE:
            return [crashed]
        if self is Strategy.ONE_FOR_ALL:
            return list(children)
        return list(children[children.index(crashed) :])


@attrs.frozen
class Crash:
    """One entry of a restart history."""

    name: str
    at: float
    reason: str


@attrs.define
class RestartIntensity:
    """At most ``max_restarts`` restarts in any ``period`` seconds, with exponential backoff.

    ``backoff`` is the delay before the first restart of a burst; each further restart
    inside the window doubles it, up to ``max_backoff``.
    """

    max_restarts: int = 3
    period: float = 5.0
    backoff: float = 0.1
    max_backoff: float = 5.0
    _recent: deque[Crash] = attrs.field(factory=deque, init=False)

    def record(self, crash: Crash) -> float | None:
        """Count a crash. Returns the delay before restarting, or None when over intensity."""
        while self._recent and self._recent[0].at <= crash.at - self.period:
            self._recent.popleft()
        self._recent.append(crash)
        if len(self._recent) > self.max_restarts:
            return None
        return min(self.backoff * 2.0 ** (len(self._recent) - 1), self.max_backoff)

    @property
    def history(self) -> tuple[Crash, ...]:
        return tuple(self._recent)
