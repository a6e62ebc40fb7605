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
    ["allocate", mib]          allocate mib MiB and touch every page (past a memory limit: the
                               kernel's OOM killer)
    ["fork_until_refused", n, path]  fork children that sleep until the kernel refuses a fork
                               (a task limit) or n run; write {"forked": k, "refused": bool}
                               to path; the children live on
    ["exit", code]
    ["kill", signal]           send a signal to itself (crash by SIGKILL, SIGSEGV...)
    ["by_run", path, programs] the n-th run of the program runs programs[n] (a list of steps;
                               the last one again from then on), n counted in the file at
                               path: one executable plays a session's turns one by one
    ["live", options]          play a live Claude Code process (stream-json on stdin, see
                               below) until stdin closes, then exit 0
    ["answer"]                 in a live turn: print a Claude turn answering its prompt
                               (init, assistant text "<turn>: <prompt>", success result)
    ["ask", request, before]   in a live turn: send the control request ``request`` (e.g.
                               {"subtype": "can_use_tool", ...}), wait for its answer and
                               print it as {"type": "answered", "response": ...};
                               ``before`` (optional): frames printed in the same write,
                               ahead of the request (one read of the pipe takes them all)
    ["converse", options]      a Claude turn that keeps its conversation as Claude does, in
                               ``<CLAUDE_CONFIG_DIR or ~/.claude>/projects/<cwd>/<id>.jsonl``
                               (per turn or live): ``--resume`` of an id with no file fails
                               as Claude does ("No conversation found"); otherwise the prompt
                               is appended to the file, options["log"] (a path) gets a line
                               ``<session id> <prompt>``, options["delay"] seconds pass, and
                               the answer is JSON: {"prompts": every user prompt of the
                               conversation so far, "broken": lines of the file that are not
                               JSON}

A live process answers the ``initialize`` control request (with an error if options has
"refuse"), then runs ``options["turns"][n]`` for its n-th user message (the last one again
from then on). An ``interrupt`` control request is acknowledged at once; a running "hang" or
"sleep" step then stops and the turn prints ``options["on_interrupt"]`` (default: an
``error_during_execution`` result), unless options has "ignore_interrupt". Any other control
request gets an empty success, or ``options["answers"][subtype]`` as its payload, or an error
for a subtype in ``options["refuse_requests"]``. The session id is
the one ``--resume`` names, else options["session_id"], else "fake-<pid>".

Only the standard library is used and nothing of agentrt is imported, so it starts fast with
``python -I -S``. `fake_cli_argv` builds an argv for a `Command`; `fake_cli_executable` writes
an executable a backend can be pointed at as its binary (the program comes from a file, the
command line stays the backend's and is what ``record`` records).
"""

from __future__ import annotations

import json
import os
import queue
import re
import shlex
import signal
import stat
import subprocess
import sys
import threading
import time
import uuid
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


# Reentrant: a signal handler runs in the main thread, maybe while that thread holds it.
_out_lock = threading.RLock()


def _out(data: bytes) -> None:
    # os.write, not sys.stdout: a signal handler that prints (["on", ...]) may run while the
    # main program is mid-write, and a buffered writer refuses that reentrant call. The lock
    # keeps a live process's reader thread from splitting a line of the main thread's.
    view = memoryview(data)
    with _out_lock:
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


def _fork_until_refused(most: int, path: str) -> None:
    forked, refused = 0, False
    while forked < most:
        try:
            pid = os.fork()
        except BlockingIOError:  # EAGAIN: the cgroup's pids.max
            refused = True
            break
        if pid == 0:
            while True:
                time.sleep(3600)
        forked += 1
    with open(path, "w") as f:
        json.dump({"forked": forked, "refused": refused}, f)


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


class _Interrupted(Exception):
    pass


class _Live:
    """The state of a live process: its session, its turns, an interrupt asked for."""

    def __init__(self, options: dict[str, Any], args: Sequence[str]) -> None:
        self.options = options
        resume = list(args).index("--resume") + 1 if "--resume" in args else None
        self.session_id = (
            args[resume] if resume else options.get("session_id", f"fake-{os.getpid()}")
        )
        self.turn = 0
        self.prompt = ""
        self.interrupted = threading.Event()
        self.messages: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.answers: queue.Queue[dict[str, Any]] = queue.Queue()
        self.asked = 0

    def read_stdin(self) -> None:
        # A thread: control requests are answered at once, even while a turn runs.
        for line in sys.stdin.buffer:
            if not line.strip():
                continue
            message = json.loads(line)
            if message.get("type") == "control_request":
                self.control(message)
            elif message.get("type") == "control_response":
                self.answers.put(message["response"])
            else:
                self.messages.put(message)
        self.messages.put(None)

    def control(self, message: dict[str, Any]) -> None:
        subtype = message["request"]["subtype"]
        response: dict[str, Any] = {"subtype": "success", "request_id": message["request_id"]}
        if subtype == "initialize" and self.options.get("refuse"):
            response = {**response, "subtype": "error", "error": "refused"}
        elif subtype == "interrupt" and not self.options.get("ignore_interrupt"):
            self.interrupted.set()
        elif subtype in self.options.get("refuse_requests", ()):
            response = {**response, "subtype": "error", "error": f"no {subtype} here"}
        elif subtype in self.options.get("answers", {}):
            response = {**response, "response": self.options["answers"][subtype]}
        _emit({"type": "control_response", "response": response})

    def run(self, args: Sequence[str]) -> None:
        global _live
        _live = self
        threading.Thread(target=self.read_stdin, daemon=True).start()
        turns = self.options.get("turns", [[["answer"]]])
        while (message := self.messages.get()) is not None:
            content = message["message"]["content"]
            self.prompt = content if isinstance(content, str) else json.dumps(content)
            self.interrupted.clear()
            self.turn += 1
            try:
                run(turns[min(self.turn - 1, len(turns) - 1)], args)
            except _Interrupted:
                run(self.options.get("on_interrupt", [["emit", self.error_result()]]), args)
        os._exit(0)

    def ask(self, request: dict[str, Any], before: Sequence[Any] = ()) -> None:
        self.asked += 1
        request_id = f"fake-ask-{self.asked}"
        asking = {"type": "control_request", "request_id": request_id, "request": request}
        _out(b"".join(json.dumps(frame).encode() + b"\n" for frame in (*before, asking)))
        while True:
            if self.interrupted.is_set():
                raise _Interrupted
            try:
                response = self.answers.get(timeout=0.01)
            except queue.Empty:
                continue
            if response.get("request_id") == request_id:
                _emit({"type": "answered", "response": response, "session_id": self.session_id})
                return

    def wait(self, seconds: float) -> None:
        if self.interrupted.wait(seconds):
            raise _Interrupted

    def answer(self) -> None:
        sid = self.session_id
        text = f"{self.turn}: {self.prompt}"
        _emit({"type": "system", "subtype": "init", "session_id": sid, "model": "fake"})
        _emit(
            {
                "type": "assistant",
                "message": {"content": [{"type": "text", "text": text}]},
                "session_id": sid,
            }
        )
        _emit(self.result("success", text))

    def result(self, subtype: str, text: str) -> dict[str, Any]:
        return {
            "type": "result",
            "subtype": subtype,
            "is_error": subtype != "success",
            "result": text,
            "session_id": self.session_id,
            "total_cost_usd": 0.01 * self.turn,
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }

    def error_result(self) -> dict[str, Any]:
        return self.result("error_during_execution", "")


def _converse(options: dict[str, Any], args: Sequence[str]) -> None:
    resume = args[list(args).index("--resume") + 1] if "--resume" in args else None
    if _live is not None:
        session_id, prompt = _live.session_id, _live.prompt
    else:
        session_id, prompt = resume or str(uuid.uuid4()), sys.stdin.read()
    home = os.environ.get("CLAUDE_CONFIG_DIR") or os.path.expanduser("~/.claude")
    folder = os.path.join(home, "projects", re.sub(r"[^A-Za-z0-9]", "-", os.getcwd()))
    path = os.path.join(folder, f"{session_id}.jsonl")
    if resume is not None and not os.path.exists(path):
        lost = f"No conversation found with session ID: {resume}"
        sys.stderr.write(lost + "\n")
        result = {"type": "result", "subtype": "error_during_execution", "is_error": True}
        _emit({**result, "session_id": resume, "errors": [lost]})
        sys.stderr.flush()
        os._exit(1)
    prompts, broken = [], 0
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                try:
                    entry = json.loads(line)
                except ValueError:
                    broken += 1
                    continue
                if entry.get("type") == "user":
                    prompts.append(entry["message"]["content"])
    prompts.append(prompt)
    os.makedirs(folder, exist_ok=True)
    user = {"type": "user", "sessionId": session_id, "message": {"content": prompt}}
    with open(path, "a") as f:
        f.write(json.dumps(user) + "\n")
    if options.get("log"):
        with open(options["log"], "a") as f:
            f.write(f"{session_id} {prompt}\n")
    _emit({"type": "system", "subtype": "init", "session_id": session_id, "model": "fake"})
    _sleep(options.get("delay", 0))
    text = json.dumps({"prompts": prompts, "broken": broken})
    assistant = {"type": "assistant", "sessionId": session_id, "message": {"content": text}}
    with open(path, "a") as f:
        f.write(json.dumps(assistant) + "\n")
    result = {"type": "result", "subtype": "success", "is_error": False, "result": text}
    _emit({**result, "session_id": session_id, "total_cost_usd": 0.001})


# The live process this program plays, if any: its "hang" and "sleep" steps end on an
# interrupt.
_live: _Live | None = None


def _sleep(seconds: float) -> None:
    if _live is None:
        time.sleep(seconds)
    else:
        _live.wait(seconds)


# What "allocate" steps hold, until the process ends.
held: list[bytes] = []


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
            _sleep(rest[0])
        elif op == "close_output":
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
        elif op == "hang":
            while True:
                _sleep(3600)
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
        elif op == "allocate":
            held.append(b"\x01" * (rest[0] * 1024 * 1024))
        elif op == "fork_until_refused":
            _fork_until_refused(rest[0], rest[1])
        elif op == "kill":
            os.kill(os.getpid(), _signal(rest[0]))
        elif op == "by_run":
            _by_run(rest[0], rest[1], args)
        elif op == "live":
            _Live(rest[0], args).run(args)
        elif op == "converse":
            _converse(rest[0], args)
        elif op == "answer":
            assert _live is not None, "answer: only in a live turn"
            _live.answer()
        elif op == "ask":
            assert _live is not None, "ask: only in a live turn"
            _live.ask(rest[0], rest[1] if len(rest) > 1 else ())
        else:
            raise SystemExit(f"fake_cli: unknown step {op!r}")


# What a fake CLI answers to ``--version`` alone.
FAKE_VERSION = "0.0.0"


def main(argv: Sequence[str]) -> None:
    if argv[1] == "--program":
        steps = json.loads(argv[2])
    elif argv[1] == "--program-file":
        with open(argv[2]) as f:
            steps = json.load(f)
    else:
        raise SystemExit("usage: fake_cli.py --program JSON | --program-file PATH [ARG...]")
    if argv[3:] == ["--version"]:
        # As every CLI does (the runtime asks a CLI that does not report its version).
        print(f"fake-cli {FAKE_VERSION}")
        return
    run(steps, argv[3:])


if __name__ == "__main__":
    main(sys.argv)
