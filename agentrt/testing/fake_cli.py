"""A fake coding CLI for process tests: a small program of steps, run with ``sys.executable``.

The program is a JSON list of steps, each ``[op, *args]``::

    ["emit", value]            print value as one JSON line on stdout
    ["write", text]            write text to stdout as is (no newline added)
    ["write_hex", hex]         write raw bytes to stdout (invalid UTF-8, say)
    ["big_line", n]            print one valid JSON line of exactly n bytes (a string)
    ["replay", path, delay]    print each line of a recorded stream, delay seconds apart
    ["stderr", text, times]    write text (repeated) to stderr
    ["sleep", seconds]
    ["hang"]                   sleep for ever, silently
    ["close_output"]           close stdout and stderr (onto /dev/null) and go on
    ["repeat", n, steps]       run steps n times
    ["read_stdin"]             read stdin to EOF
    ["record", path]           read stdin, write argv/env/stdin/cwd/pid (and the mode and
                               content of every argument that is a file) to path as JSON
    ["ignore", signal]         ignore a signal ("SIGTERM", "SIGINT", ...)
    ["on", signal, steps]      on that signal run steps, then exit 0 (Claude on SIGINT)
    ["spawn", options]         start a child running options["steps"]; options may set
                               "setsid" (new session), "stdout" / "stderr": "null" (else
                               inherited), "clear_env"; prints {"type": "spawned", "pid": ...}
                               unless "announce" is false
    ["daemon", path, steps]    start steps as a daemon that escapes its turn: double fork, setsid,
                               stdio on /dev/null, exec'd through ``env -i`` (as sudo does: no
                               env marker); waits until it has recorded itself at path (as
                               "record" does)
    ["exit", code]
    ["kill", signal]           send a signal to itself (crash by SIGKILL, SIGSEGV...)
    ["by_run", path, programs] the n-th run of the program runs programs[n] (a list of steps;
                               the last one again from then on), n counted in the file at
                               path: one executable plays a session's turns one by one

Only the standard library is used and nothing of agentrt is imported, so it starts fast with
``python -I -S``. `fake_cli_argv` builds an argv for a `Command`; `fake_cli_executable` writes
an executable a backend can be pointed at as its binary (the program comes from a file, the
command line stays the backend's and is what ``record`` records).
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

SCRIPT = os.path.abspath(__file__)

Step = Sequence[Any]


def fake_cli_argv(*steps: Step, args: Sequence[str] = ()) -> tuple[str, ...]:
    """The argv that runs ``steps`` (``args`` follow, as a real CLI's arguments would)."""
    return (sys.executable, "-I", "-S", SCRIPT, "--program", json.dumps(steps), *args)


def fake_cli_executable(directory: str, *steps: Step, name: str = "fake-cli") -> str:
    """Write an executable named ``name`` into ``directory`` that runs ``steps`` with whatever
    arguments it is given; return its path."""
    program = os.path.join(directory, f"{name}.program.json")
    with open(program, "w") as f:
        json.dump(steps, f)
    path = os.path.join(directory, name)
    with open(path, "w") as f:
        quoted = " ".join(shlex.quote(a) for a in (sys.executable, "-I", "-S", SCRIPT))
        f.write(f'#!/bin/sh\nexec {quoted} --program-file {shlex.quote(program)} "$@"\n')
    os.chmod(path, 0o755)
    return path


def _signal(name: str) -> signal.Signals:
    return signal.Signals[name]


def _out(data: bytes) -> None:
    # os.write, not sys.stdout: a signal handler that prints (["on", ...]) may run while the
    # main program is mid-write, and a buffered writer refuses that reentrant call.
    view = memoryview(data)
    while view:
        view = view[os.write(1, view) :]


def _emit(value: Any) -> None:
    _out(json.dumps(value, separators=(",", ":")).encode() + b"\n")


def _file_facts(args: Sequence[str]) -> dict[str, Any]:
    facts: dict[str, Any] = {}
    for arg in args:
        try:
            st = os.stat(arg)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            with open(arg, "rb") as f:
                content = f.read().decode("utf-8", "replace")
            facts[arg] = {
                "mode": stat.S_IMODE(st.st_mode),
                "dir_mode": stat.S_IMODE(os.stat(os.path.dirname(arg) or ".").st_mode),
                "content": content,
            }
    return facts


def _record(path: str, args: Sequence[str]) -> None:
    data = sys.stdin.buffer.read()
    record = {
        "argv": list(args),
        "env": dict(os.environ),
        "stdin": data.decode("utf-8", "replace"),
        "cwd": os.getcwd(),
        "pid": os.getpid(),
        "files": _file_facts(args),
    }
    # Whole or not at all: a test (or a "daemon" step) may be waiting for the file.
    with open(path + ".tmp", "w") as f:
        json.dump(record, f)
    os.replace(path + ".tmp", path)


def _spawn(options: dict[str, Any]) -> None:
    env: dict[str, str] | None = {} if options.get("clear_env") else None
    child = subprocess.Popen(
        [sys.executable, "-I", "-S", SCRIPT, "--program", json.dumps(options["steps"])],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL if options.get("stdout") == "null" else None,
        stderr=subprocess.DEVNULL if options.get("stderr") == "null" else None,
        start_new_session=bool(options.get("setsid")),
        env=env,
    )
    if options.get("announce", True):
        _emit({"type": "spawned", "pid": child.pid, "setsid": bool(options.get("setsid"))})


def _daemon(path: str, steps: Sequence[Step]) -> None:
    first = os.fork()
    if first == 0:
        os.setsid()
        if os.fork() == 0:
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            program = [["record", path], *steps]
            os.execvp(
                "env",
                ["env", "-i", sys.executable, "-I", "-S", SCRIPT, "--program", json.dumps(program)],
            )
        os._exit(0)
    os.waitpid(first, 0)
    deadline = time.monotonic() + 30
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise SystemExit(f"fake_cli: the daemon did not record itself at {path}")
        time.sleep(0.005)


def _by_run(path: str, programs: Sequence[Sequence[Step]], args: Sequence[str]) -> None:
    try:
        with open(path) as f:
            runs = int(f.read())
    except FileNotFoundError:
        runs = 0
    with open(path, "w") as f:
        f.write(str(runs + 1))
    run(programs[min(runs, len(programs) - 1)], args)


def run(steps: Sequence[Step], args: Sequence[str]) -> None:
    """Run a program's steps in order."""
    for step in steps:
        op, rest = step[0], step[1:]
        if op == "emit":
            _emit(rest[0])
        elif op == "write":
            _out(rest[0].encode())
        elif op == "write_hex":
            _out(bytes.fromhex(rest[0]))
        elif op == "big_line":
            _out(b'"' + b"x" * (rest[0] - 2) + b'"\n')
        elif op == "replay":
            delay = rest[1] if len(rest) > 1 else 0
            with open(rest[0], "rb") as f:
                for line in f:
                    _out(line)
                    if delay:
                        time.sleep(delay)
        elif op == "stderr":
            sys.stderr.write(rest[0] * (rest[1] if len(rest) > 1 else 1))
            sys.stderr.flush()
        elif op == "sleep":
            time.sleep(rest[0])
        elif op == "close_output":
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
        elif op == "hang":
            while True:
                time.sleep(3600)
        elif op == "repeat":
            for _ in range(rest[0]):
                run(rest[1], args)
        elif op == "read_stdin":
            sys.stdin.buffer.read()
        elif op == "record":
            _record(rest[0], args)
        elif op == "ignore":
            signal.signal(_signal(rest[0]), signal.SIG_IGN)
        elif op == "on":
            handler_steps = rest[1]

            def handler(signum: int, frame: object, handler_steps: Step = handler_steps) -> None:
                run(handler_steps, args)
                os._exit(0)

            signal.signal(_signal(rest[0]), handler)
        elif op == "spawn":
            _spawn(rest[0])
        elif op == "daemon":
            _daemon(rest[0], rest[1])
        elif op == "exit":
            os._exit(rest[0])
        elif op == "kill":
            os.kill(os.getpid(), _signal(rest[0]))
        elif op == "by_run":
            _by_run(rest[0], rest[1], args)
        else:
            raise SystemExit(f"fake_cli: unknown step {op!r}")


def main(argv: Sequence[str]) -> None:
    if argv[1] == "--program":
        steps = json.loads(argv[2])
    elif argv[1] == "--program-file":
        with open(argv[2]) as f:
            steps = json.load(f)
    else:
        raise SystemExit("usage: fake_cli.py --program JSON | --program-file PATH [ARG...]")
    run(steps, argv[3:])


if __name__ == "__main__":
    main(sys.argv)
