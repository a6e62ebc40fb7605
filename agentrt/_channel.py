"""What the runtime asks a live CLI between (or during) turns, outside a turn's own lines:
change the model or the permission mode, read the context usage, stop a background task,
add a message to the running turn (`ChannelCall`). A backend's live protocol writes each as
a `ControlRequest`; the CLI's reply comes back among its control frames as a
`ControlAnswer`.
The background tasks a live CLI reports running are `BackgroundTask` values.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import attrs

ChannelCall = Literal["set_model", "set_permission_mode", "context_usage", "stop_task", "steer"]

# The calls that change what the CLI runs with, so that a new process of the same agent
# instance gets them again (after its handshake).
SETTINGS: frozenset[ChannelCall] = frozenset(("set_model", "set_permission_mode"))


@attrs.frozen
class ControlRequest:
    """A request for a live CLI: its ``request_id``, the ``line`` to write, and ``decode``,
    which makes the call's value of the CLI's success payload."""

    request_id: str
    line: bytes = attrs.field(repr=False)
    decode: Callable[[Any], Any] = attrs.field(repr=False)


@attrs.frozen
class ControlAnswer:
    """The CLI's reply to the request ``request_id``: its success ``payload``, or the
    ``error`` it refused the request with."""

    request_id: str
    payload: Any = None
    error: str | None = None


@attrs.frozen
class BackgroundTask:
    """A background task of an agent's warm CLI, as the CLI reports it: ``task_id`` (what
    `stop_task` takes), its ``description``, its ``kind`` (Claude: ``"local_bash"``,
    ``"local_agent"``, ...; None when the CLI did not say)."""

    task_id: str
    description: str = ""
    kind: str | None = None


@attrs.frozen
class ContextCategory:
    """One row of the context window's use: its ``name`` (``"System prompt"``,
    ``"Messages"``, ``"Free space"``, ...), its ``tokens``, and ``kind`` (``"used"``,
    ``"free"``, ``"buffer"``, ``"deferred"``; None when the CLI did not say)."""

    name: str
    tokens: int
    kind: str | None = None


@attrs.frozen
class ContextUsage:
    """How full the agent's context window is, as its live CLI counts it: ``total_tokens``
    of ``max_tokens`` (``percentage``), for ``model``, by ``categories``; ``raw`` is what
    the CLI answered."""

    total_tokens: int
    max_tokens: int
    percentage: float
    model: str | None = None
    categories: tuple[ContextCategory, ...] = ()
    raw: Any = attrs.field(default=None, repr=False, eq=False)
