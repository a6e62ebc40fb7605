"""The console under load: 200 agents, 20 of them streaming turns at once, each followed by
an open agent page, and a fleet page (issue 25).

    .venv/bin/python -m bench.console [--agents 200] [--streaming 20] [--seconds 20]

The runtime and the console run in this process on a MemoryStore with scripted agents (no
CLI processes: what is measured is the console). The pages are a child process of plain
HTTP clients (one server-sent event stream per streaming agent's page, one for the fleet)
that count the events they receive, so the CPU figures are the server's alone. Reported:
events produced by the turns and delivered to the pages per second, what the relay dropped
(a page that falls behind never slows a turn), fleet updates received, and the server's
CPU time over the window (process time, all its threads).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import trio

import agentrt
from agentrt.testing import ScriptedBackend
from agentrt.testing._scripted import Sleep

# One streaming turn: CHUNKS text events, a millisecond apart, then the result.
CHUNKS = 200
TEXT = "streamed words of a reply. " * 2

_CLIENT = r"""
import json, sys, time, trio

async def stream(port, cookie, path, counts, key, deadline):
    s = await trio.open_tcp_stream("127.0.0.1", port)
    head = f"GET {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncookie: {cookie}\r\n\r\n"
    await s.send_all(head.encode())
    frame = b"event: event\n" if key == "events" else b"event: fleet\n"
    with trio.move_on_at(deadline):
        async for chunk in s:
            counts[key] += chunk.count(frame)
            counts["dropped_notices"] += chunk.count(b"event: dropped\n")
            counts["bytes"] += len(chunk)
    await s.aclose()

async def main(port, cookie, names, seconds):
    counts = {"events": 0, "fleet": 0, "bytes": 0, "dropped_notices": 0}
    deadline = trio.current_time() + seconds
    async with trio.open_nursery() as n:
        n.start_soon(stream, port, cookie, "/events/fleet", counts, "fleet", deadline)
        for name in names:
            path = f"/events/agent?name={name}"
            n.start_soon(stream, port, cookie, path, counts, "events", deadline)
    print(json.dumps(counts))

trio.run(main, int(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3]), float(sys.argv[4]))
"""


def turn(call: object) -> list[object]:
    steps: list[object] = []
    for _ in range(CHUNKS):
        steps += [agentrt.TextEvent(text=TEXT), Sleep(0.001)]
    return [*steps, agentrt.ResultEvent(text="done")]


async def measure(agents: int, streaming: int, seconds: float) -> dict[str, Any]:
    produced = 0

    class Counting(agentrt.Agent):
        def handle_stream_event(self, event: agentrt.Event) -> None:
            nonlocal produced
            produced += 1

    async with agentrt.open_runtime(store=agentrt.MemoryStore()) as rt:
        names = [f"agent-{i:03d}" for i in range(agents)]
        for name in names:
            await rt.start_agent(Counting, name=name, backend=ScriptedBackend(default=turn))
        busy = names[:streaming]
        async with agentrt.open_console(rt) as console, trio.open_nursery() as nursery:
            cookie = "agentrt_console=" + console.url.split("token=", 1)[1]
            port = console.address.rsplit(":", 1)[1]

            async def keep_busy(name: str) -> None:
                # Tells: an ask's turn has no ref a stream (so a page) can follow.
                while True:
                    await rt.wait(await rt.tell(name, "go"))

            for name in busy:
                nursery.start_soon(keep_busy, name)
            await trio.sleep(2)  # the turns run and the pages settle before the window
            produced_before, cpu_before = produced, time.process_time()
            began = time.monotonic()
            argv = [sys.executable, "-c", _CLIENT, port, cookie, json.dumps(busy), str(seconds)]
            result = await trio.run_process(argv, capture_stdout=True)
            took = time.monotonic() - began
            cpu = time.process_time() - cpu_before
            produced_in_window = produced - produced_before
            nursery.cancel_scope.cancel()
    counts = json.loads(result.stdout)
    return {
        "agents": agents,
        "streaming": streaming,
        "seconds": round(took, 1),
        "events_produced_per_s": round(produced_in_window / took),
        "events_delivered_per_s": round(counts["events"] / took),
        "fleet_updates": counts["fleet"],
        "relay_drop_notices": counts["dropped_notices"],
        "bytes_per_s": round(counts["bytes"] / took),
        "server_cpu_percent": round(100 * cpu / took, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=200)
    parser.add_argument("--streaming", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    print(json.dumps(trio.run(measure, args.agents, args.streaming, args.seconds), indent=2))


if __name__ == "__main__":
    main()
