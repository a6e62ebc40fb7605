"""A small team of agents on the scripted backend: no CLI, no credentials.

    .venv/bin/python examples/scripted_team.py

Three agents share a runtime that runs at most two turns at a time. The reviewer is told
to work in the background and polled; the flaky agent hangs until its watchdog ends the
turn, after which it takes its next prompt as if nothing happened; the writer's asks
queue up and wait for a free slot.
"""

from __future__ import annotations

import trio

import agentrt
from agentrt.testing import Call, Gate, ScriptedBackend, Sleep, reply


def slow_echo(seconds: float) -> object:
    def script(call: Call) -> list[object]:
        return [Sleep(seconds), *reply(f"done: {call.prompt}", session_id="writer-1")]

    return script


class Reviewer(agentrt.Agent):
    """Keeps a tally on the instance; the runtime calls it between turns only."""

    def __init__(self) -> None:
        self.reviewed = 0

    def handle_response(self, ref: agentrt.Ref, response: agentrt.Response) -> None:
        self.reviewed += 1


async def main(out: list[str] | None = None) -> None:
    start = trio.current_time()

    def say(line: str) -> None:
        text = f"[{trio.current_time() - start:5.2f}s] {line}"
        print(text)
        if out is not None:
            out.append(text)

    reviewer = Reviewer()
    # A store in memory: scripted sessions are no one's to continue, so they stay out of
    # the user's own store (the default, a file in their home).
    async with agentrt.open_runtime(store=agentrt.MemoryStore(), max_processes=2) as rt:
        await rt.start_agent(
            agentrt.Agent, name="writer", backend=ScriptedBackend(default=slow_echo(0.2))
        )
        await rt.start_agent(
            reviewer, name="reviewer", backend=ScriptedBackend(default=slow_echo(0.5))
        )
        await rt.start_agent(
            agentrt.Agent,
            name="flaky",
            backend=ScriptedBackend([Gate()], default=slow_echo(0.1)),
            watchdog=1.0,
        )

        review = await rt.tell("reviewer", "review chapter 1")
        say(f"told the reviewer; poll says {await rt.poll(review)}")

        flaky = await rt.tell("flaky", "this one hangs")

        async with trio.open_nursery() as nursery:

            async def ask_writer(prompt: str) -> None:
                response = await rt.ask("writer", prompt)
                say(f"writer answered {response.text!r}")

            for prompt in ["outline", "draft", "polish"]:
                nursery.start_soon(ask_writer, prompt)
                await trio.sleep(0.01)
            status = await rt.status("writer")
            waiting = status.current is not None and status.current.waiting_for_process
            say(
                f"writer is {status.state}{' (waiting for a slot)' if waiting else ''}"
                f" with {status.queued} asks queued"
            )

        result = await rt.wait(review)
        say(f"reviewer finished: {type(result).__name__} ({reviewer.reviewed} reviewed)")

        outcome = await rt.wait(flaky)
        if isinstance(outcome, agentrt.Failed) and isinstance(outcome.error, agentrt.TurnFailed):
            say(f"flaky turn ended by its watchdog: {outcome.error.reason.value}")
        response = await rt.ask("flaky", "try again")
        say(f"flaky answered {response.text!r} on its next turn")
        say(f"writer's session: {(await rt.status('writer')).session_id}")


if __name__ == "__main__":
    trio.run(main)
