"""The pinned codex binary driven through agentrt's public API (``backend="codex"``),
against the fake OpenAI API: resume, process-tree cleanup, failures, supervised restart.

Every process codex starts carries the place's marker; "zero survivors" means no live
process carries it once the runtime says the turn or the agent is over.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
from proc_helpers import Watcher, marked, wait_until

import agentrt
from agentrt import StopReason, ToolUseEvent, TurnFailed, Usage
from agentrt.testing import (
    FakeOpenAI,
    OpenAIError,
    OpenAIReply,
    OpenAIScript,
    open_fake_openai,
)

from ._codex import MARKER_VAR, Place, call_usage, codex_binary, codex_place, find_marked

BINARY = codex_binary()
pytestmark = [
    pytest.mark.realcli,
    pytest.mark.skipif(BINARY is None, reason="codex is not installed: run `make codex-cli`"),
]

# How long a usage limit whose reset the CLI did not say parks (docs: five minutes).
UNSAID_RESET = 300.0

LONG = "sleep 300"


async def tool_started(agent: Watcher) -> None:
    """Return once codex reported a command execution."""
    await agent.wait_for(lambda: any(isinstance(e, ToolUseEvent) for e in agent.events))


@attrs.frozen
class Setup:
    api: FakeOpenAI
    place: Place
    rt: agentrt.Runtime
    agent: Watcher


def conversation(api: FakeOpenAI, call: int) -> list[tuple[str, str]]:
    """(role, text) of every message the n-th model call sent, in order."""
    return [
        (item["role"], part["text"])
        for item in api.model_calls[call].input_items()
        if item.get("type") == "message"
        for part in item["content"]
        if part.get("type") in ("input_text", "output_text")
    ]


def options(place: Place, **extra: Any) -> dict[str, Any]:
    assert BINARY is not None
    return place.raw_options(BINARY, **extra)


@asynccontextmanager
async def codex_agent(
    script: OpenAIScript, store: agentrt.SessionStore | None = None, **extra: Any
) -> AsyncIterator[Setup]:
    """A runtime with one codex agent named "coder" in a fresh place; kill_grace is short."""
    async with (
        open_fake_openai(script) as api,
        codex_place(api) as place,
        agentrt.open_runtime(store=store) as rt,
    ):
        agent = Watcher()
        await rt.start_agent(
            agent, name="coder", backend="codex", kill_grace=0.5, **options(place, **extra)
        )
        yield Setup(api, place, rt, agent)


async def test_two_asks_resume_one_thread() -> None:
    script = [OpenAIReply.text("First answer"), OpenAIReply.text("Second answer")]
    async with codex_agent(script) as s:
        first = await s.rt.ask("coder", "Question one")
        second = await s.rt.ask("coder", "Question two")
    assert (first.text, second.text) == ("First answer", "Second answer")
    assert first.session_id is not None and second.session_id == first.session_id
    assert first.stop_reason is StopReason.COMPLETE is second.stop_reason
    # The second model call carried the first exchange: the thread really was resumed.
    sent = conversation(s.api, 1)
    asked = sent.index(("user", "Question one"))
    assert sent[asked + 1 :] == [
        ("assistant", "First answer"),
        ("user", "Question two"),
    ]


async def test_interrupt_kills_the_command_tree_with_zero_survivors() -> None:
    script = [OpenAIReply.exec_command(LONG), OpenAIReply.text("not reached")]
    async with codex_agent(script, sandbox="danger-full-access") as s:
        ref = await s.rt.tell("coder", "Run it")
        with trio.fail_after(20):
            await tool_started(s.agent)
            (sleeper,) = await wait_until(lambda: find_marked(s.place.marker, "sleep"), 10)
            assert await s.rt.interrupt("coder")
            result = await s.rt.wait(ref)
        survivors = marked(MARKER_VAR, s.place.marker)
    assert survivors == [], f"{sleeper=} and others outlived the interrupted turn"
    assert isinstance(result, agentrt.Failed) and isinstance(result.error, TurnFailed)
    assert result.error.reason is StopReason.INTERRUPTED
    assert result.error.session_id is not None
    assert s.agent.errors == [result.error]


async def test_each_response_reports_its_turns_own_usage() -> None:
    script = [
        OpenAIReply.text("one", usage=call_usage(0)),
        OpenAIReply.exec_command(LONG, usage=call_usage(1)),
        OpenAIReply.text("three", usage=call_usage(2)),
    ]
    async with codex_agent(script, sandbox="danger-full-access") as s:
        first = await s.rt.ask("coder", "Turn one")
        ref = await s.rt.tell("coder", "Turn two")
        with trio.fail_after(20):
            await tool_started(s.agent)
            await wait_until(lambda: find_marked(s.place.marker, "sleep"), 10)
            await s.rt.interrupt("coder")
            await s.rt.wait(ref)
        third = await s.rt.ask("coder", "Turn three")
    assert first.usage == Usage(input_tokens=2, output_tokens=2, cache_read_input_tokens=1)
    # codex kept the call of the interrupted turn: the next completed turn reports it.
    assert third.usage == Usage(input_tokens=220, output_tokens=220, cache_read_input_tokens=110)


async def test_stop_agent_kills_the_command_orphaned_by_codex() -> None:
    # stop_agent ends the turn with SIGTERM to codex's group. Under danger-full-access the
    # command runs in a session of its own, and codex dies by SIGTERM without killing it
    # (see CODEX.md): only the runtime's descendant-tree kill can catch the orphan.
    script = [OpenAIReply.exec_command(LONG), OpenAIReply.text("not reached")]
    async with codex_agent(script, sandbox="danger-full-access") as s:
        with trio.fail_after(20):
            await s.rt.tell("coder", "Run it")
            await tool_started(s.agent)
            (sleeper,) = await wait_until(lambda: find_marked(s.place.marker, "sleep"), 10)
            (node,) = find_marked(s.place.marker, "node")  # the npm wrapper, first in the group
            assert os.getsid(sleeper) != os.getsid(node)  # outside the group the CLI got
            await s.rt.stop_agent("coder")
        survivors = marked(MARKER_VAR, s.place.marker)
    assert survivors == [], f"{sleeper=} and others outlived the stopped agent"


async def test_http_401_is_authentication_failed() -> None:
    script = [OpenAIError(401, "Incorrect API key provided")]
    async with codex_agent(script) as s:
        with pytest.raises(TurnFailed) as caught:
            await s.rt.ask("coder", "Hello")
    error = caught.value
    assert error.reason is StopReason.AUTHENTICATION_FAILED
    assert error.detail is not None and error.detail["status"] == 401
    assert "Incorrect API key provided" in error.message
    assert s.agent.errors == [error]


async def test_a_thread_codex_no_longer_has_is_session_lost() -> None:
    script = [OpenAIReply.text("First answer")]
    async with codex_agent(script) as s:
        first = await s.rt.ask("coder", "Question one")
        # The thread's rollout goes (a wiped CODEX_HOME, say): the resume cannot find it.
        shutil.rmtree(s.place.codex_home / "sessions")
        with pytest.raises(TurnFailed) as caught:
            await s.rt.ask("coder", "Question two")
    assert caught.value.reason is StopReason.SESSION_LOST
    assert caught.value.session_id == first.session_id
    assert len(s.api.model_calls) == 1  # codex gave up before calling the model


class CrashOnNotify(Watcher):
    """Raises from handle_event: an agent crash, which a permanent agent survives."""

    started = 0

    def init_agent(self, **options: Any) -> dict[str, Any]:
        type(self).started += 1
        return options

    def handle_event(self, event: Any) -> None:
        raise RuntimeError(f"crash on {event!r}")


async def test_a_supervised_restart_resumes_the_thread() -> None:
    CrashOnNotify.started = 0
    script = [OpenAIReply.text("Before the crash"), OpenAIReply.text("After the restart")]
    async with (
        open_fake_openai(script) as api,
        codex_place(api) as place,
        agentrt.open_runtime(store=agentrt.MemoryStore()) as rt,
    ):
        await rt.start_agent(
            CrashOnNotify, name="coder", backend="codex", restart="permanent", **options(place)
        )
        first = await rt.ask("coder", "Question one")
        await rt.notify("coder", "boom")
        # Queued behind the crash, the ask waits for the restarted agent.
        second = await rt.ask("coder", "Question two")
    assert CrashOnNotify.started == 2
    assert first.session_id is not None and second.session_id == first.session_id
    assert ("assistant", "Before the crash") in conversation(api, 1)


async def test_a_new_runtime_resumes_the_stored_thread(tmp_path: Path) -> None:
    script = [OpenAIReply.text("From the first runtime"), OpenAIReply.text("From the second")]
    store = agentrt.SQLiteStore(tmp_path / "sessions.sqlite3")
    async with open_fake_openai(script) as api, codex_place(api) as place:
        answers = []
        for prompt in ("Question one", "Question two"):
            async with agentrt.open_runtime(store=store) as rt:
                await rt.start_agent(agentrt.Agent, name="coder", backend="codex", **options(place))
                answers.append(await rt.ask("coder", prompt))
    assert answers[1].session_id == answers[0].session_id is not None
    assert ("assistant", "From the first runtime") in conversation(api, 1)


async def test_a_usage_limit_ends_the_turn_with_its_reset() -> None:
    """The API's 429 usage_limit_reached with its reset: codex says "You've hit your usage
    limit"; the turn ends usage_limit, not retryable, with the reset time."""
    resets_at = int(time.time()) + 3600
    async with codex_agent([OpenAIError.usage_limit(resets_at)] * 6) as s:
        with pytest.raises(TurnFailed) as caught:
            await s.rt.ask("coder", "Hello")
    error = caught.value
    assert error.reason is StopReason.USAGE_LIMIT, error
    assert error.detail is not None and error.detail["retryable"] is False
    assert abs(error.detail["resets_at"] - resets_at) <= 60, error


async def test_a_usage_limit_said_to_reset_just_now_parks_for_minutes_not_a_day() -> None:
    """The API's reset seconds past (its clock behind this one's at the reset): codex says
    "Try again at" that time cut to the minute. The agent parks as for a reset not said;
    it parked until that time tomorrow."""
    before = time.time()
    async with codex_agent([OpenAIError.usage_limit(before - 5)] * 6) as s:
        with pytest.raises(TurnFailed) as caught:
            await s.rt.ask("coder", "Hello")
        status = await s.rt.status("coder")
    assert caught.value.reason is StopReason.USAGE_LIMIT, caught.value
    assert "Try again at" in caught.value.message
    assert status.state == "parked" and status.parked_until is not None
    assert status.parked_until <= time.time() + UNSAID_RESET


async def test_a_full_context_is_context_exhausted() -> None:
    async with codex_agent([OpenAIError.context_length_exceeded()] * 6) as s:
        with pytest.raises(TurnFailed) as caught:
            await s.rt.ask("coder", "Hello")
    assert caught.value.reason is StopReason.CONTEXT_EXHAUSTED, caught.value


async def test_an_expired_token_is_credential_expired() -> None:
    async with codex_agent([OpenAIError.expired_token()] * 6) as s:
        with pytest.raises(TurnFailed) as caught:
            await s.rt.ask("coder", "Hello")
    assert caught.value.reason is StopReason.CREDENTIAL_EXPIRED, caught.value
