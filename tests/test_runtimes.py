"""Runtime ids (agentrt._driver._runtimes): which runtime wrote a record, and whether it is gone."""

from __future__ import annotations

import os
import socket

from agentrt._driver._runtimes import new_runtime_id, runtime_gone


def test_which_runtimes_count_as_gone() -> None:
    mine = new_runtime_id()
    host, pid, start, _ = mine.split(":")
    assert host == socket.gethostname() and int(pid) == os.getpid()
    assert runtime_gone(mine)  # of this process, but not open
    assert not runtime_gone(f"another-host-{host}:{pid}:{start}:x")
    assert not runtime_gone("not an agentrt id")
    assert not runtime_gone(f"{host}:pid:start:x")
    assert runtime_gone(f"{host}:{pid}:{int(start) + 1}:x")  # this pid, another process
    assert runtime_gone(f"{host}:{2**22 + 7}:1:x")  # no such process
