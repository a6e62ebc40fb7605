"""Serve the fake Anthropic Messages API from the command line, for demos and manual tries.

    python -m agentrt.testing.fake_anthropic [--port 0] [--reply TEXT]
    python -m agentrt.testing.fake_anthropic [--reply TEXT] -- CMD [ARG ...]

Every model call gets TEXT, or by default an echo of its prompt ("You said: ...").

Alone, it prints ``ANTHROPIC_BASE_URL=http://127.0.0.1:PORT`` as its first stdout line,
then one line per request on stderr, until Ctrl-C or SIGTERM stops it.

With ``-- CMD``, it runs CMD against the fake and prints nothing of its own: CMD gets this
environment with the base URL, a dummy API key and a fresh HOME in a temporary directory
(removed afterwards), without ambient credentials or XDG directories, so a ``claude`` on
PATH or at ``$CLAUDE_CLI`` talks to the fake and keeps its files (and agentrt its default
store) in that HOME. SIGINT and SIGTERM go on to CMD; when CMD exits the fake stops, and
the exit status is CMD's (128 + N when signal N ended it; 127 when it cannot be started).
A Ctrl+C typed in a terminal reaches CMD directly (it is in the terminal's foreground
process group, as this program is), so that one is not sent a second time.

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
from collections.abc import Callable, Mapping, Sequence

import trio

from .._env import AMBIENT_AUTH_VARS
from ._fake_anthropic import AnthropicText, FakeAnthropic, RecordedRequest, open_fake_anthropic

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


def main(argv: Sequence[str] | None = None) -> None:
    """Parse ``argv``; serve until interrupted, or run CMD and exit with its status."""
    parser = argparse.ArgumentParser(prog="python -m agentrt.testing.fake_anthropic")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--reply", help="answer every model call with this text")
    parser.add_argument(
        "command", nargs="*", metavar="-- CMD", help="run CMD against the fake, then stop"
    )
    args = parser.parse_args(argv)
    if args.command:
        raise SystemExit(_run(args.command, args.host, args.port, _answer(args.reply)))
    with contextlib.suppress(KeyboardInterrupt):
        trio.run(_serve, args.host, args.port, _answer(args.reply))


def _answer(reply: str | None) -> Callable[[RecordedRequest], AnthropicText]:
    def answer(request: RecordedRequest) -> AnthropicText:
        if reply is not None:
            return AnthropicText(reply)
        return AnthropicText(f"You said: {request.last_user_text()}")

    return answer


async def _serve(host: str, port: int, answer: Callable[[RecordedRequest], AnthropicText]) -> None:
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


def _run(
    command: Sequence[str], host: str, port: int, answer: Callable[[RecordedRequest], AnthropicText]
) -> int:
    home = tempfile.mkdtemp(prefix="agentrt-fake-home-")
    try:
        return trio.run(_run_command, command, home, host, port, answer)
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _command_env(api: FakeAnthropic, home: str, environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` for a command whose ``claude`` should talk to ``api`` from ``home``."""
    kept = {key: value for key, value in environ.items() if key not in _DROPPED}
    return {**kept, **api.claude_env(home)}


async def _run_command(
    command: Sequence[str],
    home: str,
    host: str,
    port: int,
    answer: Callable[[RecordedRequest], AnthropicText],
) -> int:
    forwarded = {signal.SIGTERM} if _in_terminal_foreground() else {signal.SIGINT, signal.SIGTERM}
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with open_fake_anthropic(answer, host=host, port=port) as api:
            env = _command_env(api, home, os.environ)
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
