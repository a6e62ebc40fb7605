"""After every test, no process this test session started may be left running."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator

import pytest

from agentrt import _proctree


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


@pytest.fixture(autouse=True)
def no_leftover_processes() -> Iterator[None]:
    yield
    left = leftover_processes()
    if left:
        described = [f"{st.pid} ({st.state}) {_cmdline(st.pid)}" for st in left]
        for st in left:  # so that one leak does not fail every later test
            with contextlib.suppress(ProcessLookupError):
                os.kill(st.pid, signal.SIGKILL)
        pytest.fail("processes left running:\n" + "\n".join(described))
