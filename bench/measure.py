"""One measurement, in the fresh process the harness starts for it.

``python -m bench.measure SPEC`` (SPEC is JSON) runs one scenario for one contender and
prints one JSON object: wall seconds, CPU seconds (user + system of this process and of its
reaped children, such as the fake CLIs), peak RSS of this process and its growth over the
measured part, plus what the scenario adds. Setup (imports, the contender's
untimed preparation) happens before the clock starts. A fresh process per measurement
keeps one run's memory peak and allocator state out of the next.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import trio

from . import asyncio_bridge, cli_tree, interrupt, many_agents
from .contenders import (
    CONVERSATION_CONTENDERS,
    INTERRUPT_CONTENDERS,
    SCALE_CONTENDERS,
    TURN_CONTENDERS,
    Ask,
    Claude,
    Loop,
    Say,
    Turn,
)
from .generate import Fixture

Result = dict[str, Any]


class IncompleteTurn(Exception):
    """A contender's turn did not end with the fixture's result: its figures would lie."""


@contextlib.contextmanager
def _usage(out: Result) -> Iterator[None]:
    self0 = resource.getrusage(resource.RUSAGE_SELF)
    kids0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    peak0 = cli_tree.status_kib("self", "VmHWM")
    t0 = time.perf_counter()
    yield
    t1 = time.perf_counter()
    self1 = resource.getrusage(resource.RUSAGE_SELF)
    kids1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    out["wall"] = t1 - t0
    out["cpu"] = sum(
        after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
        for before, after in ((self0, self1), (kids0, kids1))
    )
    # The peak RSS is VmHWM, the high-water mark of this process's own address space; it is
    # what ru_maxrss reports, except that Linux carries into ru_maxrss the peak of the
    # process that exec'd us (the harness, forked) and would report that instead.
    out["maxrss_kib"] = cli_tree.status_kib("self", "VmHWM")
    out["growth_kib"] = out["maxrss_kib"] - peak0


def _run(loop: Loop, main: Callable[[], Awaitable[None]]) -> None:
    if loop == "trio":
        trio.run(main)
    else:

        async def wrapped() -> None:
            await main()

        asyncio.run(wrapped())


async def _concurrently(loop: Loop, turn: Turn, slots: int) -> list[bool]:
    if loop == "asyncio":
        return list(await asyncio.gather(*(turn(slot) for slot in range(slots))))
    done = [False] * slots

    async def one(slot: int) -> None:
        done[slot] = await turn(slot)

    async with trio.open_nursery() as nursery:
        for slot in range(slots):
            nursery.start_soon(one, slot)
    return done


def _turns(spec: dict[str, Any]) -> Result:
    contender = TURN_CONTENDERS[spec["contender"]]
    fixture = Fixture.from_json(spec["fixture"])
    scenario = spec["scenario"]
    slots = spec.get("slots", 1)
    turns = spec.get("turns", 1)
    out: Result = {}

    def check(ok: bool | list[bool]) -> None:
        if not (all(ok) if isinstance(ok, list) else ok):
            raise IncompleteTurn(f"{contender.name}: a turn of {fixture.name} saw no result")

    async def body(turn: Turn) -> None:
        if scenario == "concurrent":
            with _usage(out):
                oks = await _concurrently(contender.loop, turn, slots)
            check(oks)
        elif scenario == "tiny":
            check(await turn(0))  # warm-up: first spawn, first import paths
            oks = []
            with _usage(out):
                for _ in range(turns):
                    oks.append(await turn(0))
            check(oks)
        else:
            with _usage(out):
                ok = await turn(0)
            check(ok)

    async def main() -> None:
        await contender.run(fixture, slots, body)

    _run(contender.loop, main)
    return out


def _interrupt(spec: dict[str, Any]) -> Result:
    contender = INTERRUPT_CONTENDERS[spec["contender"]]
    out: Result = {}

    async def main() -> None:
        out["latencies"] = await interrupt.measure(contender, spec["turns"])

    trio.run(main)
    return out


def _idle(spec: dict[str, Any]) -> Result:
    contender = SCALE_CONTENDERS[spec["contender"]]
    n = spec["agents"]
    out: Result = {"agents": n}

    async def checkpoint() -> None:
        gc.collect()
        out["rss_after_kib"] = cli_tree.status_kib("self", "VmRSS")

    async def main() -> None:
        gc.collect()
        out["rss_before_kib"] = cli_tree.status_kib("self", "VmRSS")
        await contender.idle(n, checkpoint)

    # Imported before the baseline: agentrt's modules and its testing kit are ~15 MiB, which
    # the 10,000 agents' growth would otherwise carry as 1.5 KiB each.
    import agentrt.testing  # noqa: F401

    trio.run(main)
    if "rss_after_kib" not in out:
        raise RuntimeError(f"{contender.name}: idle run never reached its checkpoint")
    out["kib_per_agent"] = (out["rss_after_kib"] - out["rss_before_kib"]) / n
    return out


def _asks(spec: dict[str, Any]) -> Result:
    contender = SCALE_CONTENDERS[spec["contender"]]
    n = spec["asks"]
    # "On one core": pin this process, so a runtime cannot borrow the second one.
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    out: Result = {"asks": n}

    async def body(ask: Ask) -> None:
        for _ in range(min(n, 200)):
            await ask()
        with _usage(out):
            for _ in range(n):
                await ask()

    async def main() -> None:
        await contender.asks(body)

    trio.run(main)
    out["per_second"] = n / out["wall"]
    return out


# How long a conversation's CLI idles after its last turn before its memory is read: long
# enough for what it does after a result (writing the transcript) to be over.
IDLE_BEFORE_RSS = 1.0


@contextlib.contextmanager
def _fake_claude(binary: str, cli: str = "claude") -> Iterator[tuple[Claude, int]]:
    """The real CLI (``cli``: claude or gemini) on a fresh HOME and project, with a fake
    API of their own (the fake's pid is the second item)."""
    with tempfile.TemporaryDirectory(prefix="bench-warm-") as tmp:
        home, cwd = os.path.join(tmp, "home"), os.path.join(tmp, "project")
        for folder in (home, cwd, os.path.join(home, "tmp")):
            os.mkdir(folder)
        with subprocess.Popen(
            [sys.executable, "-m", "bench.fake_api", home, cli],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        ) as fake:
            assert fake.stdin is not None and fake.stdout is not None
            try:
                env = {
                    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                    "LANG": "C.UTF-8",
                    "TMPDIR": os.path.join(home, "tmp"),
                    **json.loads(fake.stdout.readline()),
                }
                yield Claude(binary, cwd, env), fake.pid
            finally:
                fake.stdin.close()
                fake.wait(timeout=30)


def _conversation(spec: dict[str, Any]) -> Result:
    # Turn 1 (the CLI's start included) is timed on its own; turns 2..N one by one, with the
    # CPU of this process and of the CLI's tree over them. The fake API runs in a process of
    # its own, left out of every figure.
    contender = CONVERSATION_CONTENDERS[spec["contender"]]
    out: Result = {"turns": spec["turns"]}
    with _fake_claude(spec["binary"], contender.cli) as (claude, fake):
        body = _conversing(out, spec["turns"], fake, contender.loop)
        _run(contender.loop, lambda: contender.run(claude, body))
    return out


def _interleaved(spec: dict[str, Any]) -> Result:
    # Every contender's conversation at once in this process (on trio: the SDK runs on it
    # too), their turns taken one after another, the order rotated each turn: each
    # follow-up is compared with the others' under the same load. One turn runs at a time,
    # so this process's CPU over a turn is that contender's (the others wait, their CLIs are
    # processes of their own); memory cannot be told apart here.
    names: list[str] = spec["contenders"]
    turns: int = spec["turns"]
    latencies: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}

    async def hold(
        name: str, claude: Claude, *, task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED
    ) -> None:
        # Each conversation's turns run in its own task (the SDK's task groups need it).
        prompts_in, prompts = trio.open_memory_channel[str](0)
        answers_in, answers = trio.open_memory_channel[str | None](0)

        async def body(say: Say) -> None:
            task_status.started((prompts_in, answers))
            async for prompt in prompts:
                await answers_in.send(await say(prompt))

        await CONVERSATION_CONTENDERS[name].run(claude, body)

    async def main(claudes: list[Claude]) -> None:
        async with trio.open_nursery() as nursery:
            channels = [
                await nursery.start(hold, n, c) for n, c in zip(names, claudes, strict=True)
            ]
            order = list(zip(names, channels, strict=True))
            for n in range(1, turns + 1):
                prompt = f"turn {n}"
                k = n % len(order)
                for name, (ask, answer) in order[k:] + order[:k]:
                    cpu0 = _cpu_self()
                    t0 = time.perf_counter()
                    await ask.send(prompt)
                    text = await answer.receive()
                    latencies[name].append(time.perf_counter() - t0)
                    cpu[name].append(_cpu_self() - cpu0)
                    if text is None or f"ok: {prompt}" not in text:
                        raise IncompleteTurn(f"{name}: turn {n} answered {text!r}")
            for ask, _ in channels:
                await ask.aclose()

    # Every contender's imports before the loop runs, not in its first task step: importing
    # the SDK (pydantic models) took 8.5 s on a loaded machine, a step that held up the
    # runtimes already open past their leases (each fenced its agent: "lease lost").
    import claude_agent_sdk  # noqa: F401

    import agentrt  # noqa: F401

    with contextlib.ExitStack() as stack:
        claudes = [stack.enter_context(_fake_claude(spec["binary"]))[0] for _ in names]
        trio.run(main, claudes)
    return {
        "turns": turns,
        "latencies": {name: xs[1:] for name, xs in latencies.items()},
        "cpu_self": {name: xs[1:] for name, xs in cpu.items()},
        "wall": sum(sum(xs[1:]) for xs in latencies.values()),
        "maxrss_kib": cli_tree.status_kib("self", "VmHWM"),
    }


def _cpu_self() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _conversing(out: Result, turns: int, fake: int, loop: Loop) -> Callable[[Say], Awaitable[None]]:
    async def body(say: Say) -> None:
        latencies = []
        for n in range(1, turns + 1):
            if n == 2:
                self0 = resource.getrusage(resource.RUSAGE_SELF)
                cli0 = cli_tree.cpu_seconds(exclude={fake})
            prompt = f"turn {n}"
            t0 = time.perf_counter()
            text = await say(prompt)
            latencies.append(time.perf_counter() - t0)
            if text is None or f"ok: {prompt}" not in text:
                raise IncompleteTurn(f"turn {n} answered {text!r}")
        self1 = resource.getrusage(resource.RUSAGE_SELF)
        cli1 = cli_tree.cpu_seconds(exclude={fake})
        follow_ups = turns - 1
        out["first"] = latencies[0]
        out["latencies"] = latencies[1:]
        out["wall"] = sum(latencies[1:])
        out["cpu_self"] = (
            self1.ru_utime - self0.ru_utime + self1.ru_stime - self0.ru_stime
        ) / follow_ups
        out["cpu_cli"] = (cli1 - cli0) / follow_ups
        await (trio.sleep if loop == "trio" else asyncio.sleep)(IDLE_BEFORE_RSS)
        out["cli_rss_kib"] = cli_tree.rss_kib(exclude={fake})
        out["maxrss_kib"] = cli_tree.status_kib("self", "VmHWM")
        out["rss_kib"] = cli_tree.status_kib("self", "VmRSS")

    return body


_SCENARIOS: dict[str, Callable[[dict[str, Any]], Result]] = {
    "mix": _turns,
    "small": _turns,
    "tiny": _turns,
    "concurrent": _turns,
    "interrupt": _interrupt,
    "idle": _idle,
    "asks": _asks,
    "warm": _conversation,
    "warm-interleaved": _interleaved,
    "agents": many_agents.measure,
    "bridge": asyncio_bridge.measure,
}


def main() -> None:
    # Started in the background by a script, this process inherits SIGINT ignored, and so
    # would every CLI it starts: the interrupt scenario's shell could not trap it and would
    # wait for SIGTERM a second later. Caught here, it is the default again after exec.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    spec = json.loads(sys.argv[1])
    result = _SCENARIOS[spec["scenario"]](spec)
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
