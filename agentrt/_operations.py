"""The agent operations, declared once: per operation its name, how it names its agent,
its arguments and how each travels when routed, whether it is awaited, and what its answer
is when routed.

A new agent operation is written in three places, its declaration and its local
implementation, and one command is run:

- its entry here, in `OPERATIONS`;
- its `LocalAgent` method (`agentrt._address`: what the agent's owner does);
- its `Runtime` method, in `AgentCalls` (`agentrt._agent_calls`), marked `operation`: its
  signature, its argument checks and its docstring (for users and the reference docs);
- ``python -m agentrt._api_written``, which writes its module-level function's line in
  `agentrt._api` and its export in agentrt/__init__.py (a type checker reads a module's
  names only as written; tests/test_operations.py fails, naming the command, while stale).

Made from those, nothing to write: the routed call kind and its answer
(`agentrt._stores._route_codec`), the call the owner serves (`agentrt._address.ROUTED`), the
`RemoteAgent` method (`_routed`, from the `LocalAgent` one), and the asyncio and sync forms'
methods (`make_operations`, from the `Runtime` one). `operation` types each form's method
from the `Runtime` signature for a type checker, so ``rt.set_model("a", 1)`` is refused on
every form (tests/test_operations.py runs mypy on such a module). What is left by hand: its
``autofunction`` line in docs/reference/api.md, in the section it belongs to (the test names
it when missing); and an operation that is not awaited (``stream``, ``unsolicited``) has a
method per form, as its result differs per form.

Walked through with ``set_model``: ``Operation("set_model", "name", (("model",
"text_or_none"),))`` here; ``LocalAgent.set_model`` (a call on the warm CLI's channel);
``AgentCalls.set_model`` (refuses a model that is not a str or None, and says what the
call does). From them: the routed call ``set_model``, its model travelling as a str or
None and its answer None; ``ROUTED["set_model"]``; ``RemoteAgent.set_model``;
``agentrt.asyncio.Runtime.set_model`` and ``agentrt.sync.Runtime.set_model``; and, once the
command has run, ``agentrt.set_model``.

tests/test_operations.py holds every form against the declaration in both directions
(declared but missing, present but undeclared).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any, Concatenate, Generic, Literal, ParamSpec, TypeVar, overload

import attrs

P = ParamSpec("P")
R = TypeVar("R")

Travels = Literal["prompt", "text", "text_or_none", "ref", "event", "count", "key", "seconds"]
"""How a routed argument travels: a prompt (a str, checked non-blank before it leaves); a
str; a str or None; a `Ref`; a notify's event (plain data only, checked before it leaves);
an int >= 0; an idempotency key (a str or None, left out of the row when None, so a call
without one is the row it was before keys); a number of seconds or None (an argument of
calls that are never routed only: a schedule's period)."""

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
    ``awaited``: an async method (the sync form blocks on it); ``stream`` and
    ``unsolicited`` return at once. ``answer``: what a routed call answers; None for an
    operation that is not routed (it runs here, or reads a routed one as ``stream`` reads
    ``events``). ``public``: a `Runtime` method (``events`` is the routed read behind a
    remote ``stream`` only).
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
        Operation("ask", "name", (("prompt", "prompt"), ("key", "key")), "response"),
        Operation("tell", "name", (("prompt", "prompt"), ("key", "key")), "ref"),
        # Read from the store where the runtime is: never routed.
        Operation("request", "name", (("key", "text"),), None),
        Operation("poll", "ref", (), "poll"),
        Operation("wait", "ref", (), "settled"),
        Operation("stream", "ref", (), None, awaited=False),
        # A local agent's only: another runtime's refuses (`RemoteAgent.unsolicited`).
        Operation("unsolicited", "name", (), None, awaited=False),
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
        Operation("steer", "name", (("text", "prompt"),)),
        Operation("stop_agent", "name"),
        # Kept in the store where the runtime is: never routed (the agent's owner, on any
        # program, fires what they keep).
        Operation(
            "schedule",
            "name",
            (
                ("prompt", "prompt"),
                ("every", "seconds"),
                ("cron", "text_or_none"),
                ("overlap", "text"),
                ("key", "key"),
            ),
            None,
        ),
        Operation("schedules", "name", (), None),
        Operation("unschedule", "name", (("schedule_id", "text"),), None),
        Operation("run_schedule", "name", (("schedule_id", "text"),), None),
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
operations' are, and their module-level functions written as theirs are, but the asyncio and
sync forms write each out (their results and blocks differ per form)."""

AWAITED: tuple[str, ...] = tuple(
    name for name, op in OPERATIONS.items() if op.public and op.awaited
)
"""The agent operations every form spells alike, made in a loop from the `Runtime` method
(the asyncio and sync forms) or the `LocalAgent` one (`RemoteAgent`): all but ``stream``
and ``unsolicited``, whose results differ per form."""


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
