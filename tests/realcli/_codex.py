"""Driving the pinned codex binary against the fake OpenAI API, for the smoke tests and the
fixture capture script (see CODEX.md)."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import subprocess
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import trio
from npm_clis import MARKER_VAR as MARKER_VAR
from npm_clis import ROOT as ROOT
from npm_clis import Turn as Turn
from npm_clis import decode as decode
from npm_clis import exit_status as exit_status
from npm_clis import find_marked as find_marked
from npm_clis import pinned_binary, pinned_version, scratch_dir
from npm_clis import run_turn as run_translated

from agentrt import Event, Usage
from agentrt.backend import Command, ExitStatus, SessionTotals
from agentrt.backends.codex import CodexBackend, CodexOptions
from agentrt.testing import FAKE_OPENAI_KEY_VAR, FakeOpenAI, OpenAIUsage

FAKE_KEY = "sk-fake-0000000000000000"


def codex_version() -> str:
    """The pinned version: $AGENTRT_CODEX_VERSION, else tests/realcli/CODEX_VERSION."""
    return pinned_version("codex")


def codex_binary() -> Path | None:
    """The codex that `make codex-cli` installed for the pinned version, if it did."""
    return pinned_binary("codex")


@attrs.frozen
class Place:
    """Directories of one test: CODEX_HOME, HOME and the working directory."""

    codex_home: Path
    home: Path
    cwd: Path
    marker: str

    def raw_options(self, binary: Path, **extra: Any) -> dict[str, Any]:
        """Backend options (as ``start_agent`` takes them) for codex in this place."""
        env = {"HOME": str(self.home), FAKE_OPENAI_KEY_VAR: FAKE_KEY, MARKER_VAR: self.marker}
        env.update(extra.pop("env", {}))
        return {
            "binary": str(binary),
            "cwd": str(self.cwd),
            "codex_home": str(self.codex_home),
            "env_policy": "isolated",
            "env": env,
            **extra,
        }

    def options(self, binary: Path, **extra: Any) -> CodexOptions:
        return CodexBackend().parse_options(self.raw_options(binary, **extra))


@asynccontextmanager
async def codex_place(api: FakeOpenAI, **config: Any) -> AsyncIterator[Place]:
    """Fresh directories with a config.toml pointing at ``api``. On the way out, every
    process that carries this place's marker is killed, then the directories are removed.

    They live in the project's .cache, not /tmp: codex 0.171.0 refuses to create its helper
    aliases under a temporary directory and says so on stderr every run."""
    async with scratch_dir("codex-") as root:
        place = Place(Path(root, "codex-home"), Path(root, "home"), Path(root, "work"), root)
        for path in (place.codex_home, place.home, place.cwd):
            path.mkdir()
        (place.codex_home / "config.toml").write_text(api.codex_config_toml(**config))
        yield place


def call_usage(power: int) -> OpenAIUsage:
    """A distinct usage per model call: 3/1/2 x 10**power (input/cached/output)."""
    return OpenAIUsage(
        input_tokens=3 * 10**power, cached_tokens=10**power, output_tokens=2 * 10**power
    )


def translate(
    frames: Sequence[Any], status: ExitStatus, stderr: str, *, usage_baseline: Usage | None = None
) -> list[Event]:
    """Every event the backend's translator makes of one turn, the terminal one last."""
    baseline = None if usage_baseline is None else SessionTotals(usage=usage_baseline)
    t = CodexBackend().translator(CodexBackend().parse_options({}), baseline=baseline)
    events = [event for frame in frames for event in t.feed(frame)]
    end = t.finish(status, stderr)
    return events + ([end] if end is not None else [])


async def run_turn(command: Command, **translator: Any) -> Turn:
    """Run one turn's command to its end (at most 60 s) and translate it."""
    return await run_translated(command, functools.partial(translate, **translator))


def redact_paths(text: str, place: Place, api: FakeOpenAI) -> str:
    """``text`` with the test's directories and port replaced by stable placeholders."""
    for path, name in ((place.cwd, "$CWD"), (place.codex_home, "$CODEX_HOME")):
        text = text.replace(str(path), name)
    text = text.replace(str(place.home), "$HOME").replace(str(place.marker), "$ROOT")
    return text.replace(f"127.0.0.1:{api.port}", "127.0.0.1:$PORT")


class LiveCodex:
    """A ``codex app-server`` driven by hand through the backend's `LiveProtocol`, as the
    runtime drives a warm session: write the opening, answer control frames until ready,
    then per turn write the prompt and feed the turn's frames to a fresh translator."""

    def __init__(self, protocol: Any, process: trio.Process) -> None:
        self.protocol = protocol
        self.process = process
        self._buffer = b""
        self._writing = trio.Lock()
        self.frames: list[Any] = []  # every frame read, in order
        # Everything written and read, in order: {"write": message} / {"read": frame}.
        self.transcript: list[dict[str, Any]] = []

    async def _frame(self) -> Any:
        assert self.process.stdout is not None
        while b"\n" not in self._buffer:
            chunk = await self.process.stdout.receive_some(65536)
            if not chunk:
                raise EOFError(f"codex app-server closed stdout (exit {self.process.poll()})")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        frame = json.loads(line)
        self.frames.append(frame)
        self.transcript.append({"read": frame})
        return frame

    async def write(self, data: bytes) -> None:
        assert self.process.stdin is not None
        if data:
            async with self._writing:
                self.transcript += [{"write": json.loads(line)} for line in data.splitlines()]
                await self.process.stdin.send_all(data)

    async def interrupt(self) -> None:
        """Write the protocol's interrupt (from another task, while `turn` runs)."""
        await self.write(self.protocol.interrupt())

    async def until_ready(self) -> None:
        await self.write(self.protocol.opening())
        while not self.protocol.ready:
            frame = await self._frame()
            assert self.protocol.classify(frame) == "control", frame
            await self.write(self.protocol.control(frame))

    async def turn(self, prompt: str, *, baseline: SessionTotals | None = None) -> list[Event]:
        """One turn's events, the terminal one last. At most 60 s."""
        translator = self.protocol.translator(baseline=baseline)
        events: list[Event] = []
        with trio.fail_after(60):
            await self.write(self.protocol.prompt(prompt))
            while True:
                frame = await self._frame()
                role = self.protocol.classify(frame)
                if role == "control":
                    await self.write(self.protocol.control(frame))
                    continue
                events += translator.feed(frame)
                if role == "end":
                    return events

    async def close(self) -> int:
        """Close stdin (app-server then exits) and wait, at most 20 s; the exit code."""
        assert self.process.stdin is not None
        await self.process.stdin.aclose()
        with trio.fail_after(20):
            return await self.process.wait()


@asynccontextmanager
async def live_codex(protocol: Any) -> AsyncIterator[LiveCodex]:
    """Spawn ``protocol.command`` (stdin kept open, stderr discarded) and make it ready."""
    command = protocol.command
    process = await trio.lowlevel.open_process(
        [str(a) for a in command.argv],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=dict(command.env),
        cwd=command.cwd,
        start_new_session=True,
    )
    live = LiveCodex(protocol, process)
    try:
        with trio.fail_after(60):
            await live.until_ready()
        yield live
    finally:
        with trio.CancelScope(shield=True):
            if process.returncode is None:
                # The group: the npm wrapper's native codex child must not outlive it.
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
            await process.wait()
