"""What calling agentrt from asyncio or from threads costs (issue 27).

    .venv/bin/python -m bench.asyncio_bridge [--asks N] [--concurrent N]

On the scripted backend (no process), in one run: the latency of one ``ask`` awaited
natively in trio, through ``agentrt.asyncio`` and through ``agentrt.sync`` (p50 and p99;
the bridge's cost is the difference from the trio row), then the throughput of N asks at
once through each. Also trio's guest mode on the asyncio loop, the mechanism not chosen,
measured the same way for the comparison: each of its calls crosses to trio's I/O thread
and back as the bridge's crosses to the runtime's thread, and it cannot serve a blocked
loop (a notebook cell) at all.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import outcome
import trio

import agentrt
import agentrt.asyncio
import agentrt.sync
from agentrt.testing import ScriptedBackend, reply

WARMUP = 200


def _backend() -> ScriptedBackend:
    return ScriptedBackend(default=lambda call: reply("ok"))


def _row(name: str, latencies: list[float], per_second: float) -> dict[str, Any]:
    xs = sorted(latencies)
    return {
        "contender": name,
        "p50_us": xs[len(xs) // 2] * 1e6,
        "p99_us": xs[int(len(xs) * 0.99)] * 1e6,
        "mean_us": statistics.fmean(xs) * 1e6,
        "per_second": per_second,
    }


async def _timed(ask: Callable[[], Awaitable[object]], n: int) -> list[float]:
    for _ in range(WARMUP):
        await ask()
    out = []
    for _ in range(n):
        start = time.perf_counter()
        await ask()
        out.append(time.perf_counter() - start)
    return out


def trio_native(n: int, concurrent: int) -> dict[str, Any]:
    async def main() -> dict[str, Any]:
        async with agentrt.open_runtime(store=agentrt.MemoryStore()) as rt:
            for i in range(concurrent):
                await rt.start_agent(agentrt.Agent, name=f"a{i}", backend=_backend())
            latencies = await _timed(lambda: rt.ask("a0", "hi"), n)
            start = time.perf_counter()
            async with trio.open_nursery() as nursery:
                for i in range(concurrent):
                    nursery.start_soon(rt.ask, f"a{i}", "hi")
            return _row("trio, native", latencies, concurrent / (time.perf_counter() - start))

    return trio.run(main)


def through_asyncio(n: int, concurrent: int) -> dict[str, Any]:
    async def main() -> dict[str, Any]:
        async with agentrt.asyncio.open_runtime(store=agentrt.MemoryStore()) as rt:
            for i in range(concurrent):
                await rt.start_agent(agentrt.Agent, name=f"a{i}", backend=_backend())
            latencies = await _timed(lambda: rt.ask("a0", "hi"), n)
            start = time.perf_counter()
            await asyncio.gather(*(rt.ask(f"a{i}", "hi") for i in range(concurrent)))
            return _row("agentrt.asyncio", latencies, concurrent / (time.perf_counter() - start))

    return asyncio.run(main())


def through_sync(n: int, concurrent: int) -> dict[str, Any]:
    with agentrt.sync.open_runtime(store=agentrt.MemoryStore()) as rt:
        for i in range(concurrent):
            rt.start_agent(agentrt.Agent, name=f"a{i}", backend=_backend())
        for _ in range(WARMUP):
            rt.ask("a0", "hi")
        latencies = []
        for _ in range(n):
            start = time.perf_counter()
            rt.ask("a0", "hi")
            latencies.append(time.perf_counter() - start)
        threads = 16
        start = time.perf_counter()
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(lambda i: rt.ask(f"a{i}", "hi"), range(concurrent)))
        elapsed = time.perf_counter() - start
    return _row(f"agentrt.sync ({threads} threads)", latencies, concurrent / elapsed)


def guest_mode(n: int, concurrent: int) -> dict[str, Any]:
    """The same calls through trio's guest mode on the asyncio loop (not shipped)."""

    async def main() -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[tuple[Any, trio.Nursery, trio.lowlevel.TrioToken, trio.Event]]
        ready = loop.create_future()
        finished: asyncio.Future[outcome.Outcome[None]] = loop.create_future()

        async def host() -> None:
            async with agentrt.open_runtime(store=agentrt.MemoryStore()) as rt:
                for i in range(concurrent):
                    await rt.start_agent(agentrt.Agent, name=f"a{i}", backend=_backend())
                async with trio.open_nursery() as nursery:
                    stop = trio.Event()
                    ready.set_result((rt, nursery, trio.lowlevel.current_trio_token(), stop))
                    await stop.wait()
                    nursery.cancel_scope.cancel()

        trio.lowlevel.start_guest_run(
            host,
            run_sync_soon_threadsafe=loop.call_soon_threadsafe,
            done_callback=finished.set_result,
            host_uses_signal_set_wakeup_fd=True,
        )
        rt, nursery, token, stop = await ready

        async def ask(name: str) -> object:
            done: asyncio.Future[outcome.Outcome[object]] = loop.create_future()

            async def task() -> None:
                done.set_result(await outcome.acapture(rt.ask, name, "hi"))

            token.run_sync_soon(nursery.start_soon, task)
            return (await done).unwrap()

        latencies = await _timed(lambda: ask("a0"), n)
        start = time.perf_counter()
        await asyncio.gather(*(ask(f"a{i}") for i in range(concurrent)))
        row = _row("guest mode (not chosen)", latencies, concurrent / (time.perf_counter() - start))
        token.run_sync_soon(stop.set)
        (await finished).unwrap()
        return row

    return asyncio.run(main())


def main() -> None:
    parser = argparse.ArgumentParser(prog="bench.asyncio_bridge", description=__doc__)
    parser.add_argument("--asks", type=int, default=5000, help="asks timed one by one")
    parser.add_argument("--concurrent", type=int, default=1000, help="asks at once, one agent each")
    args = parser.parse_args()
    rows = [f(args.asks, args.concurrent) for f in (trio_native, through_asyncio, through_sync)]
    rows.append(guest_mode(args.asks, args.concurrent))
    native = rows[0]["p50_us"]
    print(f"| {args.asks} asks one by one, {args.concurrent} at once | p50 | p99 | ", end="")
    print("added p50 | asks/s at once |\n|---|---|---|---|---|")
    for row in rows:
        print(
            f"| {row['contender']} | {row['p50_us']:.0f} µs | {row['p99_us']:.0f} µs | "
            f"{row['p50_us'] - native:+.0f} µs | {row['per_second']:,.0f} |"
        )


if __name__ == "__main__":
    main()
