"""Routed calls between two programs on one SQLite file (issue 38): the transport chosen
for `SQLiteStore`'s routing, measured against the other one the issue names.

    .venv/bin/python -m bench.routed_sqlite [--calls N] [--dir DIR]

Two processes each time, the owner a program of its own. First the two transports bare,
a round trip of a small call and its answer, without agentrt:

- ``socket``: a Unix socket the owner listens on, one connection per call, a
  length-prefixed frame each way (what `agentrt._stores._sqlite_router` does);
- ``rows``: the call a row of a table in an SQLite file in WAL mode with
  ``synchronous=FULL`` (as the store writes), the answer written into the row, the row
  deleted once read; each side waking on ``PRAGMA data_version`` polled every millisecond
  (SQLite has no notification, so a poll is the wake-up that needs no other channel).

Then agentrt itself on the chosen transport: a routed ``status`` and a routed ``ask`` (a
scripted agent, no process) from one runtime to another program's, beside the same calls
to a local agent. Each line gives the median, the 99th percentile and calls per second
(one caller, one call at a time).
"""

from __future__ import annotations

import argparse
import os
import socket
import sqlite3
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import trio

import agentrt
from agentrt.testing import ScriptedBackend, reply

REPO = Path(__file__).resolve().parents[1]
WARMUP = 20
POLL = 0.001
_LENGTH = struct.Struct(">I")
CALL = b"x" * 200  # about a routed ask's frame


def _exactly(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


def serve_socket(path: str) -> None:
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)
    listener.listen()
    print("READY", flush=True)
    while True:
        conn, _ = listener.accept()
        with conn:
            (length,) = _LENGTH.unpack(_exactly(conn, 4))
            body = _exactly(conn, length)
            conn.sendall(_LENGTH.pack(len(body)) + body)


def socket_call(path: str) -> Callable[[], None]:
    def call() -> None:
        with socket.socket(socket.AF_UNIX) as conn:
            conn.connect(path)
            conn.sendall(_LENGTH.pack(len(CALL)) + CALL)
            (length,) = _LENGTH.unpack(_exactly(conn, 4))
            _exactly(conn, length)

    return call


def _connect(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    return conn


def _wait_for_change(conn: sqlite3.Connection, seen: int) -> int:
    while (version := conn.execute("PRAGMA data_version").fetchone()[0]) == seen:
        time.sleep(POLL)
    return int(version)


def serve_rows(path: str) -> None:
    conn = _connect(path)
    print("READY", flush=True)
    seen = 0
    while True:
        seen = _wait_for_change(conn, seen)
        for ident, body in conn.execute("SELECT id, body FROM routed WHERE answer IS NULL"):
            conn.execute("UPDATE routed SET answer = ? WHERE id = ?", (body, ident))


def rows_call(path: str) -> Callable[[], None]:
    conn = _connect(path)
    counter = iter(range(1 << 62))

    def call() -> None:
        ident = next(counter)
        conn.execute("INSERT INTO routed (id, body) VALUES (?, ?)", (ident, CALL))
        seen = 0
        while True:
            row = conn.execute("SELECT answer FROM routed WHERE id = ?", (ident,)).fetchone()
            if row[0] is not None:
                break
            seen = _wait_for_change(conn, seen)
        conn.execute("DELETE FROM routed WHERE id = ?", (ident,))

    return call


def timed(call: Callable[[], None], calls: int) -> list[float]:
    for _ in range(WARMUP):
        call()
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return times


def line(label: str, times: list[float]) -> str:
    ms = sorted(t * 1000 for t in times)
    p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
    rate = len(ms) / (sum(ms) / 1000)
    return f"{label:28} p50 {statistics.median(ms):7.3f} ms  p99 {p99:7.3f} ms  {rate:8.0f} calls/s"


def _owner(*argv: str) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        [sys.executable, "-m", "bench.routed_sqlite", *argv], stdout=subprocess.PIPE, cwd=REPO
    )
    assert process.stdout is not None
    assert process.stdout.readline().strip() == b"READY"
    return process


def bare(directory: Path, calls: int) -> list[str]:
    lines = []
    path = str(directory / "bare.sock")
    owner = _owner("--serve-socket", path)
    try:
        lines.append(line("socket (bare)", timed(socket_call(path), calls)))
    finally:
        owner.kill()
        owner.wait()
    path = str(directory / "bare.sqlite3")
    _connect(path).execute("CREATE TABLE routed (id INTEGER PRIMARY KEY, body BLOB, answer BLOB)")
    owner = _owner("--serve-rows", path)
    try:
        lines.append(line("rows + data_version (bare)", timed(rows_call(path), calls)))
    finally:
        owner.kill()
        owner.wait()
    return lines


def _backend() -> ScriptedBackend:
    return ScriptedBackend(default=lambda call: reply("ok"))


async def serve_agentrt(path: str) -> None:
    async with agentrt.open_runtime(store=agentrt.SQLiteStore(path)) as rt:
        await rt.start_agent(agentrt.Agent, name="x", backend=_backend())
        print("READY", flush=True)
        await trio.sleep_forever()


async def measure_agentrt(path: str, calls: int) -> list[str]:
    argv = [sys.executable, "-m", "bench.routed_sqlite", "--serve-agentrt", path]
    owner = await trio.lowlevel.open_process(argv, stdout=subprocess.PIPE, cwd=REPO)
    try:
        assert owner.stdout is not None
        assert (await owner.stdout.receive_some()).strip() == b"READY"
        async with agentrt.open_runtime(store=agentrt.SQLiteStore(path)) as rt:
            await rt.start_agent(agentrt.Agent, name="y", backend=_backend())
            times: dict[str, list[float]] = {}
            kinds = {
                "status, local": lambda: rt.status("y"),
                "status, routed": lambda: rt.status("x"),
                "ask, local": lambda: rt.ask("y", "ping"),
                "ask, routed": lambda: rt.ask("x", "ping"),
            }
            for round_ in range(WARMUP + calls):
                for kind, made in kinds.items():
                    start = time.perf_counter()
                    await made()
                    if round_ >= WARMUP:
                        times.setdefault(kind, []).append(time.perf_counter() - start)
            return [line(f"agentrt {kind}", seconds) for kind, seconds in times.items()]
    finally:
        owner.kill()
        await owner.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500, help="calls of each kind (500)")
    parser.add_argument("--dir", help="where the files go (default: a new temporary one)")
    parser.add_argument("--serve-socket", help=argparse.SUPPRESS)
    parser.add_argument("--serve-rows", help=argparse.SUPPRESS)
    parser.add_argument("--serve-agentrt", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_socket:
        serve_socket(args.serve_socket)
    elif args.serve_rows:
        serve_rows(args.serve_rows)
    elif args.serve_agentrt:
        trio.run(serve_agentrt, args.serve_agentrt)
    else:
        with tempfile.TemporaryDirectory(dir=args.dir, prefix="rs") as where:
            directory = Path(where)
            os.chmod(directory, 0o700)
            for shown in bare(directory, args.calls):
                print(shown)
            for shown in trio.run(measure_agentrt, str(directory / "s.sqlite3"), args.calls):
                print(shown)


if __name__ == "__main__":
    main()
