"""Running the `agentrt` command as a subprocess, as a user would."""

from __future__ import annotations

import re
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import attrs
import trio

COMMAND = (sys.executable, "-m", "agentrt")
# The backends this distribution ships (its entry points), as the command lists them.
SHIPPED = ("acp", "claude", "codex", "gemini", "opencode", "pi", "qwen")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")


def plain(text: str) -> str:
    """``text`` without terminal escape sequences and carriage returns."""
    return _ANSI.sub("", text)


@attrs.frozen
class Run:
    code: int
    stdout: str
    stderr: str


async def agentrt(
    *args: str, env: Mapping[str, str], stdin: bytes = b"", bound: float = 60.0
) -> Run:
    """Run ``agentrt ARGS`` to its end.

    Cancellation: bounded by ``bound``; the command is killed if it takes longer."""
    with trio.fail_after(bound):
        result = await trio.run_process(
            [*COMMAND, *args],
            env=dict(env),
            stdin=stdin,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    return Run(result.returncode, result.stdout.decode(), result.stderr.decode())


@asynccontextmanager
async def open_agentrt(
    *args: str, env: Mapping[str, str], **options: Any
) -> AsyncIterator[trio.Process]:
    """``agentrt ARGS`` running in the background (``options`` go to the process: pipes,
    a terminal); killed on the way out if it is still running.

    Cancellation: the kill is shielded."""
    process = await trio.lowlevel.open_process([*COMMAND, *args], env=dict(env), **options)
    try:
        yield process
    finally:
        with trio.CancelScope(shield=True):
            if process.returncode is None:
                process.kill()
            await process.wait()
