"""The Qwen Code backend as pure functions: its frames (recorded from the pinned 0.24.4
against the fake Anthropic API, tests/fixtures/qwen/) through the shared stream-json
translator and its dialect, its live control protocol, its command and options."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from agentrt import InvalidOptions, StopReason, Usage
from agentrt.backend import (
    Allow,
    AppToolServer,
    Capabilities,
    Deny,
    ErrorEvent,
    Event,
    ExitStatus,
    InitEvent,
    ResultEvent,
    SecretFile,
    SessionEvent,
    SessionTotals,
    TextEvent,
    ToolApproval,
    ToolResultEvent,
    ToolUseEvent,
    UsageEvent,
)
from agentrt.backends.qwen import QwenBackend, QwenTranslator

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "qwen" / "0.24.4"
BACKEND = QwenBackend()
_generic = msgspec.json.Decoder()


def frames(name: str, decode: Any) -> list[Any]:
    """A recorded stream, decoded as the process driver decodes stdout: the translator's
    typed decoder first, the generic one for what it refuses."""
    out = []
    for line in (FIXTURES / f"{name}.jsonl").read_bytes().splitlines():
        try:
            out.append(decode(line))
        except (msgspec.DecodeError, msgspec.ValidationError):
            out.append(_generic.decode(line))
    return out


def translate(name: str, translator: QwenTranslator | None = None) -> list[Event]:
    t = translator or QwenTranslator()
    return [event for frame in frames(name, t.decode) for event in t.feed(frame)]


def options(**raw: Any) -> Any:
    return BACKEND.parse_options({"binary": "qwen", **raw})


def test_a_text_turn() -> None:
    events = translate("text")
    session, init = events[0], events[1]
    assert isinstance(session, SessionEvent) and session.session_id
    assert isinstance(init, InitEvent)
    assert (init.cli_version, init.model, init.permission_mode) == ("0.24.4", "claude-fake", "auto")
    assert init.cwd == "/project" and "read_file" in init.tools
    texts = [e for e in events if isinstance(e, TextEvent)]
    # The deltas, then the completed message adds nothing they did not say.
    assert "".join(e.text for e in texts) == "hello there"
    assert texts[-1].message_boundary and texts[-1].text == ""
    usage, result = events[-2], events[-1]
    assert isinstance(usage, UsageEvent) and isinstance(result, ResultEvent)
    assert result.text == "hello there" and result.session_id == session.session_id
    assert result.usage == Usage(input_tokens=10, output_tokens=5)
    assert result.num_turns == 1 and result.cost_usd is None  # Qwen Code prints no cost


def test_each_calls_usage_is_streamed_without_an_estimate() -> None:
    # Qwen Code reports a call's usage on its assistant frames; the backend has no price
    # table, so the stream's usage carries no estimated cost.
    events = translate("tool")
    result = events[-1]
    streamed = [e for e in events[:-2] if isinstance(e, UsageEvent)]
    assert [e.usage for e in streamed] == [
        Usage(input_tokens=10, output_tokens=5),
        Usage(input_tokens=20, output_tokens=10),
    ]
    assert all(e.estimated_cost_usd is None for e in streamed)
    assert isinstance(result, ResultEvent) and result.usage == streamed[-1].usage


def test_a_tool_turn() -> None:
    events = translate("tool")
    [use] = [e for e in events if isinstance(e, ToolUseEvent)]
    [result] = [e for e in events if isinstance(e, ToolResultEvent)]
    assert use.name == "read_file" and use.input == {"file_path": "/project/a.txt"}
    assert result.tool_use_id == use.id and result.content == "hi\n" and not result.is_error
    assert isinstance(events[-1], ResultEvent) and events[-1].text == "It says hi."


def test_a_rejected_key_is_an_authentication_failure() -> None:
    events = translate("auth")
    terminal = events[-1]
    assert isinstance(terminal, ErrorEvent)
    assert terminal.reason is StopReason.AUTHENTICATION_FAILED and not terminal.retryable
    # The message is the CLI's error.message (an object, where Claude's is a string).
    assert terminal.message.startswith("[API Error: 401")


@pytest.mark.parametrize(
    ("quoted", "reason"),
    [
        ('529 {"type":"error","error":{"type":"overloaded_error"}}', StopReason.OVERLOADED),
        ('429 {"type":"error","error":{"type":"rate_limit_error"}}', StopReason.RATE_LIMITED),
        ("500 internal", StopReason.CLI_ERROR),
        # As 0.24.4 quoted the fake Anthropic API's answers (tests/realcli/test_qwen_turns).
        (
            '400 {"type":"error","error":{"type":"invalid_request_error","message":"prompt is '
            'too long: 210000 tokens > 200000 maximum"},"request_id":"req_fake_1"}',
            StopReason.CONTEXT_EXHAUSTED,
        ),
        (
            '401 {"type":"error","error":{"type":"authentication_error","message":"OAuth token '
            'has expired. Please obtain a new token or refresh your existing token."}}',
            StopReason.CREDENTIAL_EXPIRED,
        ),
        (
            '429 {"error":{"code":"insufficient_quota","message":"Free allocated quota '
            'exceeded."}}',
            StopReason.USAGE_LIMIT,
        ),
    ],
)
def test_the_quoted_api_status_classifies_an_error_result(quoted: str, reason: StopReason) -> None:
    # The auth fixture's result with another status quoted, as the CLI words each one.
    t = QwenTranslator()
    *_, result = frames("auth", t.decode)
    result["error"]["message"] = f"[API Error: {quoted}]"
    (terminal,) = [e for e in t.feed(result) if isinstance(e, ErrorEvent)]
    assert terminal.reason is reason
    assert terminal.retryable is (reason in (StopReason.OVERLOADED, StopReason.RATE_LIMITED))


def test_a_model_quoting_a_status_classifies_nothing() -> None:
    t = QwenTranslator()
    *_, result = frames("auth", t.decode)
    result["error"]["message"] = "the build failed with 429 errors"
    (terminal,) = [e for e in t.feed(result) if isinstance(e, ErrorEvent)]
    assert terminal.reason is StopReason.CLI_ERROR


def test_a_lost_session_is_named_from_stderr() -> None:
    # What 0.24.4 prints, and exits 1, for a --resume id it has no transcript of.
    stderr = 'No saved session found with title "0f9c-lost".\n'
    event = QwenTranslator().finish(ExitStatus(1), stderr)
    assert isinstance(event, ErrorEvent)
    assert event.reason is StopReason.SESSION_LOST and event.session_id == "0f9c-lost"


def test_a_resumed_turn_reports_its_own_usage() -> None:
    # The CLI's usage is the session's running total: minus what earlier turns reported.
    baseline = SessionTotals(usage=Usage(input_tokens=4, output_tokens=2), turns=1)
    result = translate("text", BACKEND.translator(options(), baseline=baseline))[-1]
    assert isinstance(result, ResultEvent)
    assert result.usage == Usage(input_tokens=6, output_tokens=3)


def test_the_live_protocol_over_a_recorded_process() -> None:
    # live.jsonl: initialize answered, a turn whose run_shell_command was asked for and
    # allowed, then a second turn; as the process printed them.
    live = BACKEND.live(options(), session_id=None, approvals=True)
    opening = json.loads(live.opening())
    assert opening["type"] == "control_request"
    assert opening["request"] == {"subtype": "initialize"}  # no hooks: none to name
    translator = live.translator()
    recorded = frames("live", translator.decode)
    # The recording answered the CLI's own request ids; ours are made per process.
    recorded[0]["response"]["request_id"] = opening["request_id"]
    ends, asks, events = 0, [], []
    baseline = None
    for frame in recorded:
        role = live.classify(frame)
        if role == "control":
            answer = live.control(frame)
            if isinstance(answer, ToolApproval):
                asks.append(answer)
            continue
        events += translator.feed(frame)
        if role == "end":
            ends += 1
            result = events[-1]
            assert isinstance(result, ResultEvent)
            baseline = SessionTotals(usage=result.usage or Usage(), turns=1)
            translator = live.translator(baseline=baseline)
    assert live.ready and ends == 2
    [ask] = asks
    assert ask.request.tool_name == "run_shell_command"
    assert ask.request.input == {"command": "echo hi > out.txt"}
    allow = json.loads(ask.answer(Allow()))["response"]
    assert allow["request_id"] and allow["response"]["behavior"] == "allow"
    deny = json.loads(ask.answer(Deny("no")))["response"]["response"]
    assert deny == {"behavior": "deny", "message": "no"}
    results = [e for e in events if isinstance(e, ResultEvent)]
    # The second result says 30/15, the session's total: the turn's own share is 10/5.
    assert [r.usage for r in results] == [
        Usage(input_tokens=20, output_tokens=10),
        Usage(input_tokens=10, output_tokens=5),
    ]


def test_without_approvals_the_live_process_denies_each_ask_itself() -> None:
    live = BACKEND.live(options(), session_id=None)
    request = {"subtype": "can_use_tool", "tool_name": "edit", "input": {}, "tool_use_id": "t1"}
    answer = live.control({"type": "control_request", "request_id": "r9", "request": request})
    assert isinstance(answer, bytes)
    response = json.loads(answer)["response"]
    assert response["request_id"] == "r9"
    assert response["response"]["behavior"] == "deny"
    assert "approve_tool" in response["response"]["message"]


def test_a_turn_command() -> None:
    command = BACKEND.command(options(model="m", auth_type="anthropic"), "hi", session_id="s-1")
    argv = command.argv
    assert argv[:3] == ("qwen", "--output-format", "stream-json")
    assert "-p" not in argv and "hi" not in argv  # the prompt goes by stdin
    assert command.stdin == b"hi"
    assert argv[argv.index("--resume") + 1] == "s-1"
    assert argv[argv.index("--approval-mode") + 1] == "default"
    assert argv[argv.index("--auth-type") + 1] == "anthropic"
    assert command.env["QWEN_CODE_NO_RELAUNCH"] == "1"
    assert command.env["QWEN_USAGE_STATISTICS_ENABLED"] == "false"
    settings = json.loads(command.env_files["QWEN_CODE_SYSTEM_DEFAULTS_PATH"].content)
    assert settings["privacy"] == {"usageStatisticsEnabled": False}
    assert settings["memory"]["enableManagedAutoMemory"] is False
    assert settings["memory"]["enableManagedAutoDream"] is False
    live = BACKEND.live(options(), session_id=None).command.argv
    assert live[live.index("--input-format") + 1] == "stream-json" and "--resume" not in live


def test_settings_options_merge_by_section_over_the_defaults() -> None:
    command = BACKEND.command(
        options(settings={"memory": {"enableManagedAutoMemory": True}, "ui": {"theme": "x"}}),
        "hi",
        session_id=None,
    )
    settings = json.loads(command.env_files["QWEN_CODE_SYSTEM_DEFAULTS_PATH"].content)
    assert settings["memory"]["enableManagedAutoMemory"] is True
    assert settings["memory"]["enableManagedAutoDream"] is False
    assert settings["ui"] == {"theme": "x"}


def test_app_tools_go_in_the_settings_file_never_on_argv_or_in_the_env() -> None:
    server = AppToolServer("agentrt", "http://127.0.0.1:4321/mcp", "tok-secret-123")
    command = BACKEND.command(BACKEND.with_app_tools(options(), server), "hi", session_id=None)
    assert not any("tok-secret-123" in a for a in command.argv if isinstance(a, str))
    assert not any("tok-secret-123" in v for v in command.env.values())
    settings = json.loads(command.env_files["QWEN_CODE_SYSTEM_DEFAULTS_PATH"].content)
    assert settings["mcpServers"]["agentrt"] == {
        "httpUrl": "http://127.0.0.1:4321/mcp",
        "headers": {"Authorization": "Bearer tok-secret-123"},
        "trust": True,
    }
    assert "127.0.0.1" in command.env["NO_PROXY"]


def test_an_inline_mcp_config_goes_by_file() -> None:
    config = {"mcpServers": {"s": {"httpUrl": "http://x", "headers": {"k": "v"}}}}
    argv = BACKEND.command(options(mcp_config=config), "hi", session_id=None).argv
    secret = argv[argv.index("--mcp-config") + 1]
    assert isinstance(secret, SecretFile) and json.loads(secret.content) == config


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ({"approval_mode": "sometimes"}, "approval_mode"),
        ({"auth_type": "oauth"}, "auth_type"),
        ({"extra_args": ["--yolo"]}, "extra_args"),
        ({"extra_args": ["--resume=x"]}, "extra_args"),
        ({"resume": "-x"}, "resume"),
        ({"session_id": "not-a-uuid"}, "session_id"),
        ({"settings": {"memory": True}}, "settings"),
        ({"resume": "a", "session_id": "6f3c2b9e-0d1a-4b7c-8e2f-3a4b5c6d7e8f"}, "session_id"),
        ({"approvl_mode": "yolo"}, "approvl_mode"),
    ],
)
def test_bad_options_are_refused_naming_the_key(raw: dict[str, Any], key: str) -> None:
    with pytest.raises(InvalidOptions) as refused:
        BACKEND.parse_options(raw)
    assert refused.value.key == key


def test_capabilities_live_and_approvals_but_no_hooks() -> None:
    assert BACKEND.capabilities(options()) == Capabilities(live=True, approvals=True)


def test_the_pinned_version_is_the_one_the_backend_was_written_for() -> None:
    pinned = (ROOT / "tests" / "realcli" / "QWEN_VERSION").read_text().strip()
    assert pinned == QwenBackend().info().written_for == FIXTURES.name


def test_portable_sessions_paths(tmp_path: Path) -> None:
    o = options(qwen_home=str(tmp_path / "qh"))
    assert BACKEND.cli_home(o) == str(tmp_path / "qh")
    moved = BACKEND.with_cli_home(o, str(tmp_path / "other"))
    assert BACKEND.command(moved, "x", session_id=None).env["QWEN_HOME"] == str(tmp_path / "other")
    assert set(BACKEND.login_files(o)) == {"settings.json", ".env", "oauth_creds.json"}
    assert BACKEND.transcript_pattern("abc") == "projects/*/chats/abc.jsonl"
