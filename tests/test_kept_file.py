"""`agentrt._driver._kept_file.KeptFile`'s own unit test: a kernel file kept open shows what is true
at each read, and nothing once its process is gone (never a later one under the same pid)."""

from __future__ import annotations

import ctypes
import mmap
import os
import signal
import subprocess
import sys

from agentrt._driver._kept_file import KeptFile


def state(stat: bytes | None) -> str:
    assert stat is not None
    return stat[stat.rindex(b")") + 2 :].split()[0].decode()


def test_each_read_is_the_files_content_then_and_none_once_the_process_is_reaped() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    kept = KeptFile(f"/proc/{child.pid}/stat")
    try:
        assert state(kept.read()) in "SR"
        os.kill(child.pid, signal.SIGSTOP)
        os.waitpid(child.pid, os.WUNTRACED)  # returns once it has stopped
        assert state(kept.read()) == "T"  # read again through the same descriptor
        child.kill()
        os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)
        assert state(kept.read()) == "Z"
    finally:
        child.kill()
        child.wait()
    assert kept.read() is None  # reaped: whatever gets the pid next is not read
    kept.close()


def test_a_file_that_is_not_there_reads_as_gone() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    kept = KeptFile(f"/proc/{child.pid}/statm")
    assert kept.read() is None
    kept.close()


def test_content_longer_than_one_read_comes_whole() -> None:
    # The kernel renders /proc/self/maps a page at a time: 400 mappings of our own (shared
    # and private ones alternate, so they stay apart), listed in it after many pages.
    flags = (mmap.MAP_SHARED, mmap.MAP_PRIVATE)
    regions = [mmap.mmap(-1, mmap.PAGESIZE, flags=flags[n % 2]) for n in range(400)]
    starts = [ctypes.addressof(ctypes.c_char.from_buffer(region)) for region in regions]
    kept = KeptFile("/proc/self/maps")
    try:
        got = kept.read()
    finally:
        kept.close()
    assert got is not None and len(got) > 4 * mmap.PAGESIZE
    ranges = [[int(x, 16) for x in line.split()[0].split(b"-")] for line in got.splitlines()]
    assert all(any(low <= start < high for low, high in ranges) for start in starts)
