"""Module-level ``agentrt.ask`` etc.: the `Runtime` methods, on the innermost open runtime.

Each is made from its method, so the two cannot drift: the same signature (less ``self``)
and docstring for help() and mypy, and one implementation. Each raises `NoRuntime` when
called outside ``async with agentrt.open_runtime()``. The lines that make them are written
from the operations' declaration by ``python -m agentrt._api_written``.
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


agents = _on_current_runtime(Runtime.agents)
ask = _on_current_runtime(Runtime.ask)
context_usage = _on_current_runtime(Runtime.context_usage)
halt = _on_current_runtime(Runtime.halt)
interrupt = _on_current_runtime(Runtime.interrupt)
interrupt_request = _on_current_runtime(Runtime.interrupt_request)
notify = _on_current_runtime(Runtime.notify)
open_supervisor = _on_current_runtime(Runtime.open_supervisor)
poll = _on_current_runtime(Runtime.poll)
remove_workspace = _on_current_runtime(Runtime.remove_workspace)
request = _on_current_runtime(Runtime.request)
reset_session = _on_current_runtime(Runtime.reset_session)
run_schedule = _on_current_runtime(Runtime.run_schedule)
schedule = _on_current_runtime(Runtime.schedule)
schedules = _on_current_runtime(Runtime.schedules)
set_model = _on_current_runtime(Runtime.set_model)
set_permission_mode = _on_current_runtime(Runtime.set_permission_mode)
start_agent = _on_current_runtime(Runtime.start_agent)
statistics = _on_current_runtime(Runtime.statistics)
status = _on_current_runtime(Runtime.status)
steer = _on_current_runtime(Runtime.steer)
stop_agent = _on_current_runtime(Runtime.stop_agent)
stop_task = _on_current_runtime(Runtime.stop_task)
stream = _on_current_runtime(Runtime.stream)
tell = _on_current_runtime(Runtime.tell)
unhalt = _on_current_runtime(Runtime.unhalt)
unschedule = _on_current_runtime(Runtime.unschedule)
unsolicited = _on_current_runtime(Runtime.unsolicited)
wait = _on_current_runtime(Runtime.wait)
whereis = _on_current_runtime(Runtime.whereis)
withdraw = _on_current_runtime(Runtime.withdraw)
workspaces = _on_current_runtime(Runtime.workspaces)
