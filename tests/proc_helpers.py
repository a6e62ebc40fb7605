"""Shared pieces of the process tests (tier 3)."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from typing import Any

import pytest
import trio

from agentrt import Agent, Event, ProcessLimits, ProcessTracker, RawEvent
from agentrt._proctree import read_stat
from agentrt.backend import Command
from agentrt.testing import fake_cli_argv

# Short graces keep the tier fast; the bounds under test are set per test.
FAST = ProcessLimits(
    startup=10.0, interrupt_grace=0.3, term_grace=0.3, stderr_drain=0.3, stdout_drain=0.3
)
# Real processes on a loaded machine: an upper bound on one says "not the long wait", never
# "fast"; the wait it rules out is made far longer than this.
SLACK = 5.0
ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}


def fake(*steps: Any, **kwargs: Any) -> Command:
    """A Command running the fake CLI with these steps."""
    kwargs.setdefault("env", ENV)
    return Command(argv=fake_cli_argv(*steps), **kwargs)


def running(pid: int) -> bool:
    """Whether pid exists and is not a zombie."""
    st = read_stat(pid)
    return st is not None and not st.gone


async def wait_until(predicate: Callable[[], bool], bound: float = SLACK) -> None:
    """Poll until ``predicate()`` holds (process states in /proc have no event to wait on)."""
    with trio.fail_after(bound):
        while not predicate():  # noqa: ASYNC110
            await trio.sleep(0.005)


class Walks:
    """Counts a tracker's walks (`ProcessTracker.reap`, which its `run` calls every
    interval), so that a test waits for the next ones instead of sleeping for them."""

    def __init__(self, tracker: ProcessTracker, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        walk = tracker.reap

        def counted() -> int:
            self.count += 1
            return walk()

        monkeypatch.setattr(tracker, "reap", counted)

    async def wait(self, walks: int = 1) -> None:
        """Return once ``walks`` more walks than now have run (each one whole: it is sync)."""
        target = self.count + walks
        await wait_until(lambda: self.count >= target, SLACK)


async def wait_not_running(pid: int, bound: float = SLACK) -> None:
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
