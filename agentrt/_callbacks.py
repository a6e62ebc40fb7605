"""An agent's callbacks as its actor calls them: awaited when they are async, a decision's
return checked to be a `Reaction`, and a failure either crashing the agent (`AgentCrashed`,
for a decision) or logged and contained (``handle_error``); and the state its
``checkpoint_state`` returns, encoded for the store and given back by ``restore_state``."""

from __future__ import annotations

import inspect
from typing import Any

import attrs
import msgspec

from ._agent import Agent, Halt, Prompt, Reaction, Stop, overridden
from ._logs import log_error
from ._redact import redact

_state_encoder = msgspec.json.Encoder()


class AgentCrashed(Exception):
    """A callback of the agent raised (or returned something invalid): the actor ends."""

    def __init__(self, callback: str, error: Exception) -> None:
        self.callback = callback
        self.error = error
        super().__init__(redact(f"{callback} raised {type(error).__name__}: {error}"))


def _reaction(callback: str, value: object) -> Reaction:
    if value is None or isinstance(value, Prompt | Halt | Stop):
        return value
    raise TypeError(f"{callback} returned {value!r}; expected Prompt, Halt, Stop or None")


def encode_state(value: Any) -> bytes | None:
    """The store blob of what ``checkpoint_state`` returned (None: nothing to keep)."""
    return None if value is None else _state_encoder.encode(value)


async def restore_state(agent: Agent, blob: bytes) -> None:
    """Give ``agent`` its checkpointed state back, decoded as its ``state_type``."""
    if "restore_state" in overridden(type(agent)):
        result = agent.restore_state(msgspec.json.decode(blob, type=type(agent).state_type))
        if inspect.isawaitable(result):
            await result


@attrs.define(eq=False)
class Callbacks:
    """The callbacks of one actor's agent; one the agent does not override is not called."""

    agent: Agent
    # The agent's name, for the log.
    name: str
    # The callbacks its class overrides (`agentrt._agent.overridden`).
    overrides: frozenset[str]

    async def call(self, name: str, *args: Any) -> Any:
        result = getattr(self.agent, name)(*args)
        if inspect.isawaitable(result):
            result = await result
        return result

    async def decide(self, name: str, *args: Any) -> Reaction:
        """Call a callback whose failure crashes the agent."""
        if name not in self.overrides:
            return None
        try:
            return _reaction(name, await self.call(name, *args))
        except Exception as exc:
            raise AgentCrashed(name, exc) from exc

    async def contained(self, name: str, *args: Any) -> Reaction:
        """Call a callback whose failure is logged and otherwise ignored."""
        if name not in self.overrides:
            return None
        try:
            return _reaction(name, await self.call(name, *args))
        except Exception as exc:
            log_error(f"agent {self.name!r}: {name} raised; the agent goes on", exc)
            return None
