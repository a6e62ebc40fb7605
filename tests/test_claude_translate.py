"""Claude Code stream-json -> events, on recorded 2.1.x-shaped streams."""

from __future__ import annotations

import copy
import datetime
import itertools
import signal
import time
from typing import Any

import msgspec
import pytest
from claude_frames import (
    FIXTURES,
    MODEL,
    SID,
    frames,
    run,
    streamed_usage,
    summaries,
    summary,
    text_of,
    translate,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from agentrt import (
    ErrorEvent,
    Event,
    InitEvent,
    McpServerStatus,
    PermissionDenial,
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
from agentrt.backends.claude import ClaudeBackend, ClaudeTranslator
from agentrt.backends.claude._failures import resets_at
from agentrt.lowlevel import FrameBatch

USAGE = ("usage", 9, 18, 4211, 36120)
INIT_ROW = ("init", MODEL, "default")
INIT_FRAME = frames("text_partial.jsonl")[0]


def result_row(
    text: str, cost: float, duration: float, turns: int, sid: str = SID
) -> tuple[Any, ...]:
    return ("result", text, sid, cost, duration, turns, "end_turn", MODEL)


def test_text_with_partial_messages() -> None:
    events, terminal = run(frames("text_partial.jsonl"))
    assert summaries(events) == [
        ("session", SID, MODEL),
        INIT_ROW,
        ("raw", ("system", "status"), None),
        ("text", "The answer", False),
        ("text", " is 4", False),
        ("text", "2.", False),
        # The completed block repeats the deltas: only its boundary is new.
        ("text", "", True),
        ("raw", ("rate_limit_event", None), None),
        USAGE,
        result_row("The answer is 42.", 0.0184125, 3.187, 1),
    ]
    assert terminal is None
    result = events[-1]
    assert isinstance(result, ResultEvent) and result.is_terminal
    assert result.usage == Usage(
        input_tokens=9,
        output_tokens=18,
        cache_creation_input_tokens=4211,
        cache_read_input_tokens=36120,
    )
    assert isinstance(result.raw, dict) and result.raw["modelUsage"][MODEL]["costUSD"] == 0.0184125


def test_tool_use_with_partial_messages() -> None:
    events, _ = run(frames("tool_use_partial.jsonl"))
    bash = (
        "tool_use",
        "toolu_01JzQ4cR8kYv2mXn6pLwT3sA",
        "Bash",
        {"command": "ls | wc -l", "description": "Count files"},
    )
    assert summaries(events) == [
        ("session", SID, MODEL),
        INIT_ROW,
        ("text", "I'll count", False),
        ("text", " the files.", False),
        ("text", "", True),
        bash,
        ("tool_result", "toolu_01JzQ4cR8kYv2mXn6pLwT3sA", "12", False),
        ("text", "There are ", False),
        ("text", "12 files", False),
        ("text", ".", False),
        ("text", "", True),
        ("raw", ("rate_limit_event", None), None),
        ("usage", 9, 85, 4211, 36120),
        result_row("There are 12 files.", 0.0412, 7.412, 2),
    ]


def test_without_partial_messages_completed_blocks_are_the_text() -> None:
    events, _ = run(frames("tool_use_no_partial.jsonl"))
    assert summaries(events)[:6] == [
        ("session", SID, MODEL),
        INIT_ROW,
        ("text", "I'll count the files.", True),
        (
            "tool_use",
            "toolu_01JzQ4cR8kYv2mXn6pLwT3sA",
            "Bash",
            {"command": "ls | wc -l", "description": "Count files"},
        ),
        ("tool_result", "toolu_01JzQ4cR8kYv2mXn6pLwT3sA", "12", False),
        ("text", "There are 12 files.", True),
    ]


def test_thinking_is_dropped() -> None:
    events, _ = run(frames("thinking.jsonl"))
    assert summaries(events) == [
        ("session", SID, MODEL),
        INIT_ROW,
        ("text", "Autumn ", False),
        ("text", "moonlight", False),
        ("text", "", True),
        USAGE,
        result_row("Autumn moonlight", 0.0091, 3.187, 1),
    ]


@pytest.mark.parametrize("typed", [False, True])
def test_subagent_text_is_not_the_answer_but_its_tools_are_events(typed: bool) -> None:
    lines = (FIXTURES / "subagent.jsonl").read_bytes().splitlines()
    events, _ = run(typed_frames(lines) if typed else frames("subagent.jsonl"))
    assert text_of(events) == "There is one TODO (src/a.py)."
    task = "toolu_01TaskAaaaBbbb"
    # The subagent's calls name the Task call they were made in; the main thread's none.
    assert [
        (*summary(e)[:3], e.parent_tool_use_id)
        for e in events
        if isinstance(e, ToolUseEvent | ToolResultEvent)
    ] == [
        ("tool_use", task, "Task", None),
        ("tool_use", "toolu_01SubGrepCccc", "Grep", task),
        ("tool_result", "toolu_01SubGrepCccc", "src/a.py:3: # TODO fix", task),
        ("tool_result", task, [{"type": "text", "text": "One TODO, in src/a.py."}], None),
    ]


def test_resumed_turn_with_a_failed_tool_call() -> None:
    sid = "7d3e2f10-aa55-4b1c-8c9d-0e1f2a3b4c5d"
    events, _ = run(frames("resumed_tool_error.jsonl"))
    assert summaries(events) == [
        ("session", sid, MODEL),
        INIT_ROW,
        ("tool_use", "toolu_01ResumedRead", "Read", {"file_path": "/nope"}),
        (
            "tool_result",
            "toolu_01ResumedRead",
            "<tool_use_error>File does not exist.</tool_use_error>",
            True,
        ),
        ("text", "That file does not exist.", True),
        USAGE,
        result_row("That file does not exist.", 0.0202, 3.187, 2, sid),
    ]


def test_is_error_result_fails_even_with_subtype_success() -> None:
    events, terminal = run(frames("is_error_success.jsonl"))
    assert terminal is None
    assert summaries(events)[-2:] == [
        USAGE,
        ("error", StopReason.CLI_ERROR, "Credit balance is too low", 400, False, SID),
    ]
    assert isinstance(events[-1], ErrorEvent) and events[-1].raw["subtype"] == "success"


def test_rejected_key_fails_on_the_first_api_retry() -> None:
    stream = frames("auth_retry.jsonl")
    t = ClaudeTranslator()
    assert summaries(t.feed(stream[0])) == [("session", SID, MODEL), INIT_ROW]
    first_retry = t.feed(stream[1])
    assert summaries(first_retry) == [
        (
            "error",
            StopReason.AUTHENTICATION_FAILED,
            "the API rejected the credentials (authentication_failed, HTTP 401); "
            "the CLI would keep retrying, so the turn ends now",
            401,
            False,
            SID,
        )
    ]
    assert first_retry[0].is_terminal
    # Whatever the CLI prints afterwards (more retries, the final result when it is stopped)
    # is kept but is never terminal, so it cannot replace the classification.
    later = [e for frame in stream[2:] for e in t.feed(frame)]
    assert summaries(later) == [
        ("raw", ("system", "api_retry"), None),
        ("raw", ("system", "api_retry"), None),
        USAGE,
        ("raw", ("result", "success"), "after the turn had failed"),
    ]
    assert not any(e.is_terminal for e in later)
    assert t.finish(ExitStatus(0), "") is None


def test_an_interrupt_after_a_fatal_retry_keeps_authentication_failed() -> None:
    t = ClaudeTranslator()
    translate(frames("auth_retry.jsonl")[:2], t)
    aborted = frames("interrupted.jsonl")[-1]
    assert not any(e.is_terminal for e in t.feed(aborted))


@pytest.mark.parametrize(
    ("status", "error"),
    [(401, "authentication_failed"), (401, None), (None, "authentication_failed")],
)
def test_fatal_api_retry_variants(status: int | None, error: str | None) -> None:
    frame: dict[str, Any] = {"type": "system", "subtype": "api_retry", "attempt": 1}
    if status is not None:
        frame["error_status"] = status
    if error is not None:
        frame["error"] = error
    (event,) = ClaudeTranslator().feed(frame)
    assert isinstance(event, ErrorEvent) and event.reason is StopReason.AUTHENTICATION_FAILED
    assert event.status == status and event.session_id is None


@pytest.mark.parametrize(
    ("status", "error"), [(429, "rate_limit"), (529, "overloaded"), (500, "api_error")]
)
def test_retryable_api_retry_is_only_kept_raw(status: int, error: str) -> None:
    frame = {"type": "system", "subtype": "api_retry", "error_status": status, "error": error}
    (event,) = ClaudeTranslator().feed(frame)
    assert isinstance(event, RawEvent) and not event.is_terminal


def test_a_spent_plan_is_a_usage_limit_not_a_retryable_rate_limit() -> None:
    """The CLI's "You've hit your ... limit" on a 429 is the plan's usage limit: not
    retryable before its reset, which the text gives (the next 3:45pm, UTC)."""
    events, _ = run(frames("rate_limited.jsonl"))
    assert summaries(events)[-1] == (
        "error",
        StopReason.USAGE_LIMIT,
        "You've hit your session limit · resets 3:45pm",
        429,
        False,
        SID,
    )
    terminal = events[-1]
    assert isinstance(terminal, ErrorEvent) and terminal.resets_at is not None
    reset = datetime.datetime.fromtimestamp(terminal.resets_at, datetime.UTC)
    assert (reset.hour, reset.minute) == (15, 45)
    assert 0 < terminal.resets_at - time.time() <= 86400


def test_overloaded_result_after_retryable_retries() -> None:
    events, _ = run(frames("overloaded.jsonl"))
    kinds = summaries(events)
    assert kinds[2:4] == [("raw", ("system", "api_retry"), None)] * 2
    last = events[-1]
    assert isinstance(last, ErrorEvent)
    assert (last.reason, last.status, last.retryable) == (StopReason.OVERLOADED, 529, True)
    assert "overloaded_error" in last.message


def test_sigint_result_is_an_error_result() -> None:
    # The runtime classifies an interrupted turn itself; the translator reports what it saw.
    events, terminal = run(frames("interrupted.jsonl"))
    assert summaries(events) == [
        ("session", SID, MODEL),
        INIT_ROW,
        ("text", "Let me look at", False),
        USAGE,
        ("error", StopReason.CLI_ERROR, "Request was aborted.", None, False, SID),
    ]
    assert terminal is None


def test_error_subtype_without_is_error_is_a_failure() -> None:
    events, _ = run(frames("max_turns.jsonl"))
    assert summaries(events)[-1] == (
        "error",
        StopReason.CLI_ERROR,
        "Reached maximum number of turns (1)",
        None,
        False,
        SID,
    )


def test_each_result_of_a_background_task_turn_is_terminal() -> None:
    events, terminal = run(frames("background_task.jsonl"))
    terminals = [e for e in events if e.is_terminal]
    assert [(t.kind, t.text) for t in terminals if isinstance(t, ResultEvent)] == [
        ("result", "Started it; I'll report back."),
        ("result", "The task printed done."),
    ]
    assert len(terminals) == 2
    # The second system/init repeats the session id: no second checkpoint.
    assert [e for e in events if isinstance(e, SessionEvent)] == [
        SessionEvent(session_id=SID, model=MODEL)
    ]
    # Text after the first result is still de-duplicated against its own deltas.
    second = events[events.index(terminals[0]) + 1 :]
    assert text_of(second) == "The task printed done."
    assert terminal is None


def test_every_init_is_an_event_with_what_the_cli_started_with() -> None:
    stream = frames("background_task.jsonl")
    later = next(i for i, f in enumerate(stream) if f.get("subtype") == "init" and i > 0)
    servers = [
        {"name": "db", "status": "connected"},
        {"name": "search", "status": "failed"},
        {"status": "connected"},  # no name: not a server we can name
        "odd",
    ]
    stream[later] = {
        **stream[later],
        "mcp_servers": servers,
        "permissionMode": "acceptEdits",
        "tools": ["Bash", "mcp__db__query", 7],
    }
    stream[later].pop("claude_code_version", None)
    inits = [e for e in translate(stream) if isinstance(e, InitEvent)]
    assert [(e.model, e.permission_mode, e.cwd) for e in inits] == [
        (MODEL, "default", stream[0]["cwd"]),
        (MODEL, "acceptEdits", stream[0]["cwd"]),
    ]
    # The CLI's version as it reports it; an init without one says None, not a guess.
    assert [e.cli_version for e in inits] == [stream[0]["claude_code_version"], None]
    assert inits[0].tools[:3] == ("Task", "Bash", "Glob") and inits[0].mcp_servers == ()
    assert inits[1].tools == ("Bash", "mcp__db__query")
    assert inits[1].mcp_servers == (
        McpServerStatus(name="db", status="connected"),
        McpServerStatus(name="search", status="failed"),
    )
    assert inits[1].raw is stream[later]


def test_an_error_result_after_a_success_is_the_last_terminal() -> None:
    stream = frames("background_task.jsonl")
    stream[-1] = {**stream[-1], "is_error": True, "result": "Background task failed"}
    events = translate(stream)
    last = [e for e in events if e.is_terminal][-1]
    assert isinstance(last, ErrorEvent) and last.message == "Background task failed"


def test_no_conversation_found_in_a_result_is_session_lost() -> None:
    lost = "0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b"
    events = translate(
        [
            {
                "type": "result",
                "subtype": "error_during_execution",
                "is_error": True,
                "errors": [f"No conversation found with session ID: {lost}"],
                "session_id": SID,
            }
        ]
    )
    assert summaries(events) == [
        ("session", SID, None),
        (
            "error",
            StopReason.SESSION_LOST,
            f"No conversation found with session ID: {lost}",
            None,
            False,
            lost,
        ),
    ]


# What Claude Code 2.1.337 prints (against the fake API; trimmed to the fields read here):
# a model call past API_TIMEOUT_MS names its error in ``api_error``, and a resume of a
# session it does not have names that in ``startup_failure_reason``.
TIMEOUT_337 = [
    {
        "type": "assistant",
        "message": {
            "id": "d9b421d0-befd-49a3-9f7a-5b8a7c2a7e96",
            "model": "<synthetic>",
            "role": "assistant",
            "type": "message",
            "content": [
                {"type": "text", "text": "Request timed out. Set API_TIMEOUT_MS above 2000."}
            ],
        },
        "parent_tool_use_id": None,
        "session_id": SID,
        "error": "server_error",
        "is_api_error_message": True,
        "api_error": "request_timeout",
    },
    {
        "type": "result",
        "subtype": "success",
        "is_error": True,
        "num_turns": 1,
        "session_id": SID,
        "total_cost_usd": 0,
        "terminal_reason": "api_error",
        "api_error_status": None,
        "api_error": "request_timeout",
        "result": "Request timed out. Set API_TIMEOUT_MS above 2000.",
    },
]


def test_a_request_timeout_of_2_1_337_has_its_own_reason() -> None:
    [*_, terminal] = translate(TIMEOUT_337)
    assert isinstance(terminal, ErrorEvent)
    assert (terminal.reason, terminal.retryable) == (StopReason.REQUEST_TIMEOUT, True)
    assert terminal.message.startswith("Request timed out") and terminal.session_id == SID


def test_a_resume_target_not_found_is_session_lost_whatever_the_wording() -> None:
    lost = "71375a4b-9d56-4da6-b432-02416567c950"
    frame = {
        "type": "result",
        "subtype": "error_during_execution",
        "is_error": True,
        "num_turns": 0,
        "session_id": lost,
        "total_cost_usd": 0,
        "errors": [f"No conversation found with session ID: {lost}"],
        "startup_failure_reason": "resume_target_not_found",
    }
    [*_, terminal] = translate([frame])
    assert isinstance(terminal, ErrorEvent)
    assert (terminal.reason, terminal.session_id) == (StopReason.SESSION_LOST, lost)
    # The field decides, not the text: a later wording is still a lost session.
    reworded = {**frame, "errors": [f"Session {lost} cannot be resumed"]}
    [*_, terminal] = translate([reworded])
    assert isinstance(terminal, ErrorEvent)
    assert (terminal.reason, terminal.session_id) == (StopReason.SESSION_LOST, lost)


def test_an_unknown_startup_failure_or_api_error_is_classified_as_before() -> None:
    frame = {**TIMEOUT_337[-1], "api_error": "something_new", "result": "API Error: 500"}
    [*_, terminal] = translate([frame])
    assert isinstance(terminal, ErrorEvent) and terminal.reason is StopReason.CLI_ERROR


def test_error_message_is_redacted_but_raw_is_the_frame() -> None:
    key = "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUv"
    frame = {
        "type": "result",
        "subtype": "success",
        "is_error": True,
        "result": f"API Error: 400 bad header x-api-key: {key}",
    }
    (event,) = ClaudeTranslator().feed(frame)
    assert isinstance(event, ErrorEvent)
    assert key not in event.message and "[REDACTED]" in event.message
    assert event.raw is frame


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (
            {"type": "result", "subtype": "error_max_budget_usd", "error": "budget spent"},
            "budget spent",
        ),
        (
            {"type": "result", "subtype": "error_during_execution"},
            "the CLI reported error_during_execution",
        ),
        ({"type": "result", "is_error": True, "result": ""}, "the CLI reported unknown"),
        ({"type": "result", "is_error": True, "errors": ["a", 2]}, "a; 2"),
    ],
)
def test_error_message_sources(frame: dict[str, Any], message: str) -> None:
    (event,) = ClaudeTranslator().feed(frame)
    assert isinstance(event, ErrorEvent) and event.message == message
    assert event.reason is StopReason.CLI_ERROR


def silent_error(status: int | None, errors: Any = ()) -> dict[str, Any]:
    """An error result that says nothing itself (the SDK's fixtures have these)."""
    frame = {"type": "result", "subtype": "success", "is_error": True, "result": ""}
    frame["errors"] = list(errors) if isinstance(errors, tuple) else errors
    return frame if status is None else {**frame, "api_error_status": status}


@pytest.mark.parametrize(
    ("frame", "reason", "message", "retryable"),
    [
        (silent_error(529), StopReason.OVERLOADED, "the API is overloaded (HTTP 529)", True),
        (
            silent_error(429, ["", "  "]),
            StopReason.RATE_LIMITED,
            "the API's rate limit was reached (HTTP 429)",
            True,
        ),
        (
            silent_error(500, "not a list"),
            StopReason.CLI_ERROR,
            "the API call failed (HTTP 500)",
            False,
        ),
        (
            silent_error(None, [None]),
            StopReason.CLI_ERROR,
            "the CLI reported an error without a message",
            False,
        ),
    ],
)
def test_an_error_result_that_says_nothing_is_worded_from_its_api_status(
    frame: dict[str, Any], reason: StopReason, message: str, retryable: bool
) -> None:
    (event,) = ClaudeTranslator().feed(frame)
    assert isinstance(event, ErrorEvent)
    assert (event.reason, event.message, event.retryable) == (reason, message, retryable)


def rate_limit(status: str) -> dict[str, Any]:
    info = {"status": status, "resetsAt": 1700003600, "rateLimitType": "seven_day"}
    return {"type": "rate_limit_event", "rate_limit_info": info, "session_id": SID}


UNCLEAR = {"type": "result", "subtype": "success", "is_error": True, "result": "Stopped."}


@pytest.mark.parametrize(
    ("stream", "reason"),
    [
        ([rate_limit("rejected"), UNCLEAR], StopReason.USAGE_LIMIT),
        ([rate_limit("rejected"), silent_error(None)], StopReason.USAGE_LIMIT),
        ([rate_limit("rejected"), silent_error(429)], StopReason.USAGE_LIMIT),
        ([rate_limit("allowed_warning"), UNCLEAR], StopReason.CLI_ERROR),
        # The latest one counts: the limit was lifted before the turn ended.
        ([rate_limit("rejected"), rate_limit("allowed"), UNCLEAR], StopReason.CLI_ERROR),
        # The CLI's own words are more precise than the rejection.
        ([rate_limit("rejected"), silent_error(529)], StopReason.OVERLOADED),
    ],
)
def test_a_rejected_rate_limit_that_ends_the_turn_is_the_usage_limit(
    stream: list[Any], reason: StopReason
) -> None:
    """A rejected rate_limit_event is the credential's usage window: the error that ends the
    turn is USAGE_LIMIT, reset at the event's resetsAt, unless it says something else."""
    events = translate(stream)
    assert [type(e) for e in events[:-1]] == [SessionEvent, *[RawEvent] * (len(stream) - 1)]
    terminal = events[-1]
    assert isinstance(terminal, ErrorEvent) and terminal.reason is reason
    limited = reason is StopReason.USAGE_LIMIT
    assert terminal.resets_at == (1700003600 if limited else None)
    assert terminal.retryable is (reason is StopReason.OVERLOADED)


def test_a_rejected_rate_limit_then_the_end_of_the_stream_is_the_usage_limit() -> None:
    _, terminal = run([INIT_FRAME, rate_limit("rejected")], ExitStatus(1))
    assert isinstance(terminal, ErrorEvent) and terminal.reason is StopReason.USAGE_LIMIT
    assert terminal.resets_at == 1700003600
    assert not terminal.retryable and "usage limit" in terminal.message
    _, crashed = run([INIT_FRAME, rate_limit("rejected")], ExitStatus(None, signal.SIGKILL))
    assert isinstance(crashed, ErrorEvent) and crashed.reason is StopReason.PROCESS_CRASHED


def test_a_success_after_a_rejected_rate_limit_stands() -> None:
    events = translate([rate_limit("rejected"), *frames("text_partial.jsonl")[1:]])
    assert isinstance(events[-1], ResultEvent)


def test_a_result_carries_its_structured_output_and_permission_denials() -> None:
    stream = frames("2.1.332/permission_denied.jsonl")
    (result,) = [e for e in translate(stream) if isinstance(e, ResultEvent)]
    assert result.permission_denials == (
        PermissionDenial(
            tool_name="Bash",
            tool_use_id="toolu_fake_1",
            input={"command": "touch made.txt", "description": "Run it"},
        ),
    )
    assert result.structured_output is None
    answer = {"files": 12, "names": ["a.py"]}
    odd = [{"tool_use_id": 5}, "not a denial"]
    frame = {**stream[-1], "structured_output": answer, "permission_denials": odd}
    result = ClaudeTranslator().feed(frame)[-1]
    assert isinstance(result, ResultEvent) and result.structured_output == answer
    assert result.permission_denials == (PermissionDenial(tool_name="", tool_use_id=""),)


def test_result_with_odd_field_types_degrades_to_none() -> None:
    frame = {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "result": 5,
        "duration_ms": "slow",
        "num_turns": True,
        "total_cost_usd": None,
        "stop_reason": 3,
        "usage": {"input_tokens": "many", "output_tokens": 7},
    }
    usage, result = ClaudeTranslator().feed(frame)
    assert isinstance(usage, UsageEvent) and usage.usage == Usage(output_tokens=7)
    assert isinstance(result, ResultEvent)
    assert (
        result.text,
        result.duration,
        result.num_turns,
        result.cost_usd,
        result.model_stop_reason,
    ) == ("", None, None, None, None)


def test_result_without_usage_has_no_usage_event() -> None:
    (event,) = ClaudeTranslator().feed({"type": "result", "subtype": "success", "result": "ok"})
    assert isinstance(event, ResultEvent) and event.usage is None and event.text == "ok"


def test_session_event_comes_from_the_first_frame_carrying_an_id() -> None:
    t = ClaudeTranslator()
    first = t.feed({"type": "system", "subtype": "status", "session_id": SID})
    assert summaries(first) == [("session", SID, None), ("raw", ("system", "status"), None)]
    init = {"type": "system", "subtype": "init", "session_id": SID, "model": MODEL}
    assert summaries(t.feed(init)) == [("init", MODEL, None)]
    other = "11111111-2222-4333-8444-555555555555"
    assert summaries(t.feed({"type": "system", "subtype": "init", "session_id": other})) == [
        ("session", other, MODEL),
        ("init", None, None),
    ]
    assert t.session_id == other


def test_tool_use_is_emitted_once_per_id_with_its_full_input() -> None:
    block = {
        "type": "tool_use",
        "id": "toolu_1",
        "name": "Edit",
        "input": {"file_path": "a.py", "old_string": "x", "new_string": "y"},
    }
    frame = {"type": "assistant", "message": {"id": "m", "content": [block]}}
    t = ClaudeTranslator()
    (event,) = t.feed(frame)
    assert isinstance(event, ToolUseEvent) and event.input == block["input"]
    assert t.feed(frame) == []
    server = {
        "type": "server_tool_use",
        "id": "srvtoolu_1",
        "name": "web_search",
        "input": {"query": "q"},
    }
    assert summaries(t.feed({"type": "assistant", "message": {"content": [server, block]}})) == [
        ("tool_use", "srvtoolu_1", "web_search", {"query": "q"})
    ]


def _delta(text: str, index: int = 0) -> dict[str, Any]:
    return {
        "type": "stream_event",
        "event": {
            "type": "content_block_delta",
            "index": index,
            "delta": {"type": "text_delta", "text": text},
        },
    }


def _block(text: str) -> dict[str, Any]:
    return {"type": "assistant", "message": {"content": [{"type": "text", "text": text}]}}


def test_completed_text_adds_only_what_the_stream_missed() -> None:
    events = translate([_delta("Hello, "), _block("Hello, world")])
    assert summaries(events) == [("text", "Hello, ", False), ("text", "world", True)]


def test_completed_text_the_stream_never_sent_is_emitted_whole() -> None:
    events = translate([_delta("Hello", 0), _block("Other"), _block("Hello")])
    assert summaries(events) == [
        ("text", "Hello", False),
        ("text", "Other", True),
        ("text", "", True),
    ]


def test_each_streamed_block_matches_one_completed_block() -> None:
    stream = [_delta("ok", 0), _block("ok"), _delta("ok", 1), _block("ok"), _block("ok")]
    assert summaries(translate(stream)) == [
        ("text", "ok", False),
        ("text", "", True),
        ("text", "ok", False),
        ("text", "", True),
        ("text", "ok", True),
    ]


def test_a_long_streamed_message_costs_linear_time() -> None:
    # 40,000 deltas of 64 characters (2.5 MB): concatenated per delta, the copies grow with
    # the square of the length (1.3 s here, against 0.1 s when the deltas are joined once,
    # as the completed block arrives).
    piece = "x" * 63 + " "
    stream = [_delta(piece) for _ in range(40_000)]
    events = translate([*stream, _block(piece * 40_000 + "tail")])
    assert len(events) == 40_001
    assert summaries(events[-1:]) == [("text", "tail", True)]


def _abandoned(from_block_index: int) -> dict[str, Any]:
    # How Claude Code closes a reply it gives up mid-stream (it then retries unstreamed).
    abandoned = {"api_message_id": "msg_1", "from_block_index": from_block_index}
    return {
        "type": "stream_event",
        "event": {"type": "message_stop"},
        "abandoned_blocks": abandoned,
    }


def test_an_abandoned_reply_takes_its_streamed_text_back() -> None:
    stream = [_delta("Partial "), _delta("ans"), _abandoned(0), _block("Whole answer.")]
    assert summaries(translate(stream)) == [
        ("text", "Partial ", False),
        ("text", "ans", False),
        ("text_retracted", "Partial ans"),
        ("text", "Whole answer.", True),
    ]


def test_only_the_abandoned_blocks_are_taken_back() -> None:
    stream = [_delta("kept", 0), _delta("cut", 1), _abandoned(1), _abandoned(0), _block("kept")]
    assert summaries(translate(stream)) == [
        ("text", "kept", False),
        ("text", "cut", False),
        ("text_retracted", "cut"),
        ("text_retracted", "kept"),
        ("text", "kept", True),
    ]


def test_a_new_message_forgets_the_previous_stream() -> None:
    start = {"type": "stream_event", "event": {"type": "message_start", "message": {"model": "m2"}}}
    events = translate([_delta("same"), start, _block("same")])
    assert summaries(events) == [("text", "same", False), ("text", "same", True)]


@pytest.mark.parametrize(
    "frame",
    [
        None,
        3,
        "text",
        [1, 2],
        {"no": "type"},
        {"type": 7},
        {"type": "assistant"},
        {"type": "assistant", "message": {"content": "plain"}},
        {"type": "user", "message": "x"},
        {"type": "user", "message": {"content": [1, {"type": "x"}]}},
        {"type": "stream_event"},
        {"type": "stream_event", "event": {"type": "content_block_delta"}},
        {"type": "system"},
        {"type": "result", "usage": [1]},
    ],
)
def test_malformed_frames_never_raise(frame: Any) -> None:
    events = ClaudeTranslator().feed(frame)
    assert all(isinstance(e, Event) for e in events)


def test_non_objects_and_unknown_types_are_kept_raw() -> None:
    t = ClaudeTranslator()
    assert summaries(t.feed([1, 2])) == [("raw", [1, 2], "not a JSON object")]
    assert summaries(t.feed({"type": "tool_progress", "tool_name": "Bash"})) == [
        ("raw", ("tool_progress", None), None)
    ]
    assert summaries(t.feed({"type": "assistant", "message": None})) == [
        ("raw", ("assistant", None), "assistant frame without a message")
    ]


# --- finish: the stream ended without a terminal event ------------------------------------


def test_finish_after_a_result_is_none() -> None:
    t = ClaudeTranslator()
    translate(frames("text_partial.jsonl"), t)
    assert t.finish(ExitStatus(None, signal.SIGKILL), "Killed") is None


def test_finish_without_a_result_is_malformed_output() -> None:
    _, terminal = run(frames("text_partial.jsonl")[:-1], ExitStatus(0), "")
    assert isinstance(terminal, ErrorEvent) and terminal.is_terminal
    assert terminal.reason is StopReason.MALFORMED_OUTPUT
    assert terminal.message == "the CLI exited with code 0 without printing its result"
    assert terminal.session_id == SID


def test_finish_by_signal_is_process_crashed() -> None:
    _, terminal = run(frames("interrupted.jsonl")[:-1], ExitStatus(None, signal.SIGKILL), "")
    assert isinstance(terminal, ErrorEvent)
    assert terminal.reason is StopReason.PROCESS_CRASHED
    assert terminal.message == "the CLI was killed by SIGKILL without printing its result"


def test_finish_with_unknown_exit_and_unknown_signal() -> None:
    t = ClaudeTranslator()
    assert isinstance(e := t.finish(ExitStatus(None), ""), ErrorEvent)
    assert e.message == "the CLI ended without printing its result"
    assert isinstance(e := t.finish(ExitStatus(None, 200), ""), ErrorEvent)
    assert "killed by signal 200" in e.message


@pytest.mark.parametrize(
    ("stderr", "reason", "retryable"),
    [
        ("Invalid API key · Please run /login\n", StopReason.AUTHENTICATION_FAILED, False),
        (
            "OAuth token has expired. Please obtain a new token or refresh your existing token.",
            StopReason.CREDENTIAL_EXPIRED,
            False,
        ),
        ("Error: not logged in", StopReason.AUTHENTICATION_FAILED, False),
        ("Claude AI usage limit reached|1764460800", StopReason.USAGE_LIMIT, False),
        ("You've hit your weekly limit · resets Mon 9am", StopReason.USAGE_LIMIT, False),
        ("Prompt is too long", StopReason.CONTEXT_EXHAUSTED, False),
        (
            "Autocompact is thrashing: the context refilled to the limit within 3 turns",
            StopReason.CONTEXT_EXHAUSTED,
            False,
        ),
        ("Error during compaction: aborted", StopReason.CONTEXT_EXHAUSTED, False),
        ('{"type":"overloaded_error","message":"Overloaded"}', StopReason.OVERLOADED, True),
        ("segfault at line 429", StopReason.MALFORMED_OUTPUT, False),
        # The CLI prints this on runs that work; it is no failure marker.
        (
            "⚠ claude.ai connectors are disabled because ANTHROPIC_API_KEY or another auth\n"
            "  source is set and takes precedence over your claude.ai login",
            StopReason.MALFORMED_OUTPUT,
            False,
        ),
    ],
)
def test_finish_classifies_stderr_markers(stderr: str, reason: StopReason, retryable: bool) -> None:
    terminal = ClaudeTranslator().finish(ExitStatus(1), stderr)
    assert isinstance(terminal, ErrorEvent)
    assert (terminal.reason, terminal.retryable) == (reason, retryable)


# 2026-12-07 03:50 UTC, a Monday.
NOW = datetime.datetime(2026, 12, 7, 3, 50, tzinfo=datetime.UTC).timestamp()


@pytest.mark.parametrize(
    ("text", "reset"),
    [
        ("You've hit your 5-hour limit · resets 4:47am (UTC)", (2026, 12, 7, 4, 47)),
        ("You've hit your session limit · resets 3am (UTC)", (2026, 12, 8, 3, 0)),
        ("You've hit your weekly limit · resets Mon 9am (UTC)", (2026, 12, 7, 9, 0)),
        ("You've hit your weekly limit · resets Sun 9am", (2026, 12, 13, 9, 0)),
        ("You've hit your weekly limit · resets Jan 2, 3pm (UTC)", (2027, 1, 2, 15, 0)),
        # The zone the CLI names: 4:47am in Paris is 3:47 UTC, so the next one is tomorrow's.
        ("You've hit your 5-hour limit · resets 4:47am (Europe/Paris)", (2026, 12, 8, 3, 47)),
        ("Claude AI usage limit reached|1796698800", (2026, 12, 8, 3, 0)),
        # A time of day just past is the reset just past (the CLI cuts it to the minute; the
        # API's clock may lag), not tomorrow's: the runtime parks as for a reset not said.
        ("You've hit your 5-hour limit · resets 3:50am (UTC)", (2026, 12, 7, 3, 50)),
        ("You've hit your 5-hour limit · resets 3:48am (UTC)", (2026, 12, 7, 3, 48)),
        ("You've hit your 5-hour limit · resets 3:47am (UTC)", (2026, 12, 8, 3, 47)),
    ],
)
def test_a_usage_limit_text_gives_its_reset_time(text: str, reset: tuple[int, ...]) -> None:
    expected = datetime.datetime(*reset, tzinfo=datetime.UTC).timestamp()
    assert resets_at(text, NOW) == expected


def test_a_usage_limit_text_without_a_time_gives_none() -> None:
    assert resets_at("You've hit your weekly limit", NOW) is None
    assert resets_at("the model says it resets 9am", NOW) is None


def test_finish_markers_win_over_the_signal() -> None:
    terminal = ClaudeTranslator().finish(ExitStatus(None, signal.SIGTERM), "Invalid API key")
    assert isinstance(terminal, ErrorEvent)
    assert terminal.reason is StopReason.AUTHENTICATION_FAILED


def test_finish_unknown_resume_id_is_session_lost_with_that_id() -> None:
    lost = "0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b"
    terminal = ClaudeTranslator().finish(
        ExitStatus(1), f"No conversation found with session ID: {lost}\n"
    )
    assert isinstance(terminal, ErrorEvent)
    assert (terminal.reason, terminal.session_id) == (StopReason.SESSION_LOST, lost)
    assert terminal.message.endswith(f"No conversation found with session ID: {lost}")


def test_finish_message_is_redacted_and_bounded() -> None:
    token = "sk-ant-oat01-ZZZZZZZZZZZZZZZZZZZZZZ"
    stderr = "x" * 20000 + f"\nrequest failed: Authorization: Bearer {token}\n\n"
    terminal = ClaudeTranslator().finish(ExitStatus(1), stderr)
    assert isinstance(terminal, ErrorEvent)
    assert token not in terminal.message and "[REDACTED]" in terminal.message
    assert len(terminal.message) < 700


# --- properties -----------------------------------------------------------------------------


def normalized(events: list[Event]) -> list[tuple[Any, ...]]:
    """Events with each streamed message's text joined into one row: what must not depend on
    how the CLI chunked its deltas, nor on whether partial messages were on."""
    rows: list[tuple[Any, ...]] = []
    pending = ""
    # A call's usage is streamed in more steps with partial messages on.
    streamed = {id(e) for e in streamed_usage(events)}
    for event in events:
        if id(event) in streamed:
            continue
        if isinstance(event, TextEvent):
            pending += event.text
            if event.message_boundary:
                rows.append(("text", pending))
                pending = ""
        elif not isinstance(event, RawEvent):
            rows.append(summary(event))
    return rows + ([("open text", pending)] if pending else [])


def rechunk(stream: list[Any], data: st.DataObject) -> list[Any]:
    """The same stream with every run of text deltas re-split at arbitrary points."""
    out: list[Any] = []
    i = 0
    while i < len(stream):
        frame = stream[i]
        if not _is_text_delta(frame):
            out.append(frame)
            i += 1
            continue
        j = i
        while j < len(stream) and _is_text_delta(stream[j]):
            j += 1
        text = "".join(f["event"]["delta"]["text"] for f in stream[i:j])
        cuts = sorted(data.draw(st.sets(st.integers(1, max(1, len(text) - 1)), max_size=len(text))))
        bounds = [0, *[c for c in cuts if c < len(text)], len(text)]
        for a, b in itertools.pairwise(bounds):
            piece = copy.deepcopy(frame)
            piece["event"]["delta"]["text"] = text[a:b]
            out.append(piece)
        i = j
    return out


def _is_text_delta(frame: Any) -> bool:
    event = frame.get("event") if frame.get("type") == "stream_event" else None
    return (
        isinstance(event, dict)
        and event.get("type") == "content_block_delta"
        and event["delta"].get("type") == "text_delta"
    )


STREAMS = [
    "text_partial.jsonl",
    "tool_use_partial.jsonl",
    "thinking.jsonl",
    "background_task.jsonl",
    "subagent.jsonl",
]


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(STREAMS), data=st.data())
def test_any_chunking_of_text_deltas_gives_the_same_events(name: str, data: st.DataObject) -> None:
    stream = frames(name)
    assert normalized(translate(rechunk(stream, data))) == normalized(translate(stream))


def test_partial_messages_on_or_off_give_the_same_events() -> None:
    on = normalized(translate(frames("tool_use_partial.jsonl")))
    off = normalized(translate(frames("tool_use_no_partial.jsonl")))
    assert on == off


NOISE = [
    {"type": "system", "subtype": "status", "status": "requesting"},
    {"type": "system", "subtype": "hook_response", "hook_name": "SessionStart"},
    {"type": "rate_limit_event", "rate_limit_info": {"status": "allowed"}},
    {"type": "tool_progress", "tool_name": "Bash"},
    {"type": "stream_event", "event": {"type": "ping"}},
    {
        "type": "stream_event",
        "parent_tool_use_id": "toolu_x",
        "event": {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": "subagent chatter"},
        },
    },
    {"type": "system", "subtype": "api_retry", "error_status": 529, "error": "overloaded"},
]


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from([*STREAMS, "tool_use_no_partial.jsonl"]), data=st.data())
def test_informational_frames_anywhere_change_nothing_else(name: str, data: st.DataObject) -> None:
    stream = frames(name)
    noisy = list(stream)
    for noise in data.draw(st.lists(st.sampled_from(NOISE), max_size=8)):
        noisy.insert(data.draw(st.integers(1, len(noisy))), noise)
    assert normalized(translate(noisy)) == normalized(translate(stream))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
frame_like = st.fixed_dictionaries(
    {"type": st.sampled_from(["system", "stream_event", "assistant", "user", "result", "x"])},
    optional={
        "subtype": st.sampled_from(["init", "api_retry", "success", "status"]) | json_values,
        "session_id": st.text(max_size=6) | json_values,
        "message": st.fixed_dictionaries(
            {},
            optional={
                "content": st.lists(
                    st.fixed_dictionaries(
                        {"type": st.sampled_from(["text", "tool_use", "tool_result"])},
                        optional={
                            "text": json_values,
                            "id": json_values,
                            "tool_use_id": json_values,
                            "input": json_values,
                        },
                    ),
                    max_size=3,
                )
                | json_values
            },
        )
        | json_values,
        "event": json_values,
        "usage": json_values,
        "is_error": json_values,
        "error_status": json_values,
        "parent_tool_use_id": json_values,
    },
)


@settings(max_examples=200, deadline=None)
@given(stream=st.lists(frame_like | json_values, max_size=12), code=st.integers(-1, 255))
def test_any_frames_translate_without_raising(stream: list[Any], code: int) -> None:
    t = ClaudeTranslator()
    events = translate(stream, t)
    assert all(isinstance(e, Event) for e in events)
    terminal = t.finish(ExitStatus(code), "stderr")
    assert terminal is None or terminal.is_terminal
    assert (terminal is None) == any(e.is_terminal for e in events)


@pytest.mark.parametrize(("baseline", "expected"), [(None, 0.6), (0.4, 0.2), (0.9, 0.0)])
def test_a_resumed_turn_reports_its_own_cost(baseline: float | None, expected: float) -> None:
    # total_cost_usd is the session's running total; the turn's cost is the rest, never < 0.
    stream = frames("text_partial.jsonl")
    stream[-1] = {**stream[-1], "total_cost_usd": 0.6}
    totals = None if baseline is None else SessionTotals(cost_usd=baseline)
    translator = ClaudeBackend().translator(ClaudeBackend().parse_options({}), baseline=totals)
    (result,) = [e for e in translate(stream, translator) if isinstance(e, ResultEvent)]
    assert result.cost_usd == pytest.approx(expected)


def test_a_failed_turn_reports_its_own_cost_and_usage() -> None:
    # An error result is billed like a success: the share of the running total since the
    # baseline, and this run's usage, on the terminal ErrorEvent.
    stream = frames("max_turns.jsonl")
    stream[-1] = {**stream[-1], "total_cost_usd": 0.6}
    translator = ClaudeBackend().translator(
        ClaudeBackend().parse_options({}), baseline=SessionTotals(cost_usd=0.4)
    )
    (error,) = [e for e in translate(stream, translator) if isinstance(e, ErrorEvent)]
    assert error.cost_usd == pytest.approx(0.2)
    assert error.usage == Usage(
        input_tokens=9,
        output_tokens=18,
        cache_creation_input_tokens=4211,
        cache_read_input_tokens=36120,
    )


@pytest.mark.parametrize(
    ("name", "baseline", "expected"),
    [
        # A new session: the result's usage is all zeros, modelUsage has the call.
        ("2.1.332/max_budget.jsonl", None, Usage(input_tokens=10, output_tokens=5)),
        # Resumed after that turn (10 in, 5 out): usage says one call, modelUsage the
        # session's three; the turn made two.
        (
            "2.1.332/max_budget_resumed.jsonl",
            Usage(input_tokens=10, output_tokens=5),
            Usage(input_tokens=20, output_tokens=10),
        ),
    ],
)
def test_a_turn_the_cli_budget_ended_counts_its_calls(
    name: str, baseline: Usage | None, expected: Usage
) -> None:
    totals = None if baseline is None else SessionTotals(usage=baseline, cost_usd=0.00014)
    translator = ClaudeBackend().translator(ClaudeBackend().parse_options({}), baseline=totals)
    events = translate(frames(name), translator)
    error = events[-1]
    assert isinstance(error, ErrorEvent) and error.reason is StopReason.CLI_ERROR
    assert "Reached maximum budget" in error.message
    assert error.usage == expected
    assert events[-2] == UsageEvent(usage=expected)
    assert error.cost_usd == pytest.approx(0.00014 * expected.input_tokens / 10)


def test_the_stream_reports_each_calls_usage_and_its_estimated_cost() -> None:
    # Two calls of claude-sonnet-4-5 ($3 in, $15 out, $3.75 cache writes, $0.30 cache reads
    # per million tokens): each call's input at its message_start, its output at its
    # message_delta; summed over the calls so far.
    events = translate(frames("tool_use_partial.jsonl"))
    streamed = streamed_usage(events)
    assert [summary(e) for e in streamed] == [
        ("usage", 3, 1, 4211, 12040),
        ("usage", 3, 74, 4211, 12040),
        ("usage", 6, 75, 8422, 24080),
        ("usage", 6, 85, 8422, 24080),
    ]
    price = (6 * 3 + 85 * 15 + 8422 * 3.75 + 24080 * 0.3) * 1e-6
    assert streamed[-1].estimated_cost_usd == pytest.approx(price)
    # Without partial messages each assistant frame carries its call's usage as the call
    # started (the output not yet counted): the input is known all the same.
    events = translate(frames("2.1.332/tool_use_bash.jsonl"))
    assert [summary(e)[1:3] for e in streamed_usage(events)] == [(10, 1), (20, 2)]


def test_a_model_without_a_price_streams_usage_without_an_estimate() -> None:
    start = {
        "type": "stream_event",
        "event": {
            "type": "message_start",
            "message": {"id": "m1", "model": "someone-elses-model", "usage": {"input_tokens": 3}},
        },
    }
    (event,) = ClaudeTranslator().feed(start)
    assert event == UsageEvent(usage=Usage(input_tokens=3), estimated_cost_usd=None)


# The driver hands feed() typed frames for the lines ClaudeTranslator.decode accepts and
# dicts for the rest; both must translate alike.
RECORDED = sorted(str(path.relative_to(FIXTURES)) for path in FIXTURES.rglob("*.jsonl"))


def typed_frames(lines: list[bytes]) -> list[Any]:
    return list(FrameBatch(lines, ClaudeTranslator().decode))


@pytest.mark.parametrize("name", RECORDED)
def test_typed_decoding_translates_as_generic_decoding(name: str) -> None:
    lines = [line for line in (FIXTURES / name).read_bytes().splitlines() if line]
    typed = typed_frames(lines)
    assert translate(typed) == translate(frames(name))


def test_stream_assistant_and_user_frames_are_decoded_typed() -> None:
    # Otherwise the test above compares the generic path with itself.
    lines = (FIXTURES / "tool_use_partial.jsonl").read_bytes().splitlines()
    kinds = {
        msgspec.json.decode(line)["type"]
        for line, frame in zip(lines, typed_frames(lines), strict=True)
        if type(frame) is not dict
    }
    assert kinds == {"stream_event", "assistant", "user"}


stream_event_like = st.fixed_dictionaries(
    {"type": st.just("stream_event")},
    optional={
        "session_id": st.sampled_from([SID, "other"]) | json_values,
        "parent_tool_use_id": st.none() | json_values,
        "event": st.fixed_dictionaries(
            {
                "type": st.sampled_from(
                    ["content_block_delta", "message_start", "content_block_stop", "other"]
                )
            },
            optional={
                "index": st.integers(0, 3) | json_values,
                "delta": st.fixed_dictionaries(
                    {"type": st.sampled_from(["text_delta", "input_json_delta", "other"])},
                    optional={"text": st.text(max_size=4) | json_values},
                )
                | json_values,
                "message": st.fixed_dictionaries({}, optional={"model": json_values}) | json_values,
            },
        )
        | json_values,
    },
)


@settings(max_examples=300, deadline=None)
@given(stream=st.lists(frame_like | stream_event_like, max_size=8))
def test_any_frame_translates_the_same_typed_or_not(stream: list[Any]) -> None:
    lines = [msgspec.json.encode(frame) for frame in stream]
    generic = [msgspec.json.decode(line) for line in lines]  # as JSON has it (no inf)
    assert translate(typed_frames(lines)) == translate(generic)


@pytest.mark.parametrize(
    "stream",
    [
        [_delta("ok", 0), _block("ok"), _delta("ok", 1), _block("ok"), _block("ok")],
        [_delta("Hello", 0), _block("Other"), _block("Hello")],
        [_delta("a", 1), _delta("b", 0), _block("b"), _block("a")],
        [_delta("a", 0), _delta("b", 1), _abandoned(1), _block("a"), _abandoned(0)],
    ],
)
def test_streamed_blocks_match_alike_typed_or_not(stream: list[Any]) -> None:
    lines = [msgspec.json.encode(frame) for frame in stream]
    assert translate(typed_frames(lines)) == translate(stream)


def test_a_recorded_usage_limit_carries_its_reset() -> None:
    """2.1.332 on a subscription login whose window is spent: the rejected rate_limit_event's
    resetsAt is the turn's resets_at; USAGE_LIMIT, not retryable, status 429."""
    stream = frames("2.1.332/usage_limit.jsonl")
    (limit,) = [f for f in stream if isinstance(f, dict) and f["type"] == "rate_limit_event"]
    terminal = translate(stream)[-1]
    assert isinstance(terminal, ErrorEvent)
    assert (terminal.reason, terminal.status, terminal.retryable) == (
        StopReason.USAGE_LIMIT,
        429,
        False,
    )
    assert terminal.resets_at == limit["rate_limit_info"]["resetsAt"]
    assert terminal.message.startswith("You've hit your 5-hour limit · resets ")


def test_a_recorded_prompt_too_long_is_context_exhausted() -> None:
    terminal = translate(frames("2.1.332/prompt_too_long.jsonl"))[-1]
    assert isinstance(terminal, ErrorEvent)
    assert (terminal.reason, terminal.status, terminal.retryable, terminal.resets_at) == (
        StopReason.CONTEXT_EXHAUSTED,
        400,
        False,
        None,
    )


def test_a_401_after_an_answered_call_is_an_expired_credential() -> None:
    """The recorded turn's first call was answered, its next got 401: the fatal api_retry
    ends it CREDENTIAL_EXPIRED at once."""
    stream = frames("2.1.332/expired_token.jsonl")
    events = translate(stream)
    (terminal,) = [e for e in events if e.is_terminal]
    assert isinstance(terminal, ErrorEvent)
    assert (terminal.reason, terminal.status, terminal.retryable) == (
        StopReason.CREDENTIAL_EXPIRED,
        401,
        False,
    )
    assert "after it had accepted them" in terminal.message
    # Without the answered call, the same 401 is a credential that never worked.
    retry = next(f for f in stream if isinstance(f, dict) and f.get("subtype") == "api_retry")
    *_, first = ClaudeTranslator().feed(retry)
    assert isinstance(first, ErrorEvent) and first.reason is StopReason.AUTHENTICATION_FAILED


def test_a_401_in_a_session_whose_earlier_turns_were_answered_is_an_expired_credential() -> None:
    retry = {"type": "system", "subtype": "api_retry", "error_status": 401, "error": "x"}
    backend = ClaudeBackend()
    options = backend.parse_options({})
    worked = SessionTotals(usage=Usage(input_tokens=10), turns=1)
    (event,) = backend.translator(options, baseline=worked).feed(retry)
    assert isinstance(event, ErrorEvent) and event.reason is StopReason.CREDENTIAL_EXPIRED
    # Only failed turns before (no tokens counted): the credential may never have worked.
    (event,) = backend.translator(options, baseline=SessionTotals(turns=2)).feed(retry)
    assert isinstance(event, ErrorEvent) and event.reason is StopReason.AUTHENTICATION_FAILED


def test_an_expired_token_result_is_an_expired_credential() -> None:
    """The CLI's own words, where a result says them (the fatal api_retry not seen)."""
    stream = [f for f in frames("2.1.332/expired_token.jsonl") if f.get("type") == "result"]
    (terminal,) = [e for e in translate(stream) if e.is_terminal]
    assert isinstance(terminal, ErrorEvent)
    assert terminal.reason is StopReason.CREDENTIAL_EXPIRED
