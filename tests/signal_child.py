"""A runtime in a program of its own, for the tests of what a CLI inherits from the signal
state the runtime was started with (a shell starts a background job with SIGINT ignored).

    python signal_child.py BINARY

Starts one claude agent on BINARY, tells it a prompt, interrupts the turn once the CLI has
reported its session, and prints one JSON line: the turn's stop reason, the signal that
ended the CLI, and whether this program's own SIGINT is still as it was started.
"""

from __future__ import annotations

import json
import signal
import sys

import trio

import agentrt


class Coder(agentrt.Agent):
    session = trio.Event()

    def handle_stream_event(self, event: agentrt.Event) -> None:
        if isinstance(event, agentrt.SessionEvent):
            self.session.set()


async def main(binary: str) -> None:
    started_with = (signal.getsignal(signal.SIGINT), signal.pthread_sigmask(signal.SIG_BLOCK, ()))
    async with agentrt.open_runtime(store=agentrt.MemoryStore()) as rt:
        await rt.start_agent(Coder, name="a", backend="claude", binary=binary)
        ref = await rt.tell("a", "hi")
        await Coder.session.wait()
        await rt.interrupt("a")
        outcome = await rt.wait(ref)
    assert isinstance(outcome, agentrt.Failed) and isinstance(outcome.error, agentrt.TurnFailed)
    now = (signal.getsignal(signal.SIGINT), signal.pthread_sigmask(signal.SIG_BLOCK, ()))
    print(
        json.dumps(
            {
                "reason": outcome.error.reason.value,
                "signal": outcome.error.exit_status and outcome.error.exit_status.signal,
                "runtime_unchanged": now == started_with,
            }
        )
    )


if __name__ == "__main__":
    trio.run(main, sys.argv[1])
