"""Running the pinned real ``claude`` binary against the fake API, and cleaning up after it.

Every process started here carries an env marker, so a test finds (and kills) exactly its
own processes, including the Bash tool's, which the CLI starts in a session of their own.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import trio
from proc_helpers import ProcInfo, kill_marked, marked
from trio_util import AsyncValue

from agentrt import Agent
from agentrt.backend import redact, redact_mapping
from agentrt.testing import FakeAnthropic, RecordedRequest

REPO = Path(__file__).resolve().parents[2]
VERSION_FILE = Path(__file__).with_name("CLAUDE_VERSION")
MARKER_VAR = "AGENTRT_TEST_MARKER"
BASE_ARGS = ("-p", "--output-format", "stream-json", "--verbose")


# A claude binary installed some other way than by npm (the one bundled in the Agent SDK's
# wheel, say): the tier runs it instead of the one `make clis` installs.
BINARY_VAR = "AGENTRT_CLAUDE_BINARY"


def claude_version() -> str:
    """The version the tier runs: AGENTRT_CLAUDE_VERSION, else what the binary
    AGENTRT_CLAUDE_BINARY names reports, else the pinned one (tests/realcli/CLAUDE_VERSION)."""
    if version := os.environ.get("AGENTRT_CLAUDE_VERSION"):
        return version
    if binary := os.environ.get(BINARY_VAR):
        return reported_version(binary)
    return VERSION_FILE.read_text().strip()


@functools.cache
def reported_version(binary: str) -> str:
    """The version ``binary --version`` prints first ("2.1.337 (Claude Code)")."""
    done = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=60)
    return done.stdout.split()[0]


def claude_binary(version: str | None = None) -> Path:
    """The binary the tier runs: AGENTRT_CLAUDE_BINARY if set (and no other version is
    asked for), else where ``make clis`` installs that version."""
    if version is None and (binary := os.environ.get(BINARY_VAR)):
        return Path(binary)
    version = version or claude_version()
    return REPO / ".cache" / f"claude-{version}" / "node_modules" / ".bin" / "claude"


def npm_available() -> bool:
    return shutil.which("npm") is not None


def project_folder_name(cwd: Path | str) -> str:
    """The CLI's folder name for a working directory: each non-alphanumeric becomes "-"."""
    return re.sub(r"[^A-Za-z0-9]", "-", str(cwd))


def transcript_path(home: Path, cwd: Path, session_id: str) -> Path:
    """Where the CLI keeps the transcript of a session run in ``cwd``."""
    return home / ".claude" / "projects" / project_folder_name(cwd) / f"{session_id}.jsonl"


@attrs.define
class ClaudeRun:
    """One claude process, its decoded stdout frames and its stderr, read as they come."""

    process: trio.Process
    args: Sequence[str]
    prompt: str
    env_changes: Mapping[str, str | None]
    frames: list[dict[str, Any]] = attrs.field(factory=list)
    bad_lines: list[bytes] = attrs.field(factory=list)
    stderr: bytearray = attrs.field(factory=bytearray)
    started: float = attrs.field(factory=time.monotonic)
    ended: float | None = None
    _count: Any = attrs.field(factory=lambda: AsyncValue(0))
    _eof: trio.Event = attrs.field(factory=trio.Event)

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def returncode(self) -> int | None:
        return self.process.returncode

    @property
    def duration(self) -> float:
        return (self.ended or time.monotonic()) - self.started

    @property
    def result(self) -> dict[str, Any] | None:
        results = self.of_type("result")
        return results[-1] if results else None

    @property
    def session_id(self) -> str | None:
        for frame in self.frames:
            if isinstance(frame.get("session_id"), str):
                return str(frame["session_id"])
        return None

    def of_type(self, type_: str, subtype: str | None = None) -> list[dict[str, Any]]:
        return [
            f
            for f in self.frames
            if f.get("type") == type_ and (subtype is None or f.get("subtype") == subtype)
        ]

    async def wait_frame(self, predicate: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        """Wait for the first frame (seen so far or to come) that satisfies ``predicate``."""
        checked = 0
        while True:
            for frame in self.frames[checked:]:
                if predicate(frame):
                    return frame
            checked = len(self.frames)
            await self._count.wait_value(lambda n, c=checked: n > c)

    async def wait(self) -> int:
        """Wait for the exit and for stdout/stderr to be read to their ends."""
        code = await self.process.wait()
        await self._eof.wait()
        return code

    def _add_line(self, line: bytes) -> None:
        try:
            frame = json.loads(line)
        except ValueError:
            self.bad_lines.append(line)
            return
        self.frames.append(frame)
        self._count.value = len(self.frames)


def base_env(api: FakeAnthropic, home: Path, marker: str) -> dict[str, str]:
    """The whole environment of a test's claude process, before the test's own changes."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "TMPDIR": str(home / "tmp"),
        MARKER_VAR: marker,
        **api.claude_env(str(home)),
    }


@asynccontextmanager
async def open_claude(
    args: Sequence[str],
    *,
    api: FakeAnthropic,
    home: Path,
    cwd: Path,
    prompt: str,
    marker: str,
    env: Mapping[str, str | None] | None = None,
    binary: Path | None = None,
) -> AsyncIterator[ClaudeRun]:
    """Start ``claude -p --output-format stream-json --verbose ARGS`` with the prompt on stdin.

    The environment is only PATH, locale, TMPDIR (``home``/tmp: the CLI keeps sockets there
    and leaves them behind when killed) and ``api.claude_env(home)``, then ``env`` (a None
    value removes a variable). On leaving, however it is left: SIGKILL to the CLI's group and
    to every marked process (the Bash tool runs in its own session).

    Cancellation: the cleanup is shielded and bounded.
    """
    (home / "tmp").mkdir(exist_ok=True)
    changed = {**base_env(api, home, marker), **(env or {})}
    full_env = {k: v for k, v in changed.items() if v is not None}
    argv = [str(binary or claude_binary()), *BASE_ARGS, *args]
    process = await trio.lowlevel.open_process(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=full_env,
        cwd=str(cwd),
        start_new_session=True,
    )
    run = ClaudeRun(process, tuple(args), prompt, dict(env or {}))
    body_error: BaseException | None = None
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_read_streams, run)
            assert process.stdin is not None
            # The CLI may exit before it reads stdin (e.g. when it refuses its arguments).
            with contextlib.suppress(trio.BrokenResourceError):
                await process.stdin.send_all(prompt.encode())
            await process.stdin.aclose()
            try:
                yield run
            except BaseException as exc:
                # Re-raised outside the nursery, so a failed assertion is not wrapped in a group.
                body_error = exc
            finally:
                nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            if process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
            with trio.move_on_after(5):
                await process.wait()
            await kill_marked(MARKER_VAR, marker)
    if body_error is not None:
        raise body_error


async def _read_streams(run: ClaudeRun) -> None:
    async def stdout() -> None:
        assert run.process.stdout is not None
        pending = b""
        while data := await run.process.stdout.receive_some(65536):
            pending += data
            *lines, pending = pending.split(b"\n")
            for line in lines:
                if line.strip():
                    run._add_line(line)
        if pending.strip():
            run._add_line(pending)

    async def stderr() -> None:
        assert run.process.stderr is not None
        while data := await run.process.stderr.receive_some(65536):
            run.stderr += data

    async with trio.open_nursery() as nursery:
        nursery.start_soon(stdout)
        nursery.start_soon(stderr)
    run.ended = time.monotonic()
    run._eof.set()


FIXTURES = REPO / "tests" / "fixtures" / "claude"
RECORD_VAR = "AGENTRT_RECORD_FIXTURES"


@attrs.frozen
class Claude:
    """The pinned binary, a fake API, a fresh HOME and project directory, a process marker."""

    binary: Path
    version: str
    api: FakeAnthropic
    home: Path
    project: Path
    marker: str

    def open(
        self, args: Sequence[str] = (), *, prompt: str, env: Mapping[str, str | None] | None = None
    ) -> contextlib.AbstractAsyncContextManager[ClaudeRun]:
        return open_claude(
            args,
            api=self.api,
            home=self.home,
            cwd=self.project,
            prompt=prompt,
            marker=self.marker,
            env=env,
            binary=self.binary,
        )

    async def run(
        self, args: Sequence[str] = (), *, prompt: str, env: Mapping[str, str | None] | None = None
    ) -> ClaudeRun:
        """Run to the end. Cancellation: bound it with ``trio.fail_after``."""
        async with self.open(args, prompt=prompt, env=env) as run:
            await run.wait()
        return run

    def transcript(self, session_id: str) -> Path:
        return transcript_path(self.home, self.project, session_id)

    def agent_options(
        self, env: Mapping[str, str | None] | None = None, **options: Any
    ) -> dict[str, Any]:
        """``start_agent`` keywords for an agent on the claude backend that runs this pinned
        binary in the project directory against this fake, and nothing else.

        The environment is ``env_policy="isolated"`` (PATH, HOME, locale, proxies, TLS) plus
        `base_env` (the fake's URL, a dummy key, fresh HOME and TMPDIR, the test's marker),
        then ``env`` (a None value removes a variable). The key travels in the environment:
        a Command's argv is readable by every local user through /proc.
        """
        (self.home / "tmp").mkdir(exist_ok=True)
        changed = {**base_env(self.api, self.home, self.marker), **(env or {})}
        return {
            "binary": str(self.binary),
            "cwd": str(self.project),
            "env_policy": "isolated",
            "env": {k: v for k, v in changed.items() if v is not None},
            **options,
        }

    def oauth_login(self) -> dict[str, str | None]:
        """Env changes that log the CLI in with the fake's dummy OAuth token (a subscription
        login) instead of its dummy API key."""
        token = self.api.claude_env(str(self.home), login="oauth")["CLAUDE_CODE_OAUTH_TOKEN"]
        return {"ANTHROPIC_API_KEY": None, "CLAUDE_CODE_OAUTH_TOKEN": token}

    def record(self, name: str, run: ClaudeRun, *, description: str, script: str) -> None:
        """With AGENTRT_RECORD_FIXTURES=1, keep this run's stdout as a fixture for backend
        tests: tests/fixtures/claude/<version>/<name>.jsonl, described in MANIFEST.json.
        Paths and the fake's port are normalized; credential-shaped text is redacted."""
        if os.environ.get(RECORD_VAR) != "1":
            return
        folder = FIXTURES / self.version
        folder.mkdir(parents=True, exist_ok=True)
        # Compact and unescaped, as the CLI itself prints its lines.
        lines = [
            json.dumps(self._normalize_strings(frame), separators=(",", ":"), ensure_ascii=False)
            for frame in run.frames
        ]
        (folder / f"{name}.jsonl").write_text("".join(line + "\n" for line in lines), "utf-8")
        manifest_path = folder / "MANIFEST.json"
        manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
        manifest["claude_version"] = self.version
        manifest["recorded_by"] = f"{RECORD_VAR}=1 .venv/bin/pytest tests/realcli"
        manifest["command"] = " ".join(["claude", *BASE_ARGS, "<args>"]) + ", prompt on stdin"
        env = redact_mapping(base_env(self.api, self.home, "<per test>"))
        manifest["base_env"] = {k: self._normalize(v) for k, v in env.items() if k != "PATH"}
        manifest.setdefault("fixtures", {})[name] = {
            "description": description,
            "args": [self._normalize(a) for a in run.args],
            "env_changes": {
                k: None if v is None else self._normalize(v) for k, v in run.env_changes.items()
            },
            "prompt": run.prompt,
            "fake_api_script": script,
            "exit": run.returncode,
            "stderr": self._normalize(run.stderr.decode(errors="replace")),
            "frames": len(lines),
        }
        manifest["fixtures"] = dict(sorted(manifest["fixtures"].items()))
        manifest_path.write_text(json.dumps(manifest, indent=2) + "\n")

    def _normalize_strings(self, value: Any) -> Any:
        # String by string: redact() on JSON text would also hit `"input_tokens": 10`.
        if isinstance(value, str):
            return self._normalize(value)
        if isinstance(value, list):
            return [self._normalize_strings(v) for v in value]
        if isinstance(value, dict):
            return {k: self._normalize_strings(v) for k, v in value.items()}
        return value

    def _normalize(self, text: str) -> str:
        for path, stand_in in ((self.home, "/home/user"), (self.project, "/work/project")):
            text = text.replace(str(path), stand_in)
            text = text.replace(project_folder_name(path), project_folder_name(stand_in))
        text = text.replace(self.api.base_url.removeprefix("http://"), "127.0.0.1:PORT")
        return redact(text)


def tool_results(request: RecordedRequest) -> int:
    """How many tool results the model call ``request`` sends back (its tool calls so far)."""
    return sum(
        1
        for m in request.messages
        if isinstance(m.get("content"), list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    )


def sleeping(claude: Claude, seconds: int) -> list[int]:
    """The pids of ``claude``'s marked ``sleep SECONDS`` processes."""
    return [p.pid for p in marked(MARKER_VAR, claude.marker) if p.cmdline == f"sleep {seconds}"]


async def wait_for_process(marker: str, predicate: Callable[[ProcInfo], bool]) -> ProcInfo:
    """Poll /proc until a marked process satisfies ``predicate`` (no event exists to wait on).

    Cancellation: bound it with ``trio.fail_after``.
    """
    while True:
        for info in marked(MARKER_VAR, marker):
            if predicate(info):
                return info
        await trio.sleep(0.05)


async def request_where(
    api: FakeAnthropic, matches: Callable[[RecordedRequest], bool]
) -> RecordedRequest:
    """The first model call ``matches`` accepts, looked for as each request arrives: a wait
    of a minute for a CLI's own timer is no minute of polling.

    Cancellation: bound it with ``trio.fail_after``.
    """
    while True:
        for request in api.message_requests:
            if matches(request):
                return request
        await api.wait_requests(len(api.requests) + 1)


async def wait_until_gone(marker: str) -> None:
    """Poll /proc until no marked process is alive.

    Cancellation: bound it with ``trio.move_on_after`` and look again.
    """
    # Polling: nothing signals the exit of a process that is not our child.
    while True:
        if not marked(MARKER_VAR, marker):
            return
        await trio.sleep(0.05)


class Lines(Agent):
    """Notes when its turn's first and latest events came (trio time): the CLI's first and
    latest lines, for a turn whose every line is an event (no partial messages)."""

    def __init__(self) -> None:
        self.first_event = self.last_event = -math.inf

    def handle_stream_event(self, event: Any) -> None:
        self.last_event = trio.current_time()
        if self.first_event == -math.inf:
            self.first_event = self.last_event
