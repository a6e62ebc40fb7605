"""What a turn's cgroup costs, paired: tiny turns through `open_cli_process`, alternating turn
by turn between a tracker with turn cgroups and one without, in one process (the same heap,
the same moment of a shared machine). The heap is filled with live Python objects first, as
a busy runtime's would be: a spawn that forks pays for it, one that does not pays nothing.

    bench/.venv/bin/python -m bench.spawn_cost [--heap-mib 68] [--turns 300]

Prints, per arm, the median wall time of a turn with its 10th-90th percentiles and the
minor page faults of the runtime per turn (getrusage), then the cgroup arm's ratio to the
other: of the medians, and the median of the turn-by-turn ratios. Needs turn cgroups (root,
or a delegated cgroup v2 subtree).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import tempfile
import time
from typing import Any

import trio

from agentrt.backend import Command
from agentrt.lowlevel import ProcessTracker, open_cli_process

_TINY = b'{"type":"system","subtype":"init"}\n{"type":"result","subtype":"success"}\n'


async def _turn(command: Command, tracker: ProcessTracker) -> None:
    async with open_cli_process(command, tracker=tracker) as proc:
        async for _ in proc.batches():
            pass


async def _main(turns: int, command: Command) -> None:
    on, off = ProcessTracker(), ProcessTracker(cgroups=False)
    async with trio.open_nursery() as nursery:
        await nursery.start(on.run, 60.0)
        await nursery.start(off.run, 60.0)
        if not on.isolation.startswith("cgroup"):
            raise SystemExit(f"no turn cgroups here: {on.isolation}")
        walls: dict[str, list[float]] = {"cgroup": [], "no cgroup": []}
        faults = dict.fromkeys(walls, 0)
        arms = [("cgroup", on), ("no cgroup", off)]
        for i in range(turns + 5):  # the first five warm up
            for name, tracker in arms if i % 2 else arms[::-1]:
                before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
                start = time.perf_counter()
                await _turn(command, tracker)
                wall = time.perf_counter() - start
                if i >= 5:
                    walls[name].append(wall * 1e3)
                    faults[name] += resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
        nursery.cancel_scope.cancel()
    for name, values in walls.items():
        deciles = statistics.quantiles(values, n=10)
        print(
            f"{name:9s}  {statistics.median(values):6.2f} ms/turn"
            f" [{deciles[0]:.2f}-{deciles[-1]:.2f}]  {faults[name] / turns:7.1f} minor faults/turn"
        )
    pairs = [a / b for a, b in zip(walls["cgroup"], walls["no cgroup"], strict=True)]
    medians = statistics.median(walls["cgroup"]) / statistics.median(walls["no cgroup"])
    print(f"cgroup / no cgroup: {medians:.2f}x (medians), {statistics.median(pairs):.2f}x (pairs)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--heap-mib", type=int, default=68, help="live heap to hold (MiB)")
    parser.add_argument("--turns", type=int, default=300, help="turns per arm")
    args = parser.parse_args()
    # About 360 B per entry: a dict and its 200-character string.
    heap: list[Any] = [{"n": i, "s": "x" * 200} for i in range(args.heap_mib * 2900)]
    with tempfile.TemporaryDirectory() as directory:
        fixture, cli = os.path.join(directory, "tiny.jsonl"), os.path.join(directory, "tiny.cli")
        with open(fixture, "wb") as f:
            f.write(_TINY)
        with open(cli, "w") as f:
            f.write(f"#!/bin/sh\nexec cat '{fixture}'\n")
        os.chmod(cli, 0o755)
        command = Command(argv=(cli,), env={"PATH": os.defpath}, cwd=directory)
        trio.run(_main, args.turns, command)
    del heap


if __name__ == "__main__":
    main()
