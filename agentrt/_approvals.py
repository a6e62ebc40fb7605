"""The agent's answer to what its live CLI asks: a tool approval (``approve_tool``) or a hook
(``handle_hook``), within ``approval_timeout``.

An answer that does not come in time is none (the tool is denied, the hook goes on). One
that raises, or is of another type, is none too, and is a crash: `answer` returns it, and
the actor ends the turn now and crashes once the turn is over.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, NamedTuple

import trio

from ._asks import AddContext, Allow, Ask, Block, Decision, Deny, HookAnswer, ToolApproval
from ._events import Event, ToolDecisionEvent

logger = logging.getLogger("agentrt")

# Calls the agent's callback of that name with the question (awaiting it if it is async).
Call = Callable[[str, Any], Awaitable[Any]]

_DECISIONS = (Allow, Deny)
_HOOK_ANSWERS = (Block, AddContext, type(None))


class Crash(NamedTuple):
    """A callback that failed to answer: its name and what it raised."""

    callback: str
    error: Exception


class Answer(NamedTuple):
    """What the CLI is told, the events that record it, and a callback's crash, if any."""

    reply: bytes
    events: Sequence[Event]
    crash: Crash | None


async def answer(ask: Ask, call: Call, within: float, agent: str) -> Answer:
    """Ask ``agent`` (by ``call``) what to answer ``ask``, waiting at most ``within``
    seconds (its ``approval_timeout``)."""
    if isinstance(ask, ToolApproval):
        decision, by, crash = await _ask_agent(call, "approve_tool", ask.request, within, agent)
        if decision is None:
            decision = Deny(f"the agent did not allow the tool ({by})")
        assert isinstance(decision, Allow | Deny)
        request = ask.request
        event = ToolDecisionEvent(
            tool_use_id=request.tool_use_id,
            tool_name=request.tool_name,
            allowed=isinstance(decision, Allow),
            message=decision.message if isinstance(decision, Deny) else None,
            updated_input=decision.updated_input if isinstance(decision, Allow) else None,
            decided_by=by,
        )
        return Answer(ask.answer(decision), (event,), crash)
    reply, _, crash = await _ask_agent(call, "handle_hook", ask.hook, within, agent)
    assert reply is None or isinstance(reply, Block | AddContext)
    return Answer(ask.answer(reply), (), crash)


async def _ask_agent(
    call: Call, name: str, question: Any, within: float, agent: str
) -> tuple[Decision | HookAnswer, str, Crash | None]:
    # The answer, who gave it (the callback, "timeout" or "error"), and the crash.
    answers = _DECISIONS if name == "approve_tool" else _HOOK_ANSWERS
    with trio.move_on_after(within):
        try:
            value = await call(name, question)
            if not isinstance(value, answers):
                names = ("None" if t is type(None) else t.__name__ for t in answers)
                expected = " or ".join(names)
                raise TypeError(f"{name} returned {value!r}; expected {expected}")
        except Exception as exc:
            return None, "error", Crash(name, exc)
        return value, name, None
    logger.warning(
        "agent %r: %s did not answer within approval_timeout (%g s)",
        agent,
        name,
        within,
        extra={"agent": agent},
    )
    return None, "timeout", None
