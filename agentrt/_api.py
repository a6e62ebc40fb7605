"""Module-level ``agentrt.ask`` etc.: the `Runtime` methods, on the innermost open runtime.

Each is made from its method, so the two cannot drift: the same signature (less ``self``)
and docstring for help() and mypy, and one implementation. Each raises `NoRuntime` when
called outside ``async with agentrt.open_runtime()``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, TypeVar, cast

from ._runtime import Runtime, current_runtime

P = ParamSpec("P")
R = TypeVar("R")


def _on_current_runtime(method: Callable[Concatenate[Runtime, P], R]) -> Callable[P, R]:
    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        return method(current_runtime(), *args, **kwargs)

    signature = inspect.signature(method)
    call.__name__ = call.__qualname__ = method.__name__
    call.__doc__ = method.__doc__
    cast(Any, call).__signature__ = signature.replace(
        parameters=tuple(signature.parameters.values())[1:]
    )
    return call


start_agent = _on_current_runtime(Runtime.start_agent)
open_supervisor = _on_current_runtime(Runtime.open_supervisor)
ask = _on_current_runtime(Runtime.ask)
tell = _on_current_runtime(Runtime.tell)
poll = _on_current_runtime(Runtime.poll)
wait = _on_current_runtime(Runtime.wait)
stream = _on_current_runtime(Runtime.stream)
notify = _on_current_runtime(Runtime.notify)
interrupt = _on_current_runtime(Runtime.interrupt)
interrupt_request = _on_current_runtime(Runtime.interrupt_request)
withdraw = _on_current_runtime(Runtime.withdraw)
halt = _on_current_runtime(Runtime.halt)
unhalt = _on_current_runtime(Runtime.unhalt)
reset_session = _on_current_runtime(Runtime.reset_session)
status = _on_current_runtime(Runtime.status)
agents = _on_current_runtime(Runtime.agents)
whereis = _on_current_runtime(Runtime.whereis)
stop_agent = _on_current_runtime(Runtime.stop_agent)
statistics = _on_current_runtime(Runtime.statistics)
workspaces = _on_current_runtime(Runtime.workspaces)
remove_workspace = _on_current_runtime(Runtime.remove_workspace)
set_model = _on_current_runtime(Runtime.set_model)
set_permission_mode = _on_current_runtime(Runtime.set_permission_mode)
context_usage = _on_current_runtime(Runtime.context_usage)
stop_task = _on_current_runtime(Runtime.stop_task)
