"""What a turn asks of its agent (the `TurnHost` shape `agentrt._turn.Turn` talks to):
the recorder's claim and checkpoint, the delivery of its events to the agent's
``handle_stream_event`` and the ask's subscribers, and the agent's answers to its live CLI.

Made per turn, so an idle agent holds none; a read calls ``deliver`` and ``watched``
directly, so it costs no extra call."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence

from . import _approvals
from ._asks import Ask
from ._callbacks import Callbacks
from ._events import ErrorEvent, Event, SessionLostEvent, StopReason
from ._recorder import Recorder
from ._slot import Slot
from ._stores._protocols import ApprovalStore


class AgentTurnHost:
    """The actor's side of one turn of ``slot``'s agent."""

    __slots__ = (
        "_approvals",
        "_callbacks",
        "_crashed",
        "_handler",
        "_runtime_id",
        "_slot",
        "_timeout",
        "checkpoint",
        "started",
    )

    def __init__(
        self,
        slot: Slot,
        recorder: Recorder,
        callbacks: Callbacks,
        approvals: ApprovalStore | None,
        runtime_id: str,
        approval_timeout: float,
        crashed: Callable[[_approvals.Crash], None],
    ) -> None:
        self._slot = slot
        self._callbacks = callbacks
        self._approvals = approvals
        self._runtime_id = runtime_id
        self._timeout = approval_timeout
        # approve_tool or handle_hook failed: the actor ends the turn, and itself after it.
        self._crashed = crashed
        self.started = recorder.started
        self.checkpoint = recorder.checkpoint
        self._handler: Callable[[Event], Awaitable[None] | None] | None = (
            callbacks.agent.handle_stream_event
            if "handle_stream_event" in callbacks.overrides
            else None
        )

    def watched(self) -> bool:
        """Whether anything looks at the turn's events as they come."""
        if self._handler is not None:
            return True
        request = self._slot.current
        return request is not None and bool(request.subscriptions)

    async def deliver(self, events: Sequence[Event]) -> None:
        # The events of one read, recorded by the turn: this awaits only what must be
        # waited for (an async handler, a full subscriber), so a read costs one await
        # however many lines it held.
        handler = self._handler
        for event in events:
            # By identity: isinstance on a msgspec Struct class is slow, and this is per event.
            if type(event) is ErrorEvent and event.reason is StopReason.SESSION_LOST:
                lost = event.session_id or self._slot.session_id
                if lost is not None:
                    await self.deliver(
                        (SessionLostEvent(timestamp=event.timestamp, session_id=lost),)
                    )
            if handler is not None:
                result = handler(event)
                if inspect.isawaitable(result):
                    await result
            request = self._slot.current
            subscriptions = request.subscriptions if request is not None else None
            if subscriptions and not event.is_terminal:
                for subscription in tuple(subscriptions):
                    sent = subscription.send_nowait(event)
                    if sent is None:  # its buffer is full: the turn waits for the reader
                        sent = await subscription.send(event)
                    if not sent:
                        subscriptions.remove(subscription)

    async def answer(self, ask: Ask) -> tuple[bytes, Sequence[Event]]:
        current = self._slot.current
        operators = _approvals.Operators(
            self._approvals, self._runtime_id, None if current is None else current.ref.id
        )
        reply, events, crash = await _approvals.answer(
            ask, self._callbacks.call, self._timeout, self._slot.name, operators
        )
        if crash is not None:
            self._crashed(crash)
        return reply, events
