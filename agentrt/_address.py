"""One address per agent name: what a call naming an agent reaches, in this runtime or in the
one that owns it.

A name resolves once, to a `LocalAgent` (an agent of this runtime: made with its `Child`,
so resolving is one dict lookup) or a `RemoteAgent` (the agent another runtime owns, on a
store that routes calls). Both have the same async methods, so every `Runtime` call is
written once. They are async by trio's rule: a call that may reach another node may wait,
and every one of them checkpoints. ``stream`` and ``unsolicited`` are synchronous: each
returns an async iterator; ``stream``'s of events, which for a remote agent reads them with
routed ``events`` calls (`agentrt._follow`), and ``unsolicited``'s of the turns nobody asked
for, a local agent's only (a remote agent's refuses).

The operations are declared in `agentrt._operations`. Each `RemoteAgent` method but these
two is made in a loop from the `LocalAgent` one (`_routed`: its signature and result,
its arguments checked as declared), and the owner's side of a routed call is `ROUTED`: the
`LocalAgent` method each call kind runs.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, Protocol, TypeVar, cast, final

import trio

from . import _scheduling as scheduling
from ._arguments import check_prompt, wrong_type
from ._channel import ContextUsage
from ._durable import (
    answer_of,
    check_key,
    find_by_key,
    new_stored_id,
    poll_result,
    reattached,
    refuse_key,
    settled,
    wait_stored,
)
from ._errors import AgentNotFound, InvalidOptions, StoreError
from ._events import Event, Response
from ._follow import EncodedBatch, FollowedStream, ended
from ._logs import log_error
from ._operations import OPERATIONS, ROUTED_CALLS, Travels, make_operations
from ._options import AgentOptions
from ._requests import NotFound, Origin, Pending, PollResult, Ref, Request, Settled, ref_of
from ._schedule import Schedule
from ._slot import Slot
from ._status import AgentStatus
from ._stores._protocols import Router
from ._stores._request_store import RequestStore
from ._stores._route_codec import EventBatch, check_event
from ._stream import EventStream
from ._unsolicited import UnsolicitedTurns

P = ParamSpec("P")
R = TypeVar("R")

# Beyond the turn's own kill ladder (two ``kill_grace`` covers its drain and the driver's
# SIGTERM -> SIGKILL), how long a cancelled ask waits, shielded, for its turn to end.
CANCEL_MARGIN = 10.0


def cancel_grace(options: AgentOptions) -> float:
    """Bound on the shielded wait of a cancelled ask for its turn's processes to be gone."""
    return 2 * options.kill_grace + CANCEL_MARGIN


class Member(Protocol):
    """An agent name of this runtime, across its instances (a `Child`)."""

    @property
    def slot(self) -> Slot: ...

    async def stop(self) -> None: ...


class Addressed(Protocol):
    def address(self) -> LocalAgent: ...


def resolve(
    children: Mapping[str, Addressed],
    router: Router | None,
    name: str,
    requests: RequestStore | None = None,
) -> LocalAgent | RemoteAgent:
    """The address of agent ``name``: this runtime's agent, or else (on a store that routes
    calls) the one another runtime owns; `AgentNotFound` on a store that does not."""
    if not isinstance(name, str):
        raise wrong_type("name", "a str", name)
    child = children.get(name)
    if child is not None:
        return child.address()
    if router is None:
        # Said plainly: on such a store no other runtime's agent can be reached either.
        raise AgentNotFound(
            name,
            "runs here, and this runtime's store reaches no other runtime's agents",
            known=children,
        )
    return RemoteAgent(router, name, requests)


class LocalAgent:
    """An agent of this runtime: each call acts on its `Slot` (the one owner of its state)."""

    __slots__ = ("_grace", "_member", "_slot")

    def __init__(self, member: Member, cancel_grace: float) -> None:
        self._member = member
        self._slot = member.slot
        # Bound on a cancelled ask's shielded wait for its turn's processes to be gone.
        self._grace = cancel_grace

    async def ask(self, prompt: str, key: str | None = None) -> Response:
        slot = self._slot
        joined = None if key is not None or slot.current is None else await slot.arriving(prompt)
        if joined is not None:  # steered into the running turn: its answer is this one's
            return answer_of(await self.wait(joined.ref))
        if slot.requests is None:
            if key is not None:
                refuse_key(key)
            request = slot.submit(prompt, "ask")
        else:
            stored = await self._accept(prompt, "ask", key)
            if isinstance(stored, Ref):  # the key's first request: its answer is this one's
                return answer_of(await self.wait(stored))
            request = stored
        try:
            await request.wait()
        except BaseException:
            withdrawn = slot.requests is None or await self._withdrawn(request)
            if not withdrawn and slot.mailbox.is_queued(request):
                # Still queued in the store, so here too: it is stopped as its turn begins,
                # and settles `cancelled` where every program reads it.
                request.abandoned = True
                raise
            turn_over = slot.abandon(request)  # the loop may have taken it meanwhile
            if turn_over is not None:
                with trio.move_on_after(self._grace, shield=True):
                    await turn_over.wait()
            raise
        outcome = request.outcome
        if isinstance(outcome, Response):
            return outcome
        if outcome is None:  # withdrawn while queued, by its ref (a caller that had its key)
            return answer_of(request.result())
        raise outcome

    async def _withdrawn(self, request: Request) -> bool:
        """Whether the abandoned stored ``request`` may leave this program's queue: it is
        not queued here, or the store withdrew it first (what every program reads). A
        store that cannot is logged: the asker's cancellation is what it sees."""
        if not self._slot.mailbox.is_queued(request):
            return True
        durable = self._slot.requests
        assert durable is not None and request.stored_id is not None
        try:
            return await durable.withdraw(request.stored_id)
        except StoreError as exc:
            log_error(f"agent {durable.name!r}: the store could not withdraw a request", exc)
            return False

    async def tell(self, prompt: str, key: str | None = None) -> Ref:
        slot = self._slot
        joined = None if key is not None or slot.current is None else await slot.arriving(prompt)
        if joined is not None:
            return joined.ref
        return await self._submit(prompt, "tell", key)

    async def _submit(self, prompt: str, origin: Origin, key: str | None) -> Ref:
        """Queue ``prompt`` as a request of ``origin`` (stored first on a store that keeps
        requests) and return its `Ref`: a tell's, or a schedule's fire (`_scheduler`)."""
        slot = self._slot
        if slot.requests is None:
            if key is not None:
                refuse_key(key)
            await trio.lowlevel.checkpoint()
            return slot.submit(prompt, origin).ref
        stored = await self._accept(prompt, origin, key)
        return stored if isinstance(stored, Ref) else stored.ref

    async def _accept(self, prompt: str, origin: Origin, key: str | None) -> Request | Ref:
        """Store a new request and hand it to the agent; or, for a ``key`` the store keeps
        a request under already, that request's `Ref` (nothing new stored or started)."""
        slot = self._slot
        durable = slot.requests
        assert durable is not None
        check_prompt(prompt)
        check_key(key)
        request = slot.mailbox.request(prompt, origin, new_stored_id())
        request.key = key
        async with durable.accepting:
            # An agent waiting for work runs the request at once: its one write starts it.
            stored_id = await durable.accept(request, key, start=slot.waiting)
            if stored_id != request.stored_id:
                ref = ref_of(slot.name, stored_id)
                if ref is None:
                    raise InvalidOptions("key", key, "its request was not made by agentrt: no Ref")
                return ref
            if request.claimed and not slot.waiting:
                # The agent took other work (a notification), halted or stopped meanwhile:
                # the request waits its turn in the store's queue, unstarted.
                await durable.release(request)
            slot.enter(request, bounded=False)
        return request

    async def request(self, key: str) -> Ref | None:
        """The `Ref` of the kept request ``key`` names (see `Runtime.request`)."""
        durable = self._slot.requests
        if durable is None:
            refuse_key(key)
        return await find_by_key(durable.store, self._slot.name, key)

    async def poll(self, ref: Ref) -> PollResult:
        slot = self._slot
        result = slot.mailbox.poll(ref)
        if isinstance(result, NotFound) and slot.requests is not None and ref.name == slot.name:
            return poll_result(await slot.requests.store.find_request(ref.name, id=str(ref.id)))
        await trio.lowlevel.checkpoint()
        return result

    async def wait(self, ref: Ref) -> Settled | NotFound:
        slot = self._slot
        mailbox = slot.mailbox
        request = mailbox.find(ref)
        if request is None:
            result = mailbox.poll(ref)
            if isinstance(result, NotFound) and slot.requests is not None and ref.name == slot.name:
                return settled(await wait_stored(slot.requests.store, ref.name, str(ref.id)))
            await trio.lowlevel.checkpoint()
            assert not isinstance(result, Pending)
            return result
        await request.wait()
        return request.result()

    def stream(self, ref: Ref) -> EventStream:
        slot = self._slot
        durable = slot.requests
        if durable is None or ref.name != slot.name or slot.mailbox.find(ref) is not None:
            return slot.mailbox.subscribe(ref)
        return reattached(durable.store, ref, None)  # settled, or never this program's

    def unsolicited(self) -> UnsolicitedTurns:
        return self._slot.mailbox.unsolicited()

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
        slot = self._slot
        request = slot.mailbox.find(ref)
        durable = slot.requests
        chained = request is not None and request.stored_id is None
        if durable is None or ref.name != slot.name or chained:
            # Kept in memory only (a prompt the agent chained to itself, or no store's).
            await trio.lowlevel.checkpoint()
            return slot.withdraw(ref)
        if request is None:  # not in this runtime's queue: one another program stored
            return await durable.withdraw(str(ref.id))
        # The store first, what every program reads: a withdrawal it fails (raising) leaves
        # the request queued here too, and one it holds started (a release it failed)
        # runs when its turn comes. One the loop takes meanwhile finds it withdrawn as it
        # claims it, and settles it so.
        assert request.stored_id is not None
        withdrawn = await durable.withdraw(request.stored_id)
        if withdrawn or not request.claimed:
            withdrawn = slot.withdraw(ref) or withdrawn
        return withdrawn

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

    async def steer(self, text: str) -> None:
        await self._slot.steer(text)

    async def stop_agent(self) -> None:
        await self._member.stop()

    async def schedule(
        self,
        prompt: str,
        *,
        every: float | None = None,
        cron: str | None = None,
        overlap: str = "skip",
        key: str | None = None,
    ) -> Schedule:
        return await scheduling.add(
            self._slot.store, self._slot.name, prompt, every, cron, overlap, key
        )

    async def schedules(self) -> Sequence[Schedule]:
        return await scheduling.of(self._slot.store, self._slot.name)

    async def unschedule(self, schedule_id: str) -> bool:
        return await scheduling.drop(self._slot.store, self._slot.name, schedule_id)

    async def run_schedule(self, schedule_id: str) -> bool:
        return await scheduling.due_now(self._slot.store, self._slot.name, schedule_id)


# The checks a routed argument gets before it leaves, by how it travels (`Travels`); the
# owner's `LocalAgent` checks the rest as it checks its own callers'.
_CHECKS: dict[Travels, Callable[[Any], object]] = {
    "prompt": check_prompt,
    "event": check_event,
    "key": check_key,
}


def _check(argument: str, kind: Travels) -> Callable[[Any], object] | None:
    # The check of a routed argument, its errors naming it (steer's ``text``, a prompt).
    if kind == "prompt" and argument != "prompt":
        return functools.partial(check_prompt, argument=argument)
    return _CHECKS.get(kind)


def _routed(
    method: Callable[Concatenate[LocalAgent, P], Coroutine[Any, Any, R]],
) -> Callable[Concatenate[RemoteAgent, P], Coroutine[Any, Any, R]]:
    """The `RemoteAgent` method of ``method``'s operation: its arguments, checked as they
    travel (`OPERATIONS`), routed to the agent's owner, whose `LocalAgent` runs ``method``;
    the same signature and result."""
    operation = OPERATIONS[method.__name__]
    travels = list(operation.arguments)
    checks = [
        _check(name, kind)
        for name, kind in ([("ref", "ref"), *travels] if operation.by == "ref" else travels)
    ]

    # Positional only, as `Runtime` calls it: the router sends the arguments as a tuple.
    # Wrapping ``method`` gives it ``method``'s signature (help(), inspect).
    @functools.wraps(method)
    async def routed(self: RemoteAgent, /, *arguments: object) -> object:
        for check, argument in zip(checks, arguments, strict=True):
            if check is not None:
                check(argument)
        return await self._router.call(self._name, operation.name, arguments)

    return cast("Callable[Concatenate[RemoteAgent, P], Coroutine[Any, Any, R]]", routed)


# What a type checker sees of the operations `make_operations` gives `RemoteAgent`: the
# `LocalAgent` methods, whose signatures and results `_routed` keeps.
if TYPE_CHECKING:
    _LocalAgent = LocalAgent
else:
    _LocalAgent = object


@final
class RemoteAgent(_LocalAgent):
    """The agent named ``name`` that another runtime owns: each call is routed to it, and
    its answer (or its error) comes back. ``requests``: the store's requests, where it
    keeps them (a stream then gives what it keeps of a request the owner does not hold)."""

    __slots__ = ("_name", "_requests", "_router")

    def __init__(self, router: Router, name: str, requests: RequestStore | None = None) -> None:
        self._router = router
        self._name = name
        self._requests = requests

    def stream(self, ref: Ref) -> EventStream:
        """The owner's events of ``ref``; on a store that keeps requests, what it keeps of
        a request the owner does not hold (`reattached`)."""

        def fetch(after: int) -> Awaitable[EventBatch[Event]]:
            return self._router.call(self._name, "events", (ref, after))

        if self._requests is None:
            return FollowedStream(fetch)
        return reattached(self._requests, ref, fetch)

    def unsolicited(self) -> UnsolicitedTurns:
        raise InvalidOptions(
            "name",
            self._name,
            "not an agent of this runtime (another runtime's, or none): read an agent's "
            "unsolicited turns in the runtime that owns it, or follow each with stream, "
            "poll or wait by its ref",
        )


make_operations(RemoteAgent, _routed, LocalAgent)


# The calls another runtime may route to an agent of this one (`ROUTED_CALLS`): the
# LocalAgent method each runs (a routed call is never routed on).
ROUTED: dict[str, Callable[..., Awaitable[object]]] = {
    call: getattr(LocalAgent, call) for call in ROUTED_CALLS
}
