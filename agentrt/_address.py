"""One address per agent name: what a call naming an agent reaches, in this runtime or in the
one that owns it.

A name resolves once, to a `LocalAgent` (an agent of this runtime: made with its `Child`,
so resolving is one dict lookup) or a `RemoteAgent` (the agent another runtime owns, on a
store that routes calls). Both have the same async methods, so every `Runtime` call is
written once. They are async by trio's rule: a call that may reach another node may wait,
and every one of them checkpoints. ``stream`` alone is synchronous: it returns the async
iterator of events, which for a remote agent reads them with routed ``events`` calls
(`agentrt._follow`).

The owner's side of a routed call is `ROUTED`: the `LocalAgent` method each call kind runs.
The operations themselves are declared in `agentrt._operations`, and both classes are held
against that declaration by a test.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol, cast, final

import trio

from ._arguments import check_prompt, wrong_type
from ._channel import ContextUsage
from ._errors import AgentNotFound
from ._events import Response
from ._follow import EncodedBatch, FollowedStream, ended
from ._operations import ROUTED_CALLS
from ._requests import Completed, Failed, NotFound, Pending, PollResult, Ref, Settled, Withdrawn
from ._slot import Slot
from ._status import AgentStatus
from ._stores._protocols import Router
from ._stores._route_codec import check_event
from ._stream import EventStream


class Member(Protocol):
    """An agent name of this runtime, across its instances (a `Child`)."""

    @property
    def slot(self) -> Slot: ...

    async def stop(self) -> None: ...


class Addressed(Protocol):
    def address(self) -> LocalAgent: ...


def resolve(
    children: Mapping[str, Addressed], router: Router | None, name: str
) -> LocalAgent | RemoteAgent:
    """The address of agent ``name``: this runtime's agent, or else (on a store that routes
    calls) the one another runtime owns; `AgentNotFound` on a store that does not."""
    if not isinstance(name, str):
        raise wrong_type("name", "a str", name)
    child = children.get(name)
    if child is not None:
        return child.address()
    if router is None:
        raise AgentNotFound(name, "in this runtime, whose store routes no calls to others")
    return RemoteAgent(router, name)


@final
class LocalAgent:
    """An agent of this runtime: each call acts on its `Slot` (the one owner of its state)."""

    __slots__ = ("_grace", "_member", "_slot")

    def __init__(self, member: Member, cancel_grace: float) -> None:
        self._member = member
        self._slot = member.slot
        # Bound on a cancelled ask's shielded wait for its turn's processes to be gone.
        self._grace = cancel_grace

    async def ask(self, prompt: str) -> Response:
        slot = self._slot
        request = slot.submit(prompt, "ask")
        try:
            await request.wait()
        except BaseException:
            turn_over = slot.abandon(request)
            if turn_over is not None:
                with trio.move_on_after(self._grace, shield=True):
                    await turn_over.wait()
            raise
        outcome = request.outcome
        if isinstance(outcome, Response):
            return outcome
        assert outcome is not None
        raise outcome

    async def tell(self, prompt: str) -> Ref:
        await trio.lowlevel.checkpoint()
        return self._slot.submit(prompt, "tell").ref

    async def poll(self, ref: Ref) -> PollResult:
        await trio.lowlevel.checkpoint()
        return self._slot.mailbox.poll(ref)

    async def wait(self, ref: Ref) -> Settled | NotFound:
        mailbox = self._slot.mailbox
        request = mailbox.find(ref)
        if request is None:
            await trio.lowlevel.checkpoint()
            result = mailbox.poll(ref)
            assert not isinstance(result, Pending)
            return result
        await request.wait()
        return request.result()

    def stream(self, ref: Ref) -> EventStream:
        return self._slot.mailbox.subscribe(ref)

    async def events(self, ref: Ref, after: int) -> EncodedBatch:
        """A routed follower's read of the events of ``ref`` after number ``after``."""
        tap = self._slot.mailbox.tap(ref)
        if tap is None:
            await trio.lowlevel.checkpoint()
            return ended(after)
        return await tap.read(after)

    async def notify(self, event: Any) -> None:
        await trio.lowlevel.checkpoint()
        self._slot.notify(event)

    async def interrupt(self) -> bool:
        await trio.lowlevel.checkpoint()
        return self._slot.interrupt()

    async def interrupt_request(self, ref: Ref) -> bool:
        await trio.lowlevel.checkpoint()
        return self._slot.interrupt_request(ref)

    async def withdraw(self, ref: Ref) -> bool:
        await trio.lowlevel.checkpoint()
        return self._slot.withdraw(ref)

    async def halt(self) -> None:
        await trio.lowlevel.checkpoint()
        self._slot.halt()

    async def unhalt(self) -> None:
        await trio.lowlevel.checkpoint()
        self._slot.unhalt()

    async def reset_session(self) -> None:
        await self._slot.reset_session()

    async def status(self) -> AgentStatus:
        await trio.lowlevel.checkpoint()
        return self._slot.status()

    async def set_model(self, model: str | None) -> None:
        await self._slot.channel_call("set_model", model)

    async def set_permission_mode(self, mode: str) -> None:
        await self._slot.channel_call("set_permission_mode", mode)

    async def context_usage(self) -> ContextUsage | None:
        return cast(ContextUsage | None, await self._slot.channel_call("context_usage", None))

    async def stop_task(self, task_id: str) -> None:
        await self._slot.channel_call("stop_task", task_id)

    async def stop_agent(self) -> None:
        await self._member.stop()


@final
class RemoteAgent:
    """The agent named ``name`` that another runtime owns: each call is routed to it, and
    its answer (or its error) comes back."""

    __slots__ = ("_name", "_router")

    def __init__(self, router: Router, name: str) -> None:
        self._router = router
        self._name = name

    async def _call(self, call: str, *arguments: object) -> Any:
        return await self._router.call(self._name, call, arguments)

    async def ask(self, prompt: str) -> Response:
        return cast(Response, await self._call("ask", check_prompt(prompt)))

    async def tell(self, prompt: str) -> Ref:
        return cast(Ref, await self._call("tell", check_prompt(prompt)))

    async def poll(self, ref: Ref) -> PollResult:
        return cast(PollResult, await self._call("poll", ref))

    async def wait(self, ref: Ref) -> Settled | NotFound:
        return cast(Completed | Failed | Withdrawn | NotFound, await self._call("wait", ref))

    def stream(self, ref: Ref) -> EventStream:
        return FollowedStream(lambda after: self._call("events", ref, after))

    async def notify(self, event: Any) -> None:
        await self._call("notify", check_event(event))

    async def interrupt(self) -> bool:
        return cast(bool, await self._call("interrupt"))

    async def interrupt_request(self, ref: Ref) -> bool:
        return cast(bool, await self._call("interrupt_request", ref))

    async def withdraw(self, ref: Ref) -> bool:
        return cast(bool, await self._call("withdraw", ref))

    async def halt(self) -> None:
        await self._call("halt")

    async def unhalt(self) -> None:
        await self._call("unhalt")

    async def reset_session(self) -> None:
        await self._call("reset_session")

    async def status(self) -> AgentStatus:
        return cast(AgentStatus, await self._call("status"))

    async def set_model(self, model: str | None) -> None:
        await self._call("set_model", model)

    async def set_permission_mode(self, mode: str) -> None:
        await self._call("set_permission_mode", mode)

    async def context_usage(self) -> ContextUsage | None:
        return cast(ContextUsage | None, await self._call("context_usage"))

    async def stop_task(self, task_id: str) -> None:
        await self._call("stop_task", task_id)

    async def stop_agent(self) -> None:
        await self._call("stop_agent")


# The calls another runtime may route to an agent of this one (`ROUTED_CALLS`): the
# LocalAgent method each runs (a routed call is never routed on).
ROUTED: dict[str, Callable[..., Awaitable[object]]] = {
    call: getattr(LocalAgent, call) for call in ROUTED_CALLS
}
