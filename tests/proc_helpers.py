"""Shared pieces of the process tests (tier 3)."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from typing import Any

import trio

from agentrt import Agent, Event, RawEvent
from agentrt._proctree import read_stat
from agentrt.backend import Command
from agentrt.lowlevel import ProcessLimits
from agentrt.testing import fake_cli_argv

# Short graces keep the tier fast; the bounds under test are set per test.
FAST = ProcessLimits(
    startup=10.0, interrupt_grace=0.3, term_grace=0.3, stderr_drain=0.3, stdout_drain=0.3
)
ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}


def fake(*steps: Any, **kwargs: Any) -> Command:
    """A Command running the fake CLI with these steps."""
    kwargs.setdefault("env", ENV)
    return Command(argv=fake_cli_argv(*steps), **kwargs)


def running(pid: int) -> bool:
    """Whether pid exists and is not a zombie."""
    st = read_stat(pid)
    return st is not None and not st.gone


async def wait_until(predicate: Callable[[], bool], bound: float = 2.0) -> None:
    """Poll until ``predicate()`` holds (process states in /proc have no event to wait on)."""
    with trio.fail_after(bound):
        while not predicate():  # noqa: ASYNC110
            await trio.sleep(0.005)


async def wait_not_running(pid: int, bound: float = 2.0) -> None:
    """Wait until a process we signalled is gone (signals are delivered asynchronously)."""
    await wait_until(lambda: not running(pid), bound)


def child(*steps: Any, **options: Any) -> list[Any]:
    """A fake-CLI "spawn" step."""
    return ["spawn", {"steps": list(steps), **options}]


READY = ["emit", {"type": "ready"}]
IGNORE_TERM = ["ignore", signal.SIGTERM.name]
IGNORE_INT = ["ignore", signal.SIGINT.name]


class Watcher(Agent):
    """Keeps every stream event; finds the pids the fake CLI announces."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def handle_stream_event(self, event: Event) -> None:
        self.events.append(event)

    def spawned(self) -> list[int]:
        return [
            e.data["pid"]
            for e in self.events
            if isinstance(e, RawEvent)
            and isinstance(e.data, dict)
            and e.data.get("type") == "spawned"
        ]
