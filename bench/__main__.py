"""Run every benchmark and print the tables (``bench/run`` calls this in bench/.venv).

Each figure comes from its own fresh process (bench.measure); within a round every
contender of a scenario runs once, one after another, so a contender and the trio floor
it is compared with are measured under the same conditions ("pair by pair").
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from . import asyncio_bridge, many_agents, report
from .contenders import (
    AGENTRT_WARM,
    CLAUDE_FLOOR,
    CONVERSATION_CONTENDERS,
    INTERRUPT_CONTENDERS,
    OPENCODE_BINARY,
    PI_BINARY,
    QWEN_BINARY,
    QWEN_CONTENDERS,
    SCALE_CONTENDERS,
    TURN_CONTENDERS,
)
from .generate import Fixture, ensure

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

FULL = {
    "mode": "full",
    "rounds": 5,
    "tiny_turns": 200,
    "slots": 100,
    "interrupt_turns": 200,
    "idle_agents": 10_000,
    "asks": 50_000,
    "warm_turns": 20,
    "many_agents": (2_000, 20_000, 50_000),
    # 50,000 agents on SQLite take minutes: fewer rounds than the other figures.
    "many_agents_rounds": 3,
    "bridge_asks": 5_000,
    "bridge_concurrent": 1_000,
}
QUICK = {
    "mode": "quick",
    "rounds": 1,
    "tiny_turns": 5,
    "slots": 10,
    "interrupt_turns": 10,
    "idle_agents": 500,
    "asks": 1_000,
    "warm_turns": 2,
    "many_agents": (100, 300),
    "many_agents_rounds": 1,
    "bridge_asks": 300,
    "bridge_concurrent": 50,
}
SCENARIOS = (
    "mix",
    "small",
    "tiny",
    "concurrent",
    "interrupt",
    "idle",
    "asks",
    "warm",
    "agents",
    "bridge",
)
# Which fixture each turn scenario streams.
_FIXTURE = {"mix": "mix", "small": "small", "tiny": "tiny", "concurrent": "turn1m"}


def claude_binary() -> Path:
    """The pinned real claude (tests/realcli/CLAUDE_VERSION), where `make claude-cli` puts it."""
    version = (ROOT / "tests" / "realcli" / "CLAUDE_VERSION").read_text().strip()
    return ROOT / ".cache" / f"claude-{version}" / "node_modules" / ".bin" / "claude"


def gemini_binary() -> Path:
    """The pinned real gemini (tests/realcli/GEMINI_VERSION), where `make gemini-cli` puts it."""
    version = (ROOT / "tests" / "realcli" / "GEMINI_VERSION").read_text().strip()
    return ROOT / ".cache" / "npm" / f"gemini-{version}" / "node_modules" / ".bin" / "gemini"


def _measure(spec: dict[str, Any]) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "bench.measure", json.dumps(spec)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if done.returncode != 0:
        sys.exit(
            f"bench: {spec['scenario']} / {spec['contender']} failed "
            f"(exit {done.returncode}):\n{done.stderr}"
        )
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


def _summary(scenario: str, result: dict[str, Any], fixture: Fixture | None) -> str:
    if scenario == "warm-interleaved":
        return ", ".join(
            f"{name} {statistics.median(xs) * 1000:.0f} ms"
            for name, xs in result["latencies"].items()
        )
    if scenario == "warm":
        follow = statistics.median(result["latencies"]) * 1000
        return f"first turn {result['first']:.2f} s, follow-ups {follow:.0f} ms (median)"
    if "latencies" in result:
        return f"p50 {sorted(result['latencies'])[len(result['latencies']) // 2] * 1000:.2f} ms"
    if scenario == "bridge":
        return (
            f"p50 {result['p50_us']:.0f} us, p99 {result['p99_us']:.0f} us, "
            f"{result['cpu_us']:.0f} us CPU/ask, {result['concurrent_per_second']:,.0f}/s at once"
        )
    if scenario == "agents":
        return (
            f"{result['agents']:,} agents: start {result['first_us']:.0f} / "
            f"{result['last_us']:.0f} us per agent (first / last tenth), "
            f"stop {result['stop_s']:.2f} s, {result['kib_per_agent']:.2f} KiB/agent"
        )
    if "kib_per_agent" in result:
        return f"{result['kib_per_agent']:.2f} KiB/agent"
    if "per_second" in result:
        return f"{result['per_second']:,.0f}/s"
    if scenario in ("mix", "small") and fixture is not None:
        return f"{fixture.bytes / result['wall'] / 1e6:.1f} MB/s"
    return f"{result['wall']:.3f} s"


# The per-turn rows of the npm CLIs beside claude's (on its fake API), each where its
# pinned binary is installed; left out of the interleaved run (seconds, for opencode tens
# of seconds, a turn).
_NPM_ROWS = {
    "agentrt-opencode": OPENCODE_BINARY,
    "agentrt-opencode-warm": OPENCODE_BINARY,
    "agentrt-acp-opencode": OPENCODE_BINARY,
    "agentrt-acp-opencode-warm": OPENCODE_BINARY,
    "agentrt-pi": PI_BINARY,
    "agentrt-pi-warm": PI_BINARY,
}
# A quick run keeps the harness working and asserts no speed: it runs one conversation row
# of each harness path and what the tables and targets read. Left out are the rows that
# only run another row's harness code on a CLI whose start is the cost (the npm CLIs'
# and qwen's, seconds of CPU a turn; claude with the SDK's argv or system prompt).
# gemini's row stays: its own fake API mode and contender.
_QUICK_LEFT_OUT = {
    *_NPM_ROWS,
    *QWEN_CONTENDERS,
    "claude-floor-sdk-argv",
    "agentrt-warm-sdk-prompt",
}
# The interleaved run of a quick run: one hand-driven CLI, agentrt warm and the SDK (the
# targets' comparisons; per-turn agentrt's is judged on its own warm row).
_QUICK_INTERLEAVED = (CLAUDE_FLOOR, AGENTRT_WARM, "sdk-client")


def _plan(
    params: dict[str, Any], fixtures: dict[str, Fixture], only: set[str]
) -> list[dict[str, Any]]:
    specs = []
    claude, gemini = claude_binary(), gemini_binary()
    if "warm" in only and not claude.exists():
        print(f"bench: warm skipped: no claude at {claude} (make claude-cli)", file=sys.stderr)
        only = only - {"warm"}
    if "warm" in only and not gemini.exists():
        print(f"bench: no gemini row: no gemini at {gemini} (make gemini-cli)", file=sys.stderr)
    for name, binary in _NPM_ROWS.items():
        if "warm" in only and not binary.exists():
            print(f"bench: no {name} row: nothing at {binary}", file=sys.stderr)
    if "warm" in only and not QWEN_BINARY.exists():
        print(
            f"bench: qwen rows skipped: no qwen at {QWEN_BINARY} (make qwen-cli)", file=sys.stderr
        )
    for scenario in SCENARIOS:
        if scenario not in only:
            continue
        rounds = 1 if scenario == "interrupt" else params["rounds"]
        if scenario == "agents":
            rounds = min(rounds, params["many_agents_rounds"])
        for rnd in range(rounds):
            if scenario in _FIXTURE:
                for c in TURN_CONTENDERS.values():
                    if scenario in c.scenarios:
                        specs.append(
                            {
                                "scenario": scenario,
                                "contender": c.name,
                                "round": rnd,
                                "fixture": fixtures[_FIXTURE[scenario]].to_json(),
                                "turns": params["tiny_turns"] if scenario == "tiny" else 1,
                                "slots": params["slots"] if scenario == "concurrent" else 1,
                            }
                        )
            elif scenario == "warm":
                # Each conversation in a fresh process, then all of them interleaved.
                conversation = {"round": rnd, "turns": params["warm_turns"], "binary": str(claude)}
                quick = params["mode"] == "quick"
                names = [
                    n
                    for n in CONVERSATION_CONTENDERS
                    if (QWEN_BINARY.exists() or n not in QWEN_CONTENDERS)
                    and (n not in _NPM_ROWS or _NPM_ROWS[n].exists())
                    and not (quick and n in _QUICK_LEFT_OUT)
                ]
                for name in names:
                    if CONVERSATION_CONTENDERS[name].cli == "claude":
                        specs.append({"scenario": scenario, "contender": name, **conversation})
                    elif gemini.exists():
                        specs.append(
                            {
                                "scenario": scenario,
                                "contender": name,
                                **conversation,
                                "binary": str(gemini),
                            }
                        )
                # The interleaved run compares the contenders on one fake API under one load.
                specs.append(
                    {
                        "scenario": "warm-interleaved",
                        "contender": "interleaved",
                        "contenders": [
                            n
                            for n in names
                            if CONVERSATION_CONTENDERS[n].cli == "claude"
                            and n not in _NPM_ROWS
                            and (not quick or n in _QUICK_INTERLEAVED)
                        ],
                        **conversation,
                    }
                )
            elif scenario == "agents":
                # The two stores alternate at each size, within the round.
                for n in params["many_agents"]:
                    for store in many_agents.STORES:
                        specs.append(
                            {
                                "scenario": scenario,
                                "contender": f"agentrt-{store}",
                                "round": rnd,
                                "agents": n,
                                "store": store,
                            }
                        )
            elif scenario == "bridge":
                for name in asyncio_bridge.CONTENDERS:
                    specs.append(
                        {
                            "scenario": scenario,
                            "contender": name,
                            "round": rnd,
                            "asks": params["bridge_asks"],
                            "concurrent": params["bridge_concurrent"],
                        }
                    )
            elif scenario == "interrupt":
                for name in INTERRUPT_CONTENDERS:
                    specs.append(
                        {
                            "scenario": scenario,
                            "contender": name,
                            "round": rnd,
                            "turns": params["interrupt_turns"],
                        }
                    )
            else:
                for name in SCALE_CONTENDERS:
                    specs.append(
                        {
                            "scenario": scenario,
                            "contender": name,
                            "round": rnd,
                            "agents": params["idle_agents"],
                            "asks": params["asks"],
                        }
                    )
    return specs


def main() -> None:
    parser = argparse.ArgumentParser(prog="bench/run", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="tiny fixtures, one round (CI keeps it working)"
    )
    parser.add_argument("--rounds", type=int, help="rounds per figure (default 5; quick 1)")
    parser.add_argument(
        "--out",
        type=Path,
        help="markdown file whose results section is rewritten "
        "(default bench/README.md; quick mode: none)",
    )
    parser.add_argument("--json", type=Path, help="also write the raw records here")
    parser.add_argument("--fixtures", type=Path, help="fixture folder (default bench/fixtures)")
    parser.add_argument(
        "--only", help=f"comma-separated scenarios to run (of {', '.join(SCENARIOS)})"
    )
    args = parser.parse_args()

    params = dict(QUICK if args.quick else FULL)
    if args.rounds is not None:
        params["rounds"] = args.rounds
    only = set(args.only.split(",")) if args.only else set(SCENARIOS)
    if unknown := only - set(SCENARIOS):
        parser.error(f"unknown scenario(s): {', '.join(sorted(unknown))}")
    out = args.out if args.out is not None else (None if args.quick else HERE / "README.md")
    folder = args.fixtures or (HERE / "fixtures" / ("quick" if args.quick else "full"))

    about = report.machine(ROOT)
    started = time.monotonic()
    print(f"bench: fixtures in {folder}", file=sys.stderr)
    fixtures = ensure(folder, quick=args.quick)
    for fx in fixtures.values():
        # Into the page cache, so no run pays for the disk (in chunks: the measurement
        # processes are forked from this one, so it stays small).
        with open(fx.path, "rb") as f:
            while f.read(1 << 20):
                pass

    records = []
    specs = _plan(params, fixtures, only)
    for i, spec in enumerate(specs, 1):
        result = _measure(spec)
        fixture = Fixture.from_json(spec["fixture"]) if "fixture" in spec else None
        print(
            f"bench: [{i}/{len(specs)}] {spec['scenario']} round {spec['round'] + 1} "
            f"{spec['contender']}: {_summary(spec['scenario'], result, fixture)}",
            file=sys.stderr,
        )
        records.append(
            {"scenario": spec["scenario"], "contender": spec["contender"], "round": spec["round"]}
            | result
        )

    about["wall time of this run"] = f"{time.monotonic() - started:.0f} s"
    text = report.section(report.Results(records, fixtures), about, params)
    print(text)
    if out is not None:
        report.write_section(out, text)
        print(f"bench: results written to {out}", file=sys.stderr)
    if args.json is not None:
        args.json.write_text(
            json.dumps(
                {
                    "machine": about,
                    "params": params,
                    "fixtures": {n: f.to_json() for n, f in fixtures.items()},
                    "records": records,
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
