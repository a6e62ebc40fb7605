"""The pinned real ``claude`` binary against the fake API: the facts agentrt builds on.

These run the binary directly (not through agentrt), so that a new CLI version that changes
one of these facts fails here, in the test named for that fact. With
AGENTRT_RECORD_FIXTURES=1 each run is also kept as a stream-json fixture for backend tests.
"""

from __future__ import annotations

import os
import signal
import time

import pytest
import trio
from proc_helpers import ProcInfo, marked, proc_info

from agentrt.testing import (
    AnthropicCutStream,
    AnthropicError,
    AnthropicHang,
    AnthropicText,
    AnthropicToolUse,
)

from ._claude import MARKER_VAR, Claude, wait_for_process, wait_until_gone

pytestmark = pytest.mark.realcli

LONG_COMMAND = "echo start; sleep 300; echo end"


def tool_turn(command: str) -> list[AnthropicToolUse | AnthropicText]:
    bash = AnthropicToolUse("Bash", {"command": command, "description": "Run it"}, text="On it.")
    return [bash, AnthropicText("Tool finished.")]


async def test_text_turn(claude: Claude) -> None:
    """One prompt, one streamed text answer."""
    claude.api.set_script([AnthropicText("Hello from the fake.", input_tokens=21, output_tokens=8)])
    with trio.fail_after(30):
        run = await claude.run(prompt="Say hello")
    claude.record("text_turn", run, description=str(test_text_turn.__doc__), script="text")

    assert run.returncode == 0, run.stderr
    assert run.bad_lines == []
    assert [(f["type"], f.get("subtype")) for f in run.frames] == [
        ("system", "init"),
        ("assistant", None),
        ("result", "success"),
    ]
    init, assistant, result = run.frames
    session_id = init["session_id"]
    assert init["claude_code_version"] == claude.version
    assert init["cwd"] == str(claude.project)
    assert init["apiKeySource"] == "ANTHROPIC_API_KEY"
    assert "Bash" in init["tools"]
    assert assistant["message"]["content"] == [{"type": "text", "text": "Hello from the fake."}]
    assert assistant["session_id"] == session_id
    assert result["is_error"] is False
    assert result["result"] == "Hello from the fake."
    assert result["session_id"] == session_id
    assert result["usage"]["input_tokens"] == 21
    assert result["usage"]["output_tokens"] == 8
    assert result["num_turns"] == 1

    # The only traffic: one streamed model call, with the key redacted in the record.
    (request,) = claude.api.requests
    assert request.method == "POST" and request.path == "/v1/messages?beta=true"
    assert request.stream
    assert request.headers["x-api-key"] == "[REDACTED]"
    assert request.headers["x-claude-code-session-id"] == session_id
    assert request.body["model"] == init["model"]
    assert request.last_user_text() == "Say hello"
    # The environment block travels as a role "system" message inside the messages array.
    assert "system" in [m["role"] for m in request.messages]

    assert claude.transcript(session_id).is_file()


async def test_resume_resends_history_under_the_same_session_id(claude: Claude) -> None:
    """Turn 2 with --resume <turn 1's session id>."""
    claude.api.set_script([AnthropicText("The word is banana."), AnthropicText("It was banana.")])
    with trio.fail_after(30):
        first = await claude.run(prompt="Remember the word banana.")
        session_id = first.session_id
        assert first.returncode == 0 and session_id is not None
        args = ["--resume", session_id]
        second = await claude.run(args, prompt="Which word?")
    claude.record(
        "resume_turn",
        second,
        description=str(test_resume_resends_history_under_the_same_session_id.__doc__),
        script="text (turn 2)",
    )

    assert second.returncode == 0, second.stderr
    assert {f.get("session_id") for f in second.frames} == {session_id}
    assert second.result is not None and second.result["result"] == "It was banana."
    request = claude.api.message_requests[1]
    assert request.texts("user")[-1] == "Which word?"
    assert "Remember the word banana." in "".join(request.texts("user"))
    assert request.texts("assistant") == ["The word is banana."]
    assert [m["role"] for m in request.messages if m["role"] != "system"] == [
        "user",
        "assistant",
        "user",
    ]


async def test_resume_of_an_unknown_session_exits_1(claude: Claude) -> None:
    """--resume with a session id this HOME never saw."""
    unknown = "0b7e4a8e-1111-4222-8333-123456789abc"
    with trio.fail_after(30):
        run = await claude.run(["--resume", unknown], prompt="hello?")
    claude.record(
        "resume_unknown",
        run,
        description=str(test_resume_of_an_unknown_session_exits_1.__doc__),
        script="(none: no request is made)",
    )

    assert run.returncode == 1
    assert claude.api.requests == []
    (result,) = run.frames  # no system/init: the CLI gives up before the session starts
    assert result["type"] == "result" and result["subtype"] == "error_during_execution"
    assert result["is_error"] is True
    assert result["errors"] == [f"No conversation found with session ID: {unknown}"]
    assert "No conversation found" in run.stderr.decode()


async def test_resume_after_the_transcript_is_deleted_exits_1(claude: Claude) -> None:
    """A real session whose transcript file was removed is as unknown as a made-up id."""
    claude.api.set_script([AnthropicText("First.")])
    with trio.fail_after(30):
        first = await claude.run(prompt="one")
        assert first.session_id is not None
        claude.transcript(first.session_id).unlink()
        run = await claude.run(["--resume", first.session_id], prompt="two")
    assert run.returncode == 1
    assert run.result is not None
    assert run.result["errors"] == [f"No conversation found with session ID: {first.session_id}"]
    assert len(claude.api.requests) == 1


async def test_401_without_retries_fails_in_one_request(claude: Claude) -> None:
    """401 authentication_error with CLAUDE_CODE_MAX_RETRIES=0."""
    claude.api.set_script([AnthropicError.authentication()])
    with trio.fail_after(30):
        run = await claude.run(prompt="hi")
    claude.record(
        "error_401",
        run,
        description=str(test_401_without_retries_fails_in_one_request.__doc__),
        script="401 authentication_error",
    )

    assert run.returncode == 1
    assert run.duration < 10
    assert len(claude.api.requests) == 1
    (assistant,) = run.of_type("assistant")
    assert assistant["error"] == "authentication_failed"
    assert assistant["api_error_status"] == 401
    result = run.result
    assert result is not None
    # subtype "success" although the turn failed: is_error is what tells.
    assert result["subtype"] == "success" and result["is_error"] is True
    assert result["api_error_status"] == 401
    assert result["terminal_reason"] == "api_error"


async def test_401_with_default_retries_is_announced_by_api_retry(claude: Claude) -> None:
    """401 on every call, CLAUDE_CODE_MAX_RETRIES unset (the CLI retries 10 times)."""
    claude.api.set_script(lambda request: AnthropicError.authentication())
    env: dict[str, str | None] = {"CLAUDE_CODE_MAX_RETRIES": None}
    with trio.fail_after(30):
        async with claude.open(prompt="hi", env=env) as run:
            retry = await run.wait_frame(lambda f: f.get("subtype") == "api_retry")
            # Still running: without a fast fail on this frame a turn waits out all retries.
            assert run.returncode is None
    claude.record(
        "error_401_api_retry",
        run,
        description=str(test_401_with_default_retries_is_announced_by_api_retry.__doc__)
        + " Cut short (SIGKILL) after the first api_retry frame.",
        script="401 authentication_error, always",
    )

    assert retry["type"] == "system"
    assert retry["error"] == "authentication_failed"
    assert retry["error_status"] == 401
    assert retry["attempt"] == 1 and retry["max_retries"] == 10
    assert retry["retry_delay_ms"] > 0


@pytest.mark.parametrize(
    ("error", "name", "assistant_error"),
    [
        (AnthropicError.rate_limit(), "error_429", "rate_limit"),
        (AnthropicError.overloaded(), "error_529", "server_error"),
        (AnthropicError.server(), "error_500", "server_error"),
    ],
)
async def test_http_errors_end_the_turn_with_their_status(
    claude: Claude, error: AnthropicError, name: str, assistant_error: str
) -> None:
    """An HTTP error status with CLAUDE_CODE_MAX_RETRIES=0."""
    claude.api.set_script([error])
    with trio.fail_after(30):
        run = await claude.run(prompt="hi")
    claude.record(
        name,
        run,
        description=f"{error.status} {error.error_type} with CLAUDE_CODE_MAX_RETRIES=0.",
        script=f"{error.status} {error.error_type}",
    )

    assert run.returncode == 1
    (assistant,) = run.of_type("assistant")
    assert assistant["error"] == assistant_error
    assert assistant["api_error_status"] == error.status
    assert run.result is not None
    assert run.result["is_error"] is True
    assert run.result["api_error_status"] == error.status


async def test_a_usage_limit_says_when_it_resets(claude: Claude) -> None:
    """A subscription login (OAuth) whose 5-hour window is spent: 429 with the unified
    rate-limit headers. The CLI reports the reset in a rejected rate_limit_event, in the
    result's api_error "usage_limit_reached" and in its "You've hit your ... limit · resets
    ..." text."""
    resets_at = int(time.time()) + 3600
    claude.api.set_script([AnthropicError.usage_limit(resets_at)])
    with trio.fail_after(30):
        run = await claude.run(prompt="hi", env=claude.oauth_login())
    claude.record(
        "usage_limit",
        run,
        description=str(test_a_usage_limit_says_when_it_resets.__doc__),
        script="429 rate_limit_error with anthropic-ratelimit-unified-* headers (rejected)",
    )

    assert run.returncode == 1
    (event,) = run.of_type("rate_limit_event")
    info = event["rate_limit_info"]
    assert (info["status"], info["resetsAt"], info["rateLimitType"]) == (
        "rejected",
        resets_at,
        "five_hour",
    )
    assert run.result is not None
    assert run.result["api_error"] == "usage_limit_reached"
    assert run.result["api_error_status"] == 429
    assert run.result["result"].startswith("You've hit your 5-hour limit · resets ")


async def test_a_prompt_too_long_is_the_cli_s_own_terminal_reason(claude: Claude) -> None:
    """400 "prompt is too long": the result's terminal_reason is prompt_too_long."""
    claude.api.set_script([AnthropicError.prompt_too_long()])
    with trio.fail_after(30):
        run = await claude.run(prompt="hi")
    claude.record(
        "prompt_too_long",
        run,
        description=str(test_a_prompt_too_long_is_the_cli_s_own_terminal_reason.__doc__),
        script="400 invalid_request_error: prompt is too long",
    )

    assert run.returncode == 1
    assert run.result is not None
    assert run.result["terminal_reason"] == "prompt_too_long"
    assert run.result["result"].startswith("Prompt is too long")


async def test_an_expired_token_after_an_answered_call(claude: Claude) -> None:
    """An OAuth login whose token expires mid-turn: the first call is answered (a Bash tool
    call), the next ones get 401 "OAuth token has expired". The CLI asks twice (it tries
    the login again), with an api_retry frame before each, then ends with the 401's text."""
    claude.api.set_script(
        [
            AnthropicToolUse("Bash", {"command": "true", "description": "Run it"}),
            *[AnthropicError.expired_token()] * 3,
        ]
    )
    with trio.fail_after(30):
        run = await claude.run(["--allowedTools", "Bash"], prompt="hi", env=claude.oauth_login())
    claude.record(
        "expired_token",
        run,
        description=str(test_an_expired_token_after_an_answered_call.__doc__),
        script="Bash tool_use, then 401 authentication_error: OAuth token has expired",
    )

    assert run.returncode == 1
    retries = run.of_type("system", "api_retry")
    assert retries and {(r["error_status"], r["error"]) for r in retries} == {
        (401, "authentication_failed")
    }
    assert run.result is not None
    assert "OAuth token has expired" in run.result["result"]


async def test_cut_stream_is_retried_once_without_streaming(claude: Claude) -> None:
    """The stream breaks mid-answer; the CLI asks again with stream:false."""
    claude.api.set_script([AnthropicCutStream(), AnthropicText("Whole answer.")])
    with trio.fail_after(30):
        run = await claude.run(prompt="hi")
    claude.record(
        "cut_stream_then_json",
        run,
        description=str(test_cut_stream_is_retried_once_without_streaming.__doc__),
        script="cut stream, then a JSON text reply",
    )

    assert run.returncode == 0
    assert [r.stream for r in claude.api.message_requests] == [True, False]
    assert run.result is not None and run.result["result"] == "Whole answer."


async def test_silent_api_ends_the_turn_after_api_timeout(claude: Claude) -> None:
    """No response at all, API_TIMEOUT_MS=2000."""
    claude.api.set_script([AnthropicHang()])
    env = {"API_TIMEOUT_MS": "2000"}
    with trio.fail_after(30):
        run = await claude.run(prompt="hi", env=env)
    claude.record(
        "api_timeout",
        run,
        description=str(test_silent_api_ends_the_turn_after_api_timeout.__doc__),
        script="hang (no response)",
    )

    assert run.returncode == 1
    assert 2 <= run.duration < 10
    assert run.result is not None and run.result["is_error"] is True
    assert "Request timed out" in run.result["result"]
    assert len(claude.api.requests) == 1  # no retry without streaming after a timeout


async def _long_bash_running(claude: Claude, run_pid: int) -> ProcInfo:
    with trio.fail_after(20):
        sleeper = await wait_for_process(claude.marker, lambda p: p.cmdline == "sleep 300")
    cli = proc_info(run_pid)
    assert cli is not None
    # The Bash tool runs in a session of its own, outside the CLI's group, as a child's child.
    assert sleeper.sid != cli.sid and sleeper.pgid != cli.pgid
    assert sleeper.sid == sleeper.pgid
    shell = proc_info(sleeper.ppid)
    assert shell is not None and shell.ppid == run_pid and shell.sid == sleeper.sid
    return sleeper


async def test_sigint_mid_tool_ends_the_turn_and_its_tool_tree(claude: Claude) -> None:
    """SIGINT while the Bash tool runs `echo start; sleep 300; echo end`."""
    claude.api.set_script(tool_turn(LONG_COMMAND))
    args = ["--allowedTools", "Bash"]
    with trio.fail_after(30):
        async with claude.open(args, prompt="run it") as run:
            await _long_bash_running(claude, run.pid)
            run.process.send_signal(signal.SIGINT)
            assert await run.wait() == 0
            with trio.move_on_after(5):
                await wait_until_gone(claude.marker)
            assert marked(MARKER_VAR, claude.marker) == []  # the CLI ended its tool's session
    claude.record(
        "sigint_mid_tool",
        run,
        description=str(test_sigint_mid_tool_ends_the_turn_and_its_tool_tree.__doc__),
        script="tool_use Bash, then text (never reached)",
    )

    assert len(claude.api.message_requests) == 1
    # Usually the CLI ends with the frames below; on a loaded machine it has at times exited 0
    # before printing them, as it does when interrupted mid-request: agentrt reads "we
    # interrupted, exit 0" as interrupted either way (tests/test_claude_turns_replay.py).
    result = run.result
    if result is None:
        return
    assert result["subtype"] == "error_during_execution" and result["is_error"] is True
    assert result["terminal_reason"] == "aborted_tools"
    texts = [
        block.get("text")
        for frame in run.of_type("user")
        for block in frame["message"]["content"]
        if isinstance(block, dict)
    ]
    assert "[Request interrupted by user for tool use]" in texts


async def test_sigint_while_waiting_for_the_api_exits_0_maybe_without_result(
    claude: Claude,
) -> None:
    """SIGINT half a second into an outstanding model call."""
    claude.api.set_script([AnthropicHang()])
    with trio.fail_after(30):
        async with claude.open(prompt="hi") as run:
            await claude.api.wait_requests(1)
            # Within ~50 ms of the request the CLI still prints a result (error_during_execution,
            # terminal_reason aborted_streaming); later, as here, usually none at all.
            await trio.sleep(0.5)
            run.process.send_signal(signal.SIGINT)
            assert await run.wait() == 0
    claude.record(
        "sigint_mid_request",
        run,
        description=str(test_sigint_while_waiting_for_the_api_exits_0_maybe_without_result.__doc__),
        script="hang (no response)",
    )

    interrupted = [
        f
        for f in run.of_type("user")
        if f["message"]["content"] == [{"type": "text", "text": "[Request interrupted by user]"}]
    ]
    # Beside load the CLI may exit before it prints its note of the interrupt.
    assert len(interrupted) <= 1
    assert run.result is None or run.result["subtype"] == "error_during_execution"


async def test_sigterm_mid_tool_exits_143_without_result(claude: Claude) -> None:
    """SIGTERM while the Bash tool runs."""
    claude.api.set_script(tool_turn(LONG_COMMAND))
    args = ["--allowedTools", "Bash"]
    with trio.fail_after(30):
        async with claude.open(args, prompt="run it") as run:
            await _long_bash_running(claude, run.pid)
            run.process.send_signal(signal.SIGTERM)
            assert await run.wait() == 143
            with trio.move_on_after(5):
                await wait_until_gone(claude.marker)
            assert marked(MARKER_VAR, claude.marker) == []
    claude.record(
        "sigterm_mid_tool",
        run,
        description=str(test_sigterm_mid_tool_exits_143_without_result.__doc__),
        script="tool_use Bash, then text (never reached)",
    )

    assert run.result is None
    (tool_result,) = [
        block
        for frame in run.of_type("user")
        for block in frame["message"]["content"]
        if block.get("type") == "tool_result"
    ]
    assert tool_result["is_error"] is True
    assert tool_result["content"].startswith("Exit code 137")


async def test_sigkill_leaves_the_bash_tool_orphaned(claude: Claude) -> None:
    """Why agentrt tracks the whole tree: a SIGKILLed CLI leaves its tool's session running."""
    claude.api.set_script(tool_turn(LONG_COMMAND))
    with trio.fail_after(30):
        async with claude.open(["--allowedTools", "Bash"], prompt="run it") as run:
            sleeper = await _long_bash_running(claude, run.pid)
            os.killpg(run.pid, signal.SIGKILL)  # the CLI's whole group
            assert await run.wait() == -signal.SIGKILL
            survivor = proc_info(sleeper.pid)
            assert survivor is not None and survivor.cmdline == "sleep 300"
    # open_claude's cleanup killed it by its marker.
    assert proc_info(sleeper.pid) is None


async def test_bash_tool_round_trip(claude: Claude) -> None:
    """The model asks for Bash `echo hello`; the CLI runs it and sends the result back."""
    claude.api.set_script(tool_turn("echo hello"))
    with trio.fail_after(30):
        run = await claude.run(["--allowedTools", "Bash"], prompt="say hello in bash")
    claude.record(
        "tool_use_bash",
        run,
        description=str(test_bash_tool_round_trip.__doc__),
        script="tool_use Bash `echo hello` (after text), then text",
    )

    assert run.returncode == 0
    # One assistant frame per content block; both carry the same message id.
    kinds = [
        (f["type"], [b["type"] for b in f["message"]["content"]])
        for f in run.frames
        if f["type"] in ("assistant", "user")
    ]
    assert kinds == [
        ("assistant", ["text"]),
        ("assistant", ["tool_use"]),
        ("user", ["tool_result"]),
        ("assistant", ["text"]),
    ]
    first, second = run.of_type("assistant")[:2]
    assert first["message"]["id"] == second["message"]["id"]
    assert run.result is not None
    assert run.result["result"] == "Tool finished." and run.result["num_turns"] == 2
    (tool_result,) = claude.api.message_requests[1].tool_results()
    assert tool_result == {
        "tool_use_id": "toolu_fake_1",
        "type": "tool_result",
        "content": "hello",
        "is_error": False,
        "cache_control": {"type": "ephemeral"},
    }


async def test_write_command_without_permission_is_denied(claude: Claude) -> None:
    """A Bash command that writes, in the default permission mode, without --allowedTools."""
    claude.api.set_script(tool_turn("touch made.txt"))
    with trio.fail_after(30):
        run = await claude.run(prompt="make a file")
    claude.record(
        "permission_denied",
        run,
        description=str(test_write_command_without_permission_is_denied.__doc__),
        script="tool_use Bash `touch made.txt`, then text",
    )

    assert run.returncode == 0
    assert run.of_type("system", "permission_denied")
    assert not (claude.project / "made.txt").exists()
    (tool_result,) = claude.api.message_requests[1].tool_results()
    assert tool_result["is_error"] is True
    assert "needs approval" in str(tool_result["content"])


async def test_bare_long_sleep_is_refused_by_the_cli(claude: Claude) -> None:
    """`sleep 300` alone is blocked before it runs; the compound command is not."""
    claude.api.set_script(tool_turn("sleep 300"))
    with trio.fail_after(30):
        run = await claude.run(["--allowedTools", "Bash"], prompt="wait")
    assert run.returncode == 0
    (tool_result,) = claude.api.message_requests[1].tool_results()
    assert tool_result["is_error"] is True
    assert "Blocked: standalone sleep 300" in str(tool_result["content"])


@pytest.mark.skipif(os.geteuid() != 0, reason="the refusal only applies to root")
async def test_bypass_permissions_as_root_needs_is_sandbox(claude: Claude) -> None:
    """--permission-mode bypassPermissions as root: refused, unless IS_SANDBOX=1."""
    args = ["--permission-mode", "bypassPermissions"]
    claude.api.set_script(tool_turn("touch made.txt"))
    with trio.fail_after(30):
        refused = await claude.run(args, prompt="make a file")
        allowed = await claude.run(args, prompt="make a file", env={"IS_SANDBOX": "1"})
    assert refused.returncode == 1 and refused.frames == []
    assert "cannot be used with root/sudo privileges" in refused.stderr.decode()
    assert allowed.returncode == 0
    assert (claude.project / "made.txt").exists()
