"""Requests to an agent: their refs, their lifecycle, and what ``poll`` reports about them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import attrs
import trio

from ._errors import AgentRTError
from ._events import Response

if TYPE_CHECKING:
    from ._stream import Subscriber

# Where a request came from: the application (``ask``, ``tell``), the agent's own chained
# prompt (``self_chain``), or its warm CLI, which started the turn by itself (``task``: a
# background task ended, and the CLI runs the model on its notification), or one of its
# schedules (``schedule``: `Runtime.schedule`), or a wake-up its CLI scheduled and agentrt
# stored (``wakeup``), or a fire of a cron job its CLI made and agentrt stored (``cron``).
Origin = Literal["ask", "tell", "self_chain", "task", "schedule", "wakeup", "cron"]

# The origins a stored schedule (its ``origin``) and a stored request keep, read back from
# the store's text: a schedule's fires are requests of its own origin, and a stored
# request another program runs keeps its origin (any other is read as the caller decides).
STORED_ORIGINS: dict[str, Origin] = {"schedule": "schedule", "wakeup": "wakeup", "cron": "cron"}


@attrs.frozen(cache_hash=True)
class Ref:
    """Names one request (an ask, a tell, or a prompt an agent chained to itself)."""

    name: str
    id: int


def ref_of(name: str, stored_id: str) -> Ref | None:
    """The `Ref` of the stored request ``stored_id``; None for an id the runtime did not
    make (written through the store's API by other code: it runs, but has no `Ref`)."""
    return Ref(name, int(stored_id)) if stored_id.isdecimal() else None


@attrs.frozen
class Pending:
    """The request is queued or running."""


@attrs.frozen
class Completed:
    """The request's turn succeeded."""

    response: Response


@attrs.frozen
class Failed:
    """The request's turn failed (`TurnFailed`), its agent stopped (`AgentStopped`), or
    the runtime running it died mid-turn (`OwnerDied`, on a store that keeps requests)."""

    error: AgentRTError


@attrs.frozen
class Withdrawn:
    """The request was withdrawn while queued (`Runtime.withdraw`)."""


@attrs.frozen
class NotFound:
    """No such request, or its result was evicted (``max_results`` / ``max_result_bytes``)."""


PollResult = Pending | Completed | Failed | Withdrawn | NotFound
Settled = Completed | Failed | Withdrawn


@attrs.define(eq=False)
class Request:
    """One prompt on its way through an agent's mailbox."""

    ref: Ref
    prompt: str
    size: int  # UTF-8 bytes of the prompt, counted against max_pending_bytes
    origin: Origin
    outcome: Response | AgentRTError | None = None
    cancelled: bool = False
    # The asking caller was cancelled once the request was taken: its turn is stopped (or
    # never starts) and nobody wants the result.
    abandoned: bool = False
    # The tasks in `wait` (made by the first waiter), rescheduled by `Mailbox.settle`: most
    # requests have one, their asker, parked without a `trio.Event` of its own.
    waiters: list[trio.lowlevel.Task] | None = None
    subscriptions: list[Subscriber] | None = None
    # The OpenTelemetry context the request was made in: its span parents the turn's.
    trace_context: object = None
    # On a store that keeps requests (`agentrt._durable`): its id there, and whether this
    # owner has claimed it (it runs under this lease epoch; a put-back one keeps its claim).
    stored_id: str | None = None
    claimed: bool = False
    # What the store settled it as when it refused this owner's settlement (its lease had
    # passed, and the new owner ended it `OwnerDied`): its callers get that, as all do.
    overruled: AgentRTError | None = None
    # Its idempotency key, if it has one (shown by `status`).
    key: str | None = None
    # When it was accepted (trio's clock; `status` shows the oldest queued one's age).
    accepted_at: float = 0.0

    @property
    def settled(self) -> bool:
        return self.cancelled or self.outcome is not None

    def result(self) -> Settled:
        if self.cancelled:
            return Withdrawn()
        outcome = self.outcome
        assert outcome is not None
        if isinstance(outcome, Response):
            return Completed(outcome)
        return Failed(outcome)

    async def wait(self) -> None:
        """Until `Mailbox.settle` settles it (at once, without a checkpoint, if it has)."""
        if self.settled:
            return
        task = trio.lowlevel.current_task()
        waiters = self.waiters
        if waiters is None:
            waiters = self.waiters = []
        waiters.append(task)

        def abort(_: object) -> trio.lowlevel.Abort:
            waiters.remove(task)
            return trio.lowlevel.Abort.SUCCEEDED

        await trio.lowlevel.wait_task_rescheduled(abort)
