"""Gemini CLI stream-json -> events, from the outputs recorded from the real binary
(tests/fixtures/gemini/, made by tests/realcli/capture_gemini.py) and by hand."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentrt import (
    ErrorEvent,
    Event,
    InitEvent,
    RawEvent,
    ResultEvent,
    SessionEvent,
    StopReason,
    TextEvent,
    ToolResultEvent,
    ToolUseEvent,
    Usage,
    UsageEvent,
)
from agentrt.backend import ExitStatus
from agentrt.backends.gemini import GeminiBackend

FIXTURES = Path(__file__).parent / "fixtures" / "gemini"
MANIFEST = json.loads((FIXTURES / "manifest.json").read_text())
OK = ExitStatus(0)


def run(frames: list[Any], status: ExitStatus = OK, stderr: str = "") -> list[Event]:
    backend = GeminiBackend()
    t = backend.translator(backend.parse_options({}))
    events = [event for frame in frames for event in t.feed(frame)]
    end = t.finish(status, stderr)
    return events + ([end] if end is not None else [])


def recorded(name: str) -> list[Event]:
    """The events of one recorded turn, the terminal one (from finish, if needed) last."""
    entry = MANIFEST["fixtures"][name]
    lines = (FIXTURES / f"{name}.jsonl").read_text().splitlines()
    frames = [json.loads(line) for line in lines if line.strip()]
    return run(frames, ExitStatus(entry["returncode"]), entry["stderr_tail"])


def of(kind: type[Event], events: list[Event]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


def text(events: list[Event]) -> str:
    return "".join(e.text for e in of(TextEvent, events))


def test_the_fixtures_are_the_pinned_versions() -> None:
    pinned = (Path(__file__).parent / "realcli" / "GEMINI_VERSION").read_text().strip()
    assert MANIFEST["gemini_version"] == pinned == GeminiBackend.written_for_version


@pytest.mark.parametrize("name", sorted(MANIFEST["fixtures"]))
def test_every_recorded_turn_ends_with_exactly_one_terminal_event(name: str) -> None:
    events = recorded(name)
    assert [e.is_terminal for e in events].count(True) == 1 and events[-1].is_terminal
    assert len({e.session_id for e in of(SessionEvent, events)}) <= 1


def test_the_session_id_comes_first_with_the_model_and_no_cli_version() -> None:
    session, init, *_ = recorded("session_turn1")
    assert isinstance(session, SessionEvent) and session.model == "gemini-2.5-flash"
    assert isinstance(init, InitEvent) and init.model == "gemini-2.5-flash"
    # Gemini CLI 0.61.0's stream reports no version of its own.
    assert init.cli_version is None


def test_a_resumed_turn_reports_the_same_session_and_its_own_usage() -> None:
    first, second = recorded("session_turn1"), recorded("session_turn2")
    assert of(SessionEvent, first)[0].session_id == of(SessionEvent, second)[0].session_id
    assert (text(first), text(second)) == ("Hello there", "Again")
    # The stats are the process's own: turn 2's are its own call's, not the session's.
    usages = [of(UsageEvent, events)[0].usage for events in (first, second)]
    assert usages == [
        Usage(input_tokens=70, output_tokens=7, cache_read_input_tokens=30),
        Usage(input_tokens=70, output_tokens=9, cache_read_input_tokens=80),
    ]
    result = second[-1]
    assert isinstance(result, ResultEvent) and result.text == "Again"
    assert result.usage == usages[1] and result.duration is not None


def test_a_shell_call_is_a_tool_use_and_its_result() -> None:
    events = recorded("shell_tool")
    (use,) = of(ToolUseEvent, events)
    (result,) = of(ToolResultEvent, events)
    assert use.name == "run_shell_command"
    assert use.input == {"command": "echo hello-from-the-tool"}
    assert result.tool_use_id == use.id and not result.is_error
    assert result.content == "hello-from-the-tool"
    final = events[-1]
    assert isinstance(final, ResultEvent) and final.text == "It printed it."


def test_a_failing_command_is_reported_in_its_output() -> None:
    (result,) = of(ToolResultEvent, recorded("failing_tool"))
    # The CLI reports the tool itself as successful: the command's exit is in the output.
    assert result.content == "Command exited with code: 3" and not result.is_error


@pytest.mark.parametrize(
    ("name", "reason", "status", "retryable"),
    [
        ("http_401", StopReason.AUTHENTICATION_FAILED, 401, False),
        ("http_400_key", StopReason.AUTHENTICATION_FAILED, 400, False),
        ("http_429", StopReason.RATE_LIMITED, None, True),
        ("http_503", StopReason.OVERLOADED, None, True),
        ("cut_stream", StopReason.CLI_ERROR, None, False),
        ("usage_limit", StopReason.USAGE_LIMIT, None, False),
        ("context_exceeded", StopReason.CONTEXT_EXHAUSTED, 400, False),
    ],
)
def test_failed_calls_are_classified(
    name: str, reason: StopReason, status: int | None, retryable: bool
) -> None:
    error = recorded(name)[-1]
    assert isinstance(error, ErrorEvent)
    assert (error.reason, error.status, error.retryable) == (reason, status, retryable)
    assert error.session_id == of(SessionEvent, recorded(name))[0].session_id


def test_a_quota_back_only_after_the_cli_s_retries_is_a_usage_limit_with_its_reset() -> None:
    """ "Please retry in 3600s": more than 0.61.0 retries for (300 s), so the credential's
    usage limit, reset that long after the result; a quota back sooner stays rate_limited."""
    before = time.time()
    error = recorded("usage_limit")[-1]
    assert isinstance(error, ErrorEvent) and error.resets_at is not None
    assert before + 3600 <= error.resets_at <= time.time() + 3600
    assert error.message.startswith("[API Error: You exceeded your current quota")
    last = (FIXTURES / "usage_limit.jsonl").read_text().splitlines()[-1]
    soon = json.loads(last)
    soon["error"] = {"message": "[API Error: Quota exceeded. Please retry in 20s.]"}
    *_, transient = GeminiBackend().translator(GeminiBackend().parse_options({})).feed(soon)
    assert isinstance(transient, ErrorEvent)
    assert (transient.reason, transient.resets_at) == (StopReason.RATE_LIMITED, None)


def test_a_session_the_cli_never_saw_is_session_lost() -> None:
    (error,) = recorded("lost")
    assert isinstance(error, ErrorEvent) and error.reason is StopReason.SESSION_LOST


def test_an_unknown_session_id_is_named() -> None:
    stderr = 'Error resuming session: Invalid session identifier "1234-abcd".\n  Searched...'
    (error,) = run([], ExitStatus(42), stderr)
    assert isinstance(error, ErrorEvent) and error.reason is StopReason.SESSION_LOST
    assert error.session_id == "1234-abcd"


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        (41, StopReason.AUTHENTICATION_FAILED),
        (42, StopReason.INVALID_OPTIONS),
        (52, StopReason.INVALID_OPTIONS),
        (55, StopReason.CLI_ERROR),
        (1, StopReason.MALFORMED_OUTPUT),
    ],
)
def test_fatal_exits_without_a_result_are_classified(code: int, reason: StopReason) -> None:
    (error,) = run([], ExitStatus(code), "Invalid auth method selected.\n")
    assert isinstance(error, ErrorEvent) and error.reason is reason
    assert f"code {code}" in error.message


def test_a_signal_is_a_crash_and_an_error_frame_is_a_notice_until_the_end() -> None:
    (crash,) = run([], ExitStatus(None, signal.SIGKILL))
    assert isinstance(crash, ErrorEvent) and crash.reason is StopReason.PROCESS_CRASHED
    notice = {"type": "error", "severity": "error", "message": "RESOURCE_EXHAUSTED"}
    events = run([notice], ExitStatus(1))
    assert isinstance(events[0], RawEvent) and not events[0].is_terminal
    assert isinstance(events[-1], ErrorEvent) and events[-1].reason is StopReason.RATE_LIMITED


def test_secrets_in_error_messages_are_redacted() -> None:
    result = {
        "type": "result",
        "status": "error",
        "error": {"type": "unknown", "message": "bad key=AIzaSyA-not-a-real-key-000000000"},
    }
    (error,) = run([result])
    assert isinstance(error, ErrorEvent) and "AIzaSy" not in error.message


def test_a_second_result_is_raw_and_text_before_a_tool_ends_its_message() -> None:
    frames = [
        {"type": "message", "role": "assistant", "content": "Let me look.", "delta": True},
        {"type": "tool_use", "tool_name": "glob", "tool_id": "t1", "parameters": {}},
        {"type": "tool_result", "tool_id": "t1", "status": "error", "error": {"message": "no"}},
        {"type": "message", "role": "assistant", "content": "Done.", "delta": True},
        {"type": "result", "status": "success", "stats": {}},
        {"type": "result", "status": "success", "stats": {}},
    ]
    events = run(frames)
    boundary = events[1]
    assert isinstance(boundary, TextEvent) and boundary.message_boundary
    (result,) = of(ToolResultEvent, events)
    assert result.is_error and result.content == "no"
    final = next(e for e in events if isinstance(e, ResultEvent))
    assert final.text == "Done."
    assert isinstance(events[-1], RawEvent) and events[-1].note == "after the turn ended"


@given(st.recursive(st.none() | st.integers() | st.text(), st.lists, max_leaves=5))
def test_any_json_value_is_translated_without_raising(frame: Any) -> None:
    run([frame, {"type": frame}, {"type": "result", "status": frame, "stats": frame}])
