"""Refusing, at ``start_agent``, an agent whose callbacks use asyncio where they run: in the
agent's trio task (under ``agentrt.asyncio`` and ``agentrt.sync``, in the runtime's own
thread, where no asyncio loop runs).

What a callback's code names is known before it runs: a global (or a closure's value) that
is the asyncio module, with one of the attribute names it loads, or an object of asyncio
itself (``from asyncio import sleep``). Refused are asyncio's coroutine functions (awaiting
one in trio fails at its first suspension) and the functions that need this thread's
running asyncio loop. What the code reaches through other objects (a method of an
``asyncio.Event`` kept on ``self``, an aiohttp session) cannot be known before it runs: its
first await fails there, with trio's TypeError, and the agent crashes as for any exception.
The ways back to the application's loop (``loop.call_soon_threadsafe``,
``asyncio.run_coroutine_threadsafe``) are not refused.
"""

from __future__ import annotations

import dis
import inspect
import sys
import types
from collections.abc import Iterator

from ._agent import CALLBACKS, Agent

# asyncio's functions that need a running asyncio loop in the calling thread.
_NEED_A_LOOP = frozenset(
    {"get_running_loop", "get_event_loop", "current_task", "all_tasks", "create_task",
     "ensure_future", "gather", "shield", "wait_for", "timeout", "timeout_at", "TaskGroup"}
)  # fmt: skip

_checked: dict[type, None] = {}


def _codes(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _codes(const)


def _refused(name: str, obj: object) -> bool:
    return name in _NEED_A_LOOP or inspect.iscoroutinefunction(obj)


def _asyncio_uses(function: types.FunctionType) -> Iterator[str]:
    """The refused asyncio names ``function``'s code uses, as ``asyncio.NAME``."""
    # Not imported here (a twentieth of agentrt's import time): code can only name asyncio's
    # objects once something has imported it.
    asyncio = sys.modules.get("asyncio")
    if asyncio is None:
        return
    scope = dict(function.__globals__)
    if function.__closure__:
        for var, cell in zip(function.__code__.co_freevars, function.__closure__, strict=True):
            try:
                scope[var] = cell.cell_contents
            except ValueError:  # a cell not yet filled
                continue
    for code in _codes(function.__code__):
        previous: object = None
        for instruction in dis.get_instructions(code):
            if previous is asyncio and instruction.opname in _ATTRIBUTE:
                name = instruction.argval
                if _refused(name, getattr(asyncio, name, None)):
                    yield f"asyncio.{name}"
            previous = None
            if instruction.opname in _NAME:
                value = previous = scope.get(instruction.argval)
                module = getattr(value, "__module__", None) or ""
                name = getattr(value, "__name__", None) or ""
                if module.startswith("asyncio") and _refused(name, value):
                    yield f"asyncio.{name}"


_NAME = frozenset({"LOAD_GLOBAL", "LOAD_NAME", "LOAD_DEREF", "LOAD_CLOSURE"})
_ATTRIBUTE = frozenset({"LOAD_ATTR", "LOAD_METHOD"})


def check_callbacks(agent_class: type[Agent]) -> None:
    """`TypeError` naming the callback and the asyncio name it uses, if one of the class's
    callbacks (``init_agent`` included) uses asyncio where only trio runs."""
    if agent_class in _checked:
        return
    for callback in ("init_agent", *CALLBACKS):
        member = inspect.getattr_static(agent_class, callback, None)
        if isinstance(member, staticmethod | classmethod):
            member = member.__func__
        if not isinstance(member, types.FunctionType) or member is Agent.__dict__[callback]:
            continue
        for used in _asyncio_uses(member):
            raise TypeError(
                f"{agent_class.__qualname__}.{callback} uses {used}, which needs an asyncio "
                f"loop: an agent's callbacks run in its trio task (under agentrt.asyncio, in "
                f"the runtime's own thread); use trio there, or hand the work to your loop "
                f"with loop.call_soon_threadsafe or asyncio.run_coroutine_threadsafe "
                f"(docs/asyncio.md)"
            )
    _checked[agent_class] = None
