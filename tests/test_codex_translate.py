"""Codex JSONL -> events, from the outputs recorded from the real binary
(tests/fixtures/codex/<version>/, made by tests/realcli/capture_codex.py) and by hand."""

from __future__ import annotations

import datetime
import json
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentrt import (
    ErrorEvent,
    Event,
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
from agentrt.backend import ExitStatus, SessionTotals
from agentrt.backends.codex import CodexBackend, CodexTranslator
from agentrt.backends.codex._failures import resets_at

FIXTURES = Path(__file__).parent / "fixtures" / "codex"
VERSIONS = sorted(p.name for p in FIXTURES.iterdir())
THREAD = "01a22817-5691-7943-9a6f-828a15a863bf"


def recorded(version: str, name: str, **translator: Any) -> list[Event]:
    """The events of one recorded turn, the terminal one (from finish, if needed) last."""
    entry = json.loads((FIXTURES / version / "manifest.json").read_text())["fixtures"][name]
    lines = (FIXTURES / version / f"{name}.jsonl").read_text().splitlines()
    if entry["usage_baseline"] is not None and "usage_baseline" not in translator:
        translator["usage_baseline"] = Usage(**entry["usage_baseline"])
    status = ExitStatus(entry["returncode"], entry["signal"])
    return run([json.loads(line) for line in lines], status, entry["stderr"], **translator)


OK = ExitStatus(0)


def run(
    frames: list[Any],
    status: ExitStatus = OK,
    stderr: str = "",
    *,
    usage_baseline: Usage | None = None,
) -> list[Event]:
    baseline = None if usage_baseline is None else SessionTotals(usage=usage_baseline)
    t = CodexBackend().translator(CodexBackend().parse_options({}), baseline=baseline)
    events = [event for frame in frames for event in t.feed(frame)]
    end = t.finish(status, stderr)
    return events + ([end] if end is not None else [])


def kinds(events: list[Event]) -> list[str]:
    return [e.kind for e in events]


def all_fixtures() -> list[tuple[str, str]]:
    return [
        (version, path.stem)
        for version in VERSIONS
        for path in sorted((FIXTURES / version).glob("*.jsonl"))
    ]


@pytest.mark.parametrize(("version", "name"), all_fixtures())
def test_every_recorded_turn_ends_with_exactly_one_terminal_event(version: str, name: str) -> None:
    events = recorded(version, name)
    assert [e.is_terminal for e in events].count(True) == 1 and events[-1].is_terminal
    sessions = {e.session_id for e in events if isinstance(e, SessionEvent)}
    assert len(sessions) <= 1
    terminal = events[-1]
    assert isinstance(terminal, ResultEvent | ErrorEvent)
    if sessions and isinstance(terminal, ResultEvent):
        assert terminal.session_id in sessions


V = "0.171.0"
needs_v = pytest.mark.skipif(V not in VERSIONS, reason=f"no fixtures recorded for codex {V}")


@needs_v
def test_text_turn() -> None:
    events = recorded(V, "thread_turn1")
    assert kinds(events) == ["session", "text", "usage", "result"]
    session, text, usage, result = events
    assert isinstance(session, SessionEvent) and isinstance(result, ResultEvent)
    assert text == TextEvent(text="Hello from turn one", message_boundary=True)
    assert result.text == "Hello from turn one" and result.session_id == session.session_id
    # Scripted: 100 input of which 30 cached, 7 output (2 of them reasoning).
    expected = Usage(input_tokens=70, output_tokens=7, cache_read_input_tokens=30)
    assert usage == UsageEvent(usage=expected) and result.usage == expected
    assert result.raw["usage"]["input_tokens"] == 100


@needs_v
def test_resumed_turn_reports_its_share_of_the_running_totals() -> None:
    first = recorded(V, "thread_turn1")
    second = recorded(V, "thread_turn2")
    assert second[0] == first[0]  # the same thread id
    result = second[-1]
    assert isinstance(result, ResultEvent) and result.text == "And turn two"
    # codex printed the thread totals (250 in, 110 cached, 16 out); turn two alone was
    # 150 in of which 80 cached, 9 out.
    assert result.raw["usage"]["input_tokens"] == 250
    assert result.usage == Usage(input_tokens=70, output_tokens=9, cache_read_input_tokens=80)
    totals = recorded(V, "thread_turn2", usage_baseline=None)[-1]
    assert isinstance(totals, ResultEvent)
    assert totals.usage == Usage(input_tokens=140, output_tokens=16, cache_read_input_tokens=110)


@needs_v
def test_command_execution() -> None:
    events = recorded(V, "command")
    assert kinds(events) == ["session", "tool_use", "tool_result", "text", "usage", "result"]
    use, result = events[1], events[2]
    assert isinstance(use, ToolUseEvent) and isinstance(result, ToolResultEvent)
    assert use.name == "command_execution" and use.id == result.tool_use_id
    assert "exit 3" in use.input["command"]
    assert result.content == {"output": "hi\noops\n", "exit_code": 3, "status": "failed"}
    assert result.is_error


@needs_v
def test_reasoning_is_dropped_and_file_changes_are_tool_events() -> None:
    events = recorded(V, "patch")
    assert kinds(events) == ["session", "tool_use", "tool_result", "text", "usage", "result"]
    use, result = events[1], events[2]
    assert isinstance(use, ToolUseEvent) and isinstance(result, ToolResultEvent)
    assert use.name == "file_change"
    assert use.input == {"changes": [{"path": "$CWD/hello.txt", "kind": "add"}]}
    assert result.content["status"] == "completed" and not result.is_error


@needs_v
def test_warning_items_are_kept_raw() -> None:
    events = recorded(V, "unknown_model")
    assert kinds(events) == ["session", "raw", "text", "usage", "result"]
    raw = events[1]
    assert isinstance(raw, RawEvent) and raw.note == "item.completed error"
    assert "nope-1" in raw.data["message"]


@needs_v
def test_a_retry_notice_is_not_the_end_of_the_turn() -> None:
    events = recorded(V, "retry_notice")
    assert kinds(events) == ["session", "raw", "text", "usage", "result"]
    notice = events[1]
    assert isinstance(notice, RawEvent) and notice.data["message"].startswith("Reconnecting")


@needs_v
@pytest.mark.parametrize(
    ("name", "reason", "status", "retryable"),
    [
        ("http_401", StopReason.AUTHENTICATION_FAILED, 401, False),
        ("missing_key", StopReason.AUTHENTICATION_FAILED, None, False),
        ("http_429", StopReason.RATE_LIMITED, 429, True),
        ("http_500", StopReason.OVERLOADED, None, True),
        ("cut_stream", StopReason.CLI_ERROR, None, True),
        ("usage_limit", StopReason.USAGE_LIMIT, 429, False),
        ("expired_token", StopReason.CREDENTIAL_EXPIRED, 401, False),
        ("context_exhausted", StopReason.CONTEXT_EXHAUSTED, None, False),
    ],
)
def test_failed_turns(name: str, reason: StopReason, status: int | None, retryable: bool) -> None:
    events = recorded(V, name)
    assert kinds(events) == ["session", "raw", "error"]
    error = events[-1]
    assert isinstance(error, ErrorEvent)
    assert (error.reason, error.status, error.retryable) == (reason, status, retryable)
    assert error.message and error.session_id == events[0].session_id  # type: ignore[attr-defined]


@needs_v
def test_a_usage_limit_carries_the_reset_codex_names() -> None:
    """codex words the reset in local time ("Try again at 5:06 AM."): the next such time."""
    error = recorded(V, "usage_limit")[-1]
    assert isinstance(error, ErrorEvent) and error.resets_at is not None
    reset = datetime.datetime.fromtimestamp(error.resets_at).astimezone()
    assert reset.strftime("%-I:%M %p") in error.message
    assert 0 < error.resets_at - time.time() <= 86400


# 2026-12-07 03:50 local time; codex's apostrophe is U+2019.
NOW = datetime.datetime(2026, 12, 7, 3, 50).timestamp()
HIT = "You\u2019ve hit your usage limit."


@pytest.mark.parametrize(
    ("message", "reset"),
    [
        (f"{HIT} Try again at 5:06 AM.", (2026, 12, 7, 5, 6)),
        (f"{HIT} Try again at 3:06 AM.", (2026, 12, 8, 3, 6)),
        # A time just past is the reset just past (cut to the minute, the API's clock
        # lagging), not tomorrow's: the runtime parks as for a reset not said.
        (f"{HIT} Try again at 3:48 AM.", (2026, 12, 7, 3, 48)),
        (f"{HIT} Try again at 3:47 AM.", (2026, 12, 8, 3, 47)),
        (f"{HIT} Try again at 12:30 PM.", (2026, 12, 7, 12, 30)),
        (f"{HIT} Try again at Dec 9th, 2026 1:15 PM.", (2026, 12, 9, 13, 15)),
    ],
)
def test_codex_reset_times(message: str, reset: tuple[int, ...]) -> None:
    assert resets_at(message, NOW) == datetime.datetime(*reset).timestamp()
    assert resets_at(HIT, NOW) is None


@needs_v
def test_unknown_thread_is_session_lost() -> None:
    (error,) = recorded(V, "no_rollout")
    manifest = json.loads((FIXTURES / V / "manifest.json").read_text())["fixtures"]
    lost_id = manifest["no_rollout"]["argv"][5]
    assert isinstance(error, ErrorEvent) and error.reason is StopReason.SESSION_LOST
    assert error.session_id == lost_id and lost_id in error.message


@needs_v
def test_interrupted_turn_has_no_terminal_frame() -> None:
    # SIGINT: codex prints nothing more and exits 1. (The runtime, which sent the signal,
    # classifies the turn as interrupted; the translator alone can only say malformed.)
    events = recorded(V, "sigint")
    assert kinds(events) == ["session", "tool_use", "error"]
    error = events[-1]
    assert isinstance(error, ErrorEvent) and error.reason is StopReason.MALFORMED_OUTPUT
    assert "exited with code 1" in error.message


def test_mcp_and_web_search_items() -> None:
    mcp = {
        "id": "item_3",
        "type": "mcp_tool_call",
        "server": "docs",
        "tool": "search",
        "arguments": {"q": "trio"},
        "result": {"content": [{"type": "text", "text": "found"}], "structured_content": None},
        "error": None,
        "status": "completed",
    }
    failed = {**mcp, "id": "item_4", "result": None, "error": {"message": "boom"}}
    failed["status"] = "failed"
    search = {"id": "item_5", "type": "web_search", "query": "q", "action": {"type": "search"}}
    events = run(
        [
            {"type": "item.started", "item": {**mcp, "result": None, "status": "in_progress"}},
            {"type": "item.completed", "item": mcp},
            {"type": "item.completed", "item": failed},
            {"type": "item.completed", "item": search},
            {"type": "item.updated", "item": {"id": "item_9", "type": "todo_list", "items": []}},
        ]
    )
    assert kinds(events) == [
        *["tool_use", "tool_result"],
        *["tool_use", "tool_result"],
        *["tool_use", "tool_result", "raw", "error"],
    ]
    assert events[0] == ToolUseEvent(id="item_3", name="mcp__docs__search", input={"q": "trio"})
    assert events[1] == ToolResultEvent(tool_use_id="item_3", content=mcp["result"])
    assert events[3] == ToolResultEvent(
        tool_use_id="item_4", content={"message": "boom"}, is_error=True
    )
    assert events[4] == ToolUseEvent(
        id="item_5", name="web_search", input={"query": "q", "action": {"type": "search"}}
    )


def test_odd_frames_are_kept_raw() -> None:
    events = run([[1, 2], "text", {"no": "type"}, {"type": "thread.forked", "x": 1}])
    assert kinds(events) == ["raw", "raw", "raw", "raw", "error"]
    assert events[0] == RawEvent(data=[1, 2], note="not a JSON object")
    assert events[3] == RawEvent(data={"type": "thread.forked", "x": 1})


def test_turn_failed_message_is_redacted_and_cut() -> None:
    message = "unexpected status 401 Unauthorized: bad key sk-abcdefghijklmnop1234 " + "x" * 900
    (error,) = run([{"type": "turn.failed", "error": {"message": message}}])
    assert isinstance(error, ErrorEvent) and error.reason is StopReason.AUTHENTICATION_FAILED
    assert "sk-abcdefgh" not in error.message and len(error.message) == 500


def test_stream_that_ends_after_an_error_notice_takes_its_reason() -> None:
    frames = [
        {"type": "thread.started", "thread_id": THREAD},
        {"type": "error", "message": "exceeded retry limit, last status: 429 Too Many Requests"},
    ]
    error = run(frames, ExitStatus(1))[-1]
    assert isinstance(error, ErrorEvent) and error.reason is StopReason.RATE_LIMITED
    assert error.session_id == THREAD


def test_killed_by_a_signal_is_a_crash() -> None:
    frames = [{"type": "thread.started", "thread_id": THREAD}, {"type": "turn.started"}]
    error = run(frames, ExitStatus(None, 9))[-1]
    assert isinstance(error, ErrorEvent) and error.reason is StopReason.PROCESS_CRASHED
    assert "SIGKILL" in error.message and error.session_id == THREAD


def test_a_rejected_flag_is_invalid_options() -> None:
    stderr = "error: unexpected argument '--full-auto' found\n\nUsage: codex exec [OPTIONS]\n"
    (error,) = run([], ExitStatus(2), stderr)
    assert isinstance(error, ErrorEvent) and error.reason is StopReason.INVALID_OPTIONS
    assert "--full-auto" in error.message
    (other,) = run([], ExitStatus(1), "Error loading config.toml: unknown variant `bogus`\n")
    assert isinstance(other, ErrorEvent) and other.reason is StopReason.MALFORMED_OUTPUT
    assert "unknown variant" in other.message


def completed(input_tokens: int, cached: int, output: int) -> dict[str, Any]:
    usage = {"input_tokens": input_tokens, "cached_input_tokens": cached, "output_tokens": output}
    return {"type": "turn.completed", "usage": usage}


def test_per_turn_usage_chains_through_the_sum_of_what_was_reported() -> None:
    # Totals as measured (tests/realcli/CODEX.md), in/cached/out: turn one made calls of
    # 3/1/2 and 30/10/20; an interrupted turn made one of 300/100/200, which codex kept; the
    # next completed turn made one of 3000/1000/2000 and reports it with the interrupted
    # one. The baseline is the sum of what the earlier turns reported.
    reported: list[Usage] = []
    for totals in (completed(33, 11, 22), completed(3333, 1111, 2222)):
        baseline = sum_usage(reported) if reported else None
        (_, result) = run([totals], usage_baseline=baseline)
        assert isinstance(result, ResultEvent) and result.usage is not None
        reported.append(result.usage)
    assert reported == [
        Usage(input_tokens=22, output_tokens=22, cache_read_input_tokens=11),
        Usage(input_tokens=2200, output_tokens=2200, cache_read_input_tokens=1100),
    ]


def sum_usage(usages: list[Usage]) -> Usage:
    return Usage(
        input_tokens=sum(u.input_tokens for u in usages),
        output_tokens=sum(u.output_tokens for u in usages),
        cache_creation_input_tokens=sum(u.cache_creation_input_tokens for u in usages),
        cache_read_input_tokens=sum(u.cache_read_input_tokens for u in usages),
    )


def test_a_count_below_its_baseline_reports_zero() -> None:
    big = Usage(input_tokens=1000, output_tokens=1)
    (_, result) = run([completed(10, 0, 5)], usage_baseline=big)
    assert isinstance(result, ResultEvent)
    assert result.usage == Usage(input_tokens=0, output_tokens=4)


def test_model_comes_from_the_options() -> None:
    backend = CodexBackend()
    t = backend.translator(backend.parse_options({"model": "gpt-5.5"}))
    assert isinstance(t, CodexTranslator)
    (session,) = t.feed({"type": "thread.started", "thread_id": THREAD})
    assert session == SessionEvent(session_id=THREAD, model="gpt-5.5") and t.session_id == THREAD
    assert t.finish(ExitStatus(0), "") is not None
    t.feed({"type": "turn.completed", "usage": {}})
    assert t.finish(ExitStatus(0), "") is None


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["type", "item", "usage", "error", "id", "x"]), inner)
    ),
    max_leaves=10,
)
_item = st.fixed_dictionaries(
    {
        "type": st.sampled_from(
            [
                *("agent_message", "reasoning", "command_execution", "file_change"),
                *("mcp_tool_call", "web_search", "todo_list", "error"),
            ]
        )
    },
    optional={k: _json for k in ("id", "text", "status", "server", "tool", "command")},
)
_typed = st.fixed_dictionaries(
    {
        "type": st.sampled_from(
            [
                *("thread.started", "turn.started", "turn.completed", "turn.failed", "error"),
                *("item.started", "item.completed"),
            ]
        )
    },
    optional={
        "item": _item | _json,
        "usage": _json,
        "error": _json,
        "thread_id": _json,
        "message": _json,
    },
)


@given(st.lists(_typed | _json, max_size=6))
def test_any_json_frames_translate_without_raising(frames: list[Any]) -> None:
    events = run(frames, ExitStatus(1))
    assert [e.is_terminal for e in events].count(True) == 1
