"""Driving the pinned Gemini CLI against the fake Gemini API, for the real-CLI tests and the
fixture capture script (capture_gemini.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
from npm_clis import MARKER_VAR as MARKER_VAR
from npm_clis import ROOT as ROOT
from npm_clis import Turn as Turn
from npm_clis import decode as decode
from npm_clis import exit_status as exit_status
from npm_clis import pinned_binary, pinned_version, scratch_dir
from npm_clis import run_turn as run_translated

from agentrt import Event
from agentrt.backend import Command, ExitStatus
from agentrt.backends.gemini import GeminiBackend, GeminiOptions
from agentrt.testing import FakeGemini

MODEL = "gemini-2.5-flash"


def gemini_version() -> str:
    """The pinned version: $AGENTRT_GEMINI_VERSION, else tests/realcli/GEMINI_VERSION."""
    return pinned_version("gemini")


def gemini_binary() -> Path | None:
    """The gemini that `make gemini-cli` installed for the pinned version, if it did."""
    return pinned_binary("gemini")


@attrs.frozen
class Place:
    """Directories of one test: the CLI home (GEMINI_CLI_HOME), HOME and the working
    directory."""

    gemini_home: Path
    home: Path
    cwd: Path
    marker: str

    def raw_options(self, binary: Path, api: FakeGemini, **extra: Any) -> dict[str, Any]:
        """Backend options (as ``start_agent`` takes them) for gemini in this place, on the
        fake: one attempt per model call (a scripted failure is seen at once), a pinned
        model (no routing call)."""
        # TMPDIR: the CLI writes a report of every failed API call there.
        env = {
            "HOME": str(self.home),
            "TMPDIR": str(self.home),
            MARKER_VAR: self.marker,
            **api.gemini_env(),
        }
        env.update(extra.pop("env", {}))
        return {
            "binary": str(binary),
            "cwd": str(self.cwd),
            "gemini_home": str(self.gemini_home),
            "model": MODEL,
            "max_attempts": 1,
            "env_policy": "isolated",
            "env": env,
            **extra,
        }

    def options(self, binary: Path, api: FakeGemini, **extra: Any) -> GeminiOptions:
        return GeminiBackend().parse_options(self.raw_options(binary, api, **extra))


@asynccontextmanager
async def gemini_place() -> AsyncIterator[Place]:
    """Fresh directories; on the way out every process that carries this place's marker is
    killed, then the directories are removed. Under the project's .cache, not /tmp: the
    CLI names its project folders after the working directory's name, which must not
    depend on the machine."""
    async with scratch_dir("gemini-") as root:
        place = Place(Path(root, "gemini-home"), Path(root, "home"), Path(root, "work"), root)
        for path in (place.home, place.cwd):
            path.mkdir()
        yield place


def translate(frames: Sequence[Any], status: ExitStatus, stderr: str) -> list[Event]:
    """Every event the backend's translator makes of one turn, the terminal one last."""
    t = GeminiBackend().translator(GeminiBackend().parse_options({"model": MODEL}))
    events = [event for frame in frames for event in t.feed(frame)]
    end = t.finish(status, stderr)
    return events + ([end] if end is not None else [])


async def run_turn(command: Command) -> Turn:
    """Run one turn's command to its end (at most 60 s) and translate it."""
    return await run_translated(command, translate)


def redact_paths(text: str, place: Place, api: FakeGemini) -> str:
    """``text`` with the test's directories and port replaced by stable placeholders."""
    for path, name in ((place.cwd, "$CWD"), (place.gemini_home, "$GEMINI_HOME")):
        text = text.replace(str(path), name)
    text = text.replace(str(place.home), "$HOME").replace(str(place.marker), "$ROOT")
    return text.replace(f"127.0.0.1:{api.port}", "127.0.0.1:$PORT")
