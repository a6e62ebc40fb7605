"""The owner's side of the schedules (`Runtime.schedule`): one task per runtime fires the
schedules of the agents this runtime owns when they are due, each fire a request of origin
``schedule`` through the agent's mailbox (stored first, on a store that keeps requests); a
cron job the agent's CLI made fires the same way, a request of origin ``cron``; a wake-up
the agent's CLI scheduled (a one-shot schedule of origin ``wakeup``), and a one-shot cron
job, fires once, a request of its origin, and is dropped.

Each fire happens once, whichever program fires it: on a store that keeps requests its
request is stored under a key made of the schedule's id and the due time (`fire_key`), so a
program that fires a due time again (it died between the fire and its record, or two
programs owned the agent for a moment) finds the request stored already; and the record of
the fire is conditional on that due time, so the next due time is written once. Only the
owner of an agent fires its schedules, so on a store several programs share, the program
that owns the agent after a restart or a failover fires what came due meanwhile (once: the
missed fires of a period are not made up).

The due times wait on trio's clock (`wall_now`), so a ``MockClock`` fires them exactly.
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING

import trio

from ._errors import AgentRTError, MailboxFull
from ._redact import redact
from ._requests import STORED_ORIGINS, Origin, Pending
from ._schedule import Schedule, fire_key, next_due, wall_now
from ._stores._schedule_store import ScheduleStore

if TYPE_CHECKING:
    from ._supervisor import Context

logger = logging.getLogger("agentrt")

# How often the scheduler reads the store, at most, while its agents have schedules:
# another program may add or make due a schedule of an agent this one owns.
STORE_READ = 1.0
# How often it reads a store other programs share while none of its agents has a schedule
# (the schedules of other programs' agents are none of its work): an idle owner reads it
# 12 times a minute, not 60. A schedule is first due a period from its add, so another
# program's first schedule of its agent fires late only when due sooner than this: made
# due at once (run now), or a shorter period.
IDLE_READ = 5.0


class Scheduler:
    """Fires the due schedules of the agents of ``context`` (a runtime) kept in ``store``,
    until the runtime closes; ``poke`` makes it read the store at once (a schedule was added
    or made due here, or an agent started, which may have schedules stored)."""

    def __init__(self, context: Context, store: ScheduleStore) -> None:
        self._context = context
        self._store = store
        # Whether the store keeps requests: a fire is then stored under its key.
        self._durable = context.capabilities.requests is not None
        # Whether other programs may add schedules to it: then it is read while it has none.
        leases = context.capabilities.leases
        self._shared = leases is not None and leases.shared_between_programs
        self._poked = trio.Event()

    def poke(self) -> None:
        self._poked.set()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            self._poked = trio.Event()
            wait = await self._fire_due()
            with trio.move_on_after(wait):
                await self._poked.wait()

    async def _fire_due(self) -> float:
        """Fire what is due of this runtime's agents' schedules; how long to wait before
        looking again."""
        try:
            kept = await self._store.schedules()
        except AgentRTError as exc:
            # Read again at the next interval, as the lease renewals do through an outage.
            logger.warning("the schedules could not be read: %s", redact(str(exc)))
            return STORE_READ
        if not kept:
            return IDLE_READ if self._shared else math.inf
        soonest = math.inf
        children = self._context.children
        owned = False
        for schedule in kept:
            if self._context.closed or schedule.name not in children:
                continue
            owned = True
            if schedule.next_due <= wall_now():
                try:
                    await self._fire(schedule)
                except AgentRTError as exc:
                    why = redact(str(exc))
                    extra = {"agent": schedule.name}
                    logger.warning("schedule %s did not fire: %s", schedule.id, why, extra=extra)
                continue
            soonest = min(soonest, schedule.next_due - wall_now())
        return min(soonest, STORE_READ if owned else IDLE_READ)

    async def _fire(self, schedule: Schedule) -> None:
        origin = STORED_ORIGINS.get(schedule.origin, "schedule")
        if schedule.every is None and schedule.cron is None:
            await self._wake(schedule, origin)
            return
        agent = self._context.children[schedule.name].address()
        now = wall_now()
        following = next_due(schedule.every, schedule.cron, schedule.next_due, now)
        last = schedule.last_ref
        fired: str | None = None
        try:
            running = last is not None and isinstance(await agent.poll(last), Pending)
            if not (running and schedule.overlap == "skip"):
                key = fire_key(schedule) if self._durable else None
                fired = str((await agent._submit(schedule.prompt, origin, key)).id)
        finally:
            # A fire that failed (its agent's mailbox is full, say) is not made up: the
            # due time passes, the next one stands.
            await self._store.record_schedule_fire(
                schedule.name,
                schedule.id,
                due=schedule.next_due,
                next_due=following,
                fired_at=None if fired is None else now,
                request=fired,
            )

    async def _wake(self, wakeup: Schedule, origin: Origin) -> None:
        """Fire a one-shot schedule (a wake-up the agent's CLI scheduled, or a one-shot cron
        job it made) once: its request is stored under its fire key (a program that dies
        before the drop fires it again and finds it), and it is dropped, fired or not. Not a
        wake-up while the warm CLI that scheduled it lives: that CLI fires it itself, and its
        turn drops this copy (`Actor`); once that CLI has ended, the next read of the store
        fires it here. Nor while the agent's mailbox is full (`MailboxFull`): it fires at a
        later read that finds room."""
        child = self._context.children[wakeup.name]
        channel = child.slot.channel
        if channel is not None and channel.holds_wakeup(wakeup.id):
            return  # the live CLI that scheduled it fires it (its turn drops this copy)
        agent = child.address()
        key = fire_key(wakeup) if self._durable else None
        full = False
        try:
            await agent._submit(wakeup.prompt, origin, key)
        except MailboxFull:
            # Kept: dropped, a one-shot would never fire. A later read of the store that
            # finds room in the mailbox fires it.
            full = True
            raise
        finally:
            if not full:
                await self._store.drop_schedule(wakeup.name, wakeup.id)
