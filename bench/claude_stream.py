"""Claude stream-json through ``ask()``: throughput and per-turn overhead against trio floors.

    .venv/bin/python bench/claude_stream.py [--mb 100] [--rounds 5] [--tiny 200]
    .venv/bin/python bench/claude_stream.py --profile ask     # cProfile of one big ask()

A seeded generator writes one Claude Code turn as ``claude -p --output-format stream-json
--verbose --include-partial-messages`` prints it (system/init, streamed text deltas, whole
assistant messages, tool calls with their results, about one line in 600 a 100 KB-1 MB tool
result, a result line last) into a temporary directory, and a fake CLI that is
``#!/bin/sh`` + ``exec cat FILE`` (argv and stdin ignored), so the fake costs nothing.

Rows, each the median of ``--rounds`` (min-max shown), every process spawned in a session
of its own:
- raw pipe: ``receive_some`` until EOF, no parsing;
- trio floor: ``trio.lowlevel.open_process`` + ``receive_some(256 KiB)`` + line split +
  ``msgspec.json.decode`` per line (one decoder), the floor of issue 8;
- ``ask()``: a runtime and one claude agent with the fake as ``binary`` (set up untimed),
  one ask per round: spawn, stdin, reading, translation, events, retention, the Response,
  the kill ladder's confirmation that the tree is gone.
Tiny turn (10 lines): ``--tiny`` turns in a row, per-turn time of ``ask()`` against a bare
``trio.run_process`` of the same fake (capturing stdout) and the trio floor.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import msgspec
import trio

import agentrt

SESSION = "5f0c9a7e-3b1d-4c2a-9e8f-1a2b3c4d5e6f"
MODEL = "claude-sonnet-4-5-20250929"
_CHUNK = 256 * 1024
_WORDS = [
    *("the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "with", "was", "on"),
    *("be", "by", "this", "are", "from", "or", "an", "which", "at", "function", "value"),
    *("return", "error", "file", "test", "module", "class", "state", "process", "turn"),
]


class _Writer:
    def __init__(self, f: object, rng: random.Random) -> None:
        self._f = f
        self.rng = rng
        self.size = 0
        self.lines = 0
        self._uuid = 0

    def line(self, frame: dict[str, object]) -> None:
        self._uuid += 1
        frame = {**frame, "session_id": SESSION, "uuid": f"0b8e{self._uuid:032x}"[:36]}
        data = json.dumps(frame, separators=(",", ":")).encode() + b"\n"
        self._f.write(data)  # type: ignore[attr-defined]
        self.size += len(data)
        self.lines += 1

    def words(self, n: int) -> str:
        return " ".join(self.rng.choice(_WORDS) for _ in range(n))


def _event(w: _Writer, event: dict[str, object]) -> None:
    w.line({"type": "stream_event", "event": event, "parent_tool_use_id": None})


def _message(w: _Writer, content: list[dict[str, object]]) -> None:
    usage = {"input_tokens": 3, "cache_read_input_tokens": 12040, "output_tokens": 60}
    message = {"model": MODEL, "id": "msg_01", "type": "message", "role": "assistant"}
    w.line(
        {
            "type": "assistant",
            "message": {**message, "content": content, "stop_reason": None, "usage": usage},
            "parent_tool_use_id": None,
        }
    )


def _text_message(w: _Writer, deltas: int) -> None:
    _event(w, {"type": "message_start", "message": {"model": MODEL, "id": "msg_01"}})
    _event(w, {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}})
    parts = []
    for _ in range(deltas):
        text = w.words(w.rng.randint(4, 60)) + " "
        parts.append(text)
        delta = {"type": "text_delta", "text": text}
        _event(w, {"type": "content_block_delta", "index": 0, "delta": delta})
    _message(w, [{"type": "text", "text": "".join(parts)}])
    _event(w, {"type": "content_block_stop", "index": 0})
    _event(w, {"type": "message_delta", "delta": {"stop_reason": "end_turn"}})
    _event(w, {"type": "message_stop"})


def _tool_call(w: _Writer, n: int, result_bytes: int) -> None:
    tool_id = f"toolu_{n:020d}"
    command = {"command": w.words(8), "description": "Run it"}
    block = {"type": "tool_use", "id": tool_id, "name": "Bash", "input": {}}
    _event(w, {"type": "content_block_start", "index": 1, "content_block": block})
    for piece in (json.dumps(command)[i : i + 20] for i in range(0, 60, 20)):
        delta = {"type": "input_json_delta", "partial_json": piece}
        _event(w, {"type": "content_block_delta", "index": 1, "delta": delta})
    _message(w, [{**block, "input": command}])
    output = w.words(max(1, result_bytes // 6))[:result_bytes]
    result = {"tool_use_id": tool_id, "type": "tool_result", "content": output, "is_error": False}
    w.line(
        {
            "type": "user",
            "message": {"role": "user", "content": [result]},
            "parent_tool_use_id": None,
            "tool_use_result": {"stdout": output[:200], "stderr": "", "interrupted": False},
        }
    )


def generate(path: Path, size: int, seed: int = 1) -> tuple[int, int]:
    """Write a turn of about ``size`` bytes; return (bytes, lines)."""
    with open(path, "wb") as f:
        w = _Writer(f, random.Random(seed))
        w.line({"type": "system", "subtype": "init", "cwd": "/work", "model": MODEL, "tools": []})
        calls = 0
        _text_message(w, 2)
        while w.size < size:
            calls += 1
            big = w.rng.random() < 0.05  # about one line in 600
            _tool_call(w, calls, w.rng.randint(100_000, 1_000_000) if big else 300)
            _text_message(w, w.rng.randint(2, 40))
        w.line(
            {
                "type": "result",
                "subtype": "success",
                "is_error": False,
                "duration_ms": 5120,
                "num_turns": calls + 1,
                "result": "done",
                "total_cost_usd": 0.02,
                "usage": {"input_tokens": 9, "output_tokens": 72},
            }
        )
        return w.size, w.lines


def fake_cli(directory: Path, fixture: Path) -> str:
    path = directory / f"{fixture.stem}.cli"
    path.write_text(f"#!/bin/sh\nexec cat '{fixture}'\n")
    path.chmod(0o755)
    return str(path)


# --- the floors ---------------------------------------------------------------------------

_decoder: msgspec.json.Decoder[object] = msgspec.json.Decoder()


async def _open(cli: str) -> trio.Process:
    return await trio.lowlevel.open_process(
        [cli], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, start_new_session=True
    )


async def raw_pipe(cli: str) -> int:
    process = await _open(cli)
    assert process.stdout is not None
    total = 0
    while chunk := await process.stdout.receive_some(_CHUNK):
        total += len(chunk)
    await process.wait()
    return total


async def trio_floor(cli: str) -> int:
    """open_process + receive_some + line split + msgspec decode per line; returns lines."""
    process = await _open(cli)
    assert process.stdout is not None
    decode = _decoder.decode
    lines = 0
    partial: bytes | bytearray = b""
    while chunk := await process.stdout.receive_some(_CHUNK):
        parts: list[bytes | bytearray] = list(chunk.split(b"\n"))
        if partial:
            parts[0] = partial + parts[0]
        partial = parts.pop()
        for line in parts:
            decode(line)
        lines += len(parts)
    await process.wait()
    return lines


async def bare_run_process(cli: str) -> int:
    done = await trio.run_process([cli], capture_stdout=True, stdin=b"hi")
    return len(done.stdout)


# --- agentrt ------------------------------------------------------------------------------


class _Ask:
    """A runtime with one claude agent on ``cli``, open while the rounds run."""

    def __init__(self, rt: agentrt.Runtime) -> None:
        self.rt = rt

    async def __call__(self, cli: str) -> int:
        response = await self.rt.ask(cli, "go")
        assert response.stop_reason is agentrt.StopReason.COMPLETE, response
        return response.event_coverage.observed


async def _with_agents(clis: list[str], body: Callable[[_Ask], Awaitable[None]]) -> None:
    async with agentrt.open_runtime() as rt:
        for cli in clis:
            # The name is the binary: one agent per fixture.
            await rt.start_agent(agentrt.Agent, name=cli, backend="claude", binary=cli)
        await body(_Ask(rt))


# --- measurement --------------------------------------------------------------------------


def _fmt(values: list[float], scale: float = 1.0, digits: int = 1) -> str:
    med = statistics.median(values) * scale
    lo, hi = min(values) * scale, max(values) * scale
    return f"{med:,.{digits}f} ({lo:,.{digits}f}-{hi:,.{digits}f})"


async def _timed(fn: Callable[[str], Awaitable[int]], cli: str, times: int = 1) -> float:
    start = time.perf_counter()
    for _ in range(times):
        await fn(cli)
    return (time.perf_counter() - start) / times


async def measure(args: argparse.Namespace, directory: Path) -> list[str]:
    big = directory / "mix.jsonl"
    tiny = directory / "tiny.jsonl"
    size, lines = generate(big, args.mb * 1_000_000)
    tiny_size, tiny_lines = generate(tiny, 1)
    big_cli, tiny_cli = fake_cli(directory, big), fake_cli(directory, tiny)
    out = [
        f"fixture: {size:,} B, {lines:,} lines; tiny turn: {tiny_size:,} B, {tiny_lines} lines",
    ]
    rows: dict[str, list[float]] = {"raw": [], "floor": [], "ask": []}
    tiny_rows: dict[str, list[float]] = {"run_process": [], "floor": [], "ask": []}
    rss: list[int] = []

    async def body(ask: _Ask) -> None:
        await ask(tiny_cli)  # warm up: imports, the first spawn
        for _ in range(args.rounds):
            # Back to back in each round, so a busy moment on the machine hits all rows.
            rows["raw"].append(await _timed(raw_pipe, big_cli))
            rows["floor"].append(await _timed(trio_floor, big_cli))
            before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            rows["ask"].append(await _timed(ask, big_cli))
            rss.append(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)
            tiny_rows["run_process"].append(await _timed(bare_run_process, tiny_cli, args.tiny))
            tiny_rows["floor"].append(await _timed(trio_floor, tiny_cli, args.tiny))
            tiny_rows["ask"].append(await _timed(ask, tiny_cli, args.tiny))

    await _with_agents([big_cli, tiny_cli], body)
    mb = size / 1e6
    floor = statistics.median(rows["floor"])
    out.append("")
    out.append(f"| stream of {mb:.0f} MB | MB/s, median (min-max) | of trio floor |")
    out.append("|---|---|---|")
    labels = {
        "raw": "raw pipe read, no parsing",
        "floor": "trio floor: open_process + receive_some + split + msgspec",
        "ask": "`ask()`, claude backend",
    }
    for key, label in labels.items():
        speeds = [mb / t for t in rows[key]]
        ratio = floor / statistics.median(rows[key])
        out.append(f"| {label} | {_fmt(speeds)} | {ratio:.0%} |")
    out.append("")
    out.append(f"peak RSS growth during the first big ask(): {rss[0] / 1024:.1f} MiB")
    out.append("")
    out.append(f"| tiny turn ({args.tiny} in a row) | ms per turn, median (min-max) | x floor |")
    out.append("|---|---|---|")
    tiny_floor = statistics.median(tiny_rows["floor"])
    tiny_labels = {
        "run_process": "bare `trio.run_process`, stdout captured",
        "floor": "trio floor",
        "ask": "`ask()`, claude backend",
    }
    for key, label in tiny_labels.items():
        ratio = statistics.median(tiny_rows[key]) / tiny_floor
        out.append(f"| {label} | {_fmt(tiny_rows[key], 1000, 2)} | {ratio:.2f} |")
    return out


async def profile(args: argparse.Namespace, directory: Path) -> None:
    big = directory / "mix.jsonl"
    generate(big, args.mb * 1_000_000)
    cli = fake_cli(directory, big)

    async def body(ask: _Ask) -> None:
        await ask(cli)
        profiler = cProfile.Profile()
        profiler.enable()
        await ask(cli)
        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)

    await _with_agents([cli], body)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=100, help="size of the big stream in MB")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tiny", type=int, default=200, help="tiny turns per round")
    parser.add_argument("--profile", choices=["ask"], help="cProfile one big ask() instead")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="agentrt-bench-") as tmp:
        if args.profile:
            trio.run(profile, args, Path(tmp))
            return
        print(
            f"python {sys.version.split()[0]}, trio {trio.__version__}, "
            f"msgspec {msgspec.__version__}, {os.cpu_count()} cpus, "
            f"load {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
        )
        for line in trio.run(measure, args, Path(tmp)):
            print(line)


if __name__ == "__main__":
    main()
