"""The pi backend as pure functions: its options, its command, and its frames (in the
shapes pi 0.73.1 printed against the fake Anthropic API) translated to events."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest

from agentrt import InvalidOptions, StopReason
from agentrt.backend import (
    ControlAnswer,
    ErrorEvent,
    Event,
    ExitStatus,
    ProtocolError,
    ResultEvent,
    SessionEvent,
    TextEvent,
    ToolResultEvent,
    ToolUseEvent,
    UsageEvent,
)
from agentrt.backends.pi import PiBackend, PiTranslator

ROOT = Path(__file__).resolve().parent.parent
BACKEND = PiBackend()
SESSION = "01a24f1d-9d0d-7465-b8e0-c0d1f5b6176b"
CLEAN = ExitStatus(0)


def options(**raw: Any) -> Any:
    return BACKEND.parse_options(raw)


def assistant(text: str = "", *, stop: str = "stop", error: str | None = None) -> dict[str, Any]:
    usage = {"input": 10, "output": 5, "cacheRead": 2, "cacheWrite": 1, "cost": {"total": 0.5}}
    content = [{"type": "text", "text": text}] if text else []
    message = {"role": "assistant", "content": content, "usage": usage, "stopReason": stop}
    return {**message, "model": "claude-fake"} | ({"errorMessage": error} if error else {})


def translate(frames: list[Any], exit: ExitStatus = CLEAN, stderr: str = "") -> list[Event]:
    translator = PiTranslator(model="claude-fake")
    events = [e for frame in frames for e in translator.feed(frame)]
    end = translator.finish(exit, stderr)
    return events + ([end] if end is not None else [])


SESSION_FRAME = {"type": "session", "version": 3, "id": SESSION, "cwd": "/p"}


def test_the_prompt_goes_on_stdin_and_the_session_by_its_whole_id(tmp_path: Path) -> None:
    o = options(provider="fake", model="m", tools=["read", "ls"], pi_home=str(tmp_path))
    command = BACKEND.command(o, "the prompt", session_id=SESSION)
    assert command.argv == (
        "pi", "--mode", "json", "-p", "--session", SESSION,
        "--provider", "fake", "--model", "m", "--tools", "read,ls",
    )  # fmt: skip
    assert command.stdin == b"the prompt"
    assert command.env["PI_CODING_AGENT_DIR"] == str(tmp_path)
    assert command.env["PI_OFFLINE"] == "1"
    with pytest.raises(InvalidOptions) as refused:
        BACKEND.command(o, "x", session_id="01a24f1d")
    assert refused.value.key == "session_id"


def test_the_models_file_is_written_into_the_home_and_never_shown(tmp_path: Path) -> None:
    models = {"providers": {"fake": {"baseUrl": "http://127.0.0.1:1", "apiKey": "sk-secret"}}}
    o = options(pi_home=str(tmp_path), models=models)
    (config,) = BACKEND.command(o, "x", session_id=None).config_files
    assert config.path == str(tmp_path / "models.json")
    assert json.loads(config.content) == models
    assert "sk-secret" not in repr(o)
    with pytest.raises(InvalidOptions) as refused:
        options(models=models)
    assert refused.value.key == "models" and "sk-secret" not in str(refused.value)


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ({"modle": "m"}, "modle"),
        ({"thinking": "max"}, "thinking"),
        ({"tools": "read"}, "tools"),
        ({"tools": ["read,bash"]}, "tools"),
        ({"extra_args": ["--session", "x"]}, "extra_args"),
        ({"pi_home": "relative"}, "pi_home"),
        ({"model": "-x"}, "model"),
    ],
)
def test_bad_options_are_refused_naming_the_key(raw: dict[str, Any], key: str) -> None:
    with pytest.raises(InvalidOptions) as refused:
        options(**raw)
    assert refused.value.key == key


def test_an_answer_streams_its_deltas_then_usage_and_the_result() -> None:
    delta = {"type": "message_update", "assistantMessageEvent": {"type": "text_delta"}}
    events = translate(
        [
            SESSION_FRAME,
            {"type": "agent_start"},
            {"type": "message_end", "message": {"role": "user", "content": []}},
            {**delta, "assistantMessageEvent": {"type": "text_delta", "delta": "hel"}},
            {**delta, "assistantMessageEvent": {"type": "text_delta", "delta": "lo"}},
            {"type": "message_end", "message": assistant("hello")},
            {"type": "agent_end", "messages": []},
        ]
    )
    assert isinstance(events[0], SessionEvent) and events[0].session_id == SESSION
    assert [e.text for e in events if isinstance(e, TextEvent)] == ["hel", "lo", ""]
    usage, result = events[-2:]
    assert isinstance(usage, UsageEvent) and isinstance(result, ResultEvent)
    assert (result.text, result.session_id, result.cost_usd) == ("hello", SESSION, 0.5)
    assert result.usage is not None
    assert (result.usage.input_tokens, result.usage.cache_read_input_tokens) == (10, 2)


def test_a_tool_call_and_its_result() -> None:
    events = translate(
        [
            SESSION_FRAME,
            {"type": "tool_execution_start", "toolCallId": "t1", "toolName": "bash", "args": {}},
            {
                "type": "tool_execution_end",
                "toolCallId": "t1",
                "toolName": "bash",
                "result": {"content": [{"type": "text", "text": "hi\n"}]},
                "isError": False,
            },
            {"type": "message_end", "message": assistant("done")},
            {"type": "agent_end", "messages": []},
        ]
    )
    use = next(e for e in events if isinstance(e, ToolUseEvent))
    result = next(e for e in events if isinstance(e, ToolResultEvent))
    assert (use.id, use.name, result.tool_use_id, result.content) == ("t1", "bash", "t1", "hi\n")
    assert isinstance(events[-1], ResultEvent) and events[-1].num_turns == 1


def test_a_failed_run_that_pi_retries_is_not_the_end() -> None:
    overloaded = '529 {"type":"error","error":{"type":"overloaded_error"}}'
    events = translate(
        [
            SESSION_FRAME,
            {"type": "message_end", "message": assistant(stop="error", error=overloaded)},
            {"type": "agent_end", "messages": []},
            {"type": "auto_retry_start", "attempt": 1, "errorMessage": overloaded},
            {"type": "message_end", "message": assistant("at last")},
            {"type": "agent_end", "messages": []},
        ]
    )
    assert isinstance(events[-1], ResultEvent) and events[-1].text == "at last"
    assert not any(isinstance(e, ErrorEvent) for e in events)


def test_a_failed_run_at_the_end_is_classified_by_its_status() -> None:
    unauthorised = '401 {"type":"error","error":{"type":"authentication_error"}}'
    events = translate(
        [
            SESSION_FRAME,
            {"type": "message_end", "message": assistant(stop="error", error=unauthorised)},
            {"type": "agent_end", "messages": []},
        ]
    )
    error = events[-1]
    assert isinstance(error, ErrorEvent)
    assert (error.reason, error.status, error.retryable) == (
        StopReason.AUTHENTICATION_FAILED,
        401,
        False,
    )


def test_a_killed_pi_and_a_lost_session() -> None:
    killed = translate([SESSION_FRAME], ExitStatus(None, signal.SIGKILL))[-1]
    assert isinstance(killed, ErrorEvent) and killed.reason is StopReason.PROCESS_CRASHED
    assert killed.session_id == SESSION
    lost = translate([], ExitStatus(1), f"No session found matching '{SESSION}'\n")[-1]
    assert isinstance(lost, ErrorEvent) and lost.reason is StopReason.SESSION_LOST
    assert lost.session_id == SESSION


def test_the_pinned_version_is_the_one_the_backend_was_written_for() -> None:
    pinned = (ROOT / "tests" / "realcli" / "PI_VERSION").read_text().strip()
    assert pinned == BACKEND.written_for_version == BACKEND.info().written_for


def test_a_live_process_opens_names_its_session_and_is_interrupted_in_band() -> None:
    live = BACKEND.live(options(model="m"), session_id=SESSION)
    assert live.command.argv == ("pi", "--mode", "rpc", "--session", SESSION, "--model", "m")
    opening = [json.loads(line) for line in live.opening().splitlines()]
    assert [(o["type"], o.get("enabled")) for o in opening] == [
        ("set_auto_retry", False),
        ("get_state", None),
    ]
    assert not live.ready and live.interrupt() == b""
    state = {"type": "response", "command": "get_state", "success": True}
    assert live.classify(state) == "control"
    live.control({**state, "data": {"sessionId": SESSION}})
    assert live.ready
    assert json.loads(live.prompt("hi")) == {"id": "agentrt-3", "type": "prompt", "message": "hi"}
    assert json.loads(live.interrupt())["type"] == "abort"
    assert live.classify({"type": "agent_end"}) == "end"
    assert live.classify({"type": "message_update"}) == "event"
    # A turn on the live process names its session first, and an aborted run is the
    # interrupt's end.
    translator = live.translator()
    events = [e for f in [{"type": "agent_start"}] for e in translator.feed(f)]
    assert isinstance(events[0], SessionEvent) and events[0].session_id == SESSION
    translator.feed({"type": "message_end", "message": assistant(stop="aborted")})
    (end,) = translator.feed({"type": "agent_end", "messages": []})
    assert isinstance(end, ErrorEvent) and end.reason is StopReason.INTERRUPTED


def test_a_refused_command_breaks_the_live_protocol_but_a_late_abort_does_not() -> None:
    live = BACKEND.live(options(), session_id=None)
    assert live.control({"type": "response", "command": "abort", "success": False}) == b""
    with pytest.raises(ProtocolError):
        live.control({"type": "response", "command": "prompt", "success": False, "error": "x"})


def test_a_live_process_takes_a_steer_answered_by_pis_acknowledgement() -> None:
    assert "steer" in BACKEND.capabilities(options()).calls
    live = BACKEND.live(options(), session_id=SESSION)
    state = {"type": "response", "command": "get_state", "success": True}
    live.control({**state, "data": {"sessionId": SESSION}})
    live.prompt("hi")
    request = live.request("steer", "also this")
    line = json.loads(request.line)
    assert line == {"id": request.request_id, "type": "steer", "message": "also this"}
    ack = {"id": request.request_id, "type": "response", "command": "steer", "success": True}
    assert live.classify(ack) == "control"
    assert live.control(ack) == ControlAnswer(request.request_id)
    assert request.decode(None) is None
    # A refusal is the call's error, not the protocol's end.
    refused = {**ack, "success": False, "error": "no"}
    assert live.control(refused) == ControlAnswer(request.request_id, error='"no"')
