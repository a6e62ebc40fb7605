"""A scheduled prompt (`Schedule`, as the stores keep it), the checks of its arguments, when
it is due next, and the wall clock its times are on."""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime
from typing import Literal

import attrs
import trio
from cronsim import CronSim, CronSimError

from ._errors import InvalidOptions
from ._requests import Ref, ref_of

Overlap = Literal["skip", "queue"]
_OVERLAPS: tuple[Overlap, ...] = ("skip", "queue")


@attrs.frozen(kw_only=True)
class Schedule:
    """A prompt agent ``name`` runs on a schedule (`Runtime.schedule`), as the store keeps it.

    It fires every ``every`` seconds, or at the times the cron expression ``cron`` names
    (five fields, or six with seconds first; read in UTC); one of the two is set.
    ``overlap`` is ``"skip"`` (a fire due while the previous one is queued or running is
    dropped) or ``"queue"`` (it queues behind it). ``key`` is the caller's idempotency key,
    or None. ``created_at``, ``next_due`` and ``last_run`` are wall clock seconds;
    ``last_run`` is None until the first fire, and ``last_request`` the stored id of the
    last fire's request (`last_ref` is its `Ref`).

    ``origin`` is ``"schedule"`` for the application's schedules, ``"wakeup"`` for a
    wake-up the agent's CLI scheduled (`agentrt.backend.WakeupBackend`): that one has
    neither ``every`` nor ``cron``, fires once at ``next_due`` (a turn of origin
    ``wakeup``), and is dropped then; and ``"cron"`` for a cron job the agent's CLI made
    (`agentrt.backend.CronBackend`), under the ``key`` ``cron:<the CLI's id for it>``: its
    fires are turns of origin ``cron``, and a one-shot job has neither ``every`` nor
    ``cron`` and fires once, as a wake-up does."""

    id: str
    name: str
    prompt: str
    every: float | None
    cron: str | None
    overlap: str
    key: str | None
    created_at: float
    next_due: float
    last_run: float | None = None
    last_request: str | None = None
    origin: str = "schedule"

    @property
    def last_ref(self) -> Ref | None:
        """The `Ref` of the last fire's request (``poll`` and ``wait`` take it); None
        before the first fire."""
        return None if self.last_request is None else ref_of(self.name, self.last_request)


def check_schedule(every: object, cron: object, overlap: object) -> None:
    """Refuse a schedule's timing that is not exactly one of a positive number of seconds
    (``every``) and a valid cron expression (``cron``), or an unknown ``overlap``."""
    if (every is None) == (cron is None):
        raise InvalidOptions(
            "every", every, "give one of every=SECONDS and cron=EXPRESSION, not both or neither"
        )
    if every is not None and (
        isinstance(every, bool)
        or not isinstance(every, int | float)
        or not math.isfinite(every)
        or every <= 0
    ):
        raise InvalidOptions("every", every, "a number of seconds > 0, such as every=3600")
    if cron is not None:
        if not isinstance(cron, str):
            raise InvalidOptions("cron", cron, "a cron expression (a str), such as '0 9 * * 1-5'")
        try:
            CronSim(cron, datetime.now(UTC))
        except CronSimError as exc:
            raise InvalidOptions("cron", cron, f"not a cron expression: {exc}") from None
    if overlap not in _OVERLAPS:
        raise InvalidOptions("overlap", overlap, "'skip' or 'queue'")


def first_due(every: float | None, cron: str | None, now: float) -> float:
    """When a schedule made at ``now`` fires first: one period on, or cron's next time."""
    return next_due(every, cron, now, now)


def next_due(every: float | None, cron: str | None, due: float, now: float) -> float:
    """The first time after ``now`` at which a schedule that was due at ``due`` fires again.
    Fires missed while no program ran the agent are not made up: one fire stands for them."""
    if every is not None:
        return due + every * (math.floor((now - due) / every) + 1)
    assert cron is not None
    return next(CronSim(cron, datetime.fromtimestamp(now, UTC))).timestamp()


def fire_key(schedule: Schedule) -> str:
    """The idempotency key of the fire due at ``schedule.next_due``: whichever program fires
    it, and however often it tries (a restart between the fire and its record), one request
    is stored for it."""
    return f"schedule:{schedule.id}:{schedule.next_due!r}"


_ANCHOR: trio.lowlevel.RunVar[float] = trio.lowlevel.RunVar("agentrt_schedule_anchor")


def wall_now() -> float:
    """Wall clock seconds, moved by trio's clock: ``time.time()`` when first read in this
    trio run, then on by the time trio's clock has moved. A schedule's times are stored as
    wall time, and its fires wait on trio's clock, so a ``MockClock`` moves them exactly
    (and a stepped wall clock does not make a schedule fire twice or skip)."""
    try:
        anchor = _ANCHOR.get()
    except LookupError:
        anchor = time.time() - trio.current_time()
        _ANCHOR.set(anchor)
    return anchor + trio.current_time()
