"""A kernel file kept open and read again from its start.

A turn's end reads the same few files every time (its cgroup's process list and counts,
its CLI's stat and memory): kept open, each read is one pread(2) at offset 0 instead of an
open, a read and a close. These files are rendered anew for every read from offset 0. A
file under /proc/<pid> stays bound to that very process: once it is reaped, reads fail, so
a later process that reuses the pid is never read through it.
"""

from __future__ import annotations

import errno
import os

_CHUNK = 65536
# What a read says when the object behind the file has gone: a removed cgroup (ENODEV), a
# reaped process (ESRCH), or one that was gone before the first open (ENOENT).
_GONE = frozenset((errno.ENOENT, errno.ESRCH, errno.ENODEV))


class KeptFile:
    """One such file, opened at its first read; `close` it when done."""

    __slots__ = ("_fd", "path")

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: int | None = None

    def read(self) -> bytes | None:
        """The whole content now, or None once what the file shows is gone. Other errors
        raise `OSError`."""
        try:
            if self._fd is None:
                self._fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
            data = os.pread(self._fd, _CHUNK, 0)
            if not data:
                return data
            # The kernel hands out at most a page or so per read: read on to the end.
            while more := os.pread(self._fd, _CHUNK, len(data)):
                data += more
        except OSError as exc:
            if exc.errno in _GONE:
                return None
            raise
        return data

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
