"""Programs on one store for the tests of durable requests (test_durable_requests.py).

    python durable_child.py STORE RECORD POLICY fill|run|caller

STORE is an SQLite file, or a PostgreSQL DSN (``host=... dbname=...``). Three agents
``a0``, ``a1``, ``a2`` on a scripted backend that appends each prompt it is given to RECORD
(``agent<TAB>prompt<TAB>resumed session``), with ``on_owner_death=POLICY``.

``fill``: halts ``a1`` and ``a2``, tells the 50 prompts ``p0`` .. ``p49`` (keys ``job-N``,
agent ``aN%3``), and prints ``READY`` once ``a0``'s first turn runs; that turn never ends
(the test SIGKILLs the program). ``run``: the next owner: answers each prompt with
``answer to <prompt>`` and prints ``DONE`` once every request it runs has settled, then
closes. ``caller``: owns no agent: finds each request by its key and waits for it, printing
``RESULT <key> <outcome> <text or error type> <session>`` per key, then ``DONE``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import trio

import agentrt
from agentrt.testing import ScriptedBackend, Sleep, reply

AGENTS = ("a0", "a1", "a2")
COUNT = 50


def keyed() -> list[tuple[str, str, str]]:
    """(agent, key, prompt) of each request, in the order they are told."""
    return [(AGENTS[n % 3], f"job-{n}", f"p{n}") for n in range(COUNT)]


class Worker(agentrt.Agent):
    # Set once a0's session is checkpointed (the store has it before its events go on).
    session_seen = trio.Event()

    def handle_stream_event(self, event: agentrt.Event) -> None:
        if isinstance(event, agentrt.SessionEvent):
            Worker.session_seen.set()


def backend(name: str, record: Path, *, hang: bool) -> ScriptedBackend:
    def script(call: agentrt.testing.Call) -> list[object]:
        with record.open("a") as file:
            file.write(f"{name}\t{call.prompt}\t{call.session_id}\n")
        if hang:
            return [agentrt.SessionEvent(session_id=f"sess-{name}"), Sleep(3600)]
        return reply(f"answer to {call.prompt}", session_id=f"sess-{name}")

    return ScriptedBackend(default=script, record=False)


async def main(store: str, record_path: str, policy: str, mode: str) -> None:
    record = Path(record_path)
    opened: agentrt.SessionStore = (
        agentrt.PostgresStore(store) if "dbname=" in store else agentrt.SQLiteStore(store)
    )
    async with agentrt.open_runtime(store=opened) as rt:
        if mode == "caller":
            for agent, key, _prompt in keyed():
                ref = await rt.request(agent, key)
                assert ref is not None, key
                result = await rt.wait(ref)
                if isinstance(result, agentrt.Completed):
                    shown = f"complete {result.response.text.replace(' ', '_')}"
                    session = result.response.session_id
                else:
                    assert isinstance(result, agentrt.Failed), result
                    shown = f"failed {type(result.error).__name__}"
                    session = getattr(result.error, "session_id", None)
                print(f"RESULT {key} {shown} {session}", flush=True)
            print("DONE", flush=True)
            return
        hang = mode == "fill"
        for name in AGENTS:
            await rt.start_agent(
                Worker,
                name=name,
                backend=backend(name, record, hang=hang),
                on_owner_death=policy,
            )
        if hang:
            await rt.halt("a1")
            await rt.halt("a2")
            for agent, key, prompt in keyed():
                await rt.tell(agent, prompt, key=key)
            await Worker.session_seen.wait()  # a retry resumes it
            print("READY", flush=True)
            await trio.sleep_forever()
        for agent, key, _prompt in keyed():
            ref = await rt.request(agent, key)
            assert ref is not None, key
            await rt.wait(ref)
        print("DONE", flush=True)


if __name__ == "__main__":
    trio.run(main, *sys.argv[1:5])
