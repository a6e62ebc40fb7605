"""How a turn (`agentrt._turn.Turn`) ends early: one way for every reason, a passed time
bound included.

Whatever stops a turn early (interrupt, a bound, a lossless overflow, a crash in the
translator or a stream callback) stops it the same way: the in-process run is cancelled, a
CLI process is interrupted and its remaining output drained only for session ids. The turn
then fails with that reason, whatever the backend printed afterwards; but a result printed
before the stop is kept: the turn completes with it instead, unless the stop is a fault of
the turn's own (``turn_crashed``, ``event_capture_overflow``).

A terminal `ErrorEvent` ends the turn at once, like a stop with the event's own reason:
the CLI is interrupted (Claude Code would otherwise retry a rejected key for minutes) and
drained, and nothing it prints afterwards changes the outcome.
"""

from __future__ import annotations

from typing import Any

import trio

from ._alarm import Alarm
from ._events import Event, ResultEvent, StopReason
from ._options import AgentOptions
from ._redact import redact
from ._telemetry._otel import TurnTrace
from ._turn_bounds import Bounds
from ._turn_response import Failure
from ._turn_source import Channel

# Stops a warm CLI is asked to end in band, so it may live on; any other stop kills it.
_IN_BAND: frozenset[StopReason] = frozenset(
    (StopReason.INTERRUPTED, StopReason.CANCELLED, StopReason.BUDGET_EXCEEDED)
)

# Stops that fail a turn even after a result: a bug, or a broken capture promise.
_LOSES_RESULT: frozenset[StopReason] = frozenset(
    (StopReason.TURN_CRASHED, StopReason.EVENT_CAPTURE_OVERFLOW)
)


class Stopping:
    """The part of `agentrt._turn.Turn` that stops it: ``stop`` for every reason, the
    bounds' alarm, a crash of the turn's own. A base class rather than an object of its
    own, so that a stop or a read makes no extra call."""

    # Turn's fields this part reads and sets (declared, with their meaning, on Turn).
    options: AgentOptions
    trace: TurnTrace | None
    _failure: Failure | None
    _terminal: Event | None
    _ended: bool
    _scope: trio.CancelScope | None
    _channel: Channel | None
    _drain_scope: trio.CancelScope | None
    _bounds: Bounds
    _alarm: Alarm | None

    def stop(
        self,
        reason: StopReason,
        message: str,
        *,
        detail: dict[str, Any] | None = None,
        cause: BaseException | None = None,
    ) -> None:
        """End the turn early with ``reason``; the first stop wins, and a terminal error
        event seen before it. After a result the turn completes with that result instead,
        unless ``reason`` is a fault of the turn's own."""
        if self._ended:
            return
        if self.trace is not None:
            self.trace.stopping(reason)
        if type(self._terminal) is ResultEvent and reason not in _LOSES_RESULT:
            self._settle()
        else:
            self._stop(Failure(reason, message, detail, cause))

    def _settle(self) -> None:
        # The last result is the outcome: the CLI is interrupted and drained as for a stop.
        if self._failure is None and not self._ended:
            self._ended = True
            self._end_run()

    def _stop(self, failure: Failure) -> None:
        if self._failure is None:
            self._failure = failure
            self._end_run()

    def _end_run(self) -> None:
        if self._scope is not None:
            self._scope.cancel()
        if self._drain_scope is not None:
            self._interrupt_cli()
        elif self._channel is not None:  # not read yet: it opens, or is open already
            self._channel.interrupt(self._gently())

    def _gently(self) -> bool:
        # A live CLI is asked to end the turn in band for an interrupt, else killed.
        return self._failure is not None and self._failure.reason in _IN_BAND

    def _interrupt_cli(self) -> None:
        assert self._channel is not None and self._drain_scope is not None
        self._channel.interrupt(self._gently())
        # Reading goes on so the CLI can flush its transcript; the driver escalates to
        # SIGKILL by itself, so this only bounds a reader stuck on a full subscriber.
        self._drain_scope.deadline = trio.current_time() + self._channel.drain_bound

    def _ended_cleanly(self) -> bool:
        # A warm CLI outlives a turn that completed, that the CLI failed itself (an API
        # error in its result), or that an interrupt ended in band.
        return self._failure is None or self._failure.reason in _IN_BAND

    def _arm(self) -> None:
        # Until the turn is stopped or settled, the alarm rings at the nearest bound.
        if self._alarm is not None and self._failure is None and not self._ended:
            self._alarm.set(self._bounds.nearest(), self._bound_passed)

    def _bound_passed(self, now: float) -> None:
        self._stop_for_bound(now)
        self._arm()

    def _reschedule(self) -> None:
        deadline = self._bounds.nearest()
        if self._alarm is not None:
            self._alarm.move(deadline)
        scope = self._scope
        # trio's deadline setter is a context manager and a re-sort: only for a change.
        if scope is not None and scope.deadline != deadline:
            scope.deadline = deadline

    def _stop_for_bound(self, now: float) -> None:
        passed = self._bounds.passed(now, self.options)
        if passed is None:
            return
        reason, message = passed
        if reason is StopReason.COMPLETE:
            self._settle()
        else:
            self.stop(reason, message)

    def _crash(self, exc: Exception) -> None:
        # A bug on our side wins even over a terminal error event: it must not go unseen.
        message = redact(f"{type(exc).__name__}: {exc}")
        self._stop(Failure(StopReason.TURN_CRASHED, message, cause=exc))
