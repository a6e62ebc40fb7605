"""How an agent instance ends (`Exit`): stopped from outside, normally (a handler returned
`Stop`), or crashed (a callback failed). The request it was processing and the prompts it
chained to itself fail with its end's error (`fail_unfinished`), ``terminate_agent`` runs
within a bound (`terminate`), and its supervisor, told the `Exit`, decides about the queued
work.
"""

from __future__ import annotations

from typing import Literal

import attrs
import trio

from ._callbacks import AgentCrashed, Callbacks
from ._errors import AgentStopped
from ._logs import log_error
from ._slot import Slot

# Bound on terminate_agent: it runs shielded while the agent stops.
TERMINATE_GRACE = 5.0

ExitKind = Literal["crashed", "normal", "stopped"]


@attrs.frozen
class Exit:
    """How one actor ended: ``crashed`` (a callback failed), ``normal`` (it returned `Stop`)
    or ``stopped`` (from outside). ``error`` is what its unfinished requests got."""

    kind: ExitKind
    error: AgentStopped


def exit_of(
    agent: str,
    crash: AgentCrashed | None,
    normally: bool,
    reason: str,
    cause: BaseException | None,
) -> tuple[Exit, str | BaseException]:
    """The instance's `Exit`, and the reason ``terminate_agent`` is given: the ``crash``,
    ``"normal"``, or the ``reason`` (and ``cause``) it was stopped for."""
    if crash is not None:
        error = AgentStopped(agent, str(crash))
        error.__cause__ = crash.error
        return Exit("crashed", error), crash.error
    if normally:
        return Exit("normal", AgentStopped(agent, "normal")), "normal"
    error = AgentStopped(agent, reason)
    error.__cause__ = cause
    return Exit("stopped", error), reason


async def fail_unfinished(slot: Slot, error: AgentStopped) -> None:
    """The request the instance was processing (in the store too, where it was claimed) and
    the prompts it chained to itself fail with ``error``."""
    current, slot.current = slot.current, None
    if current is not None and not current.settled:
        if current.claimed and slot.requests is not None:
            await slot.requests.settle(current, error)
        slot.mailbox.fail(current, error)
    slot.mailbox.fail_chained(error)


async def terminate(agent: str, callbacks: Callbacks, reason: str | BaseException) -> None:
    """The agent's ``terminate_agent``, within `TERMINATE_GRACE`; what it raises is logged."""
    with trio.move_on_after(TERMINATE_GRACE):
        try:
            await callbacks.call("terminate_agent", reason)
        except Exception as exc:
            log_error(f"agent {agent!r}: terminate_agent raised", exc)
