"""Tables from raw measurements, the machine description, the targets, the README section."""

from __future__ import annotations

import datetime
import importlib.metadata
import math
import os
import platform
import statistics
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from . import asyncio_bridge
from .contenders import (
    AGENTRT,
    AGENTRT_NO_CGROUP,
    AGENTRT_WARM,
    CLAUDE_FLOOR,
    CONVERSATION_CONTENDERS,
    FLOOR,
    INTERRUPT_CONTENDERS,
    LIVE_FLOOR,
    SCALE_CONTENDERS,
    THROUGHPUT,
    TURN_CONTENDERS,
    ConversationContender,
    InterruptContender,
    ScaleContender,
    TurnContender,
)
from .generate import Fixture

BEGIN = "<!-- bench:results:begin (written by bench/run; edits inside are overwritten) -->"
END = "<!-- bench:results:end -->"
MIB = 1024 * 1024

Record = dict[str, Any]

_TITLES = {
    "mix": "Throughput: the realistic mix (one turn)",
    "small": "Throughput: small lines (one turn)",
    "tiny": "Per-turn overhead: the tiny turn",
    "concurrent": "Concurrent turns",
}


def machine(root: Path) -> dict[str, str]:
    """What the figures were measured on."""
    cpu = "unknown"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as f:
        mem_kib = int(f.readline().split()[1])
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    versions = []
    for dist in ("agentrt", "trio", "msgspec", "anyio", "claude-agent-sdk"):
        try:
            versions.append(f"{dist} {importlib.metadata.version(dist)}")
        except importlib.metadata.PackageNotFoundError:
            versions.append(f"{dist} (not installed)")
    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": cpu,
        "cores": f"{os.cpu_count()} ({len(os.sched_getaffinity(0))} usable)",
        "memory": f"{mem_kib / MIB:.1f} GiB",
        "os": f"{platform.system()} {platform.release()}",
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "versions": ", ".join(versions),
        "commit": _commit(root),
        "load average at start": load,
    }


def _commit(root: Path) -> str:
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + (" (with uncommitted changes)" if dirty else "")


def _median(xs: Sequence[float]) -> float:
    return statistics.median(xs) if xs else math.nan


def _nearest_rank(xs: Sequence[float], q: float) -> float:
    ordered = sorted(xs)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def _fmt(x: float, digits: int = 1) -> str:
    if math.isnan(x):
        return "—"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.{digits}f}"


def _range(xs: Sequence[float], digits: int = 1) -> str:
    return f"{_fmt(min(xs), digits)}-{_fmt(max(xs), digits)}" if xs else "—"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


class Results:
    """The raw records of one run, grouped for the tables."""

    def __init__(self, records: Sequence[Record], fixtures: dict[str, Fixture]) -> None:
        self.records = records
        self.fixtures = fixtures

    def of(self, scenario: str, contender: str) -> list[Record]:
        return [
            r for r in self.records if r["scenario"] == scenario and r["contender"] == contender
        ]

    def contenders(self, scenario: str) -> list[str]:
        seen: list[str] = []
        for r in self.records:
            if r["scenario"] == scenario and r["contender"] not in seen:
                seen.append(r["contender"])
        return seen

    def metric(self, scenario: str, contender: str, f: Callable[[Record], float]) -> list[float]:
        return [f(r) for r in self.of(scenario, contender)]

    def paired(
        self,
        scenario: str,
        contender: str,
        f: Callable[[Record], float],
        floor_name: str = FLOOR,
    ) -> list[float]:
        """f(contender) / f(floor), round by round (both measured in the same round)."""
        floor = {r["round"]: f(r) for r in self.of(scenario, floor_name)}
        return [
            f(r) / floor[r["round"]] for r in self.of(scenario, contender) if r["round"] in floor
        ]


def _rate(r: Record, fixture: Fixture) -> float:
    return fixture.bytes / r["wall"] / 1e6


def _label(
    name: str,
    registry: Mapping[
        str, TurnContender | InterruptContender | ScaleContender | ConversationContender
    ] = TURN_CONTENDERS,
) -> str:
    return registry[name].label if name in registry else name


def throughput_table(res: Results, scenario: str) -> list[str]:
    fx = res.fixtures[scenario]
    rows = []
    for c in res.contenders(scenario):
        mbs = res.metric(scenario, c, lambda r: _rate(r, fx))
        ratio = res.paired(scenario, c, lambda r: _rate(r, fx))
        rows.append(
            [
                _label(c),
                _fmt(_median(mbs)),
                _range(mbs),
                _fmt(_median(res.metric(scenario, c, lambda r: fx.lines / r["wall"])), 0),
                _fmt(_median(res.metric(scenario, c, lambda r: r["cpu"])), 2),
                _fmt(_median(res.metric(scenario, c, lambda r: r["maxrss_kib"] / 1024))),
                _fmt(_median(res.metric(scenario, c, lambda r: r["growth_kib"] / 1024))),
                f"{_median(ratio) * 100:.0f} %" if ratio else "—",
            ]
        )
    header = [
        "contender",
        "MB/s (median)",
        "min-max",
        "lines/s",
        "CPU s",
        "peak RSS MiB",
        "RSS growth MiB",
        "of trio floor",
    ]
    return [f"### {_TITLES[scenario]}", "", _fixture_line(fx), "", *_table(header, rows)]


def tiny_table(res: Results, turns: int) -> list[str]:
    fx = res.fixtures["tiny"]
    rows = []
    for c in res.contenders("tiny"):
        ms = res.metric("tiny", c, lambda r: r["wall"] / turns * 1000)
        ratio = res.paired("tiny", c, lambda r: r["wall"])
        rows.append(
            [
                _label(c),
                _fmt(_median(ms), 2),
                _range(ms, 2),
                _fmt(_median(res.metric("tiny", c, lambda r: r["cpu"] / turns * 1000)), 2),
                f"{_median(ratio):.2f}x" if ratio else "—",
            ]
        )
    header = ["contender", "ms per turn (median)", "min-max", "CPU ms per turn", "x trio floor"]
    return [
        f"### {_TITLES['tiny']}",
        "",
        _fixture_line(fx) + f"; {turns} turns one after another per run, after one warm-up turn.",
        "",
        *_table(header, rows),
    ]


def concurrent_table(res: Results, slots: int) -> list[str]:
    fx = res.fixtures["turn1m"]
    rows = []
    for c in res.contenders("concurrent"):
        wall = res.metric("concurrent", c, lambda r: r["wall"])
        ratio = res.paired("concurrent", c, lambda r: r["wall"])
        rows.append(
            [
                _label(c),
                _fmt(_median(wall), 2),
                _range(wall, 2),
                _fmt(_median([slots * fx.bytes / w / 1e6 for w in wall])),
                _fmt(_median(res.metric("concurrent", c, lambda r: r["cpu"])), 2),
                _fmt(_median(res.metric("concurrent", c, lambda r: r["maxrss_kib"] / 1024))),
                f"{_median(ratio):.2f}x" if ratio else "—",
            ]
        )
    header = [
        "contender",
        "wall s (median)",
        "min-max",
        "MB/s total",
        "CPU s",
        "peak RSS MiB",
        "x trio floor (wall)",
    ]
    return [
        f"### {_TITLES['concurrent']}: {slots} at once",
        "",
        _fixture_line(fx) + f"; {slots} turns started together in one process.",
        "",
        *_table(header, rows),
    ]


def interrupt_table(res: Results) -> list[str]:
    rows = []
    for c in res.contenders("interrupt"):
        lat = [x * 1000 for r in res.of("interrupt", c) for x in r["latencies"]]
        rows.append(
            [
                _label(c, INTERRUPT_CONTENDERS),
                str(len(lat)),
                _fmt(_nearest_rank(lat, 0.5), 2),
                _fmt(_nearest_rank(lat, 0.99), 2),
                _fmt(max(lat), 2),
            ]
        )
    header = ["contender", "turns", "p50 ms", "p99 ms", "max ms"]
    return [
        "### Interrupt latency",
        "",
        "From the interrupt call to every process of the fake CLI's tree gone (a shell, a "
        "child in its group, a child in its own session); for the warm rows, the turn's "
        "two children while the live CLI stays (it answers the interrupt request with an "
        "error result); see bench/interrupt.py.",
        "",
        *_table(header, rows),
    ]


def scale_table(res: Results) -> list[str]:
    rows = []
    for c in dict.fromkeys(res.contenders("idle") + res.contenders("asks")):
        per_agent = res.metric("idle", c, lambda r: r["kib_per_agent"])
        agents = res.of("idle", c)
        per_second = res.metric("asks", c, lambda r: r["per_second"])
        rows.append(
            [
                _label(c, SCALE_CONTENDERS),
                f"{agents[0]['agents']:,}" if agents else "—",
                _fmt(_median(per_agent), 2),
                _fmt(_median(per_second), 0),
                _range(per_second, 0),
            ]
        )
    header = ["contender", "idle agents", "KiB per agent", "round trips/s, one core", "min-max"]
    return [
        "### Idle agents and round trips",
        "",
        "Memory: VmRSS growth after gc while every agent is alive, divided by their number. "
        "Round trips: one after another, the process pinned to one core.",
        "",
        *_table(header, rows),
    ]


def _added(res: Results, contender: str, key: str) -> list[float]:
    """The contender's ``key`` less the native trio row's, round by round (a floor's is
    all added: it crosses with no ask)."""
    if contender in asyncio_bridge.FLOORS:
        return [r[key] for r in res.of("bridge", contender)]
    native = {r["round"]: r[key] for r in res.of("bridge", asyncio_bridge.NATIVE)}
    return [
        r[key] - native[r["round"]] for r in res.of("bridge", contender) if r["round"] in native
    ]


def bridge_table(res: Results) -> list[str]:
    rows = []
    for c in res.contenders("bridge"):

        def m(key: str, c: str = c) -> float:
            return _median(res.metric("bridge", c, lambda r: r[key]))

        native = c == asyncio_bridge.NATIVE
        rows.append(
            [
                asyncio_bridge.CONTENDERS.get(c, c),
                _fmt(m("p50_us"), 0),
                "—" if native else f"{_median(_added(res, c, 'p50_us')):+,.0f}",
                _fmt(m("p99_us"), 0),
                "—" if native else f"{_median(_added(res, c, 'p99_us')):+,.0f}",
                _fmt(m("cpu_us"), 0),
                "—" if native else f"{_median(_added(res, c, 'cpu_us')):+,.0f}",
                _fmt(m("per_second"), 0),
                _fmt(m("concurrent_per_second"), 0),
            ]
        )
    first = res.of("bridge", res.contenders("bridge")[0])[0]
    asks, concurrent = first["asks"], first["concurrent"]
    header = [
        "contender",
        "p50 µs",
        "added p50 µs",
        "p99 µs",
        "added p99 µs",
        "CPU µs/ask",
        "added CPU µs",
        "asks/s, one by one",
        f"asks/s, {concurrent:,} at once",
    ]
    return [
        "### From asyncio and threads: the bridge's cost per call (issue 27)",
        "",
        f"One `ask` on the scripted backend after another ({asks:,} of them, after 200 "
        "untimed), then many at once, one agent each; each contender in a fresh process, "
        "not pinned to a core (the bridge's two threads are what is measured). Added: "
        "the contender's figure less the native trio row's of the same round, median over "
        "the rounds. CPU: the whole process's (every thread) per sequential ask.",
        "",
        *_table(header, rows),
    ]


def bridge_targets_table(res: Results) -> list[str]:
    # Each bridge beside the bare crossing of its kind, measured in the same run.
    floors = dict(zip(asyncio_bridge.BRIDGES, asyncio_bridge.FLOORS, strict=True))
    rows = []
    for c in asyncio_bridge.BRIDGES:
        added, floor = _added(res, c, "p50_us"), _added(res, floors[c], "p50_us")
        target = f"{asyncio_bridge.CONTENDERS[c]} adds ≤ 50 µs p50 per ask"
        if not added:
            rows.append([target, "—", "—", "not measured yet: not in this run"])
            continue
        median = _median(added)
        rows.append(
            [
                target,
                f"{median:+.0f} µs",
                f"{_median(floor):.0f} µs" if floor else "—",
                "met" if median <= 50 else "**missed**",
            ]
        )
    header = ["target", "measured", "the bare crossing (its floor)", "status"]
    return ["### Targets (issue 27)", "", *_table(header, rows)]


def _agents_by_size(res: Results, store: str) -> dict[int, list[Record]]:
    by_size: dict[int, list[Record]] = {}
    for r in res.of("agents", f"agentrt-{store}"):
        by_size.setdefault(r["agents"], []).append(r)
    return dict(sorted(by_size.items()))


def many_agents_table(res: Results) -> list[str]:
    rows = []
    for store in ("memory", "sqlite"):
        for n, records in _agents_by_size(res, store).items():

            def m(key: str, records: list[Record] = records) -> list[float]:
                return [r[key] for r in records]

            per_agent = [r["start_s"] / n * 1e6 for r in records]
            rows.append(
                [
                    "MemoryStore" if store == "memory" else "SQLiteStore, node=",
                    f"{n:,}",
                    f"{_fmt(_median(per_agent), 0)} [{_range(per_agent, 0)}]",
                    f"{_fmt(_median(m('first_us')), 0)} / {_fmt(_median(m('last_us')), 0)}",
                    f"{_fmt(_median(m('start_s')), 2)} [{_range(m('start_s'), 2)}]",
                    f"{_fmt(_median(m('stop_s')), 2)} [{_range(m('stop_s'), 2)}]",
                    _fmt(_median(m("kib_per_agent")), 2),
                ]
            )
    header = [
        "store",
        "idle agents",
        "start µs/agent [min-max]",
        "µs/agent, first / last tenth",
        "start s [min-max]",
        "stop s [min-max]",
        "KiB per agent",
    ]
    return [
        "### Many idle agents: start, stop, memory",
        "",
        "Plain agents on the scripted backend, started one after another in one runtime, "
        "never asked; the first and the last tenth of them are timed apart too (a tenth "
        "of a small run may hold a full garbage collection: the mean is what the target "
        "judges). Stop: closing the runtime (every agent stopped, every lease given "
        "back). Memory: VmRSS growth after gc with every agent alive, divided by their "
        "number. Medians over the rounds, each in a fresh process, the stores alternating "
        "at each size.",
        "",
        *_table(header, rows),
    ]


def _judged(target: str, measured: str | None, met: bool) -> list[str]:
    """A target's row: what was measured and whether it met the target (None: not in
    this run)."""
    if measured is None:
        return [target, "—", "not measured yet: not in this run"]
    return [target, measured, "met" if met else "**missed**"]


def _median_at_most(target: str, values: list[float], bound: float, unit: str) -> list[str]:
    """The target met when the median of ``values`` is at most ``bound``."""
    median = _median(values)
    return _judged(target, f"{median:.2f}{unit}" if values else None, median <= bound)


def _flat_start(res: Results, store: str, label: str) -> list[str]:
    # From the smallest size to the largest up to 20,000 (the issue's 2k-20k), or to the
    # largest measured when only one is that small.
    sizes = _agents_by_size(res, store)
    target = f"start per agent flat within 1.5x as agents grow, {label}"
    if len(sizes) < 2:
        return _judged(target, None, False)
    small, *rest = sizes
    large = max((n for n in rest if n <= 20_000), default=rest[-1])
    ratio = _median([r["start_s"] / large for r in sizes[large]]) / _median(
        [r["start_s"] / small for r in sizes[small]]
    )
    return _judged(
        f"start per agent within 1.5x, {small:,} to {large:,} agents, {label}",
        f"{ratio:.2f}x",
        ratio <= 1.5,
    )


def _stop_20k(res: Results, store: str, label: str) -> list[str] | None:
    sizes = _agents_by_size(res, store)
    if not sizes:
        return None
    # At 20,000 agents where measured, else at the largest size at the same rate.
    n = 20_000 if 20_000 in sizes else max(sizes)
    bound = 5.0 * n / 20_000
    stop = _median([r["stop_s"] for r in sizes[n]])
    return _judged(f"{n:,} agents stop in ≤ {bound:g} s, {label}", f"{stop:.2f} s", stop <= bound)


def issue22_targets_table(res: Results) -> list[str]:
    """Issue 22's targets, each beside its comparison in this run."""
    rows: list[list[str]] = []
    tiny = res.paired("tiny", AGENTRT, lambda r: r["wall"], AGENTRT_NO_CGROUP)
    target = "tiny turn with its turn cgroup ≤ 1.3x the same turn with cgroups=False"
    rows.append(_median_at_most(target, tiny, 1.3, "x"))
    wall = res.paired("concurrent", AGENTRT, lambda r: r["wall"])
    rows.append(_median_at_most("100 turns at once ≤ 1.7x the trio floor", wall, 1.7, "x"))
    for store, label in (("memory", "MemoryStore"), ("sqlite", "SQLiteStore")):
        rows.append(_flat_start(res, store, label))
    for store, label in (("memory", "MemoryStore"), ("sqlite", "SQLiteStore")):
        row = _stop_20k(res, store, label)
        if row is not None:
            rows.append(row)
    memory = _agents_by_size(res, "memory")
    if memory:
        n = max(memory)
        start = _median([r["start_s"] for r in memory[n]])
        bound = 30.0 * n / 50_000
        rows.append(
            _judged(
                f"{n:,} agents start in ≤ {bound:g} s, MemoryStore",
                f"{start:.2f} s",
                start <= bound,
            )
        )
    idle = res.metric("idle", AGENTRT, lambda r: r["kib_per_agent"])
    rows.append(_median_at_most("an idle agent ≤ 5.5 KiB", idle, 5.5, " KiB"))
    sdk = [x for run in _turn_ratios(res, AGENTRT_WARM, "sdk-client") for x in run]
    target = "warm follow-ups interleaved ≤ 1.0x ClaudeSDKClient, turn by turn"
    rows.append(_median_at_most(target, sdk, 1.0, "x"))
    return ["### Targets (issue 22)", "", *_table(["target", "agentrt", "status"], rows)]


def _fixture_line(fx: Fixture) -> str:
    return (
        f"Fixture `{fx.name}`: {fx.bytes:,} B, {fx.lines:,} lines, median line "
        f"{fx.median_line:,} B, longest {fx.max_line:,} B"
    )


def targets_table(
    res: Results,
    contender: str = AGENTRT,
    floor: str = FLOOR,
    title: str = "### Targets (issue 8)",
    *,
    scale: bool = True,
) -> list[str]:
    """The issue's targets, judged on ``contender``'s rows against ``floor``'s when they
    exist; ``scale`` adds target 4 (idle agents, round trips)."""
    rows: list[list[str]] = []

    def row(number: str, target: str, measured: str | None, met: bool | None) -> None:
        rows.append([number, *_judged(target, measured, bool(met))])

    shares = {}
    for scenario in THROUGHPUT:
        fx = res.fixtures[scenario]
        ratio = res.paired(scenario, contender, lambda r, fx=fx: _rate(r, fx), floor)
        shares[scenario] = _median(ratio) if ratio else None
    if all(v is not None for v in shares.values()):
        mix, small = shares["mix"], shares["small"]
        assert mix is not None and small is not None
        row(
            "1",
            "ask() throughput ≥ 75 % of the trio floor, mix and small lines",
            f"{mix * 100:.0f} % / {small * 100:.0f} %",
            min(mix, small) >= 0.75,
        )
    else:
        row("1", "ask() throughput ≥ 75 % of the trio floor, mix and small lines", None, None)
    growth = res.metric("mix", contender, lambda r: r["growth_kib"] / 1024)
    row(
        "1",
        "retention compact: peak RSS growth of the 100 MB turn < 32 MiB",
        f"{_median(growth):.1f} MiB" if growth else None,
        bool(growth) and _median(growth) < 32,
    )
    tiny = res.paired("tiny", contender, lambda r: r["wall"], floor)
    row(
        "2",
        "per-turn overhead on the tiny turn ≤ 1.3x the trio floor",
        f"{_median(tiny):.2f}x" if tiny else None,
        bool(tiny) and _median(tiny) <= 1.3,
    )
    wall = res.paired("concurrent", contender, lambda r: r["wall"], floor)
    rss = res.metric("concurrent", contender, lambda r: r["maxrss_kib"] / 1024)
    row(
        "3",
        "100 concurrent 1 MB turns: wall ≤ 1.2x plain trio tasks, peak RSS ≤ 60 MiB",
        f"{_median(wall):.2f}x, {_median(rss):.0f} MiB" if wall and rss else None,
        bool(wall and rss) and _median(wall) <= 1.2 and _median(rss) <= 60,
    )
    if scale:
        idle = res.metric("idle", AGENTRT, lambda r: r["kib_per_agent"])
        asks = res.metric("asks", AGENTRT, lambda r: r["per_second"])
        row(
            "4",
            "10,000 idle agents ≤ 10 KiB each; scripted ask() ≥ 20,000/s on one core",
            f"{_median(idle):.1f} KiB, {_median(asks):,.0f}/s" if idle and asks else None,
            bool(idle and asks) and _median(idle) <= 10 and _median(asks) >= 20_000,
        )
    lat = [x * 1000 for r in res.of("interrupt", contender) for x in r["latencies"]]
    row(
        "5",
        "interrupt → whole tree gone: p99 ≤ 100 ms over 200 turns",
        f"p50 {_nearest_rank(lat, 0.5):.1f} ms, p99 {_nearest_rank(lat, 0.99):.1f} ms"
        if lat
        else None,
        bool(lat) and _nearest_rank(lat, 0.99) <= 100,
    )
    return [title, "", *_table(["#", "target", "agentrt", "status"], rows)]


def warm_table(res: Results, turns: int) -> list[str]:
    rows = []
    for c in res.contenders("warm"):
        medians = res.metric("warm", c, lambda r: statistics.median(r["latencies"]) * 1000)
        pooled = [x * 1000 for r in res.of("warm", c) for x in r["latencies"]]
        ratio = res.paired("warm", c, lambda r: statistics.median(r["latencies"]), CLAUDE_FLOOR)
        rss = res.metric("warm", c, lambda r: r["cli_rss_kib"] / 1024)
        rows.append(
            [
                _label(c, CONVERSATION_CONTENDERS),
                _fmt(_median(res.metric("warm", c, lambda r: r["first"])), 2),
                _fmt(_median(medians)),
                _fmt(_nearest_rank(pooled, 0.95)),
                _range(medians),
                f"{_median(ratio):.2f}x" if ratio else "—",
                _fmt(_median(res.metric("warm", c, lambda r: r["cpu_self"] * 1000))),
                _fmt(_median(res.metric("warm", c, lambda r: r["cpu_cli"] * 1000))),
                _fmt(_median(rss)) if _median(rss) > 0 else "none",
                _fmt(_median(res.metric("warm", c, lambda r: r["rss_kib"] / 1024))),
            ]
        )
    header = [
        "contender",
        "first turn s",
        f"turns 2-{turns}: median ms",
        "p95 ms",
        "min-max of medians",
        "x floor",
        "runtime CPU ms/turn",
        "CLI CPU ms/turn",
        "idle CLI tree RSS MiB",
        "runtime RSS MiB",
    ]
    return [
        "### Follow-up turns on the real claude (warm sessions)",
        "",
        f"The pinned claude against agentrt.testing's fake Messages API (its own process, "
        f"answering at once), one conversation of {turns} turns per run. First turn: from "
        "nothing running to its result (spawn and handshake included). Median per run, p95 "
        "over every run's follow-ups (nearest rank). CPU over turns 2-N, per turn: the "
        "measuring process (the runtime, or the SDK) and the CLI's process tree. RSS: the "
        "CLI's tree (sum of VmRSS) after its last turn and a second of idling, and the "
        "measuring process's.",
        "",
        *_table(header, rows),
    ]


def _turn_ratios(res: Results, contender: str, other: str) -> list[list[float]]:
    """Per interleaved run: each follow-up of ``contender`` over the same turn of ``other``."""
    return [
        [a / b for a, b in zip(r["latencies"][contender], r["latencies"][other], strict=True)]
        for r in res.of("warm-interleaved", "interleaved")
        if contender in r["latencies"] and other in r["latencies"]
    ]


def interleaved_table(res: Results) -> list[str]:
    records = res.of("warm-interleaved", "interleaved")
    rows = []
    for c in dict.fromkeys(name for r in records for name in r["latencies"]):
        pooled = [x * 1000 for r in records for x in r["latencies"].get(c, ())]
        per_run = _turn_ratios(res, c, CLAUDE_FLOOR)
        ratios = [x for run in per_run for x in run]
        cpu = [x * 1000 for r in records for x in r.get("cpu_self", {}).get(c, ())]
        rows.append(
            [
                _label(c, CONVERSATION_CONTENDERS),
                _fmt(_median(pooled)),
                _fmt(_nearest_rank(pooled, 0.95)) if pooled else "—",
                f"{_median(ratios):.2f}x" if ratios else "—",
                _range([_median(run) for run in per_run], 2),
                f"{_median(cpu):.2f}" if cpu else "—",
            ]
        )
    header = [
        "contender",
        "median ms",
        "p95 ms",
        "x floor, turn by turn",
        "min-max of runs",
        "runtime CPU ms/turn (median)",
    ]
    return [
        "### Follow-up turns on the real claude, interleaved in one process",
        "",
        "Every conversation at once in one process, on trio (the SDK's client too), each with "
        "its own fake API and "
        "HOME; each turn goes to each contender in turn (the order rotated every turn), so "
        "every follow-up meets the same load as the others of its turn. Ratio: each "
        "follow-up over the floor's of the same turn, the median over every run's. CPU: this "
        "process's (getrusage) over each follow-up, which runs alone.",
        "",
        *_table(header, rows),
    ]


def warm_targets_table(res: Results) -> list[str]:
    """Issue 14's targets, judged on the warm agentrt rows against the others: turn by turn
    when the run interleaved them, else run by run."""

    def median_ms(r: Record) -> float:
        return float(statistics.median(r["latencies"]))

    def against(other: str) -> float | None:
        turns = [x for run in _turn_ratios(res, AGENTRT_WARM, other) for x in run]
        ratio = turns or res.paired("warm", AGENTRT_WARM, median_ms, other)
        return _median(ratio) if ratio else None

    floor, per_turn, sdk = against(CLAUDE_FLOOR), against(AGENTRT), against("sdk-client")
    rows = []
    for target, measured, met in (
        (
            "warm follow-up ≤ 1.2x the hand-driven floor",
            None if floor is None else f"{floor:.2f}x the floor",
            floor is not None and floor <= 1.2,
        ),
        (
            "warm follow-up ≥ 10x faster than per-turn",
            None if per_turn is None else f"{1 / per_turn:.1f}x faster",
            per_turn is not None and per_turn <= 0.1,
        ),
        (
            "warm follow-up not slower than ClaudeSDKClient",
            None if sdk is None else f"{sdk:.2f}x the SDK's",
            sdk is not None and sdk <= 1.0,
        ),
    ):
        rows.append(_judged(target, measured, met))
    return [
        "### Targets (issue 14)",
        "",
        "agentrt warm's follow-ups against the other's: turn by turn in the interleaved "
        "runs (the median of every turn's ratio) when there are any, else run by run (the "
        "median of the ratios of the runs' medians).",
        "",
        *_table(["target", "agentrt warm", "status"], rows),
    ]


def section(res: Results, about: dict[str, str], params: dict[str, Any]) -> str:
    """The generated part of bench/README.md (markdown), also what bench/run prints."""
    lines = [
        f"## Results ({params['mode']} run, {params['rounds']} round(s) per figure)",
        "",
        *[f"- {k}: {v}" for k, v in about.items()],
        "",
    ]
    for scenario in THROUGHPUT:
        if res.contenders(scenario):
            lines += [*throughput_table(res, scenario), ""]
    if res.contenders("tiny"):
        lines += [*tiny_table(res, params["tiny_turns"]), ""]
    if res.contenders("concurrent"):
        lines += [*concurrent_table(res, params["slots"]), ""]
    if res.contenders("interrupt"):
        lines += [*interrupt_table(res), ""]
    if res.contenders("idle") or res.contenders("asks"):
        lines += [*scale_table(res), ""]
    if res.contenders("agents"):
        lines += [*many_agents_table(res), ""]
    if res.contenders("warm"):
        lines += [*warm_table(res, params["warm_turns"]), ""]
    if res.contenders("bridge"):
        lines += [*bridge_table(res), ""]
    if res.contenders("warm-interleaved"):
        lines += [*interleaved_table(res), ""]
    lines += targets_table(res)
    if any(res.of(s, AGENTRT_WARM) for s in (*THROUGHPUT, "tiny", "concurrent", "interrupt")):
        title = "### Targets (issue 8) for warm turns, against the live trio floor"
        lines += ["", *targets_table(res, AGENTRT_WARM, LIVE_FLOOR, title, scale=False)]
    if res.contenders("warm"):
        lines += ["", *warm_targets_table(res)]
    if any(res.contenders(s) for s in ("tiny", "concurrent", "agents", "idle", "warm")):
        lines += ["", *issue22_targets_table(res)]
    if res.contenders("bridge"):
        lines += ["", *bridge_targets_table(res)]
    return "\n".join(lines) + "\n"


def write_section(path: Path, text: str) -> None:
    """Replace what lies between the markers in ``path`` (appending them if absent)."""
    old = path.read_text() if path.exists() else ""
    block = f"{BEGIN}\n{text}{END}\n"
    if BEGIN in old and END in old:
        head, rest = old.split(BEGIN, 1)
        tail = rest.split(END, 1)[1].lstrip("\n")
        new = head + block + tail
    else:
        new = old + ("\n" if old and not old.endswith("\n\n") else "") + block
    path.write_text(new)
