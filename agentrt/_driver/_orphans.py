"""Orphans that escaped every turn's tree, reaped when they exit.

Without cgroups a process can leave a turn's tree unseen (a double fork, ``setsid``, an
exec with a cleared environment: no marker, no parent to walk from) and end up our child,
since we are the subreaper. Nobody else will ever wait for it, so once it exits it would
stay a zombie of the runtime for as long as the runtime runs. Each one found is watched
through a pidfd and reaped the moment it exits: exactly that process, never ``waitpid(-1)``.
"""

from __future__ import annotations

import os
from contextlib import suppress

import trio

from ._procfs import read_stat
from ._proctree import adopted_orphans


class OrphanReaper:
    """Watch the orphans `sweep` finds while `run` runs."""

    def __init__(self) -> None:
        self._watched: set[int] = set()
        self._nursery: trio.Nursery | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Until cancelled; orphans still running then are left to whoever adopts them next."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            try:
                await trio.sleep_forever()
            finally:
                self._nursery = None

    def sweep(self) -> None:
        """Start watching every adopted orphan not watched yet (a zombie is reaped at once)."""
        if self._nursery is None:
            return
        for st in adopted_orphans():
            if st.pid in self._watched:
                continue
            try:
                fd = os.pidfd_open(st.pid)
            except OSError:
                continue
            now = read_stat(st.pid)
            if now is None or now.start_time != st.start_time:  # reaped meanwhile, pid reused
                os.close(fd)
                continue
            self._watched.add(st.pid)
            self._nursery.start_soon(self._reap, st.pid, fd)

    async def _reap(self, pid: int, fd: int) -> None:
        try:
            await trio.lowlevel.wait_readable(fd)
            _reap_exited(fd)
        finally:
            os.close(fd)
            self._watched.discard(pid)


def _reap_exited(fd: int) -> None:
    # The pidfd is readable: its process has exited, so this does not block.
    with suppress(ChildProcessError):
        os.waitid(os.P_PIDFD, fd, os.WEXITED | os.WNOHANG)
