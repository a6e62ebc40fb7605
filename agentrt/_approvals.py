"""The agent's answer to what its live CLI asks: a tool approval (``approve_tool``) or a hook
(``handle_hook``), within ``approval_timeout``.

An answer that does not come in time is none (the tool is denied, the hook goes on). One
that raises, or is of another type, is none too, and is a crash: `answer` returns it, and
the actor ends the turn now and crashes once the turn is over.

``approve_tool`` may hand the request to a person (`AskOperator`): it waits in the store
(`ApprovalStore`) until a console decides it, within what is left of the same bound.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, NamedTuple

import attrs
import trio

from ._asks import (
    AddContext,
    Allow,
    Answers,
    Ask,
    AskOperator,
    Block,
    Decision,
    Deny,
    HookAnswer,
    ToolApproval,
    ToolRequest,
)
from ._events import Event, ToolDecisionEvent
from ._records import OperatorDecision, PendingApproval
from ._redact import redact
from ._stores._protocols import ApprovalStore

logger = logging.getLogger("agentrt")

# Calls the agent's callback of that name with the question (awaiting it if it is async).
Call = Callable[[str, Any], Awaitable[Any]]

_DECISIONS = (Allow, Deny, Answers, AskOperator)
# How often a request waiting for a person looks for its decision in the store.
OPERATOR_POLL = 0.25
# Bound on taking a request's row away as its wait ends (cancelled too).
_REMOVE_GRACE = 10.0


@attrs.frozen
class Operators:
    """Where a request handed to a person waits: the agent's store (None: it has no
    `ApprovalStore` methods), the runtime's id and the request the turn runs for."""

    store: ApprovalStore | None
    runtime_id: str
    request: int | None


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


async def answer(
    ask: Ask, call: Call, within: float, agent: str, operators: Operators | None = None
) -> Answer:
    """Ask ``agent`` (by ``call``) what to answer ``ask``, waiting at most ``within``
    seconds (its ``approval_timeout``), a person too if it hands the request on."""
    if isinstance(ask, ToolApproval):
        deadline = trio.current_time() + within
        decision, by, crash = await _ask_agent(call, "approve_tool", ask.request, within, agent)
        if isinstance(decision, AskOperator):
            asked = decision
            decision, by = await _ask_operator(asked, ask.request, deadline, agent, operators)
            if decision is None and asked.default is not None:
                decision, by = asked.default, "default"
        if decision is None:
            decision = Deny(f"the agent did not allow the tool ({by})")
        assert isinstance(decision, Allow | Deny | Answers)
        request = ask.request
        event = ToolDecisionEvent(
            tool_use_id=request.tool_use_id,
            tool_name=request.tool_name,
            allowed=not isinstance(decision, Deny),
            message=decision.message if isinstance(decision, Deny) else None,
            updated_input=(
                decision.updated_input
                if isinstance(decision, Allow)
                else {"answers": dict(decision.answers)}
                if isinstance(decision, Answers)
                else None
            ),
            decided_by=by,
        )
        return Answer(ask.answer(decision), (event,), crash)
    reply, _, crash = await _ask_agent(call, "handle_hook", ask.hook, within, agent)
    assert reply is None or isinstance(reply, Block | AddContext)
    return Answer(ask.answer(reply), (), crash)


async def _ask_agent(
    call: Call, name: str, question: Any, within: float, agent: str
) -> tuple[Decision | AskOperator | HookAnswer, str, Crash | None]:
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


async def _ask_operator(
    asked: AskOperator,
    request: ToolRequest,
    deadline: float,
    agent: str,
    operators: Operators | None,
) -> tuple[Allow | Deny | None, str]:
    # The person's decision and who made it; (None, "timeout") when none came in time.
    if operators is None or operators.store is None:
        message = "approve_tool asked for an operator, but the store keeps no approvals"
        logger.warning("agent %r: %s", agent, message, extra={"agent": agent})
        return Deny(message), "error"
    store = operators.store
    now = time.time()
    pending = PendingApproval(
        id=uuid.uuid4().hex,
        name=agent,
        tool_name=request.tool_name,
        tool_use_id=request.tool_use_id,
        input=redact(json.dumps(request.input, default=str)),
        reason=redact(str(asked.reason)),
        runtime_id=operators.runtime_id,
        request=operators.request,
        requested_at=now,
        expires_at=now + max(0.0, deadline - trio.current_time()),
    )
    decided: OperatorDecision | None = None
    await store.put_approval(pending)
    try:
        with trio.move_on_at(deadline):
            # Polled: a decision may be made by another program on the store.
            while True:
                decided = await store.decision_of(pending.id)
                if decided is not None:
                    break
                await trio.sleep(OPERATOR_POLL)
    finally:
        # The row goes with the decision it holds: one that came as the bound ran out
        # still counts, one that comes after it is refused (the row is gone).
        with trio.move_on_after(_REMOVE_GRACE, shield=True):
            decided = await store.remove_approval(pending.id)
    if decided is None:
        return None, "timeout"
    if not decided.allowed:
        return Deny(decided.message or "the operator denied it"), decided.decided_by
    if decided.updated_input is None:
        return Allow(), decided.decided_by
    try:
        updated = json.loads(decided.updated_input)
    except ValueError:
        return Deny("the operator's edited input is not JSON"), decided.decided_by
    return Allow(updated_input=updated), decided.decided_by
