"""The backend conformance kit: the scenarios every agentrt backend passes, run through the
public API (``open_runtime``, ``start_agent``, ``ask``, ``interrupt``) against the
backend's real binary and a fake model API, so that a backend of one's own proves it keeps
agentrt's guarantees as claude's and codex's do.

A `BackendHarness` says how to run one backend against its fake: it turns a script of
model steps (`Say`, `Hang`, `RunShell`) into the fake's replies and gives the
``start_agent`` keywords that point the backend at it. Each `BackendCheck` runs on a fresh
fake and runtime; the checks that need a CLI process, a live channel or approvals skip,
saying why, where the harness or the backend's `Capabilities` do not have them.
"""

from __future__ import annotations

import abc
import contextlib
import os
import random
import signal
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import attrs
import trio

from .._agent import Agent
from .._backends import resolve_backend
from .._errors import TurnFailed
from .._events import Response, StopReason
from .._runtime import Runtime, open_runtime
from .._starting import AgentFactory
from .._stores._memory import MemoryStore
from ..backend import Allow, Capabilities, Deny, InProcessBackend, ToolRequest


@attrs.frozen
class Say:
    """The model answers with ``text``."""

    text: str


@attrs.frozen
class Hang:
    """The model never answers (the request is held open until the CLI leaves)."""


@attrs.frozen
class RunShell:
    """The model calls the CLI's shell tool with ``command``; its next call (the tool's
    result, or the next turn's prompt if the tool never ends) is answered "done"."""

    command: str


Step = Say | Hang | RunShell


class FakeModel(abc.ABC):
    """A fake model API that answers with a script, as one check sees it."""

    @abc.abstractmethod
    def options(self, **extra: Any) -> dict[str, Any]:
        """``start_agent`` keywords (``backend`` excluded) for an agent whose CLI talks to
        this fake and nothing else, with ``extra`` (agent options) added."""

    @abc.abstractmethod
    def history(self, call: int) -> list[str]:
        """The user prompts the ``call``-th model call (from 0) carried, oldest first: the
        conversation the CLI sent, so a resumed turn shows the earlier turns' prompts."""


class BackendHarness(abc.ABC):
    """How the checks run one backend against its fake API.

    ``backend`` is the name (or object) ``start_agent`` takes; ``turn_bound`` bounds one
    turn on a loaded machine (a CLI may take seconds to start); ``hang_watchdog`` is the
    watchdog of the hang check, shorter than the CLI's own request timeout in the fake's
    environment. ``approval_command`` is a shell command the CLI asks approval for when
    approvals are on (None: the approval check skips). `open` runs one check's fake."""

    backend: Any
    turn_bound: float = 120.0
    hang_watchdog: float = 5.0
    approval_command: str | None = None

    @abc.abstractmethod
    def open(self, script: Sequence[Step]) -> contextlib.AbstractAsyncContextManager[FakeModel]:
        """A fake that answers its model calls with ``script``'s steps, in order; on leaving,
        whatever the CLI left behind is gone."""

    def skipped(self) -> str | None:
        """Why no check can run here (the binary is not installed, ...), or None."""
        return None

    def backend_options(self) -> dict[str, Any]:
        """The backend's own options of an agent on this harness, as far as they decide its
        `Capabilities` (the fake's address does not): {} unless a harness says otherwise."""
        return {}

    def approval_options(self) -> dict[str, Any]:
        """Agent options under which the CLI asks before running ``approval_command``, for
        a harness whose other checks run its shell tool unasked: {} unless it says so."""
        return {}

    def capabilities(self) -> Capabilities:
        """The backend's `Capabilities` for an agent on this harness."""
        backend = resolve_backend(self.backend)
        declared = getattr(backend, "capabilities", None)
        if declared is None:
            return Capabilities(in_process=isinstance(backend, InProcessBackend))
        return declared(backend.parse_options(self.backend_options()))  # type: ignore[no-any-return]


Body = Callable[[BackendHarness], Awaitable[None]]
Needs = Callable[[BackendHarness], str | None]


@attrs.frozen
class BackendCheck:
    """One conformance scenario: ``name``, and ``run()``, which raises `AssertionError`
    (or the runtime's exception) when the backend fails it. `skipped` says why it does not
    apply (None: it does)."""

    name: str
    harness: BackendHarness = attrs.field(repr=False)
    _body: Body = attrs.field(repr=False)
    _needs: Needs = attrs.field(repr=False)

    def skipped(self) -> str | None:
        """Why this check does not apply to the harness's backend, or None."""
        return self.harness.skipped() or self._needs(self.harness)

    async def run(self) -> None:
        """Run the check; a check that does not apply raises `RuntimeError` saying why."""
        why = self.skipped()
        if why is not None:
            raise RuntimeError(f"check {self.name!r} does not apply: {why}")
        await self._body(self.harness)


def _always(harness: BackendHarness) -> str | None:
    return None


def _a_process(harness: BackendHarness) -> str | None:
    if harness.capabilities().in_process:
        return "an in-process backend runs no CLI process"
    return None


def _live(harness: BackendHarness) -> str | None:
    why = _a_process(harness)
    if why is None and not harness.capabilities().live:
        return "its Capabilities declare no live process (keep_alive)"
    return why


def _approvals(harness: BackendHarness) -> str | None:
    why = _live(harness)
    if why is None and not harness.capabilities().approvals:
        return "its Capabilities declare no approvals (approve_tool)"
    if why is None and harness.approval_command is None:
        return "the harness names no command that needs approval"
    return why


_CHECKS: list[tuple[str, Body, Needs]] = []


def _check(needs: Needs = _always) -> Callable[[Body], Body]:
    def register(body: Body) -> Body:
        _CHECKS.append((body.__name__.lstrip("_"), body, needs))
        return body

    return register


def backend_conformance(harness: BackendHarness) -> list[BackendCheck]:
    """Every conformance scenario, on ``harness`` (each opens a fake of its own)."""
    return [BackendCheck(name, harness, body, needs) for name, body, needs in _CHECKS]


# --- helpers ---

NAME = "conformance"


@contextlib.asynccontextmanager
async def _agent(
    harness: BackendHarness, script: Sequence[Step], agent: AgentFactory = Agent, **extra: Any
) -> AsyncIterator[tuple[Runtime, FakeModel]]:
    async with harness.open(script) as fake, open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(agent, name=NAME, backend=harness.backend, **fake.options(**extra))
        yield rt, fake


async def _ask(harness: BackendHarness, rt: Runtime, prompt: str) -> Response:
    with trio.fail_after(harness.turn_bound):
        return await rt.ask(NAME, prompt)


async def _failure(harness: BackendHarness, rt: Runtime, prompt: str) -> TurnFailed:
    with trio.fail_after(harness.turn_bound):
        try:
            response = await rt.ask(NAME, prompt)
        except TurnFailed as failed:
            return failed
    raise AssertionError(f"the turn should have failed; it answered {response.text[:80]!r}")


async def _until(
    harness: BackendHarness,
    what: str,
    ready: Callable[[], Awaitable[bool]],
    every: float = 0.05,
) -> None:
    # Polling: a CLI's progress (a session id stored, a tool's process) has no event to wait on.
    with trio.move_on_after(harness.turn_bound):
        while True:
            if await ready():
                return
            await trio.sleep(every)
    raise AssertionError(f"{what} did not happen within {harness.turn_bound:g} s")


# How often a check scans /proc for its tool's process. A CLI takes many seconds to start
# its tool on a loaded machine, and a scan every 50 ms cost a CPU-second or two of every
# check that waits for one; the kill or interrupt that follows comes at most this late.
_SCAN_EVERY = 0.25


async def _tool_started(harness: BackendHarness, found_by: str) -> None:
    async def runs() -> bool:
        return bool(_alive_with(found_by))

    await _until(harness, "the shell tool's process", runs, every=_SCAN_EVERY)


def _long_sleep() -> tuple[str, str]:
    # A duration of its own per check, so its processes are found by their command line.
    seconds = 3000 + random.randrange(10**6) / 1000
    return f"echo start; sleep {seconds}; echo end", f"sleep {seconds}"


def _alive_with(text: str) -> list[int]:
    """Live processes (not zombies) whose command line contains ``text``."""
    found = []
    needle = text.encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if needle not in f.read().replace(b"\0", b" "):
                    continue
            # Only a process that matches is asked its state.
            with open(f"/proc/{entry}/stat", "rb") as f:
                state = f.read().rpartition(b")")[2].split()[0]
        except OSError:
            continue
        if state != b"Z":
            found.append(int(entry))
    return found


def _gone(text: str) -> None:
    # The runtime confirms every process of a turn gone before the turn returns.
    left = _alive_with(text)
    assert not left, f"processes running {text!r} outlived the turn: {left}"


@attrs.define
class _Running:
    """A turn asked in the background, and its outcome once it has one."""

    outcome: Response | TurnFailed | None = None
    done: trio.Event = attrs.field(factory=trio.Event)

    async def finished(self, harness: BackendHarness) -> Response | TurnFailed:
        with trio.fail_after(harness.turn_bound):
            await self.done.wait()
        assert self.outcome is not None
        return self.outcome


def _start_turn(
    harness: BackendHarness, rt: Runtime, nursery: trio.Nursery, prompt: str
) -> _Running:
    running = _Running()

    async def ask() -> None:
        try:
            running.outcome = await _ask(harness, rt, prompt)
        except TurnFailed as failed:
            running.outcome = failed
        running.done.set()

    nursery.start_soon(ask)
    return running


def _failed_with(outcome: Response | TurnFailed, reason: StopReason) -> TurnFailed:
    assert isinstance(outcome, TurnFailed), f"expected {reason.value}, the turn answered"
    assert outcome.reason is reason, f"expected {reason.value}, got {outcome!r}"
    return outcome


# --- the scenarios ---


@_check()
async def _two_turns_resume_one_conversation(harness: BackendHarness) -> None:
    async with _agent(harness, [Say("first answer"), Say("second answer")]) as (rt, fake):
        first = await _ask(harness, rt, "first prompt")
        second = await _ask(harness, rt, "second prompt")
        assert (first.text, second.text) == ("first answer", "second answer")
        assert first.session_id is not None
        assert second.session_id == first.session_id, "turn 2 did not resume turn 1's session"
        history = fake.history(1)
        assert "first prompt" in history and history[-1] == "second prompt", history
        assert (await rt.status(NAME)).turns == 2


@_check()
async def _the_session_id_is_stored_before_the_result(harness: BackendHarness) -> None:
    async with _agent(harness, [Hang()]) as (rt, _fake), trio.open_nursery() as nursery:
        running = _start_turn(harness, rt, nursery, "hello")

        async def stored() -> bool:
            record = await rt.store.load(NAME)
            return record is not None and record.session_id is not None

        await _until(harness, "a stored session id", stored)
        assert running.outcome is None, "the turn ended before the model answered"
        record = await rt.store.load(NAME)
        assert record is not None
        await rt.interrupt(NAME)
        failed = _failed_with(await running.finished(harness), StopReason.INTERRUPTED)
        assert failed.session_id == record.session_id


@_check()
async def _a_hang_ends_at_the_watchdog(harness: BackendHarness) -> None:
    watchdog = harness.hang_watchdog
    async with _agent(harness, [Hang()], watchdog=watchdog) as (rt, _fake):
        started = trio.current_time()
        failed = await _failure(harness, rt, "hello")
        elapsed = trio.current_time() - started
        assert failed.reason is StopReason.TOTAL_TIMEOUT, failed
        assert watchdog <= elapsed < watchdog + harness.turn_bound, elapsed


@_check(_a_process)
async def _a_killed_cli_is_classified_and_its_session_resumed(harness: BackendHarness) -> None:
    # Killed while its tool runs: a CLI has its transcript on disk by then (one killed
    # while the model call is outstanding may not, and its session is lost).
    command, found_by = _long_sleep()
    async with (
        _agent(harness, [RunShell(command)]) as (rt, fake),
        trio.open_nursery() as nursery,
    ):
        running = _start_turn(harness, rt, nursery, "first prompt")
        await _tool_started(harness, found_by)
        status = await rt.status(NAME)
        assert status.cli_pid is not None and status.session_id is not None, status
        os.kill(status.cli_pid, signal.SIGKILL)
        failed = _failed_with(await running.finished(harness), StopReason.PROCESS_CRASHED)
        assert failed.session_id == status.session_id
        _gone(found_by)
        again = await _ask(harness, rt, "second prompt")
        assert again.text == "done" and again.session_id == status.session_id
        assert "first prompt" in fake.history(1)


@_check()
async def _a_line_over_a_mebibyte_comes_through_whole(harness: BackendHarness) -> None:
    # Long words, few of them: a fake that streams word by word sends 1,200 deltas of a
    # kilobyte (the line's size is the point, not the count: each delta costs a CLI its
    # own work), and the CLI still prints the whole text in one line. No word repeats: a
    # CLI that watches for a model repeating itself (gemini) takes a repeated chunk for a
    # loop.
    rng = random.Random(1_200)
    text = " ".join(f"w{i:05d}{rng.getrandbits(3972):0993x}" for i in range(1_200))
    assert len(text) > 1024 * 1024
    async with _agent(harness, [Say(text)]) as (rt, _fake):
        response = await _ask(harness, rt, "a long answer")
        assert response.text == text, f"{len(response.text)} characters of {len(text)}"


@_check(_a_process)
async def _an_interrupt_ends_the_turn_and_its_tool(harness: BackendHarness) -> None:
    command, found_by = _long_sleep()
    async with (
        _agent(harness, [RunShell(command)]) as (rt, _fake),
        trio.open_nursery() as nursery,
    ):
        running = _start_turn(harness, rt, nursery, "run it")
        await _tool_started(harness, found_by)
        assert await rt.interrupt(NAME)
        _failed_with(await running.finished(harness), StopReason.INTERRUPTED)
        _gone(found_by)


@_check(_a_process)
async def _the_tool_tree_is_killed_at_the_turns_end(harness: BackendHarness) -> None:
    # The turn ends at its watchdog, or completes while the tool still runs (a CLI that
    # moves a slow command to the background answers meanwhile): either way its end is
    # the end of every process it started.
    command, found_by = _long_sleep()
    watchdog = harness.hang_watchdog * 3
    async with _agent(harness, [RunShell(command)], watchdog=watchdog) as (rt, _fake):
        with trio.fail_after(harness.turn_bound):
            try:
                response = await rt.ask(NAME, "run it")
            except TurnFailed as failed:
                assert failed.reason is StopReason.TOTAL_TIMEOUT, failed
            else:
                assert response.text == "done"
        _gone(found_by)


@_check(_live)
async def _a_warm_cli_runs_two_turns_in_one_process(harness: BackendHarness) -> None:
    script = [Say("first answer"), Say("second answer")]
    async with _agent(harness, script, keep_alive=60.0) as (rt, fake):
        first = await _ask(harness, rt, "first prompt")
        pid = (await rt.status(NAME)).cli_pid
        second = await _ask(harness, rt, "second prompt")
        assert (first.text, second.text) == ("first answer", "second answer")
        assert pid is not None and (await rt.status(NAME)).cli_pid == pid, "not the same CLI"
        assert second.session_id == first.session_id
        assert "first prompt" in fake.history(1)


class _Denies(Agent):
    """Denies every tool the CLI asks about, and keeps what it was asked (one instance for
    every restart of the agent)."""

    def __init__(self) -> None:
        self.asked: list[ToolRequest] = []

    async def approve_tool(self, request: ToolRequest) -> Allow | Deny:
        self.asked.append(request)
        return Deny("not in a conformance check")


@_check(_approvals)
async def _a_denied_tool_does_not_run(harness: BackendHarness) -> None:
    assert harness.approval_command is not None
    marker = f"conformance-{random.randrange(10**9)}"
    command = f"{harness.approval_command} {marker}"
    agent = _Denies()
    options = harness.approval_options()
    async with _agent(harness, [RunShell(command)], agent=agent, **options) as (rt, _fake):
        response = await _ask(harness, rt, "run it")
        assert agent.asked, "approve_tool was never asked"
        assert marker in str(agent.asked[0].input), agent.asked
        assert response.text == "done"
        assert [d.tool_use_id for d in response.permission_denials] == [
            r.tool_use_id for r in agent.asked
        ]
