"""Serve the fake Anthropic Messages API from the command line, for demos and manual tries.

    python -m agentrt.testing.fake_anthropic [--port 0] [--reply TEXT]
    python -m agentrt.testing.fake_anthropic [ANSWERS] [--home DIR] -- CMD [ARG ...]

Every model call gets an echo of its prompt ("You said: ..."), or with ANSWERS:
``--reply TEXT`` that text; ``--scenario NAME`` the model's side of an example's story
(``fleet``, ``guarded``, ``app_tools``, ``reviewer``: the tool calls it is about); ``--script FILE``
the replies of a JSON list, one per model call in order (``{"text": ...}``, or
``{"tool": NAME, "input": {...}}`` for a tool call), then the echo.

Alone, it prints ``ANTHROPIC_BASE_URL=http://127.0.0.1:PORT`` as its first stdout line,
then one line per request on stderr, until Ctrl-C or SIGTERM stops it.

With ``-- CMD``, it runs CMD against the fake. CMD gets this environment with the base
URL, a dummy API key and a fresh HOME in a temporary directory (removed afterwards; with
``--home DIR``, DIR, made if missing and kept, so a second run continues the sessions of
the first), without ambient credentials or XDG directories, so its ``claude`` talks to
the fake and keeps its files (and agentrt its default store) in that HOME. Its ``claude``
is ``$CLAUDE_CLI``, else the pinned one ``make claude-cli`` installed in this checkout
(passed on as ``CLAUDE_CLI``), else the one on PATH; one line on stderr says which. Run
from a virtualenv, CMD has that virtualenv's ``bin`` first on PATH, so its ``python`` is
this one. SIGINT and SIGTERM go on to CMD; when CMD exits the fake stops, and the exit
status is CMD's (128 + N when signal N ended it; 127 when it cannot be started). A Ctrl+C
typed in a terminal reaches CMD directly (it is in the terminal's foreground process
group, as this program is), so that one is not sent a second time.

In tests, use `agentrt.testing.open_fake_anthropic` instead.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec
import trio

from .._env import AMBIENT_AUTH_VARS
from .._pinned import pinned_claude
from ._fake_anthropic import (
    AnthropicReply,
    AnthropicText,
    AnthropicToolUse,
    FakeAnthropic,
    RecordedRequest,
    open_fake_anthropic,
)
from ._scenarios import SCENARIOS, Scenario, echo

# Set in CMD's environment by nothing but this program: where CMD would otherwise find the
# user's own Claude configuration, files or credentials.
_DROPPED = AMBIENT_AUTH_VARS | {
    "CLAUDE_CONFIG_DIR",
    "CLAUDECODE",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
    "XDG_CACHE_HOME",
}
_PROG = "python -m agentrt.testing.fake_anthropic"


def main(argv: Sequence[str] | None = None) -> None:
    """Parse ``argv``; serve until interrupted, or run CMD and exit with its status."""
    parser = argparse.ArgumentParser(prog=_PROG)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    answers = parser.add_mutually_exclusive_group()
    answers.add_argument("--reply", help="answer every model call with this text")
    answers.add_argument(
        "--scenario", choices=sorted(SCENARIOS), help="the model's side of an example's story"
    )
    answers.add_argument(
        "--script",
        type=Path,
        metavar="FILE",
        help='a JSON list of replies, in order: {"text": ...} or {"tool": NAME, "input": {...}}',
    )
    parser.add_argument(
        "--home", type=Path, metavar="DIR", help="CMD's HOME, kept (default: a temporary one)"
    )
    parser.add_argument(
        "command", nargs="*", metavar="-- CMD", help="run CMD against the fake, then stop"
    )
    args = parser.parse_args(argv)
    try:
        answer = _answers(args)
    except ValueError as exc:
        parser.error(str(exc))
    if args.home is not None and not args.command:
        parser.error("--home is CMD's HOME: give it with -- CMD")
    if args.home is not None:
        try:
            args.home.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            parser.error(f"--home {args.home}: cannot be made a directory ({exc.strerror})")
    if args.command:
        raise SystemExit(_run(args.command, args.host, args.port, answer, args.home))
    with contextlib.suppress(KeyboardInterrupt):
        trio.run(_serve, args.host, args.port, answer)


def _answers(args: argparse.Namespace) -> Scenario:
    if args.reply is not None:
        reply = AnthropicText(args.reply)
        return lambda _request: reply
    if args.scenario is not None:
        return SCENARIOS[args.scenario]
    if args.script is not None:
        return _scripted(_read_script(args.script))
    return echo


def _read_script(path: Path) -> list[AnthropicReply]:
    """The replies in the JSON list at ``path``; ValueError saying which one is wrong."""
    try:
        items = msgspec.json.decode(path.read_bytes())
    except OSError as exc:
        raise ValueError(f"--script {path}: cannot be read ({exc.strerror})") from None
    except msgspec.DecodeError as exc:
        raise ValueError(f"--script {path}: not a JSON document ({exc})") from None
    if not isinstance(items, list):
        raise ValueError(f"--script {path}: expected a JSON list of replies")
    return [_reply(item, f"--script {path}: reply {n}") for n, item in enumerate(items, 1)]


def _reply(item: Any, where: str) -> AnthropicReply:
    if isinstance(item, dict) and set(item) == {"text"} and isinstance(item["text"], str):
        return AnthropicText(item["text"])
    if (
        isinstance(item, dict)
        and {"tool", "input"} <= set(item) <= {"tool", "input", "text"}
        and isinstance(item["tool"], str)
        and isinstance(item["input"], dict)
        and isinstance(item.get("text", ""), str)
    ):
        return AnthropicToolUse(item["tool"], item["input"], text=item.get("text"))
    raise ValueError(
        f'{where} is {msgspec.json.encode(item).decode()[:80]}: expected {{"text": TEXT}} '
        'or {"tool": NAME, "input": {...}} (with an optional "text")'
    )


def _scripted(replies: Sequence[AnthropicReply]) -> Scenario:
    # The script's replies in order, one per model call, then the echo.
    queue = list(reversed(replies))

    def answer(request: RecordedRequest) -> AnthropicReply:
        return queue.pop() if queue else echo(request)

    return answer


async def _serve(host: str, port: int, answer: Scenario) -> None:
    # Signals arrive as messages, not as KeyboardInterrupt raised in whatever task runs.
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with open_fake_anthropic(answer, host=host, port=port) as api:
            print(f"ANTHROPIC_BASE_URL={api.base_url}", flush=True)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_log_requests, api)
                async for _ in signals:
                    break
                nursery.cancel_scope.cancel()


async def _log_requests(api: FakeAnthropic) -> None:
    seen = 0
    while True:
        requests = await api.wait_requests(seen + 1)
        for request in requests[seen:]:
            stream = " stream" if request.stream else ""
            print(f"{request.method} {request.path}{stream}", file=sys.stderr, flush=True)
        seen = len(requests)


def _run(command: Sequence[str], host: str, port: int, answer: Scenario, home: Path | None) -> int:
    if home is not None:
        return trio.run(_run_command, command, str(home.resolve()), host, port, answer)
    scratch = tempfile.mkdtemp(prefix="agentrt-fake-home-")
    try:
        return trio.run(_run_command, command, scratch, host, port, answer)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _command_env(api: FakeAnthropic, home: str, environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` for a command whose ``claude`` should talk to ``api`` from ``home``."""
    kept = {key: value for key, value in environ.items() if key not in _DROPPED}
    if sys.prefix != sys.base_prefix:  # as the virtualenv's activate script does
        venv_bin = os.path.dirname(os.path.abspath(sys.executable))
        kept["PATH"] = os.pathsep.join([venv_bin, *filter(None, [kept.get("PATH")])])
    env = {**kept, **api.claude_env(home)}
    pinned = None if env.get("CLAUDE_CLI") else pinned_claude()
    if pinned is not None:
        env["CLAUDE_CLI"] = str(pinned.path)
    return env


def _which_claude(env: Mapping[str, str]) -> str:
    """Which ``claude`` the command's agents run, for the line that says so."""
    given = env.get("CLAUDE_CLI")
    if given:
        pinned = pinned_claude()
        if pinned is not None and given == str(pinned.path):
            return f"{pinned}, installed by `make claude-cli`"
        return f"{given} ($CLAUDE_CLI)"
    found = shutil.which("claude", path=env.get("PATH"))
    if found:
        return f"{found} (on PATH)"
    return "none found: `make claude-cli` installs the pinned one, or set CLAUDE_CLI"


async def _run_command(
    command: Sequence[str], home: str, host: str, port: int, answer: Scenario
) -> int:
    forwarded = {signal.SIGTERM} if _in_terminal_foreground() else {signal.SIGINT, signal.SIGTERM}
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with open_fake_anthropic(answer, host=host, port=port) as api:
            env = _command_env(api, home, os.environ)
            print(f"fake_anthropic: claude: {_which_claude(env)}", file=sys.stderr, flush=True)
            try:
                process = await trio.lowlevel.open_process(list(command), env=env)
            except OSError as exc:
                print(f"fake_anthropic: cannot run {command[0]!r}: {exc}", file=sys.stderr)
                return 127
            try:
                async with trio.open_nursery() as nursery:

                    async def forward() -> None:
                        async for signum in signals:
                            if signum in forwarded:
                                process.send_signal(signum)

                    nursery.start_soon(forward)
                    code = await process.wait()
                    nursery.cancel_scope.cancel()
            finally:
                with trio.CancelScope(shield=True):
                    if process.returncode is None:
                        process.kill()
                    await process.wait()
    return code if code >= 0 else 128 - code


def _in_terminal_foreground() -> bool:
    # Then a Ctrl+C typed there goes to CMD as well as to us: CMD shares our process group.
    try:
        fd = os.open("/dev/tty", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        return os.tcgetpgrp(fd) == os.getpgrp()
    except OSError:
        return False
    finally:
        os.close(fd)


if __name__ == "__main__":
    main()
