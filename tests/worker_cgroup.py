"""Each test process (the one of a serial run, or each parallel worker) runs in a cgroup of
its own, so that the runtimes its tests open make their turn cgroups there and sweep stale
ones only there. A test that plants the cgroup of "a runtime that died" then sees its own
runtime find it, not another worker's (or another test run's on the same machine), and no
runtime of ours sweeps theirs. Where this process may not move itself (no cgroup v2, no
write access), the tests run where they are, as they always did.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable

import trio

from agentrt._driver import _cgroup, _procfs

_PREFIX = "pytest-worker-"
_NAME = re.compile(rf"{_PREFIX}(\d+)-(\d+)")


def enter() -> Callable[[], None] | None:
    """Move this process into a new cgroup under its own; return how to leave it (back to
    where it was, the cgroup removed), or None where it stays."""
    try:
        parent, _ = _cgroup.own_cgroup()
    except _cgroup.Unavailable:
        return None
    _remove_stale(parent)
    pid = os.getpid()
    path = f"{parent}/{_PREFIX}{pid}-{_procfs.process_start_time(pid) or 0}"
    try:
        os.mkdir(path)
    except OSError:
        return None
    try:
        _move(pid, path)
    except OSError:
        os.rmdir(path)
        return None

    def leave() -> None:
        _move(pid, parent)
        trio.run(_cgroup.remove_tree, path)

    return leave


def _move(pid: int, cgroup: str) -> None:
    with open(f"{cgroup}/cgroup.procs", "w") as f:
        f.write(str(pid))


def _remove_stale(parent: str) -> None:
    """The cgroups of test processes that died without leaving theirs (killed, say)."""
    with contextlib.suppress(FileNotFoundError):
        for entry in os.scandir(parent):
            found = _NAME.fullmatch(entry.name)
            if found and _procfs.process_start_time(int(found[1])) != int(found[2]):
                trio.run(_cgroup.remove_tree, entry.path)
