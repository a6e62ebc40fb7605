"""An agent's schedules in the store, as the `Runtime`'s calls change them (`Runtime.schedule`
and its kin) on any program: added, listed, made due now and removed; and the wake-ups and
cron jobs an agent's CLI scheduled, added (and the jobs removed) as its turn ends. Firing
them is the owner's (`agentrt._scheduler`)."""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

from ._arguments import check_prompt, wrong_type
from ._durable import check_key, new_stored_id
from ._errors import InvalidOptions, StoreError
from ._redact import redact
from ._schedule import Schedule, check_schedule, first_due, wall_now
from ._stores._protocols import SessionStore, lacks
from ._stores._schedule_store import ScheduleStore
from .backend import CronBackend, CronDeleted, WakeupBackend

if TYPE_CHECKING:
    from ._events import Response
    from .backend import Backend, CronRequested, WakeupRequested

logger = logging.getLogger("agentrt")


def schedule_store(store: SessionStore, argument: str, value: object) -> ScheduleStore:
    """``store`` as a `ScheduleStore`; `InvalidOptions` naming ``argument`` if it is none."""
    if not isinstance(store, ScheduleStore):
        raise InvalidOptions(argument, value, lacks(store, ScheduleStore, "a schedule"))
    return store


async def add(
    store: SessionStore,
    name: str,
    prompt: str,
    every: float | None,
    cron: str | None,
    overlap: str,
    key: str | None,
) -> Schedule:
    """Keep a new schedule of ``name`` (see `Runtime.schedule`), first due one period (or
    cron's next time) from now."""
    check_prompt(prompt)
    check_schedule(every, cron, overlap)
    check_key(key)
    kept = schedule_store(store, "every" if cron is None else "cron", every or cron)
    now = wall_now()
    schedule = Schedule(
        id=new_stored_id(),
        name=name,
        prompt=prompt,
        every=None if every is None else float(every),
        cron=cron,
        overlap=overlap,
        key=key,
        created_at=now,
        next_due=first_due(every, cron, now),
    )
    return await kept.add_schedule(schedule)


async def add_wakeup(store: ScheduleStore, name: str, wakeup: WakeupRequested) -> Schedule:
    """Keep the wake-up ``wakeup`` that agent ``name``'s CLI scheduled: a schedule of origin
    ``wakeup`` due ``wakeup.due_in`` seconds from now, that fires once."""
    now = wall_now()
    schedule = Schedule(
        id=new_stored_id(),
        name=name,
        prompt=wakeup.prompt,
        every=None,
        cron=None,
        overlap="queue",
        key=None,
        created_at=now,
        next_due=now + wakeup.due_in,
        origin="wakeup",
    )
    return await store.add_schedule(schedule)


async def add_cron(store: ScheduleStore, name: str, cron: CronRequested) -> Schedule:
    """Keep the cron job ``cron`` that agent ``name``'s CLI made: a schedule of origin
    ``cron`` under the key ``cron:<the CLI's id>``, first due at the expression's next time.
    A recurring one keeps ``cron`` (a fire that comes while the last is queued or running
    is skipped); a one-shot one has neither ``every`` nor ``cron``, and fires once."""
    check_schedule(None, cron.cron, "skip")
    now = wall_now()
    schedule = Schedule(
        id=new_stored_id(),
        name=name,
        prompt=cron.prompt,
        every=None,
        cron=cron.cron if cron.recurring else None,
        overlap="skip" if cron.recurring else "queue",
        key=cron_key(cron.cron_id),
        created_at=now,
        next_due=first_due(None, cron.cron, now),
        origin="cron",
    )
    return await store.add_schedule(schedule)


def cron_key(cron_id: str) -> str:
    """The key of the schedule that keeps the CLI's cron job ``cron_id``."""
    return f"cron:{cron_id}"


async def drop_cron(store: ScheduleStore, name: str, cron_id: str) -> bool:
    """Remove the schedule that keeps agent ``name``'s CLI's cron job ``cron_id``; False if
    there is none (a job of a warm CLI, which agentrt does not keep, say)."""
    for schedule in await store.schedules(name):
        if schedule.origin == "cron" and schedule.key == cron_key(cron_id):
            return await store.drop_schedule(name, schedule.id)
    return False


async def keep_cli_schedules(
    store: ScheduleStore | None, backend: Backend, name: str, response: Response, *, warm: bool
) -> tuple[list[Schedule], bool]:
    """Store the wake-ups the CLI of agent ``name`` scheduled in the turn of ``response``
    and, unless it is ``warm``, the cron jobs it made, dropping those it deleted
    (`WakeupBackend`, `CronBackend`), so that whichever program owns the agent when one is
    due runs it, though the CLI that scheduled it is gone. A warm CLI fires its own cron
    jobs while it lives, and agentrt keeps none of them (stored too, they would run
    twice); it holds its wake-ups while it lives (`CliLifecycle.hold_wakeups`). Returns
    the wake-ups stored, and whether any schedule changed. One the store could not take
    is lost, and logged, as is a cron expression agentrt does not read."""
    if store is None:
        return [], False
    woken: list[Schedule] = []
    changed = False
    extra = {"agent": name}
    schedules_wakeups, makes_crons = _schedule_kinds(type(backend))
    if schedules_wakeups:
        for wakeup in cast(WakeupBackend, backend).wakeups(response.events):
            try:
                woken.append(await add_wakeup(store, name, wakeup))
            except StoreError as exc:
                logger.warning("a wake-up was not stored: %s", redact(str(exc)), extra=extra)
    if not warm and makes_crons:
        for cron in cast(CronBackend, backend).crons(response.events):
            try:
                if isinstance(cron, CronDeleted):
                    changed |= await drop_cron(store, name, cron.cron_id)
                else:
                    await add_cron(store, name, cron)
                    changed = True
            except (StoreError, InvalidOptions) as exc:
                logger.warning("a cron job was not kept: %s", redact(str(exc)), extra=extra)
    return woken, changed or bool(woken)


@functools.cache
def _schedule_kinds(kind: type) -> tuple[bool, bool]:
    # Whether a backend of this class is a `WakeupBackend` and a `CronBackend`, once per
    # class: the check against a runtime-checkable protocol looks up each of its members
    # (5 µs of CPU a match, 10 a miss, on Python 3.11), and every turn's end asked both.
    return issubclass(kind, WakeupBackend), issubclass(kind, CronBackend)


async def drop_woken(store: ScheduleStore | None, name: str, schedule_id: str) -> None:
    """Drop the stored copy of a wake-up the agent's live CLI fired itself; logged if the
    store fails (the copy then fires again once that CLI has ended)."""
    if store is None:
        return
    try:
        await store.drop_schedule(name, schedule_id)
    except StoreError as exc:
        why = redact(str(exc))
        logger.warning("a fired wake-up was not dropped: %s", why, extra={"agent": name})


async def of(store: SessionStore, name: str) -> Sequence[Schedule]:
    """The schedules of ``name``, oldest first; none on a store that keeps none."""
    if not isinstance(store, ScheduleStore):
        return ()
    return await store.schedules(name)


def _check_id(schedule_id: object) -> str:
    if not isinstance(schedule_id, str):
        raise wrong_type("schedule_id", "a str (a Schedule's id)", schedule_id)
    return schedule_id


async def drop(store: SessionStore, name: str, schedule_id: str) -> bool:
    """Remove the schedule ``schedule_id`` of ``name``; False if there is none."""
    id = _check_id(schedule_id)
    return await schedule_store(store, "schedule_id", id).drop_schedule(name, id)


async def due_now(store: SessionStore, name: str, schedule_id: str) -> bool:
    """Make the schedule ``schedule_id`` of ``name`` due now; False if there is none."""
    id = _check_id(schedule_id)
    kept = schedule_store(store, "schedule_id", id)
    return await kept.make_schedule_due(name, id, wall_now())
