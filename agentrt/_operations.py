"""The agent operations, declared once: per operation its name, how it names its agent,
its arguments and how each travels when routed, whether it is awaited, and what its answer
is when routed.

What is made from this declaration: the routed call kinds and their answers
(`agentrt._stores._route_codec`: a call's arguments and its answer are encoded as declared
here), the calls an owner serves (`agentrt._address.ROUTED`), and each `RemoteAgent`
method that routes a call (one line made from the `LocalAgent` method, whose signature and
result it takes, checking its arguments as declared). What is held against it
(tests/test_operations.py, in both directions: declared but missing, present but
undeclared): the `Runtime` method, the module-level function, the asyncio and sync forms'
methods (each one line made from the `Runtime` method, so that mypy and the docs see its
signature), and `LocalAgent` and `RemoteAgent`.

A new agent operation is written in two places that hold its behaviour: its entry here,
and its `LocalAgent` method (what the owner does); the routed call kind and answer follow.
Its spelling in each form is then one line or one method per form, which the test names
when missing: the `Runtime` method (its signature and docstring, for users and the
reference docs), one line in `RemoteAgent` (``_routed(LocalAgent.x)``), one in each of
the asyncio and sync forms' `Runtime` (``_awaited(TrioRuntime.x)``), one in
`agentrt._api`, its export in agentrt/__init__.py and its ``autofunction`` in
docs/reference/api.md. Those lines stay written out, not made in a loop, so that mypy and
the docs see each method's signature.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any, Concatenate, Generic, Literal, ParamSpec, TypeVar, overload

import attrs

P = ParamSpec("P")
R = TypeVar("R")

Travels = Literal["prompt", "text", "text_or_none", "ref", "event", "count"]
"""How a routed argument travels: a prompt (a str, checked non-blank before it leaves); a
str; a str or None; a `Ref`; a notify's event (plain data only, checked before it leaves);
an int >= 0."""

Answer = Literal[
    "response", "ref", "poll", "settled", "bool", "status", "none", "context_usage", "events"
]
"""What a routed call answers: a `Response`; a `Ref`; a `PollResult`; a settled one (no
`Pending`); a bool; an `AgentStatus`; None; a `ContextUsage` or None; a batch of events."""


@attrs.frozen
class Operation:
    """One operation on one agent.

    ``by``: how the `Runtime` method names the agent (its first parameter): ``name`` or
    ``ref`` (the agent the `Ref` names). ``arguments``: the parameters after it, each with
    how it travels when routed (a `LocalAgent` method takes the ref and these).
    ``awaited``: an async method (the sync form blocks on it); ``stream`` alone returns at
    once. ``answer``: what a routed call answers; None for an operation that is not routed
    (it runs here, or reads a routed one as ``stream`` reads ``events``). ``public``: a
    `Runtime` method (``events`` is the routed read behind a remote ``stream`` only).
    """

    name: str
    by: Literal["name", "ref"]
    arguments: tuple[tuple[str, Travels], ...] = ()
    answer: Answer | None = "none"
    awaited: bool = True
    public: bool = True


OPERATIONS: Mapping[str, Operation] = {
    op.name: op
    for op in (
        Operation("ask", "name", (("prompt", "prompt"),), "response"),
        Operation("tell", "name", (("prompt", "prompt"),), "ref"),
        Operation("poll", "ref", (), "poll"),
        Operation("wait", "ref", (), "settled"),
        Operation("stream", "ref", (), None, awaited=False),
        Operation("events", "ref", (("after", "count"),), "events", public=False),
        Operation("notify", "name", (("event", "event"),)),
        Operation("interrupt", "name", (), "bool"),
        Operation("interrupt_request", "ref", (), "bool"),
        Operation("withdraw", "ref", (), "bool"),
        Operation("halt", "name"),
        Operation("unhalt", "name"),
        Operation("reset_session", "name"),
        Operation("status", "name", (), "status"),
        Operation("set_model", "name", (("model", "text_or_none"),)),
        Operation("set_permission_mode", "name", (("mode", "text"),)),
        Operation("context_usage", "name", (), "context_usage"),
        Operation("stop_task", "name", (("task_id", "text"),)),
        Operation("stop_agent", "name"),
    )
}
"""Every agent operation, by name."""

ROUTED_CALLS: Mapping[str, Operation] = {
    name: op for name, op in OPERATIONS.items() if op.answer is not None
}
"""The operations another runtime may route to the agent's owner, by name."""

RUNTIME_WIDE = frozenset(
    {
        "start_agent",
        "open_supervisor",
        "agents",
        "whereis",
        "statistics",
        "workspaces",
        "remove_workspace",
    }
)
"""The `Runtime` methods that act on the runtime, not on one agent (never routed: each
runtime answers them for itself); their forms are held against the `Runtime` as the agent
operations' are."""

AWAITED: tuple[str, ...] = tuple(
    name for name, op in OPERATIONS.items() if op.public and op.awaited
)
"""The agent operations every form spells alike, made in a loop from the `Runtime` method
(the asyncio and sync forms) or the `LocalAgent` one (`RemoteAgent`): all but ``stream``,
whose result differs per form."""


def make_operations(form: type, make: Callable[[Any], object], source: type) -> None:
    """Give ``form`` each of the `AWAITED` operations: ``make`` of ``source``'s method, named
    as ``form``'s (help(), the docs)."""
    for name in AWAITED:
        made = make(getattr(source, name))
        made.__qualname__ = f"{form.__name__}.{name}"  # type: ignore[attr-defined]
        setattr(form, name, made)


class Awaiting:
    """A form whose agent operations are awaited: `agentrt.Runtime` and
    `agentrt.asyncio.Runtime` (what `operation` types them as)."""

    __slots__ = ()


class Blocking:
    """A form whose agent operations block until they settle: `agentrt.sync.Runtime`."""

    __slots__ = ()


# `operation` marks an awaited `Runtime` method as the agent operation of its name. At run
# time it returns the method itself: no layer on the call path. To a type checker it
# returns the method as each form that inherits it has it, typed from that one signature:
# awaited on `Awaiting` forms, blocking on `Blocking` ones. So the asyncio and sync forms,
# made in a loop (`make_operations`), are type-checked as if each method were written out.
if TYPE_CHECKING:

    class _Operation(Generic[P, R]):
        @overload
        def __get__(
            self, form: None, owner: type
        ) -> Callable[Concatenate[Any, P], Coroutine[Any, Any, R]]: ...
        @overload
        def __get__(self, form: Blocking, owner: type) -> Callable[P, R]: ...
        @overload
        def __get__(self, form: Awaiting, owner: type) -> Callable[P, Coroutine[Any, Any, R]]: ...
        def __get__(self, form: object, owner: type) -> Any: ...

    def operation(
        method: Callable[Concatenate[Any, P], Coroutine[Any, Any, R]],
    ) -> _Operation[P, R]: ...

else:

    def operation(method):
        return method
