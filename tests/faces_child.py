"""Programs on agentrt's asyncio and sync faces, for the tests of what a program is left
with when its reader drops a stream, or when Ctrl-C lands while its runtime closes: each
runs in a process of its own, so that a runtime that never closes fails a test by a bound
instead of hanging the suite.

    python faces_child.py drop-stream sync|asyncio

A scripted turn of 600 events; the reader breaks out of its loop over the turn's stream
after 4 events and prints the class of the turn's `poll` (the turn waits for the reader);
then it drops the stream, unclosed, once the runtime's thread is done with it (its last
read settled before that poll did), and prints the class of the turn's outcome once it
has one, then "left" once the runtime is closed.

    python faces_child.py interrupted-close BINARY

A claude agent on BINARY (a CLI that ignores SIGINT and SIGTERM: only the SIGKILL step
ends it) runs a turn; the program prints the CLI's pid and leaves its ``with`` while the
turn runs. Once the runtime closes (a scripted agent's waiting ask ends with
`AgentStopped` at once, the CLI's turn only after its kill ladder), a thread of its own
sends the process SIGINT, as a terminal's Ctrl-C does; then "left" once the block is left.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import threading

import agentrt
import agentrt.asyncio
import agentrt.sync
from agentrt.testing import ScriptedBackend, Sleep, reply

EVENTS = 600
READ = 4


def long_turn() -> ScriptedBackend:
    script = [agentrt.TextEvent(text=f"{i} ") for i in range(EVENTS)] + reply("done")
    return ScriptedBackend(script)


def drop_stream_sync() -> None:
    with agentrt.sync.open_runtime(store=agentrt.MemoryStore()) as rt:
        rt.start_agent(agentrt.Agent, name="a", backend=long_turn())
        rt.halt("a")  # so that the stream is there before the turn starts
        ref = rt.tell("a", "go")
        events = rt.stream(ref)
        rt.unhalt("a")
        for read, _ in enumerate(events, 1):
            if read == READ:
                break
        print(type(rt.poll(ref)).__name__, flush=True)  # the turn waits for the reader
        del events  # by now only this thread holds the stream
        print(type(rt.wait(ref)).__name__, flush=True)
    print("left", flush=True)


async def drop_stream_asyncio() -> None:
    async with agentrt.asyncio.open_runtime(store=agentrt.MemoryStore()) as rt:
        await rt.start_agent(agentrt.Agent, name="a", backend=long_turn())
        await rt.halt("a")
        ref = await rt.tell("a", "go")
        events, read = rt.stream(ref), 0
        await rt.unhalt("a")
        async for _ in events:
            read += 1
            if read == READ:
                break
        print(type(await rt.poll(ref)).__name__, flush=True)
        del events
        print(type(await rt.wait(ref)).__name__, flush=True)
    print("left", flush=True)


def interrupted_close(binary: str) -> None:
    session, sleeping = threading.Event(), threading.Event()

    class Coder(agentrt.Agent):
        def handle_stream_event(self, event: agentrt.Event) -> None:
            if isinstance(event, agentrt.SessionEvent):
                session.set()

    class Sleeper(agentrt.Agent):
        def pre_turn(self, prompt: str) -> None:
            sleeping.set()

    def ctrl_c_once_closing(rt: agentrt.sync.Runtime) -> None:
        try:
            rt.ask("sleeper", "sleep")
        except agentrt.AgentStopped:
            os.kill(os.getpid(), signal.SIGINT)

    sleeper = ScriptedBackend(default=lambda call: [Sleep(3600)])
    with agentrt.sync.open_runtime(store=agentrt.MemoryStore()) as rt:
        rt.start_agent(Coder, name="coder", backend="claude", binary=binary)
        rt.start_agent(Sleeper, name="sleeper", backend=sleeper)
        rt.tell("coder", "hi")
        threading.Thread(target=ctrl_c_once_closing, args=(rt,), daemon=True).start()
        session.wait()
        sleeping.wait()
        print(json.dumps({"cli": rt.status("coder").cli_pid}), flush=True)
    print("left", flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "drop-stream":
        if sys.argv[2] == "sync":
            drop_stream_sync()
        else:
            asyncio.run(drop_stream_asyncio())
    else:
        interrupted_close(sys.argv[2])
