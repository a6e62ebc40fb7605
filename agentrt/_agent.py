"""``class Agent``: the behaviour application code subclasses."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Mapping
from typing import Any

import attrs

from ._errors import TurnFailed
from ._events import Event, Response
from ._requests import Ref


@attrs.frozen
class Prompt:
    """Returned by a handler: run ``text`` as this agent's next turn, before queued work.

    Returned by ``pre_turn``: run ``text`` instead of the prompt it was given."""

    text: str


@attrs.frozen
class Halt:
    """Returned by a handler: stop taking turns (queued work waits) until ``resume``."""


Reaction = Prompt | Halt | None


class Agent:
    """Base class of an agent. Every callback is optional.

    A callback may be a plain or an ``async`` method. All of them run in the agent's own
    task, one at a time, so state kept on the instance needs no locking. The decision
    callbacks (``handle_response``, ``handle_error``, ``handle_event``) may return
    `Prompt` (chain another turn, ahead of queued work), `Halt`, or None.

    Errors: an exception in ``handle_stream_event`` fails the turn (``turn_crashed``,
    reported to ``handle_error``); in ``handle_error`` or ``terminate_agent`` it is
    logged (logger ``"agentrt"``, redacted) and the agent goes on; in any other callback
    (or a return value that is not `Prompt`, `Halt` or None) it stops the agent: the
    exception is logged, the agent leaves the registry, every waiting ask and tell fails
    with `AgentStopped` whose cause is the exception, and ``terminate_agent`` receives
    the exception.
    """

    def init_agent(self, **options: Any) -> Mapping[str, Any] | Awaitable[Mapping[str, Any]]:
        """Called once by ``start_agent`` with the options the runtime does not consume;
        returns the backend's options (by default, the options as given)."""
        return options

    def pre_turn(self, prompt: str) -> Prompt | Halt | Awaitable[Prompt | Halt | None] | None:
        """Before each turn: return `Prompt` to rewrite the prompt, `Halt` to halt with the
        request left at the head of the queue, or None to run it as is."""
        return None

    def handle_stream_event(self, event: Event) -> Awaitable[None] | None:
        """Every event of the running turn, as it arrives (the final one included)."""
        return None

    def handle_response(self, ref: Ref, response: Response) -> Reaction | Awaitable[Reaction]:
        """A turn succeeded."""
        return None

    def handle_error(self, ref: Ref, error: TurnFailed) -> Reaction | Awaitable[Reaction]:
        """A turn failed (timeout, interrupt, CLI error, ...)."""
        return None

    def post_turn(self, ref: Ref, outcome: Response | TurnFailed) -> Awaitable[None] | None:
        """After the decision callback of every turn, before the caller is answered."""
        return None

    def handle_event(self, event: Any) -> Reaction | Awaitable[Reaction]:
        """An event sent with ``notify``; while a turn runs it waits until the turn is over."""
        return None

    def terminate_agent(self, reason: str | BaseException) -> Awaitable[None] | None:
        """The agent is stopping: ``"stopped"``, ``"runtime closed"``, or the exception
        that stopped it. Bounded in time; not called if the process itself dies."""
        return None


CALLBACKS = (
    "pre_turn",
    "handle_stream_event",
    "handle_response",
    "handle_error",
    "post_turn",
    "handle_event",
    "terminate_agent",
)

_overrides: dict[type, frozenset[str]] = {}


def overridden(agent_class: type) -> frozenset[str]:
    """The callbacks ``agent_class`` overrides; the runtime skips the default no-ops."""
    found = _overrides.get(agent_class)
    if found is None:
        found = frozenset(
            name
            for name in CALLBACKS
            if inspect.getattr_static(agent_class, name) is not Agent.__dict__[name]
        )
        _overrides[agent_class] = found
    return found
