"""An agent that crashes and comes back: same conversation, same state, its queue intact.

    .venv/bin/python examples/restart_resume.py

The scripted backend stands in for a coding CLI (each "CLI turn" line shows the session
the turn resumes, as ``claude --resume <id>`` would). The ledger agent keeps a count of
the entries it has filed (``checkpoint_state`` / ``restore_state``) and crashes on an
entry it cannot read. Its supervisor, the runtime, restarts it after a short backoff: a
new instance, ``init_agent`` again, its state restored, and the prompt that was queued
behind the crash runs on the same session. Then the program "restarts": a second runtime
on the same store resumes the session and the state. (The crash is logged to stderr.)
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import trio

import agentrt
from agentrt.testing import Call, ScriptedBackend, reply


class Books(msgspec.Struct):
    filed: int = 0


class Ledger(agentrt.Agent):
    state_type = Books

    def init_agent(self, **options: Any) -> dict[str, Any]:
        self.say: Callable[[str], None] = options.pop("say")
        self.books = Books()
        self.say("init_agent: a new Ledger instance")
        return options

    def restore_state(self, state: Books) -> None:
        self.books = state
        self.say(f"restore_state: entries filed so far: {state.filed}")

    def checkpoint_state(self) -> Books:
        return self.books

    def handle_response(self, ref: agentrt.Ref, response: agentrt.Response) -> None:
        if "???" in response.text:
            raise ValueError("cannot read this entry")
        self.books.filed += 1


async def main(out: list[str] | None = None, store: agentrt.SessionStore | None = None) -> None:
    start = trio.current_time()

    def say(line: str) -> None:
        text = f"[{trio.current_time() - start:5.2f}s] {line}"
        print(text)
        if out is not None:
            out.append(text)

    def cli_turn(call: Call) -> list[object]:
        resumed = f"--resume {call.session_id}" if call.session_id else "a new session"
        say(f"CLI turn for {call.prompt!r} ({resumed})")
        return reply(f"filed: {call.prompt}", session_id="ledger-1")

    backend = ScriptedBackend(default=cli_turn)
    with tempfile.TemporaryDirectory() as scratch:
        if store is None:
            store = agentrt.SQLiteStore(Path(scratch) / "sessions.sqlite3")

        async with agentrt.open_runtime(store=store) as rt:
            await rt.start_agent(Ledger, name="ledger", backend=backend, say=say)
            answer = await rt.ask("ledger", "coffee 3.50")
            say(f"answer: {answer.text!r}")
            smudged = await rt.tell("ledger", "??? smudged receipt")
            lunch = await rt.tell("ledger", "lunch 12.00")  # queued behind the crash
            crashed = await rt.wait(smudged)
            assert isinstance(crashed, agentrt.Failed)
            say(f"the agent crashed: {crashed.error}")
            status = await rt.status("ledger")
            say(f"status: {status.state}, {status.queued} prompt queued")
            done = await rt.wait(lunch)
            assert isinstance(done, agentrt.Completed)
            status = await rt.status("ledger")
            say(f"answer: {done.response.text!r} (after {status.restarts} restart)")

        say("-- the program exits and starts again --")
        async with agentrt.open_runtime(store=store) as rt:
            await rt.start_agent(Ledger, name="ledger", backend=backend, say=say)
            answer = await rt.ask("ledger", "train 7.20")
            say(f"answer: {answer.text!r} on session {answer.session_id}")
            record = await rt.store.load("ledger")
            assert record is not None
            say(f"the store: {record.turns} turns, last one {record.last_stop_reason}")


if __name__ == "__main__":
    trio.run(main)
