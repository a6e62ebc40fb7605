"""Shared pieces of the process tests (tier 3): fake CLI commands, waits on /proc, the
processes carrying an environment marker, and an agent that keeps what it was told."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

import attrs
import pytest
import trio
from trio_util import AsyncValue

from agentrt import Agent, AgentStatus, Event, RawEvent, Ref, Response, Runtime, TurnFailed
from agentrt.backend import Command
from agentrt.lowlevel import TURN_MARKER_ENV as MARKER_ENV
from agentrt.lowlevel import CliProcess, ProcessLimits, ProcessTracker
from agentrt.testing import fake_cli_argv

T = TypeVar("T")

# Short graces keep the tier fast; the bounds under test are set per test.
FAST = ProcessLimits(
    startup=10.0, interrupt_grace=0.3, term_grace=0.3, stderr_drain=0.3, stdout_drain=0.3
)
# Real processes on a loaded machine: an upper bound on one says "not the long wait", never
# "fast"; the wait it rules out is made far longer than this.
SLACK = 5.0
ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}


# /proc read here, not through the driver's own readers: what checks that no process of a
# test outlives it must not share a mistake with what it checks.


@attrs.frozen
class Stat:
    """The fields of ``/proc/<pid>/stat`` the tests read."""

    state: str
    ppid: int
    pgrp: int
    session: int

    @property
    def gone(self) -> bool:
        return self.state in ("Z", "X", "x")  # a zombie, or dead


def read_stat(pid: int) -> Stat | None:
    """``pid``'s stat, or None if there is no such process."""
    try:
        data = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    # comm may hold spaces and parentheses; the fields after the last ')' are fixed.
    state, ppid, pgrp, session = data[data.rindex(b")") + 2 :].split()[:4]
    return Stat(state.decode(), int(ppid), int(pgrp), int(session))


def snapshot() -> dict[int, Stat]:
    """The stat of every process on the machine, by pid."""
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (st := read_stat(int(entry))) is not None:
            found[int(entry)] = st
    return found


def descendants(procs: Mapping[int, Stat], roots: Iterable[int]) -> set[int]:
    """Every process of ``procs`` below ``roots`` by parent pid (the roots excluded)."""
    children: dict[int, list[int]] = {}
    for pid, st in procs.items():
        children.setdefault(st.ppid, []).append(pid)
    found: set[int] = set()
    stack = list(roots)
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in found:
                found.add(child)
                stack.append(child)
    return found


def fake(*steps: Any, **kwargs: Any) -> Command:
    """A Command running the fake CLI with these steps."""
    kwargs.setdefault("env", ENV)
    return Command(argv=fake_cli_argv(*steps), **kwargs)


class Frames:
    """A process's frames one by one, over `CliProcess.batches`: the driver as a consumer
    that awaits per frame sees it."""

    def __init__(self, proc: CliProcess) -> None:
        self._batches = proc.batches()
        self._batch: Iterator[Any] = iter(())

    def __aiter__(self) -> Frames:
        return self

    async def __anext__(self) -> Any:
        while True:  # a batch of blank lines holds no frame
            for frame in self._batch:
                return frame
            self._batch = iter(await self._batches.__anext__())


def running(pid: int) -> bool:
    """Whether pid exists and is not a zombie."""
    st = read_stat(pid)
    return st is not None and not st.gone


def wait_dead_unseen(pid: int, bound: float = SLACK) -> None:
    """Wait until /proc shows ``pid`` dead (a zombie, or gone) without a checkpoint, so the
    runtime cannot notice the death meanwhile: its next turn is the first to meet it."""
    deadline = time.monotonic() + bound
    while running(pid):
        assert time.monotonic() < deadline, f"pid {pid} still runs"
        time.sleep(0.001)


# Where `ask_racing_a_kill` kills, each before the CLI can print a line of the turn.
KILL_POINTS = (
    *(("seen dead", 0), ("before", 0)),
    *(("running", n) for n in (0, 1, 2)),
    *(("stopped", n) for n in (0, 2, 5, 13, 50)),
)


async def ask_racing_a_kill(
    rt: Runtime, name: str, prompt: str, where: tuple[str, int], *, group: bool = False
) -> Response:
    """``ask`` while SIGKILL ends the agent's warm CLI (``group``: its process group, for a
    CLI that is a wrapper around its server). ``where`` is one of `KILL_POINTS`: "seen
    dead", killed before the ask and seen dead in /proc first (`wait_dead_unseen`);
    "before", killed just before the ask; ("running", n) killed after n checkpoints of the
    ask; ("stopped", n) stopped before the ask (so it prints nothing) and killed after n
    checkpoints of it, before, while or after the ask writes the prompt."""
    pid = (await rt.status(name)).cli_pid
    assert pid is not None
    pids = [pid]
    if group:
        pids = [int(e) for e in os.listdir("/proc") if e.isdigit() and _pgrp(int(e)) == pid]

    def signal_it(sig: signal.Signals) -> None:
        (os.killpg if group else os.kill)(pid, sig)

    how, checkpoints = where
    if how in ("seen dead", "before"):
        signal_it(signal.SIGKILL)
        if how == "seen dead":
            for member in pids:
                wait_dead_unseen(member)
        return await rt.ask(name, prompt)
    answers: list[Response] = []

    async def ask() -> None:
        answers.append(await rt.ask(name, prompt))

    async with trio.open_nursery() as nursery:
        if how == "stopped":
            signal_it(signal.SIGSTOP)
        nursery.start_soon(ask)
        for _ in range(checkpoints):
            await trio.lowlevel.checkpoint()
        signal_it(signal.SIGKILL)
    return answers[0]


def _pgrp(pid: int) -> int | None:
    st = read_stat(pid)
    return None if st is None else st.pgrp


async def wait_until(predicate: Callable[[], T], bound: float = SLACK) -> T:
    """Poll until ``predicate()`` is truthy and return that value (process states in /proc
    have no event to wait on)."""
    with trio.fail_after(bound):
        while not (value := predicate()):  # noqa: ASYNC110
            await trio.sleep(0.005)
    return value


async def wait_for_status(
    rt: Runtime,
    name: str,
    predicate: Callable[[AgentStatus], bool],
    bound: float = SLACK,
) -> AgentStatus:
    """Poll the status of agent ``name`` until ``predicate`` holds for it, and return it."""
    with trio.fail_after(bound):
        while not predicate(status := await rt.status(name)):  # noqa: ASYNC110 (no event to wait on)
            await trio.sleep(0.005)
    return status


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


@attrs.frozen
class ProcInfo:
    """A live process as the tests look at it: its ids from /proc and its command line."""

    pid: int
    ppid: int
    pgid: int
    sid: int
    state: str
    cmdline: str


def proc_info(pid: int) -> ProcInfo | None:
    """``pid`` from /proc, or None if it is gone (a zombie counts as gone)."""
    st = read_stat(pid)
    if st is None or st.gone:
        return None
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    text = cmdline.replace(b"\0", b" ").decode(errors="replace").strip()
    return ProcInfo(pid, st.ppid, st.pgrp, st.session, st.state, text)


def processes_below(root: int) -> list[ProcInfo]:
    """The live processes below ``root``, by pid."""
    found = descendants(snapshot(), [root])
    return [info for pid in sorted(found) if (info := proc_info(pid)) is not None]


def marked(name: str, value: str, *, prefix: bool = False) -> list[ProcInfo]:
    """Live processes but this one whose environment sets ``name`` to ``value`` (with
    ``prefix``: to a value starting with it), by pid. Other users' processes are never read:
    a marker is inherited, so what carries ours runs as us."""
    head, wanted = f"{name}=".encode(), value.encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            if os.stat(f"/proc/{entry}").st_uid != os.getuid():
                continue
            environ = Path("/proc", entry, "environ").read_bytes().split(b"\0")
        except OSError:
            continue  # gone meanwhile, or not ours to read
        got = next((var[len(head) :] for var in environ if var.startswith(head)), None)
        if got is None or not (got.startswith(wanted) if prefix else got == wanted):
            continue
        if (info := proc_info(int(entry))) is not None:
            found.append(info)
    return sorted(found, key=lambda info: info.pid)


def turn_processes(prefix: str) -> list[ProcInfo]:
    """Live processes of the turns whose marker starts with ``prefix`` (``"<pid>."``: every
    turn the runtimes of that process started, even after it died)."""
    return marked(MARKER_ENV, prefix, prefix=True)


async def kill_marked(name: str, value: str, *, prefix: bool = False) -> list[ProcInfo]:
    """SIGKILL what `marked` finds until nothing is left; return what was alive.

    Cancellation: shielded; bounded (5 s).
    """
    killed: dict[int, ProcInfo] = {}
    with trio.move_on_after(5, shield=True):
        while alive := marked(name, value, prefix=prefix):
            for info in alive:
                killed.setdefault(info.pid, info)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(info.pid, signal.SIGKILL)
            await trio.sleep(0.02)
    return list(killed.values())


class Watcher(Agent):
    """Keeps every stream event, error and response the agent got; finds the pids the fake
    CLI announces; `wait_for` wakes on each new event."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.errors: list[TurnFailed] = []
        self.responses: list[Response] = []
        self._count = AsyncValue(0)

    def handle_stream_event(self, event: Event) -> None:
        self.events.append(event)
        self._count.value += 1

    def handle_response(self, ref: Ref, response: Response) -> None:
        self.responses.append(response)

    def handle_error(self, ref: Ref, error: TurnFailed) -> None:
        self.errors.append(error)

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        """Return once ``predicate()`` holds, looking again after each event.

        Cancellation: bound it with ``trio.fail_after``.
        """
        await self._count.wait_value(lambda _: predicate())

    def announced(self) -> list[dict[str, Any]]:
        """The fake CLI's "spawned" frames, in order."""
        return [
            e.data
            for e in self.events
            if isinstance(e, RawEvent)
            and isinstance(e.data, dict)
            and e.data.get("type") == "spawned"
        ]

    def spawned(self) -> list[int]:
        """The pids the fake CLI announced."""
        return [data["pid"] for data in self.announced() if "pid" in data]


def fence_guards(runtime_pid: int) -> list[int]:
    """The fence guards of the runtime in process ``runtime_pid``."""
    procs = snapshot()
    children = descendants(procs, [runtime_pid])
    return [
        pid
        for pid in children
        if (info := proc_info(pid)) is not None and "_fence_guard.py" in info.cmdline
    ]


class Program:
    """A program of the tests (lease_child.py, host_child.py) running; its output read line
    by line."""

    def __init__(self, process: trio.Process) -> None:
        self.process = process
        self._buffer = b""

    @property
    def pid(self) -> int:
        return self.process.pid

    async def line(self, bound: float = 30) -> str:
        stdout = self.process.stdout
        assert stdout is not None
        with trio.fail_after(bound):  # generous: a program's start is slow on a loaded machine
            while b"\n" not in self._buffer:
                chunk = await stdout.receive_some()
                assert chunk, f"the program ended: {self._buffer!r}"
                self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.decode()

    async def kill(self) -> None:
        self.process.kill()
        await self.process.wait()


@contextlib.asynccontextmanager
async def store_programs(
    child: Path, store: str, env: Mapping[str, str] | None = None
) -> AsyncIterator[Callable[..., Awaitable[Program]]]:
    """Start ``child`` programs on ``store`` (their first argument): the test programs that
    stand for other programs or hosts sharing one store. Each is killed afterwards, with
    every process carrying its turns' marker. ``env``: their whole environment (default:
    this process's)."""
    started: list[Program] = []

    async def start(*args: str) -> Program:
        argv = [sys.executable, str(child), store, *args]
        process = await trio.lowlevel.open_process(argv, stdout=subprocess.PIPE, env=env)
        started.append(Program(process))
        return started[-1]

    try:
        yield start
    finally:
        for program in started:
            await program.kill()
            assert program.process.stdout is not None
            await program.process.stdout.aclose()
            await kill_marked(MARKER_ENV, f"{program.pid}.", prefix=True)
