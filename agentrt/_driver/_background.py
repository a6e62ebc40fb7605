"""Background work a warm CLI keeps between turns (``background``, `LiveSettings`).

While the CLI reports background tasks running (its ``"task"`` frames, read in its turns
and between them), a turn's end spares its tree, and the process neither hibernates nor
gives its slot away. `BackgroundWork` keeps what the CLI last reported, each task with
when it was first seen, so that one running past the agent's bound is stopped: by the
CLI's own ``stop_task``; a task the CLI does not stop ends the process, and whatever ends
the process ends its tasks. A CLI that reports no tasks keeps none: each turn's end kills
what the turn started (`background_work` is None).
"""

from __future__ import annotations

import logging
import math
from typing import Any, Protocol

import attrs
import trio

from .._channel import BackgroundTask, ControlAnswer, ControlRequest
from ..backend import LiveProtocol

logger = logging.getLogger("agentrt")

# Bound on the CLI's answer when the runtime stops a background task past its bound.
_STOP_BOUND = 30.0


class _Cli(Protocol):
    """What stopping a task takes of the live CLI (`WarmCli`)."""

    protocol: LiveProtocol

    async def call(self, request: ControlRequest, bound: float) -> ControlAnswer | str: ...

    def kill(self, why: str) -> None: ...


def background_work(bound: float | None, protocol: LiveProtocol) -> BackgroundWork | None:
    """The background work of a new live CLI: None where the agent keeps none (``bound``
    None) or the CLI reports no tasks."""
    if bound is None or not hasattr(protocol, "background_tasks"):
        return None
    return BackgroundWork(bound)


@attrs.define(eq=False)
class BackgroundWork:
    """The background tasks of one live CLI, as it reports them."""

    # Seconds a task may run (math.inf: no bound of its own).
    bound: float
    # The tasks the CLI reports running, by id, and when each was first seen.
    tasks: dict[str, BackgroundTask] = attrs.field(factory=dict)
    _seen: dict[str, float] = attrs.field(factory=dict)

    def news(self, protocol: LiveProtocol, frame: Any) -> bool:
        """Take a ``"task"`` frame: whether it said which tasks run now."""
        running = protocol.background_tasks(frame)  # type: ignore[attr-defined]
        if running is None:
            return False
        now = trio.current_time()
        self.tasks = {task.task_id: task for task in running}
        self._seen = {t: self._seen.get(t, now) for t in self.tasks}
        return True

    def next_due(self) -> float:
        """When the oldest task runs past the bound (math.inf: none will)."""
        if not self._seen:
            return math.inf
        return min(self._seen.values()) + self.bound

    async def stop_overdue(self, cli: _Cli) -> bool:
        """Have the CLI stop each task past the bound: whether there was one (one it could
        not stop killed the process)."""
        now = trio.current_time()
        overdue = [t for t, seen in self._seen.items() if now >= seen + self.bound]
        for task_id in overdue:
            self._seen.pop(task_id, None)
            request = cli.protocol.request("stop_task", task_id)  # type: ignore[attr-defined]
            answer = await cli.call(request, _STOP_BOUND)
            if not isinstance(answer, ControlAnswer) or answer.error is not None:
                why = answer if isinstance(answer, str) else answer.error
                cli.kill(
                    f"background task {task_id} ran past {self.bound:g} s and did not stop: {why}"
                )
                break
            logger.info("background task %s ran past %g s: stopped", task_id, self.bound)
        return bool(overdue)
