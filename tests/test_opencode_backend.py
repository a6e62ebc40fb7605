"""The opencode backend as pure functions: its options, its command, and its frames (in
the shapes opencode 1.18.33 printed against the fake Anthropic API) translated to events."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest

from agentrt import InvalidOptions, StopReason
from agentrt.backend import (
    ErrorEvent,
    Event,
    ExitStatus,
    InitEvent,
    ResultEvent,
    SessionEvent,
    TextEvent,
    ToolResultEvent,
    ToolUseEvent,
    UsageEvent,
)
from agentrt.backends.opencode import OpencodeBackend, OpencodeTranslator

ROOT = Path(__file__).resolve().parent.parent
BACKEND = OpencodeBackend()
SESSION = "ses_db0e0e35dffeDDfGSgoAHi5uC8"


def options(**raw: Any) -> Any:
    return BACKEND.parse_options(raw)


def frame(kind: str, **part: Any) -> dict[str, Any]:
    return {"type": kind, "sessionID": SESSION, "part": {"sessionID": SESSION, **part}}


def step_finish(reason: str = "stop") -> dict[str, Any]:
    tokens = {"input": 10, "output": 5, "reasoning": 0, "cache": {"write": 1, "read": 2}}
    return frame("step_finish", reason=reason, tokens=tokens, cost=0.25)


def translate(frames: list[Any], exit: ExitStatus, stderr: str = "") -> list[Event]:
    translator = OpencodeTranslator(model="fake/claude-fake")
    events = [e for f in frames for e in translator.feed(f)]
    end = translator.finish(exit, stderr)
    return events + ([end] if end is not None else [])


def test_the_prompt_goes_on_stdin_and_the_config_in_a_private_file() -> None:
    config = {"provider": {"fake": {"options": {"apiKey": "sk-secret"}}}}
    o = options(model="fake/claude-fake", config=config, agent="plan")
    command = BACKEND.command(o, "the prompt", session_id=SESSION)
    assert command.argv == (
        "opencode", "run", "--format", "json", "--title", "agentrt", "--session", SESSION,
        "--model", "fake/claude-fake", "--agent", "plan",
    )  # fmt: skip
    assert command.stdin == b"the prompt"
    # The config (its keys) never on argv nor in a plain variable: a 0600 file it names.
    secret = command.env_files["OPENCODE_CONFIG"]
    assert json.loads(secret.content) == config
    assert "sk-secret" not in repr(command) + repr(o) + json.dumps(dict(command.env))
    assert command.env["OPENCODE_DISABLE_AUTOUPDATE"] == "1"
    with pytest.raises(InvalidOptions) as refused:
        BACKEND.command(o, "x", session_id="--help")
    assert refused.value.key == "session_id"


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ({"modle": "a/b"}, "modle"),
        ({"model": "claude"}, "model"),
        ({"auto": "yes"}, "auto"),
        ({"config": "{}"}, "config"),
        ({"extra_args": ["--session=x"]}, "extra_args"),
        ({"title": "-t"}, "title"),
    ],
)
def test_bad_options_are_refused_naming_the_key(raw: dict[str, Any], key: str) -> None:
    with pytest.raises(InvalidOptions) as refused:
        options(**raw)
    assert refused.value.key == key


def test_a_clean_exit_after_its_steps_is_the_result() -> None:
    events = translate(
        [
            frame("step_start", messageID="m1"),
            frame(
                "tool_use",
                messageID="m1",
                tool="bash",
                callID="t1",
                state={"status": "completed", "input": {"command": "echo"}, "output": "hi\n"},
            ),
            step_finish("tool-calls"),
            frame("step_start", messageID="m2"),
            frame("text", messageID="m2", text="the answer"),
            step_finish(),
        ],
        ExitStatus(0),
    )
    assert isinstance(events[0], SessionEvent) and events[0].session_id == SESSION
    assert sum(isinstance(e, SessionEvent) for e in events) == 1
    assert sum(isinstance(e, InitEvent) for e in events) == 1
    use = next(e for e in events if isinstance(e, ToolUseEvent))
    result = next(e for e in events if isinstance(e, ToolResultEvent))
    assert (use.id, use.name, result.content, result.is_error) == ("t1", "bash", "hi\n", False)
    assert [e.text for e in events if isinstance(e, TextEvent)] == ["the answer", ""]
    assert isinstance(events[-2], UsageEvent)
    end = events[-1]
    assert isinstance(end, ResultEvent)
    assert (end.text, end.session_id, end.cost_usd, end.num_turns) == (
        "the answer",
        SESSION,
        0.5,
        2,
    )
    assert end.usage is not None and end.usage.output_tokens == 10


def test_an_error_frame_is_classified_by_its_status() -> None:
    data = {"message": "invalid x-api-key", "statusCode": 401, "isRetryable": False}
    error = {"type": "error", "sessionID": SESSION, "error": {"name": "APIError", "data": data}}
    events = translate([error], ExitStatus(1))
    end = events[-1]
    assert isinstance(end, ErrorEvent)
    assert (end.reason, end.status, end.session_id) == (
        StopReason.AUTHENTICATION_FAILED,
        401,
        SESSION,
    )


def test_a_killed_opencode_a_lost_session_and_an_exit_without_a_step() -> None:
    killed = translate([frame("step_start")], ExitStatus(None, signal.SIGKILL))[-1]
    assert isinstance(killed, ErrorEvent) and killed.reason is StopReason.PROCESS_CRASHED
    lost = translate([], ExitStatus(1), "\x1b[91m\x1b[1mError: \x1b[0mSession not found\n")[-1]
    assert isinstance(lost, ErrorEvent) and lost.reason is StopReason.SESSION_LOST
    empty = translate([], ExitStatus(0))[-1]
    assert isinstance(empty, ErrorEvent) and empty.reason is StopReason.CLI_ERROR
    # A step begun, then a clean exit with no step's end: its output was cut at the exit.
    cut = translate([frame("step_start")], ExitStatus(0))[-1]
    assert isinstance(cut, ErrorEvent) and cut.reason is StopReason.CLI_ERROR
    assert "before printing its turn's end" in cut.message and cut.session_id == SESSION


def test_the_pinned_version_is_the_one_the_backend_was_written_for() -> None:
    pinned = (ROOT / "tests" / "realcli" / "OPENCODE_VERSION").read_text().strip()
    assert pinned == BACKEND.written_for_version == BACKEND.info().written_for


def test_warm_and_approvals_run_opencode_acp_with_the_flags_in_its_config() -> None:
    config = {"provider": {"fake": {"options": {"apiKey": "sk-secret"}}}, "agent": {"x": {}}}
    o = options(model="fake/claude-fake", config=config, agent="plan", cwd="/")
    caps = BACKEND.capabilities(o)
    assert caps.live and caps.approvals and caps.per_turn and caps.version_probe
    live = BACKEND.live(o, session_id=SESSION, approvals=True)
    command = live.command
    assert command.argv == ("opencode", "acp")
    assert command.cwd == "/"
    # What `run` takes as flags goes in the config file: the model, the agent, and the
    # "title" agent off (no model call for a title); the user's agents stay.
    written = json.loads(command.env_files["OPENCODE_CONFIG"].content)
    assert written == {
        **config,
        "agent": {"x": {}, "title": {"disable": True}},
        "model": "fake/claude-fake",
        "default_agent": "plan",
    }
    # Its loopback server gets a password of its own, a new one per process, never on argv.
    password = command.env["OPENCODE_SERVER_PASSWORD"]
    assert len(password) >= 24
    assert password != BACKEND.live(o, session_id=None).command.env["OPENCODE_SERVER_PASSWORD"]
    assert "sk-secret" not in repr(command) and password not in repr(command)
    # The session it loads is checked as for --session.
    with pytest.raises(InvalidOptions) as refused:
        BACKEND.live(o, session_id="--help")
    assert refused.value.key == "session_id"


def test_extra_args_keep_an_agent_on_opencode_run_naming_why() -> None:
    caps = BACKEND.capabilities(options(extra_args=["--variant", "high"]))
    assert not caps.live
    assert caps.not_live is not None and "extra_args" in caps.not_live


def permission_request(live: Any) -> bytes:
    """``live`` opened on a new session, then asked for a permission."""
    live.opening()
    answer = {"protocolVersion": 1, "agentCapabilities": {"loadSession": True}}
    live.control({"jsonrpc": "2.0", "id": 0, "result": answer})
    live.control({"jsonrpc": "2.0", "id": 1, "result": {"sessionId": SESSION}})
    asked = {
        "sessionId": SESSION,
        "toolCall": {"toolCallId": "t1", "kind": "execute", "title": "touch x"},
        "options": [
            {"optionId": "once", "kind": "allow_once", "name": "Allow once"},
            {"optionId": "reject", "kind": "reject_once", "name": "Reject"},
        ],
    }
    request = {"jsonrpc": "2.0", "id": 7, "method": "session/request_permission"}
    answered = live.control({**request, "params": asked})
    assert isinstance(answered, bytes)
    return answered


@pytest.mark.parametrize(("auto", "outcome"), [(False, "reject"), (True, "once")])
def test_without_approve_tool_auto_decides_what_opencode_asks(auto: bool, outcome: str) -> None:
    live = BACKEND.live(options(auto=auto, cwd="/"), session_id=None)
    answered = json.loads(permission_request(live))
    assert answered["id"] == 7
    assert answered["result"]["outcome"] == {"outcome": "selected", "optionId": outcome}
