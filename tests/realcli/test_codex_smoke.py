"""The pinned codex binary (`make codex-cli`) run directly against the fake OpenAI API, with
argv, env and translation from the backend. Every process a test started is killed after it.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from proc_helpers import kill_marked

from agentrt import (
    ErrorEvent,
    ResultEvent,
    SessionEvent,
    StopReason,
    ToolResultEvent,
    ToolUseEvent,
    Usage,
)
from agentrt.backend import Command, ExitStatus
from agentrt.backends.codex import CodexBackend
from agentrt.testing import OpenAIError, OpenAIReply, OpenAIUsage, open_fake_openai

from ._codex import MARKER_VAR, Place, call_usage, codex_binary, codex_place, run_turn

BINARY = codex_binary()
pytestmark = [
    pytest.mark.realcli,
    pytest.mark.skipif(BINARY is None, reason="codex is not installed: run `make codex-cli`"),
]
backend = CodexBackend()


def command(place: Place, prompt: str, session_id: str | None = None) -> Command:
    assert BINARY is not None
    return backend.command(place.options(Path(BINARY)), prompt, session_id=session_id)


async def test_one_turn() -> None:
    script = [OpenAIReply.text("Hello from the fake")]
    async with open_fake_openai(script) as api, codex_place(api) as place:
        turn = await run_turn(command(place, "Say hello"))
        left = await kill_marked(MARKER_VAR, place.marker)
    assert turn.exit_status == ExitStatus(0), turn.stderr
    assert [e.kind for e in turn.events] == ["session", "text", "usage", "result"]
    result = turn.terminal
    assert isinstance(result, ResultEvent) and result.text == "Hello from the fake"
    assert result.usage == Usage(input_tokens=10, output_tokens=5)
    # One request, and only to the fake: the config turns codex's other traffic off.
    (call,) = api.requests
    assert call.path == "/v1/responses" and call.body["model"] == "gpt-5.5"
    assert call.headers["authorization"] == "[REDACTED]"
    assert call.input_items()[-1]["content"] == [{"type": "input_text", "text": "Say hello"}]
    assert left == [], "codex left processes behind after a completed turn"


async def test_resume_keeps_the_thread_and_resends_the_history() -> None:
    first_usage = OpenAIUsage(input_tokens=100, output_tokens=7, cached_tokens=30)
    script = [
        OpenAIReply.text("First answer", usage=first_usage),
        OpenAIReply.text("Second answer", usage=OpenAIUsage(input_tokens=150, output_tokens=9)),
    ]
    async with open_fake_openai(script) as api, codex_place(api) as place:
        first = await run_turn(command(place, "Question one"))
        session = first.events[0]
        assert isinstance(session, SessionEvent), first.stderr
        assert isinstance(first.terminal, ResultEvent)
        second = await run_turn(
            command(place, "Question two", session.session_id),
            usage_baseline=first.terminal.usage,
        )
    assert second.exit_status == ExitStatus(0), second.stderr
    assert second.events[0] == session
    result = second.terminal
    assert isinstance(result, ResultEvent) and result.text == "Second answer"
    assert result.session_id == session.session_id
    assert result.usage == Usage(input_tokens=150, output_tokens=9)
    history = [
        (item.get("role"), part.get("text"))
        for item in api.model_calls[1].input_items()
        if item.get("type") == "message"
        for part in item["content"]
    ]
    user_one = history.index(("user", "Question one"))
    assert history[user_one + 1 :] == [
        ("assistant", "First answer"),
        ("user", "Question two"),
    ]


async def test_usage_is_the_threads_running_total_and_reported_per_turn() -> None:
    script = [
        OpenAIReply.exec_command("true", usage=call_usage(0)),
        OpenAIReply.text("one", usage=call_usage(1)),
        OpenAIReply.text("two", usage=call_usage(2)),
    ]
    async with open_fake_openai(script) as api, codex_place(api) as place:
        first = await run_turn(command(place, "Turn one"))
        assert isinstance(first.terminal, ResultEvent), first.stderr
        thread = first.terminal.session_id
        second = await run_turn(
            command(place, "Turn two", thread), usage_baseline=first.terminal.usage
        )
    # What codex printed: every call of the thread so far, not the turn's or the last call's.
    printed = [t.frames[-1]["usage"] for t in (first, second)]
    assert [(u["input_tokens"], u["cached_input_tokens"], u["output_tokens"]) for u in printed] == [
        (33, 11, 22),
        (333, 111, 222),
    ]
    # What the turns report: their own calls (input without its cached part).
    assert first.terminal.usage == Usage(
        input_tokens=22, output_tokens=22, cache_read_input_tokens=11
    )
    assert isinstance(second.terminal, ResultEvent)
    assert second.terminal.usage == Usage(
        input_tokens=200, output_tokens=200, cache_read_input_tokens=100
    )


async def test_shell_tool_runs_and_its_output_goes_back_to_the_model() -> None:
    script = [OpenAIReply.exec_command("echo from-the-tool"), OpenAIReply.text("Done")]
    async with open_fake_openai(script) as api, codex_place(api) as place:
        turn = await run_turn(command(place, "Run it"))
    assert [e.kind for e in turn.events] == [
        *("session", "tool_use", "tool_result", "text", "usage", "result")
    ]
    use, result = turn.events[1], turn.events[2]
    assert isinstance(use, ToolUseEvent) and "echo from-the-tool" in use.input["command"]
    assert isinstance(result, ToolResultEvent) and not result.is_error
    assert result.content["exit_code"] == 0 and "from-the-tool" in result.content["output"]
    assert "from-the-tool" in api.model_calls[1].function_outputs()[0]


async def test_unknown_thread_id_is_session_lost() -> None:
    lost = str(uuid.uuid4())
    async with open_fake_openai([]) as api, codex_place(api) as place:
        turn = await run_turn(command(place, "Hello?", lost))
    assert turn.exit_status == ExitStatus(1) and turn.frames == []
    assert f"no rollout found for thread id {lost}" in turn.stderr
    (error,) = turn.events
    assert isinstance(error, ErrorEvent) and error.reason is StopReason.SESSION_LOST
    assert error.session_id == lost and api.requests == []


async def test_401_is_authentication_failed() -> None:
    script = [OpenAIError(401, "Incorrect API key provided")]
    async with open_fake_openai(script) as api, codex_place(api) as place:
        turn = await run_turn(command(place, "Hello"))
    assert turn.exit_status == ExitStatus(1)
    error = turn.terminal
    assert isinstance(error, ErrorEvent) and error.reason is StopReason.AUTHENTICATION_FAILED
    assert error.status == 401 and "Incorrect API key provided" in error.message
    assert len(api.model_calls) == 1  # no retries: the config sets them to zero
