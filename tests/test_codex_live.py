"""`CodexBackend.live`: the app-server protocol (lines written, frames classified, answers)
and the translator of its notifications, with plain data in the shapes codex 0.171.0
prints, and a session recorded from it (tests/fixtures/codex-app-server/, made by
tests/realcli/capture_codex_live.py; tests/realcli/test_codex_live.py drives the binary)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentrt import (
    Allow,
    Deny,
    ErrorEvent,
    Event,
    RawEvent,
    ResultEvent,
    SessionEvent,
    StopReason,
    TextEvent,
    ToolRequest,
    ToolResultEvent,
    ToolUseEvent,
    Usage,
    UsageEvent,
)
from agentrt.backend import (
    Capabilities,
    ControlAnswer,
    ExitStatus,
    LiveBackend,
    ProtocolError,
    SessionTotals,
    ToolApproval,
    redact,
)
from agentrt.backends.codex import CodexBackend, CodexLive, CodexLiveTranslator

SESSION = Path(__file__).parent / "fixtures" / "codex-app-server" / "0.171.0" / "session.jsonl"
THREAD = "01a23174-c113-7183-a689-b9493942ed4f"
TURN = "01a23174-c13c-7580-bacf-e3a4ff5f593c"
OTHER_TURN = "01a23174-0598-7fd1-af01-8d4e0a5d8a57"
backend = CodexBackend(environ={"PATH": "/usr/bin"})


def live(session_id: str | None = None, **raw: Any) -> CodexLive:
    protocol = backend.live(backend.parse_options(raw), session_id=session_id)
    assert protocol is not None
    return protocol


def lines(data: bytes) -> list[Any]:
    assert data.endswith(b"\n")
    return [json.loads(line) for line in data.splitlines()]


def answer(request_id: int, result: Any) -> dict[str, Any]:
    return {"id": request_id, "result": result}


def ready(protocol: CodexLive) -> CodexLive:
    """``protocol`` after codex answered its opening."""
    initialize, _, thread = lines(protocol.opening())
    assert protocol.control(answer(initialize["id"], {"userAgent": "agentrt/0.171.0"})) == b""
    assert not protocol.ready
    assert protocol.control(answer(thread["id"], {"thread": {"id": THREAD}})) == b""
    return protocol


def started(protocol: CodexLive, text: str = "Hello") -> int:
    """Start a turn and answer its turn/start with TURN; the request's id."""
    (request,) = lines(protocol.prompt(text))
    assert protocol.classify(answer(request["id"], {"turn": {"id": TURN}})) == "control"
    assert protocol.control(answer(request["id"], {"turn": {"id": TURN}})) == b""
    return int(request["id"])


def note(method: str, turn_id: str | None = TURN, **params: Any) -> dict[str, Any]:
    """A notification of ``method`` about ``turn_id`` (None: about the thread only)."""
    named = {} if turn_id is None else {"turnId": turn_id}
    return {"method": method, "params": {"threadId": THREAD, **named, **params}}


def completed(status: str = "completed", error: Any = None) -> dict[str, Any]:
    turn = {"id": TURN, "items": [], "status": status, "error": error}
    return {"method": "turn/completed", "params": {"threadId": THREAD, "turn": turn}}


def token_usage(inputs: int, cached: int, outputs: int) -> dict[str, Any]:
    total = {
        "inputTokens": inputs,
        "cachedInputTokens": cached,
        "cacheWriteInputTokens": 0,
        "outputTokens": outputs,
        "reasoningOutputTokens": 0,
        "totalTokens": inputs + outputs,
    }
    return note("thread/tokenUsage/updated", tokenUsage={"total": total, "last": total})


def item(method: str, **fields: Any) -> dict[str, Any]:
    return note(method, item=fields)


# -- the protocol --------------------------------------------------------------------------


def test_the_codex_backend_is_a_live_backend_and_its_command_is_app_server() -> None:
    assert isinstance(backend, LiveBackend)
    protocol = live(
        binary="/opt/codex",
        cwd="/work",
        codex_home="/codex",
        config={"model_reasoning_effort": "low"},
    )
    command = protocol.command
    assert command.argv == (
        *("/opt/codex", "app-server", "--listen", "stdio://"),
        *("-c", "check_for_update_on_startup=false"),
        *("-c", 'model_reasoning_effort="low"'),
    )
    assert command.cwd == "/work" and command.env["CODEX_HOME"] == "/codex"
    assert command.stdin == b""


def test_the_opening_initializes_then_starts_a_thread_that_never_asks_for_approval() -> None:
    initialize, initialized, start = lines(
        live(cwd="/work", model="gpt-5.5", sandbox="workspace-write").opening()
    )
    assert initialize["method"] == "initialize"
    assert initialize["params"]["clientInfo"]["name"] == "agentrt"
    assert initialized == {"method": "initialized"}
    assert start["method"] == "thread/start"
    assert start["params"] == {
        "approvalPolicy": "never",
        "cwd": "/work",
        "model": "gpt-5.5",
        "sandbox": "workspace-write",
    }
    assert initialize["id"] != start["id"]


def test_the_opening_resumes_the_saved_thread_with_its_sandbox() -> None:
    *_, resume = lines(live(THREAD, approval="bypass").opening())
    assert resume["method"] == "thread/resume"
    assert resume["params"] == {
        "threadId": THREAD,
        "excludeTurns": True,
        "approvalPolicy": "never",
        "sandbox": "danger-full-access",
    }


@pytest.mark.parametrize(
    "raw",
    [
        {"approval": "approve-for-me"},
        {"profile": "work"},
        {"images": ["a.png"]},
        {"output_schema": {"type": "object"}},
        {"extra_args": ["--oss"]},
    ],
)
def test_options_only_exec_takes_run_one_process_per_turn(raw: dict[str, Any]) -> None:
    options = backend.parse_options(raw)
    capabilities = backend.capabilities(options)
    assert capabilities.live is False and capabilities.approvals is False
    assert capabilities.not_live is not None and next(iter(raw)) in capabilities.not_live
    with pytest.raises(ValueError, match="codex exec only"):
        backend.live(options, session_id=None)


def test_the_process_is_ready_once_the_thread_is_named() -> None:
    protocol = ready(live())
    assert protocol.ready and protocol.thread_id == THREAD
    assert protocol.translator().feed(note("turn/started"))[0] == SessionEvent(session_id=THREAD)


@pytest.mark.parametrize("request_index", [0, 2])
def test_a_refused_opening_is_a_protocol_error(request_index: int) -> None:
    protocol = live(THREAD)
    request = lines(protocol.opening())[request_index]
    error = {"code": -32600, "message": f"no rollout found for thread id {THREAD}"}
    with pytest.raises(ProtocolError, match=f"refused {request['method']}.*no rollout found"):
        protocol.control({"id": request["id"], "error": error})
    assert not protocol.ready


def test_an_answer_to_no_request_and_a_thread_answer_without_a_thread_are_protocol_errors() -> None:
    protocol = live()
    *_, start = lines(protocol.opening())
    with pytest.raises(ProtocolError, match="did not make"):
        protocol.control(answer(99, {}))
    with pytest.raises(ProtocolError, match="names no thread"):
        protocol.control(answer(start["id"], {"thread": None}))


def test_a_request_of_codexs_gets_an_error_answer_with_its_id() -> None:
    protocol = ready(live())
    request = {"id": 0, "method": "item/commandExecution/requestApproval", "params": {}}
    assert protocol.classify(request) == "control"
    (reply,) = lines(protocol.control(request))
    assert reply["id"] == 0 and reply["error"]["code"] == -32601
    assert "item/commandExecution/requestApproval" in reply["error"]["message"]


def test_with_approvals_codex_asks_and_the_answer_accepts_or_declines() -> None:
    protocol = backend.live(backend.parse_options({}), session_id=None, approvals=True)
    assert protocol is not None
    _, _, thread = lines(protocol.opening())
    assert thread["params"]["approvalPolicy"] == "untrusted"
    ready(protocol)
    request = {
        "id": 3,
        "method": "item/commandExecution/requestApproval",
        "params": {"itemId": "call_1", "command": "rm -rf x", "cwd": "/w"},
    }
    ask = protocol.control(request)
    assert isinstance(ask, ToolApproval)
    assert ask.request == ToolRequest(
        "command_execution", {"command": "rm -rf x", "cwd": "/w"}, "call_1"
    )
    assert lines(ask.answer(Allow())) == [{"id": 3, "result": {"decision": "accept"}}]
    assert lines(ask.answer(Deny("no"))) == [{"id": 3, "result": {"decision": "decline"}}]
    # codex cannot run another command than the one it asked about.
    changed = Allow(updated_input={"command": "ls"})
    assert lines(ask.answer(changed)) == [{"id": 3, "result": {"decision": "decline"}}]
    patch = {"id": 4, "method": "item/fileChange/requestApproval", "params": {"itemId": "p1"}}
    file_change = protocol.control(patch)
    assert isinstance(file_change, ToolApproval)
    assert file_change.request.tool_name == "file_change"


def test_codex_runs_live_with_approvals_but_has_no_hooks() -> None:
    # Its version is asked for (`codex --version`): neither exec nor the turn's frames say it.
    assert backend.capabilities(backend.parse_options({})) == Capabilities(
        live=True, approvals=True, version_probe=True, calls=frozenset(("steer",))
    )
    exec_only = backend.capabilities(backend.parse_options({"profile": "p"}))
    assert exec_only.version_probe and not exec_only.live


def test_a_turn_starts_with_its_prompt_and_ends_at_its_turn_completed() -> None:
    protocol = ready(live())
    assert protocol.classify(note("thread/status/changed", None)) == "control"
    (request,) = lines(protocol.prompt("What is 2+2?"))
    assert request["method"] == "turn/start"
    assert request["params"] == {
        "threadId": THREAD,
        "input": [{"type": "text", "text": "What is 2+2?", "text_elements": []}],
    }
    # Before codex names the turn, a notification naming a turn is taken as this turn's.
    assert protocol.classify(note("turn/started")) == "event"
    protocol.control(answer(request["id"], {"turn": {"id": TURN}}))
    assert protocol.classify(item("item/started", type="agentMessage", id="m")) == "event"
    # About the thread, or about an earlier turn (a resume's saved totals): not this turn's.
    assert protocol.classify({"method": "thread/started", "params": {"thread": {}}}) == "control"
    assert protocol.classify(note("thread/tokenUsage/updated", OTHER_TURN)) == "control"
    assert protocol.classify(completed()) == "end"
    assert protocol.classify(note("item/completed")) == "control"  # between turns


def test_a_refused_turn_start_is_a_protocol_error() -> None:
    protocol = ready(live())
    (request,) = lines(protocol.prompt("Hello"))
    with pytest.raises(ProtocolError, match=r"refused turn/start: .*thread not found"):
        protocol.control(
            {"id": request["id"], "error": {"code": -32600, "message": "thread not found"}}
        )


def test_a_prompt_before_the_thread_is_ready_is_a_bug_of_the_caller() -> None:
    with pytest.raises(RuntimeError, match="before the app-server thread is ready"):
        live().prompt("too early")


def test_interrupt_names_the_running_turn() -> None:
    protocol = ready(live())
    assert protocol.interrupt() == b""  # no turn runs
    started(protocol)
    (request,) = lines(protocol.interrupt())
    assert request["method"] == "turn/interrupt"
    assert request["params"] == {"threadId": THREAD, "turnId": TURN}
    # The turn had just ended: codex says so, and the process goes on.
    refused = {"id": request["id"], "error": {"code": -32600, "message": "no active turn"}}
    assert protocol.control(refused) == b""
    protocol.classify(completed("interrupted"))
    assert protocol.interrupt() == b""


def test_a_steer_is_turn_steer_on_the_running_turn() -> None:
    protocol = ready(live())
    started(protocol)
    steer = protocol.request("steer", "Also count the tests.")
    (request,) = lines(steer.line)
    assert request["method"] == "turn/steer"
    assert request["params"] == {
        "threadId": THREAD,
        "input": [{"type": "text", "text": "Also count the tests.", "text_elements": []}],
        "expectedTurnId": TURN,
    }
    assert steer.request_id == str(request["id"])
    accepted = answer(request["id"], {"turnId": TURN})
    assert protocol.classify(accepted) == "control"
    assert protocol.control(accepted) == ControlAnswer(steer.request_id, {"turnId": TURN})
    # Once the turn is over codex refuses it: an answer the caller reads, the process lives.
    late = protocol.request("steer", "Too late.")
    refused = {"id": int(late.request_id), "error": {"code": -32600, "message": "no active turn"}}
    got = protocol.control(refused)
    assert isinstance(got, ControlAnswer) and got.request_id == late.request_id
    assert got.error is not None and "no active turn" in got.error


def test_an_interrupt_before_codex_named_the_turn_is_sent_with_its_answer() -> None:
    protocol = ready(live())
    (start,) = lines(protocol.prompt("Hello"))
    assert protocol.interrupt() == b""
    (request,) = lines(protocol.control(answer(start["id"], {"turn": {"id": TURN}})))
    assert request["method"] == "turn/interrupt" and request["params"]["turnId"] == TURN


# -- a recorded session -------------------------------------------------------------------


def replay() -> tuple[CodexLive, list[list[Event]]]:
    """Drive a protocol through the recorded session (tests/realcli/capture_codex_live.py):
    each line it writes must be the recorded one, at the recorded point; the events of each
    turn, each turn's baseline the earlier turns' usage."""
    protocol = live(cwd="$CWD")
    outbox = lines(protocol.opening())
    turns: list[list[Event]] = []
    translator = protocol.translator()
    totals = SessionTotals()
    for entry in map(json.loads, SESSION.read_text().splitlines()):
        if "write" in entry:
            message = entry["write"]
            if not outbox:  # the client's own move: a prompt or an interrupt
                if message["method"] == "turn/start":
                    translator = protocol.translator(baseline=totals)
                    turns.append([])
                    outbox = lines(protocol.prompt(message["params"]["input"][0]["text"]))
                else:
                    outbox = lines(protocol.interrupt())
            assert outbox.pop(0) == message
            continue
        frame = entry["read"]
        role = protocol.classify(frame)
        if role == "control":
            outbox += lines(reply) if (reply := protocol.control(frame)) else []
            continue
        turns[-1] += translator.feed(frame)
        if role == "end":
            terminal = turns[-1][-1]
            assert isinstance(terminal, ResultEvent | ErrorEvent)
            totals = totals.add(terminal.usage, None)
    assert outbox == []
    return protocol, turns


def test_a_recorded_session_replays_line_for_line() -> None:
    recorded = SESSION.read_text()
    assert redact(recorded) == recorded, "credential-shaped text in the recording"
    protocol, turns = replay()
    thread = protocol.thread_id
    assert thread is not None
    assert all(turn[0] == SessionEvent(session_id=thread) for turn in turns)
    # Text: the streamed delta, then the message's end (nothing the delta missed).
    assert [[e.kind for e in turn[1:]] for turn in turns] == [
        ["text", "text", "usage", "result"],
        ["tool_use", "tool_result", "text", "text", "usage", "result"],
        ["error"],
        ["raw", "error"],  # the error notice, then the failed turn
        ["text", "text", "usage", "result"],
    ]
    one, echo, hang, fail, five = (turn[-1] for turn in turns)
    assert isinstance(one, ResultEvent) and one.text == "One"
    assert one.usage == Usage(input_tokens=2, output_tokens=2, cache_read_input_tokens=1)
    assert isinstance(echo, ResultEvent) and echo.text == "Echoed"
    assert echo.usage == Usage(input_tokens=220, output_tokens=220, cache_read_input_tokens=110)
    tool_result = turns[1][2]
    assert isinstance(tool_result, ToolResultEvent) and not tool_result.is_error
    assert tool_result.content["output"] == "from-the-tool\n"
    assert isinstance(hang, ErrorEvent) and hang.reason is StopReason.INTERRUPTED
    assert isinstance(fail, ErrorEvent) and fail.reason is StopReason.AUTHENTICATION_FAILED
    assert isinstance(five, ResultEvent) and five.text == "Five"
    assert five.usage == Usage(input_tokens=2000, output_tokens=2000, cache_read_input_tokens=1000)


# -- the translator ------------------------------------------------------------------------


def translate(frames: list[Any], **translator: Any) -> list[Any]:
    t = CodexLiveTranslator(session_id=THREAD, **translator)
    return [event for frame in frames for event in t.feed(frame)]


def test_a_completed_turn_streams_its_text_and_reports_its_own_usage() -> None:
    events = translate(
        [
            note("turn/started"),
            item("item/completed", type="userMessage", id="u", content=[]),
            item("item/started", type="agentMessage", id="m", text=""),
            note("item/agentMessage/delta", itemId="m", delta="Hello "),
            note("item/agentMessage/delta", itemId="m", delta="there"),
            item("item/completed", type="agentMessage", id="m", text="Hello there!"),
            token_usage(330, 110, 220),
            note("thread/status/changed", None, status={"type": "idle"}),
            completed(),
        ],
        model="gpt-5.5",
        usage_baseline=Usage(input_tokens=20, output_tokens=20, cache_read_input_tokens=10),
    )
    usage = Usage(input_tokens=200, output_tokens=200, cache_read_input_tokens=100)
    assert [type(e) for e in events] == [
        *(SessionEvent, TextEvent, TextEvent, TextEvent, UsageEvent, ResultEvent)
    ]
    assert events[0] == SessionEvent(session_id=THREAD, model="gpt-5.5")
    assert [(e.text, e.message_boundary) for e in events[1:4]] == [
        ("Hello ", False),
        ("there", False),
        ("!", True),  # the part the deltas did not stream
    ]
    result = events[-1]
    assert events[-2] == UsageEvent(usage=usage)
    assert result.text == "Hello there!" and result.usage == usage
    assert result.session_id == THREAD and result.model == "gpt-5.5"
    assert result.raw["status"] == "completed"


def test_without_a_baseline_the_running_totals_are_the_turns_usage() -> None:
    (*_, result) = translate([token_usage(3, 1, 2), completed()])
    assert result.usage == Usage(input_tokens=2, output_tokens=2, cache_read_input_tokens=1)


def test_a_command_execution_is_a_tool_use_and_its_result() -> None:
    command = {"type": "commandExecution", "id": "call_1", "command": "/bin/bash -lc 'echo hi'"}
    events = translate(
        [
            item("item/started", **command, status="inProgress", aggregatedOutput=None),
            item(
                "item/completed", **command, status="completed", aggregatedOutput="hi\n", exitCode=0
            ),
            item("item/started", **{**command, "id": "call_2"}, status="inProgress"),
            item("item/completed", **{**command, "id": "call_2"}, status="declined"),
        ]
    )
    use, result, declined_use, declined = events[1:]
    assert use == ToolUseEvent(
        id="call_1", name="command_execution", input={"command": command["command"]}
    )
    assert result == ToolResultEvent(
        tool_use_id="call_1",
        content={"output": "hi\n", "exit_code": 0, "status": "completed"},
        is_error=False,
    )
    assert declined_use.id == "call_2" and declined.is_error


def test_other_tool_items_are_named_as_execs() -> None:
    events = translate(
        [
            item(
                "item/completed",
                type="mcpToolCall",
                id="t",
                server="docs",
                tool="search",
                arguments={"q": "x"},
                result={"content": []},
                status="completed",
            ),
            item("item/completed", type="fileChange", id="f", changes=[], status="failed"),
        ]
    )
    assert [(e.kind, getattr(e, "name", None)) for e in events[1:]] == [
        ("tool_use", "mcp__docs__search"),
        ("tool_result", None),
        ("tool_use", "file_change"),
        ("tool_result", None),
    ]
    assert events[-1].is_error


def test_a_failed_turn_is_classified_from_its_error_and_carries_its_usage() -> None:
    message = "unexpected status 401 Unauthorized: bad key sk-abcdefabcdefabcdef123456, url: x"
    error = {
        "message": message,
        "codexErrorInfo": {"httpConnectionFailed": {"httpStatusCode": 401}},
    }
    events = translate(
        [
            note("error", error=error, willRetry=False),
            token_usage(10, 0, 5),
            completed("failed", error),
        ]
    )
    notice, usage_event, failed = events[1:]
    assert isinstance(notice, RawEvent) and notice.note == "codex notice"
    assert "sk-abcdef" not in json.dumps(notice.data)
    assert isinstance(failed, ErrorEvent) and failed.reason is StopReason.AUTHENTICATION_FAILED
    assert failed.status == 401 and "sk-abcdef" not in failed.message
    assert failed.usage == Usage(input_tokens=10, output_tokens=5) == usage_event.usage
    assert failed.session_id == THREAD


def test_an_overloaded_failure_is_retryable() -> None:
    error = {"message": "We\u2019re currently experiencing high demand, which may cause trouble."}
    (*_, failed) = translate([completed("failed", error)])
    assert failed.reason is StopReason.OVERLOADED and failed.retryable


def test_an_interrupted_turn_ends_interrupted_with_what_it_spent() -> None:
    (*_, usage_event, interrupted) = translate([token_usage(10, 0, 5), completed("interrupted")])
    assert isinstance(interrupted, ErrorEvent) and interrupted.reason is StopReason.INTERRUPTED
    assert interrupted.usage == usage_event.usage == Usage(input_tokens=10, output_tokens=5)


def test_the_end_of_the_process_before_the_turn_ended_is_classified() -> None:
    t = CodexLiveTranslator(session_id=THREAD)
    t.feed(note("turn/started"))
    crashed = t.finish(ExitStatus(None, 9), "")
    assert isinstance(crashed, ErrorEvent) and crashed.reason is StopReason.PROCESS_CRASHED
    assert "SIGKILL" in crashed.message and crashed.session_id == THREAD
    t.feed(note("error", error={"message": "stream disconnected before completion: x"}))
    notice = t.finish(ExitStatus(0), "")
    assert isinstance(notice, ErrorEvent) and notice.retryable
    t.feed(completed())
    assert t.finish(ExitStatus(0), "") is None


def test_frames_no_translation_covers_are_kept_raw_and_quiet_ones_dropped() -> None:
    events = translate(
        [
            [1, 2],
            note("turn/diff/updated", diff="..."),
            note("account/rateLimits/updated", None, rateLimits={}),
            item("item/completed", type="reasoning", id="r", summary=[]),
            item("item/completed", type="plan", id="p", text="1. do it"),
            completed(),
            completed(),
        ]
    )
    assert [(e.kind, getattr(e, "note", None)) for e in events[1:]] == [
        ("raw", "not a JSON object"),
        ("raw", None),
        ("raw", "item/completed plan"),
        ("result", None),
        ("raw", None),  # a second verdict is not a second terminal event
    ]


def test_the_protocols_translator_reports_against_the_sessions_baseline() -> None:
    protocol = ready(live(THREAD))
    baseline = SessionTotals(
        usage=Usage(input_tokens=2, output_tokens=2, cache_read_input_tokens=1)
    )
    t = protocol.translator(baseline=baseline)
    t.feed(token_usage(33, 11, 22))
    (*_, result) = t.feed(completed())
    assert result.usage == Usage(input_tokens=20, output_tokens=20, cache_read_input_tokens=10)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
_methods = st.sampled_from(
    ["turn/completed", "item/completed", "item/started", "error", "thread/tokenUsage/updated"]
)
_notes = st.builds(lambda m, p: {"method": m, "params": p}, _methods, _json)


@given(st.lists(_notes | _json, max_size=6))
def test_any_frames_translate_without_raising(frames: list[Any]) -> None:
    t = CodexLiveTranslator(session_id=THREAD)
    for frame in frames:
        t.feed(frame)
    t.finish(ExitStatus(1), "")
