"""A pool: N agents behind a small dispatcher, at most ``max_processes`` CLIs at a time.

    .venv/bin/python examples/pool.py [DIRECTORY]

Jobs go into one channel; each agent's worker takes the next job whenever its agent is
free. The runtime's ``max_processes`` bounds how many CLI processes run at once, however
many agents there are: the others wait for a slot (``status().current.waiting_for_process``).
"""

from __future__ import annotations

import math
import sys

import trio

import agentrt

JOBS = [
    f"Write a one-line docstring for a Python function named {name}()."
    for name in ("parse", "render", "retry", "merge", "split", "flush")
]


async def main(cwd: str = ".", agents: int = 4, max_processes: int = 2) -> dict[str, str]:
    done: dict[str, str] = {}
    send, receive = trio.open_memory_channel[str](math.inf)
    for job in JOBS:
        send.send_nowait(job)
    send.close()
    async with agentrt.open_runtime(max_processes=max_processes) as rt:
        names = [f"pool-{i + 1}" for i in range(agents)]
        for name in names:
            await rt.start_agent(agentrt.Agent, name=name, backend="claude", cwd=cwd, tools=[])

        async def worker(name: str, jobs: trio.MemoryReceiveChannel[str]) -> None:
            async with jobs:
                async for job in jobs:
                    response = await rt.ask(name, job)
                    done[job] = name
                    print(f"{name}: {response.text}")

        async with trio.open_nursery() as nursery:
            for name in names:
                nursery.start_soon(worker, name, receive.clone())
            receive.close()
            peak = 0
            while len(done) < len(JOBS):
                peak = max(peak, rt.statistics().processes_in_use)
                await trio.sleep(0.01)
    print(f"{len(done)} jobs on {len(set(done.values()))} agents, at most {peak} CLIs at once")
    return done


if __name__ == "__main__":
    trio.run(main, sys.argv[1] if len(sys.argv) > 1 else ".")
