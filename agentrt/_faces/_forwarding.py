"""How ``agentrt.asyncio`` and ``agentrt.sync`` take on the `Runtime`'s methods: each made
from the trio method itself (the agent operations in a loop, by `make_operations` of
`agentrt._operations`; the runtime-wide methods one line each), so that the signature (less
``self``) and the docstring cannot drift and mypy checks every call against the trio
method's parameters."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from .._agent_calls import AgentCalls

    # What a type checker sees of the agent operations `make_operations` gives each form's
    # `Runtime`: the trio methods, each typed for the form by `agentrt._operations.operation`
    # (a base of both forms' `Runtime`; nothing at run time).
    AgentCallsBase = AgentCalls
else:
    AgentCallsBase = object


def same_face(made: Callable[..., Any], method: Callable[..., Any]) -> None:
    """Give ``made`` the name, docstring and signature of ``method`` (help(), the docs)."""
    made.__name__ = method.__name__
    made.__qualname__ = method.__qualname__
    made.__doc__ = method.__doc__
    cast(Any, made).__signature__ = inspect.signature(method)
