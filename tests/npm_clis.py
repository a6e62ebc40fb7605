"""What the helpers of the npm-installed CLIs (codex, gemini, qwen) share, for the real-CLI
tests and the fixture capture scripts: the pinned binary, a scratch directory under the
project's .cache swept of its processes, and one turn's process run to its end."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import trio
from proc_helpers import kill_marked, marked

from agentrt import Event
from agentrt.backend import Command, ExitStatus

ROOT = Path(__file__).resolve().parents[1]
# Set in every process of such a CLI a test starts: how the sweep finds what it left
# behind, including helpers in sessions (and PID namespaces) of their own.
MARKER_VAR = "AGENTRT_TEST_RUN"


def pinned_version(name: str) -> str:
    """The pinned version of CLI ``name``: $AGENTRT_<NAME>_VERSION, else
    tests/realcli/<NAME>_VERSION."""
    pinned = (ROOT / "tests" / "realcli" / f"{name.upper()}_VERSION").read_text().strip()
    return os.environ.get(f"AGENTRT_{name.upper()}_VERSION") or pinned


def pinned_binary(name: str) -> Path | None:
    """The ``name`` that `make NAME-cli` installed for the pinned version, if it did."""
    folder = ROOT / ".cache" / "npm" / f"{name}-{pinned_version(name)}"
    path = folder / "node_modules" / ".bin" / name
    return path if path.exists() else None


@asynccontextmanager
async def scratch_dir(prefix: str) -> AsyncIterator[str]:
    """A fresh directory under the project's .cache (not /tmp: codex refuses to make its
    helper aliases under a temporary directory, gemini names project folders after the
    working directory's name); its path is also the marker of the processes started in it,
    which are killed on the way out, before it is removed."""
    base = ROOT / ".cache" / "realcli"
    base.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=base, prefix=prefix) as root:
        try:
            yield root
        finally:
            with trio.CancelScope(shield=True):
                await kill_marked(MARKER_VAR, root)


@attrs.frozen
class Turn:
    """One finished CLI process: its frames, exit and stderr, and their translation."""

    frames: list[Any]
    exit_status: ExitStatus
    stderr: str
    events: list[Event]

    @property
    def terminal(self) -> Event:
        return self.events[-1]


def exit_status(returncode: int) -> ExitStatus:
    return ExitStatus(None, -returncode) if returncode < 0 else ExitStatus(returncode)


def decode(stdout: bytes) -> list[Any]:
    return [json.loads(line) for line in stdout.decode().splitlines() if line.strip()]


Translate = Callable[[Sequence[Any], ExitStatus, str], list[Event]]


def _write_config_files(command: Command) -> None:
    # Private, as the driver writes them (its atomic rename aside: nothing reads them yet).
    for config in command.config_files:
        Path(config.path).parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        Path(config.path).touch(mode=0o600)
        Path(config.path).write_bytes(config.content)


async def run_command(command: Command) -> subprocess.CompletedProcess[bytes]:
    """Run one turn's command to its end, in a session of its own, as the driver would (its
    config files written first), its stdout and stderr captured."""
    _write_config_files(command)
    return await trio.run_process(
        [str(a) for a in command.argv],
        stdin=command.stdin,
        env=dict(command.env),
        cwd=command.cwd,
        capture_stdout=True,
        capture_stderr=True,
        check=False,
        start_new_session=True,
    )


async def run_turn(command: Command, translate: Translate) -> Turn:
    """Run one turn's command to its end (at most 60 s) and translate it."""
    with trio.fail_after(60):
        done = await run_command(command)
    frames = decode(done.stdout)
    status = exit_status(done.returncode)
    stderr = done.stderr.decode(errors="replace")
    return Turn(frames, status, stderr, translate(frames, status, stderr))


def find_marked(marker: str, comm: str) -> list[int]:
    """Live processes carrying ``marker`` whose command name is ``comm``."""
    pids = []
    for pid in (info.pid for info in marked(MARKER_VAR, marker)):
        try:
            if Path("/proc", str(pid), "comm").read_text().strip() == comm:
                pids.append(pid)
        except OSError:
            continue
    return pids
