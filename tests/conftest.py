"""After every test, no process this test session started may be left running, nor a cgroup
its runtimes made for their turns; and no test writes a session store into the user's home."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from agentrt import MemoryStore, SessionStore, _cgroup, _proctree, _runtime

REAL_DEFAULT_STORE = _runtime._default_store


@pytest.fixture(autouse=True)
def private_store(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``open_runtime()`` without a store gets a MemoryStore here: the SQLite default waits
    on a worker thread, which lets an autojumping MockClock run ahead of the test. Anything
    that still asks for the default path (child processes, `default_store` below) gets one
    in the test's own directory."""
    monkeypatch.setenv("AGENTRT_STORE", str(tmp_path / "agentrt-store" / "sessions.sqlite3"))
    monkeypatch.setattr(_runtime, "_default_store", MemoryStore)


@pytest.fixture
def default_store(monkeypatch: pytest.MonkeyPatch) -> None:
    """Give ``open_runtime()`` its real default (SQLite at ``$AGENTRT_STORE``) back."""

    def real() -> SessionStore:
        return REAL_DEFAULT_STORE()

    monkeypatch.setattr(_runtime, "_default_store", real)


def leftover_processes() -> list[_proctree.ProcStat]:
    """Running processes we started: descendants of this process, and anything carrying an
    env marker issued by it (a setsid'd orphan reparented away from us). Other users'
    processes are never read (`marker_of` checks the owner first)."""
    me = os.getpid()
    procs = _proctree.snapshot()
    ours = _proctree.descendants(procs, [me])
    prefix = f"{me}."
    for st in procs.values():
        if st.pid not in ours and st.pid != me:
            marker = _proctree.marker_of(st.pid)
            if marker is not None and marker.startswith(prefix):
                ours.add(st.pid)
    ours |= _proctree.descendants(procs, ours)
    return [procs[pid] for pid in sorted(ours) if not procs[pid].gone]


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")[:200]
    except OSError:
        return "?"


def leftover_cgroups() -> list[Path]:
    """The cgroups runtimes of this process made for their turns (named for our pid)."""
    try:
        parent, _ = _cgroup.own_cgroup()
    except _cgroup.Unavailable:
        return []
    return sorted(Path(parent).glob(f"agentrt-{os.getpid()}-*"))


@pytest.fixture(autouse=True)
def no_leftover_processes() -> Iterator[None]:
    yield
    left = leftover_processes()
    cgroups = leftover_cgroups()
    for path in cgroups:  # so that one leak does not fail every later test
        trio.run(_cgroup.remove_tree, str(path))
    if left:
        described = [f"{st.pid} ({st.state}) {_cmdline(st.pid)}" for st in left]
        for st in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(st.pid, signal.SIGKILL)
        pytest.fail("processes left running:\n" + "\n".join(described))
    if cgroups:
        pytest.fail("turn cgroups left behind:\n" + "\n".join(map(str, cgroups)))
