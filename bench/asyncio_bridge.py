"""What calling agentrt from asyncio or from threads costs (issue 27): the ``bridge`` scenario.

On the scripted backend (no process), each contender in a fresh process per round: the
latency of one ``ask`` after another awaited natively in trio, through ``agentrt.asyncio``
and through ``agentrt.sync`` (p50 and p99, and the CPU of the whole process per ask, every
thread included), then the throughput of many asks at once, one agent each. The bridge's
cost is the difference from the native row of the same round. Also trio's guest mode on the
asyncio loop, the mechanism not chosen, measured the same way for the comparison: each of
its calls crosses to trio's I/O thread and back as the bridge's crosses to the runtime's
thread, and it cannot serve a blocked loop (a notebook cell) at all. And the floors: the
bare crossing each face makes, with no work at the other end (asyncio's
``call_soon_threadsafe`` back from an idle trio thread's ``run_sync_soon``; a thread's held
lock released the same way), which any bridge to a runtime in another thread pays.

The process is not pinned to one core: the bridge's two threads are what is measured.
"""

from __future__ import annotations

import asyncio
import contextlib
import resource
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import outcome
import trio

NATIVE = "trio-native"
CONTENDERS = {
    NATIVE: "trio, native (agentrt.open_runtime)",
    "agentrt-asyncio": "agentrt.asyncio",
    "agentrt-sync": "agentrt.sync (16 threads at once)",
    "guest-mode": "trio guest mode on asyncio (not chosen)",
    "floor-asyncio": "floor: asyncio to a trio thread and back, no work",
    "floor-thread": "floor: a thread to a trio thread and back, no work",
}
# The crossing alone, what any bridge to a runtime in another thread pays: its "added"
# figures are its own (there is no ask to subtract).
FLOORS = ("floor-asyncio", "floor-thread")
BRIDGES = ("agentrt-asyncio", "agentrt-sync")
WARMUP = 200
THREADS = 16

Ask = Callable[[str], Awaitable[object]]
Result = dict[str, Any]


def _backend() -> Any:
    # The same short Claude-like reply as the asks scenario (bench.contenders._scripted).
    from agentrt.testing import ScriptedBackend, reply

    script = reply("ok", session_id="s-1")
    return ScriptedBackend(default=lambda call: script, record=False)


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _sequential(out: Result, latencies: list[float], cpu: float, wall: float) -> None:
    xs = sorted(latencies)
    out["p50_us"] = xs[len(xs) // 2] * 1e6
    out["p99_us"] = xs[min(len(xs) - 1, int(len(xs) * 0.99))] * 1e6
    out["cpu_us"] = cpu / len(xs) * 1e6
    out["per_second"] = len(xs) / wall


async def _timed(out: Result, ask: Ask, n: int) -> None:
    for _ in range(WARMUP):
        await ask("a0")
    latencies = []
    cpu0, wall0 = _cpu(), time.perf_counter()
    for _ in range(n):
        start = time.perf_counter()
        await ask("a0")
        latencies.append(time.perf_counter() - start)
    _sequential(out, latencies, _cpu() - cpu0, time.perf_counter() - wall0)


def _timed_blocking(out: Result, call: Callable[[], object], n: int) -> None:
    # `_timed` for a blocking call.
    for _ in range(WARMUP):
        call()
    latencies = []
    cpu0, wall0 = _cpu(), time.perf_counter()
    for _ in range(n):
        start = time.perf_counter()
        call()
        latencies.append(time.perf_counter() - start)
    _sequential(out, latencies, _cpu() - cpu0, time.perf_counter() - wall0)


def _threads_at_once(out: Result, call: Callable[[int], object], concurrent: int) -> None:
    start = time.perf_counter()
    with ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(call, range(concurrent)))
    out["concurrent_per_second"] = concurrent / (time.perf_counter() - start)


def _native(n: int, concurrent: int, out: Result) -> None:
    import agentrt

    async def main() -> None:
        async with agentrt.open_runtime(store=agentrt.MemoryStore()) as rt:
            backend = _backend()
            for i in range(concurrent):
                await rt.start_agent(agentrt.Agent, name=f"a{i}", backend=backend)
            await _timed(out, lambda name: rt.ask(name, "hi"), n)
            start = time.perf_counter()
            async with trio.open_nursery() as nursery:
                for i in range(concurrent):
                    nursery.start_soon(rt.ask, f"a{i}", "hi")
            out["concurrent_per_second"] = concurrent / (time.perf_counter() - start)

    trio.run(main)


def _asyncio(n: int, concurrent: int, out: Result) -> None:
    import agentrt
    import agentrt.asyncio

    async def main() -> None:
        async with agentrt.asyncio.open_runtime(store=agentrt.MemoryStore()) as rt:
            backend = _backend()
            for i in range(concurrent):
                await rt.start_agent(agentrt.Agent, name=f"a{i}", backend=backend)
            await _timed(out, lambda name: rt.ask(name, "hi"), n)
            start = time.perf_counter()
            await asyncio.gather(*(rt.ask(f"a{i}", "hi") for i in range(concurrent)))
            out["concurrent_per_second"] = concurrent / (time.perf_counter() - start)

    asyncio.run(main())


def _sync(n: int, concurrent: int, out: Result) -> None:
    import agentrt
    import agentrt.sync

    with agentrt.sync.open_runtime(store=agentrt.MemoryStore()) as rt:
        backend = _backend()
        for i in range(concurrent):
            rt.start_agent(agentrt.Agent, name=f"a{i}", backend=backend)
        _timed_blocking(out, lambda: rt.ask("a0", "hi"), n)
        _threads_at_once(out, lambda i: rt.ask(f"a{i}", "hi"), concurrent)


def _guest_mode(n: int, concurrent: int, out: Result) -> None:
    import agentrt

    async def main() -> None:
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[tuple[Any, trio.Nursery, trio.lowlevel.TrioToken, trio.Event]]
        ready = loop.create_future()
        finished: asyncio.Future[outcome.Outcome[None]] = loop.create_future()

        async def host() -> None:
            async with agentrt.open_runtime(store=agentrt.MemoryStore()) as rt:
                backend = _backend()
                for i in range(concurrent):
                    await rt.start_agent(agentrt.Agent, name=f"a{i}", backend=backend)
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

        await _timed(out, ask, n)
        start = time.perf_counter()
        await asyncio.gather(*(ask(f"a{i}") for i in range(concurrent)))
        out["concurrent_per_second"] = concurrent / (time.perf_counter() - start)
        token.run_sync_soon(stop.set)
        (await finished).unwrap()

    asyncio.run(main())


@contextlib.contextmanager
def _trio_thread() -> Iterator[trio.lowlevel.TrioToken]:
    """A trio run idling in a thread of its own, as the runtime's does between calls."""
    opened: Future[tuple[trio.lowlevel.TrioToken, trio.Event]] = Future()

    async def idle() -> None:
        stop = trio.Event()
        opened.set_result((trio.lowlevel.current_trio_token(), stop))
        await stop.wait()

    thread = threading.Thread(target=trio.run, args=(idle,))
    thread.start()
    token, stop = opened.result()
    try:
        yield token
    finally:
        token.run_sync_soon(stop.set)
        thread.join()


def _floor_asyncio(n: int, concurrent: int, out: Result) -> None:
    # The asyncio face's crossing: run_sync_soon there, call_soon_threadsafe back.
    with _trio_thread() as token:

        async def main() -> None:
            loop = asyncio.get_running_loop()

            async def cross(name: str) -> None:
                done = loop.create_future()
                token.run_sync_soon(loop.call_soon_threadsafe, done.set_result, None)
                await done

            await _timed(out, cross, n)
            start = time.perf_counter()
            await asyncio.gather(*(cross("") for _ in range(concurrent)))
            out["concurrent_per_second"] = concurrent / (time.perf_counter() - start)

        asyncio.run(main())


def _floor_thread(n: int, concurrent: int, out: Result) -> None:
    # The sync face's crossing: run_sync_soon there, a held lock released back.
    with _trio_thread() as token:

        def cross(_: object = None) -> None:
            woken = threading.Lock()
            woken.acquire()
            token.run_sync_soon(woken.release)
            woken.acquire()

        _timed_blocking(out, cross, n)
        _threads_at_once(out, cross, concurrent)


_RUNS: dict[str, Callable[[int, int, Result], None]] = {
    NATIVE: _native,
    "agentrt-asyncio": _asyncio,
    "agentrt-sync": _sync,
    "guest-mode": _guest_mode,
    "floor-asyncio": _floor_asyncio,
    "floor-thread": _floor_thread,
}


def measure(spec: dict[str, Any]) -> Result:
    """``spec["asks"]`` asks one after another, then ``spec["concurrent"]`` at once, through
    ``spec["contender"]``, in this fresh process."""
    out: Result = {"asks": spec["asks"], "concurrent": spec["concurrent"]}
    _RUNS[spec["contender"]](spec["asks"], spec["concurrent"], out)
    return out
