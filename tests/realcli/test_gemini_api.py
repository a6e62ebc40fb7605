"""The pinned Gemini CLI driven through agentrt's public API (``backend="gemini"``), against
the fake Gemini API: a conversation across a supervised restart, failures, huge lines, a
tool's escaped process. What every backend passes (resume, the watchdog, interrupt, tool
trees) is the conformance kit's, in test_backend_conformance.py.

Every process the CLI starts carries the place's marker; "zero survivors" means no live
process carries it once the runtime says the turn or the agent is over.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
from proc_helpers import Watcher, marked

import agentrt
from agentrt import StopReason, TurnFailed
from agentrt.testing import (
    FakeGemini,
    GeminiError,
    GeminiReply,
    GeminiScript,
    GeminiText,
    open_fake_gemini,
)

from ._gemini import MARKER_VAR, Place, gemini_binary, gemini_place

BINARY = gemini_binary()
pytestmark = [
    pytest.mark.realcli,
    pytest.mark.skipif(BINARY is None, reason="gemini is not installed: run `make gemini-cli`"),
]


@attrs.frozen
class Setup:
    api: FakeGemini
    place: Place
    rt: agentrt.Runtime
    agent: Watcher


def options(place: Place, api: FakeGemini, **extra: Any) -> dict[str, Any]:
    assert BINARY is not None
    return place.raw_options(BINARY, api, **extra)


@asynccontextmanager
async def gemini_agent(
    script: GeminiScript, store: agentrt.SessionStore | None = None, **extra: Any
) -> AsyncIterator[Setup]:
    """A runtime with one gemini agent named "coder" in a fresh place; kill_grace is short."""
    async with (
        open_fake_gemini(script) as api,
        gemini_place() as place,
        agentrt.open_runtime(store=store) as rt,
    ):
        agent = Watcher()
        await rt.start_agent(
            agent, name="coder", backend="gemini", kill_grace=0.5, **options(place, api, **extra)
        )
        yield Setup(api, place, rt, agent)


def history(api: FakeGemini, call: int) -> list[tuple[str, str]]:
    """(role, text) of every text part the n-th model call sent, the CLI's own context
    (its first user part) left out."""
    return [
        (content["role"], part["text"])
        for content in api.model_calls[call].contents()
        for part in content.get("parts", [])
        if "text" in part and not part["text"].startswith("<session_context>")
    ]


class CrashOnNotify(Watcher):
    """Raises from handle_event: an agent crash, which a permanent agent survives."""

    started = 0

    def init_agent(self, **options: Any) -> dict[str, Any]:
        type(self).started += 1
        return options

    def handle_event(self, event: Any) -> None:
        raise RuntimeError(f"crash on {event!r}")


async def test_a_five_turn_conversation_survives_a_supervised_restart(tmp_path: Path) -> None:
    CrashOnNotify.started = 0
    script = [GeminiReply.text(f"Answer {n}") for n in range(1, 6)]
    store = agentrt.SQLiteStore(tmp_path / "sessions.sqlite3")
    async with (
        open_fake_gemini(script) as api,
        gemini_place() as place,
        agentrt.open_runtime(store=store) as rt,
    ):
        await rt.start_agent(
            CrashOnNotify,
            name="coder",
            backend="gemini",
            restart="permanent",
            **options(place, api),
        )
        answers = []
        for n in range(1, 6):
            answers.append(await rt.ask("coder", f"Question {n}"))
            if n == 3:
                await rt.notify("coder", "boom")  # the asks after it wait for the restart
    assert CrashOnNotify.started == 2
    assert [a.text for a in answers] == [f"Answer {n}" for n in range(1, 6)]
    assert all(a.stop_reason is StopReason.COMPLETE for a in answers)
    assert answers[0].usage is not None and answers[0].usage.output_tokens == 5
    assert len({a.session_id for a in answers}) == 1 and answers[0].session_id is not None
    expected = []
    for n in range(1, 5):
        expected += [("user", f"Question {n}"), ("model", f"Answer {n}")]
    assert history(api, 4) == [*expected, ("user", "Question 5")]


async def test_a_rejected_key_is_authentication_failed_at_the_first_request() -> None:
    script = [GeminiError(401, "API key not valid. Please pass a valid API key.")]
    async with gemini_agent(script, max_attempts=None) as s:
        with pytest.raises(TurnFailed) as caught:
            await s.rt.ask("coder", "Hello")
    assert caught.value.reason is StopReason.AUTHENTICATION_FAILED
    assert "API key not valid" in caught.value.message
    # The proof of failing fast: with its default 10 attempts the CLI still asks once.
    assert len(s.api.model_calls) == 1
    assert s.agent.errors == [caught.value]


def huge_text(size: int) -> str:
    """One chunk of ``size`` characters, so one stream-json line of that size; not one
    letter repeated, which the CLI's loop detection takes for a model stuck in a loop."""
    return "".join(f"{n:08x}" for n in range(size // 8))


async def test_a_line_over_the_cap_fails_the_turn_and_the_agent_goes_on() -> None:
    # Small enough for the next turn to resume it without compressing the history first.
    script = [GeminiReply((GeminiText(huge_text(512 * 1024)),)), GeminiReply.text("Here")]
    # A cap below 64 KiB: the CLI loses its output past that when it exits (see below).
    async with gemini_agent(script, max_line_bytes=32 * 1024) as s:
        with pytest.raises(TurnFailed) as caught:
            await s.rt.ask("coder", "Say a lot")
        after = await s.rt.ask("coder", "Are you there?")
        survivors = marked(MARKER_VAR, s.place.marker)
    assert caught.value.reason is StopReason.OUTPUT_LINE_TOO_LONG
    assert after.text == "Here" and after.session_id == caught.value.session_id is not None
    assert survivors == []


async def test_a_huge_answer_ends_whole_or_classified_never_invented() -> None:
    # Gemini CLI 0.61.0 exits with its writes to a piped stdout still queued: what is past
    # the pipe's 64 KiB may be lost (written to a file, all of it arrives; see
    # docs/gemini.md). A 3 MiB answer therefore arrives whole with its result, or without
    # the end: then the turn is malformed_output, its session kept, never a made-up result.
    text = huge_text(3 * 1024 * 1024)
    async with gemini_agent([GeminiReply((GeminiText(text),))]) as s:
        try:
            response = await s.rt.ask("coder", "Say a lot")
        except TurnFailed as error:
            assert error.reason is StopReason.MALFORMED_OUTPUT
            assert error.session_id is not None
        else:
            assert response.text == text
        survivors = marked(MARKER_VAR, s.place.marker)
    assert survivors == []


async def test_a_process_the_tool_left_running_is_killed_at_the_turns_end() -> None:
    # The command returns at once and leaves `sleep` behind, in a session of its own.
    script = [GeminiReply.shell("setsid sleep 300 > /dev/null 2>&1 &"), GeminiReply.text("Done")]
    async with gemini_agent(script, approval_mode="yolo") as s:
        response = await s.rt.ask("coder", "Start it")
        survivors = marked(MARKER_VAR, s.place.marker)
    assert response.text == "Done"
    assert survivors == []


async def test_a_spent_quota_is_a_usage_limit_with_its_reset() -> None:
    """The API's 429 whose quota comes back only in an hour ("Please retry in 3600s"): the
    CLI does not retry it (a terminal quota error); usage_limit, reset about an hour on."""
    script = [GeminiError.usage_limit(retry_in=3600)] * 3
    async with gemini_agent(script) as s:
        started = time.time()
        with pytest.raises(TurnFailed) as caught:
            await s.rt.ask("coder", "Hello")
    error = caught.value
    assert error.reason is StopReason.USAGE_LIMIT, error
    assert error.detail is not None and error.detail["retryable"] is False
    assert started + 3600 <= error.detail["resets_at"] <= time.time() + 3600
    assert len(s.api.model_calls) == 1


async def test_a_prompt_over_the_window_is_context_exhausted() -> None:
    script = [GeminiError.context_exceeded()] * 3
    async with gemini_agent(script) as s:
        with pytest.raises(TurnFailed) as caught:
            await s.rt.ask("coder", "Hello")
    assert caught.value.reason is StopReason.CONTEXT_EXHAUSTED, caught.value
