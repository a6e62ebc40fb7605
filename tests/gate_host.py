"""A runtime of chaos_host.py whose first CLI spawn stops with its child waiting at the spawn
gate (agentrt._driver._spawn), before the child is moved into its cgroup and let go.

    python gate_host.py DSN hold|freeze CHAOS_HOST_ARGUMENTS_AFTER_DSN...

It prints ``GATE <child pid>`` there, then ``hold``: blocks for ever (the test kills it
there); ``freeze``: SIGSTOPs itself, and once continued moves the child and goes on, as a
runtime frozen in the middle of a spawn does. Later spawns are not stopped.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

import chaos_host
import trio

from agentrt._driver._cgroup import TurnCgroup

_move = TurnCgroup.move
_first = threading.Event()  # set at the first move: the later ones go through


def _stopping_move(self: TurnCgroup, pid: int) -> None:
    if not _first.is_set():
        _first.set()
        print(f"GATE {pid}", flush=True)
        if sys.argv[2] == "hold":
            threading.Event().wait()
        os.kill(os.getpid(), signal.SIGSTOP)
    _move(self, pid)


if __name__ == "__main__":
    TurnCgroup.move = _stopping_move  # type: ignore[method-assign]
    trio.run(chaos_host.main, sys.argv[1], *sys.argv[3:])
