"""How a turn's CLI is started: with every signal at its default disposition and none
blocked, whatever the runtime inherited, so an interrupt reaches it in band; in its cgroup
before it runs; with no fork of the runtime where posix_spawn can do it all
(agentrt._driver._spawn's own tests, on both of its paths, below)."""

from __future__ import annotations

import errno
import functools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest
import trio
from test_isolation import WHY_NOT, needs_cgroups

import agentrt
import agentrt.sync
from agentrt._driver import _spawn
from agentrt._driver._cgroup import TurnCgroups, own_cgroup
from agentrt.backend import Command, ExitStatus
from agentrt.lowlevel import open_cli_process
from agentrt.testing import fake_cli_executable

CHILD = Path(__file__).parent / "signal_child.py"
INIT = {"type": "system", "subtype": "init", "session_id": "s-1", "model": "fake-model"}


def script_cli(directory: Path) -> tuple[Path, Path]:
    """A ``claude`` that is a shell script: it records its signal state (the blocked and the
    ignored sets of /proc/self/status), reports a session and waits in ``sleep``, which a
    SIGINT at its default disposition ends."""
    binary, record = directory / "claude", directory / "signals"
    binary.write_text(
        "#!/bin/sh\n"
        # Read by the shell itself: a shell waiting for a child blocks every signal.
        'while read -r line; do case $line in Sig[BI]*) echo "$line";; esac; done'
        f" < /proc/self/status > '{record}'\n"
        f"echo '{json.dumps(INIT)}'\n"
        "exec sleep 600\n"
    )
    binary.chmod(0o755)
    return binary, record


def started_with_sigint_ignored() -> list[str]:
    # What a shell does for a background job (``runtime &``): SIGINT and SIGQUIT ignored.
    return ["sh", "-c", 'trap "" INT QUIT; exec "$@"', "sh"]


def block_sigint() -> None:
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})


@pytest.mark.parametrize(
    ("prefix", "preexec"),
    [(started_with_sigint_ignored(), None), ([], block_sigint)],
    ids=["sigint-ignored", "sigint-blocked"],
)
async def test_a_cli_is_interrupted_in_band_whatever_signal_state_the_runtime_inherited(
    tmp_path: Path, prefix: list[str], preexec: Any
) -> None:
    binary, record = script_cli(tmp_path)
    with trio.fail_after(60):
        done = await trio.run_process(
            [*prefix, sys.executable, str(CHILD), str(binary)],
            capture_stdout=True,
            preexec_fn=preexec,
            stderr=subprocess.STDOUT,
            check=False,
        )
    assert done.returncode == 0, done.stdout.decode()
    outcome = json.loads(done.stdout.decode().splitlines()[-1])
    # The CLI saw nothing ignored and nothing blocked, and died of the SIGINT itself: no
    # SIGTERM a second later.
    assert record.read_text().split() == ["SigBlk:", "0" * 16, "SigIgn:", "0" * 16], (
        record.read_text()
    )
    assert outcome == {"reason": "interrupted", "signal": signal.SIGINT, "runtime_unchanged": True}


# -- the spawn itself, on both of its paths ------------------------------------------------------

STATUS = "while read -r l; do case $l in Sig[BI]*) echo $l;; esac; done < /proc/self/status"


@pytest.fixture(params=["posix_spawn", "fork"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test on the posix_spawn path and on the fallback (subprocess, a preexec_fn)."""
    if request.param == "fork":
        monkeypatch.setattr(_spawn, "_libc", lambda: None)
    return str(request.param)


@contextmanager
def inherited_signal_state() -> Iterator[None]:
    # This process as a background job with a blocked signal: SIGQUIT ignored, SIGUSR1 blocked.
    before = signal.signal(signal.SIGQUIT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGUSR1})
        signal.signal(signal.SIGQUIT, before)


async def output(argv: list[str], gate: _spawn.Gate | None = None) -> str:
    process = await _spawn.spawn(argv, {"PATH": os.defpath}, "/", gate)
    assert process.stdout is not None and process.stdin is not None
    await process.stdin.aclose()
    got = b""
    while chunk := await process.stdout.receive_some(65536):
        got += chunk
    assert await process.wait() == 0
    pidfd = getattr(process, "pidfd", None)
    if pidfd is not None:  # the spawn's, for its caller to close
        os.close(pidfd)
    return got.decode()


# The signals the fallback can reset: Python names neither the C library's own (glibc's 32
# and 33), nor does it let a preexec_fn set them; posix_spawn's attributes reset them all.
PYTHONS_SIGNALS = sum(1 << (int(sig) - 1) for sig in signal.valid_signals())


async def test_the_child_starts_with_no_signal_ignored_or_blocked(path: str) -> None:
    with inherited_signal_state():
        got = await output(["sh", "-c", STATUS])
    blocked_label, blocked, ignored_label, ignored = got.split()
    assert (blocked_label, ignored_label) == ("SigBlk:", "SigIgn:")
    # What this test's own ancestors left ignored or blocked, the fallback may pass on.
    reset = PYTHONS_SIGNALS if path == "fork" else ~0
    assert int(blocked, 16) & reset == 0 and int(ignored, 16) & reset == 0, got


async def test_the_child_runs_its_first_instruction_in_its_cgroup(path: str) -> None:
    if WHY_NOT is not None:
        pytest.skip(f"no turn cgroups: {WHY_NOT}")
    cgroups = TurnCgroups.create(*own_cgroup())
    try:
        turn = cgroups.new_turn()
        got = await output(["cat", "/proc/self/cgroup"], turn)
        assert f"0::{turn.name}\n" in got
        turn.remove()
    finally:
        await cgroups.close()


class Refusing:
    def move(self, pid: int) -> None:
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))

    @property
    def enter(self) -> Callable[[], object]:
        return functools.partial(self.move, 0)


async def test_a_child_that_cannot_be_moved_never_runs(path: str, tmp_path: Path) -> None:
    witness = tmp_path / "ran"
    with pytest.raises(_spawn.CannotEnter):
        await _spawn.spawn(["touch", str(witness)], {"PATH": os.defpath}, None, Refusing())
    assert not witness.exists()


class StoppedTillAWriterCame:
    """A gate that stops the child before it waits at the FIFO (or takes it out of its
    open, which it makes again when continued), and continues it once a writer has opened
    the FIFO: the child then waits there for a writer that comes after it."""

    def __init__(self, open_gate: Callable[[str], bool]) -> None:
        self.child: int | None = None
        self._open_gate = open_gate

    def move(self, pid: int) -> None:
        os.kill(pid, signal.SIGSTOP)
        os.waitid(os.P_PID, pid, os.WSTOPPED)  # stopped now, not on its way to stopping
        self.child = pid

    @property
    def enter(self) -> Callable[[], object]:
        raise AssertionError("posix_spawn's path only")

    def open_then_continue(self, fifo: str) -> bool:
        opened = self._open_gate(fifo)
        if opened and self.child is not None:
            os.kill(self.child, signal.SIGCONT)
            self.child = None
        return opened


async def test_a_child_that_reaches_the_gate_after_a_writer_came_and_went_is_let_in(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The FIFO may have a reader that is not the new child: the previous spawn's child,
    # whose close-on-exec comes after posix_spawn has returned. An open of the gate then
    # succeeds before the new child waits there, and wakes nobody; the child waits for the
    # next writer. Held here by the test, where a runtime's back-to-back spawns hold it
    # now and then (a runtime froze for ever with its CLI at the gate).
    if _spawn._libc() is None:
        pytest.skip("no posix_spawn path here: the fallback forks, with no FIFO")
    real_open_gate = _spawn._open_gate
    gate = StoppedTillAWriterCame(real_open_gate)
    monkeypatch.setattr(_spawn, "_open_gate", gate.open_then_continue)
    returned, rescued = threading.Event(), threading.Event()
    with _spawn.spawner_in_use():
        fifo = _spawn._spawner().fifo
        previous_child = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)

        def rescue() -> None:  # a spawn waiting for ever fails the test instead of hanging it
            rescued.set()
            while not returned.wait(0.01):
                real_open_gate(fifo)

        stuck = threading.Timer(30, rescue)
        stuck.start()
        try:
            assert await output(["true"], gate) == ""
        finally:
            returned.set()
            stuck.cancel()
            stuck.join()
            os.close(previous_child)
    assert not rescued.is_set(), "the child waited at the gate until the test opened it"


class Unmoved:
    def move(self, pid: int) -> None:
        pass

    @property
    def enter(self) -> Callable[[], object]:
        raise AssertionError("posix_spawn's path only")


async def test_once_the_gate_lets_a_reader_through_it_is_opened_again_only_now_and_then(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The spawn returns at the child's exec, a while after the child left the gate (held
    # here): meanwhile the gate is opened again every _REOPEN, in case the reader it let
    # through was another, not polled (a spawn took some 40 opens).
    if _spawn._libc() is None:
        pytest.skip("no posix_spawn path here: the fallback forks, with no FIFO")
    opens: list[tuple[float, bool]] = []
    real_open_gate, real_run = _spawn._open_gate, _spawn._Spawner.run

    def open_gate(fifo: str) -> bool:
        opened = real_open_gate(fifo)
        opens.append((time.monotonic(), opened))
        return opened

    def run(spawner: _spawn._Spawner, spawn: Callable[[], int], gate: _spawn.Gate) -> int:
        def spawn_then_hold() -> int:
            pid = spawn()
            time.sleep(0.05)
            return pid

        return real_run(spawner, spawn_then_hold, gate)

    monkeypatch.setattr(_spawn, "_open_gate", open_gate)
    monkeypatch.setattr(_spawn._Spawner, "run", run)
    with _spawn.spawner_in_use():
        assert await output(["true"], Unmoved()) == ""
    through = next(i for i, (_, opened) in enumerate(opens) if opened)
    again = opens[through + 1 :]
    # Each open again came at least _REOPEN after the one before.
    span = opens[-1][0] - opens[through][0]
    assert len(again) <= span / _spawn._REOPEN + 1, (len(again), span)


async def test_a_missing_binary_or_cwd_is_named(path: str, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError) as missing:
        await _spawn.spawn([str(tmp_path / "nope")], {}, None, None)
    assert missing.value.filename == str(tmp_path / "nope")
    with pytest.raises(FileNotFoundError) as no_cwd:
        await _spawn.spawn(["true"], {"PATH": os.defpath}, str(tmp_path / "gone"), None)
    assert no_cwd.value.filename == str(tmp_path / "gone")


async def test_one_pidfd_watches_the_cli_and_reaps_it(
    path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The driver watches the exit on the spawn's own pidfd, which the spawn's wait reaps
    # through: one descriptor per process, not one more for the wait. (The fallback's
    # trio Process reaps its own way: the driver opens one to watch.)
    opened: list[int] = []
    real_open = os.pidfd_open

    def pidfd_open(pid: int, flags: int = 0) -> int:
        fd = real_open(pid, flags)
        opened.append(pid)
        return fd

    _spawn._libc()  # loaded beforehand: it tries a pidfd of its own
    monkeypatch.setattr(os, "pidfd_open", pidfd_open)
    async with open_cli_process(Command(argv=("true",), env={"PATH": os.defpath})) as proc:
        assert await proc.wait() == ExitStatus(0)
    assert opened == [proc.pid]


# -- the spawner's thread and FIFO: held by the runtimes, ended with the last ----------------

RESULT = {"type": "result", "subtype": "success", "is_error": False, "result": "ok"}


def spawner_left() -> tuple[list[str], list[str]]:
    """The spawner's threads and the descriptors of its FIFOs in this process."""
    threads = [t.name for t in threading.enumerate() if t.name == "agentrt-spawn"]
    fds = []
    for fd in os.listdir("/proc/self/fd"):
        with suppress(OSError):  # the listing's own descriptor is gone by now
            if "agentrt-spawn-" in (target := os.readlink(f"/proc/self/fd/{fd}")):
                fds.append(target)
    return threads, fds


NOTHING: tuple[list[str], list[str]] = ([], [])


@pytest.fixture
def quick_claude(tmp_path: Path) -> str:
    return fake_cli_executable(str(tmp_path), ["emit", INIT], ["emit", RESULT], name="claude")


@needs_cgroups
async def test_the_spawner_ends_with_the_last_runtime_and_comes_back_with_the_next(
    quick_claude: str,
) -> None:
    async def turn(rt: agentrt.Runtime, name: str) -> None:
        await rt.start_agent(agentrt.Agent, name=name, backend="claude", binary=quick_claude)
        assert (await rt.ask(name, "hi")).text == "ok"

    for _ in range(2):  # and again, on the next runtimes
        async with agentrt.open_runtime(store=agentrt.MemoryStore()) as outer:
            await turn(outer, "a")
            async with agentrt.open_runtime(store=agentrt.MemoryStore()) as inner:
                await turn(inner, "b")
                threads, fds = spawner_left()
                assert threads == ["agentrt-spawn"] and len(fds) == 1
            assert spawner_left() == (threads, fds)  # one runtime still holds it
            await turn(outer, "c")
        assert spawner_left() == NOTHING


@needs_cgroups
def test_runtimes_in_threads_opening_as_the_last_one_closes_share_or_end_it(
    quick_claude: str,
) -> None:
    errors: list[BaseException] = []

    def one(meet: threading.Barrier, name: str) -> None:
        try:
            with agentrt.sync.open_runtime(store=agentrt.MemoryStore()) as rt:
                rt.start_agent(agentrt.Agent, name=name, backend="claude", binary=quick_claude)
                meet.wait(30)
                assert rt.ask(name, "hi").text == "ok"
            meet.wait(30)  # the other opens while this one has just closed
            with agentrt.sync.open_runtime(store=agentrt.MemoryStore()) as rt:
                rt.start_agent(agentrt.Agent, name=name, backend="claude", binary=quick_claude)
                assert rt.ask(name, "hi").text == "ok"
        except BaseException as exc:
            errors.append(exc)

    for _ in range(5):
        meet = threading.Barrier(2)
        threads = [
            threading.Thread(target=one, args=(meet, name), name=f"runtime {name}")
            for name in ("a", "b")
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        # A runtime still running is a hang (a spawn that never returned), not a spawner
        # left behind: said as such.
        assert [t.name for t in threads if t.is_alive()] == []
        assert errors == []
        assert spawner_left() == NOTHING
