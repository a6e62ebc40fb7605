"""The backend conformance kit (`agentrt.testing.backend_conformance`) in the fast tier: on
the in-process scripted backend (what needs a CLI process skips, saying why), and the kit's
own contract (skips keep their reasons, a backend that breaks a promise fails its check).
The real CLIs run it in tests/realcli/test_backend_conformance.py."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

from agentrt import ResultEvent, SessionEvent, TextEvent
from agentrt.testing import (
    BackendCheck,
    BackendHarness,
    FakeModel,
    Gate,
    Hang,
    Say,
    ScriptedBackend,
    Step,
    backend_conformance,
    reply,
)


class _ScriptedFake(FakeModel):
    def __init__(self, backend: ScriptedBackend) -> None:
        self.backend = backend

    def options(self, **extra: Any) -> dict[str, Any]:
        return extra

    def history(self, call: int) -> list[str]:
        # What a CLI resuming the session would send: the prompts of the session so far.
        calls = self.backend.calls[: call + 1]
        session = calls[-1].session_id
        earlier = [c.prompt for c in calls[:-1] if session is not None]
        return [*earlier, calls[-1].prompt]


class ScriptedHarness(BackendHarness):
    """The scripted backend: each turn of a script resumes the check's one session."""

    hang_watchdog = 0.5
    turn_bound = 10.0

    def __init__(self, *, forgets_sessions: bool = False) -> None:
        self.backend = ScriptedBackend()
        self.forgets_sessions = forgets_sessions

    @asynccontextmanager
    async def open(self, script: Sequence[Step]) -> AsyncIterator[FakeModel]:
        session = str(uuid.uuid4())
        for step in script:
            sid = str(uuid.uuid4()) if self.forgets_sessions else session
            if isinstance(step, Say):
                self.backend.push(*reply(step.text, session_id=sid))
            elif isinstance(step, Hang):
                self.backend.push(SessionEvent(session_id=sid), Gate())
            else:
                raise AssertionError(f"the scripted backend runs no shell: {step}")
        yield _ScriptedFake(self.backend)


CHECKS = [check.name for check in backend_conformance(ScriptedHarness())]
# What an in-process backend cannot be asked: it has no process, no live channel.
NEEDS_A_PROCESS = {
    "a_killed_cli_is_classified_and_its_session_resumed",
    "an_interrupt_ends_the_turn_and_its_tool",
    "the_tool_tree_is_killed_at_the_turns_end",
    "a_warm_cli_runs_two_turns_in_one_process",
    "a_denied_tool_does_not_run",
}


@pytest.mark.parametrize("name", CHECKS)
def test_the_scripted_backend_passes_the_check(name: str) -> None:
    # Not a trio test: a skip raised inside trio's run loses its reason.
    (check,) = [c for c in backend_conformance(ScriptedHarness()) if c.name == name]
    why = check.skipped()
    if why is not None:
        assert name in NEEDS_A_PROCESS, why
        pytest.skip(why)
    assert name not in NEEDS_A_PROCESS
    trio.run(check.run)


def test_the_kit_names_each_scenario_once() -> None:
    checks = backend_conformance(ScriptedHarness())
    assert all(isinstance(check, BackendCheck) for check in checks)
    assert len({check.name for check in checks}) == len(checks) == 9
    assert set(CHECKS) > NEEDS_A_PROCESS


async def test_a_check_that_does_not_apply_says_why_and_does_not_run() -> None:
    [check] = [c for c in backend_conformance(ScriptedHarness()) if c.name.startswith("a_warm")]
    assert check.skipped() == "an in-process backend runs no CLI process"
    with pytest.raises(RuntimeError, match="does not apply: an in-process backend"):
        await check.run()


async def test_a_harness_that_cannot_run_skips_every_check_with_its_reason() -> None:
    class Missing(ScriptedHarness):
        def skipped(self) -> str | None:
            return "the CLI is not installed"

    assert {c.skipped() for c in backend_conformance(Missing())} == {"the CLI is not installed"}


async def test_a_backend_that_starts_a_new_session_each_turn_fails_the_resume_check() -> None:
    harness = ScriptedHarness(forgets_sessions=True)
    [check] = [c for c in backend_conformance(harness) if c.name.startswith("two_turns")]
    with pytest.raises(AssertionError, match="did not resume"):
        await check.run()


async def test_a_backend_that_loses_a_long_line_fails_the_huge_line_check() -> None:
    class Truncating(ScriptedHarness):
        @asynccontextmanager
        async def open(self, script: Sequence[Step]) -> AsyncIterator[FakeModel]:
            for step in script:
                assert isinstance(step, Say)
                cut = step.text[: 1024 * 1024]
                self.backend.push(TextEvent(text=cut, message_boundary=True), ResultEvent(text=cut))
            yield _ScriptedFake(self.backend)

    [check] = [c for c in backend_conformance(Truncating()) if "mebibyte" in c.name]
    with pytest.raises(AssertionError, match="characters of"):
        await check.run()
