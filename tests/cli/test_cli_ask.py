"""`agentrt ask`: the pinned claude against the fake API, run as a user would."""

from __future__ import annotations

import datetime
import json
import signal
import subprocess
import time
from pathlib import Path

import pytest
import trio

from agentrt.testing import (
    AnthropicError,
    AnthropicHang,
    AnthropicText,
    AnthropicToolUse,
    FakeAnthropic,
    RecordedRequest,
)

from ._run import agentrt, open_agentrt

pytestmark = pytest.mark.realcli


def echo(request: RecordedRequest) -> AnthropicText:
    earlier = [t for t in request.texts("user")[:-1] if not t.startswith("<system-reminder>")]
    return AnthropicText(f"You said: {request.last_user_text()} | earlier: {' / '.join(earlier)}")


async def test_ask_prints_the_answer_and_stores_the_session(
    claude_env: dict[str, str], api: FakeAnthropic, tmp_path: Path
) -> None:
    api.set_script(echo)
    project = tmp_path / "project"
    project.mkdir()
    run = await agentrt("ask", "bob", "hello there", "--cwd", str(project), env=claude_env)
    assert run.code == 0, run.stderr
    assert run.stdout == "You said: hello there | earlier: \n"
    assert "session " in run.stderr  # the footer, on stderr so stdout pipes cleanly
    [record] = json.loads((await agentrt("sessions", "--json", env=claude_env)).stdout)
    assert record["name"] == "bob" and record["backend"] == "claude"
    assert record["cwd"] == str(project) and record["turns"] == 1
    assert record["last_stop_reason"] == "complete" and record["session_id"]


async def test_ask_json_and_prompt_from_stdin(
    claude_env: dict[str, str], api: FakeAnthropic, tmp_path: Path
) -> None:
    api.set_script(echo)
    run = await agentrt(
        "ask", "bob", "-", "--json", "--cwd", str(tmp_path), env=claude_env, stdin=b"from stdin\n"
    )
    assert run.code == 0, run.stderr
    data = json.loads(run.stdout)
    assert data["text"].startswith("You said: from stdin")
    assert data["stop_reason"] == "complete" and data["agent"] == "bob"
    assert data["usage"]["input_tokens"] == 10 and data["session_id"]


async def test_a_failed_turn_exits_1_with_its_fix(
    claude_env: dict[str, str], api: FakeAnthropic, tmp_path: Path
) -> None:
    api.set_script([AnthropicError.authentication()])
    run = await agentrt("ask", "bob", "hello", "--cwd", str(tmp_path), env=claude_env)
    assert run.code == 1 and run.stdout == ""
    [line] = run.stderr.strip().splitlines()
    assert line.startswith("agentrt: agent 'bob': the turn failed (authentication_failed)")
    assert "Fix: log the CLI in" in line


async def test_a_usage_limit_says_when_it_resets(
    claude_env: dict[str, str], api: FakeAnthropic, tmp_path: Path
) -> None:
    """On a subscription login (OAuth) whose window is spent, the fix names the reset."""
    # In the future, whenever the test runs (a reset in the past is another day's).
    resets_at = (int(time.time()) // 60 + 120) * 60
    resets = datetime.datetime.fromtimestamp(resets_at, datetime.UTC)
    api.set_script([AnthropicError.usage_limit(resets_at)])
    env = {**claude_env, **api.claude_env(claude_env["HOME"], login="oauth")}
    del env["ANTHROPIC_API_KEY"]
    run = await agentrt("ask", "bob", "hello", "--cwd", str(tmp_path), env=env)
    assert run.code == 1 and run.stdout == ""
    [line] = run.stderr.strip().splitlines()
    assert line.startswith("agentrt: agent 'bob': the turn failed (usage_limit)")
    assert "Fix: the login's usage limit is spent" in line
    assert line.endswith(f"(it resets at {resets:%Y-%m-%d %H:%M} UTC)"), line


async def test_a_second_ask_continues_the_conversation(
    claude_env: dict[str, str], api: FakeAnthropic, tmp_path: Path
) -> None:
    api.set_script(echo)
    first = await agentrt("ask", "bob", "remember: blue", "--cwd", str(tmp_path), env=claude_env)
    assert first.code == 0, first.stderr
    # From another directory: the stored cwd is used.
    second = await agentrt("ask", "bob", "what colour?", env=claude_env)
    assert second.code == 0, second.stderr
    assert "earlier: remember: blue" in second.stdout
    fresh = await agentrt("ask", "bob", "and now?", "--new", env=claude_env)
    assert fresh.code == 0 and "earlier: \n" in fresh.stdout


async def test_ctrl_c_interrupts_the_turn_and_exits_130(
    claude_env: dict[str, str], api: FakeAnthropic, tmp_path: Path
) -> None:
    api.set_script([AnthropicHang()])
    args = ("ask", "bob", "take your time", "--cwd", str(tmp_path))
    with trio.fail_after(30):
        async with open_agentrt(*args, env=claude_env, stderr=subprocess.PIPE) as process:
            await api.wait_requests(1)
            process.send_signal(signal.SIGINT)
            assert process.stderr is not None
            err = b""
            while chunk := await process.stderr.receive_some():
                err += chunk
            assert await process.wait() == 130
    assert err.decode().strip() == "interrupted"
    [record] = json.loads((await agentrt("sessions", "--json", env=claude_env)).stdout)
    assert record["last_stop_reason"] == "interrupted" and record["session_id"]


async def test_tool_calls_run_and_the_answer_follows(
    claude_env: dict[str, str], api: FakeAnthropic, tmp_path: Path
) -> None:
    api.set_script(
        [
            AnthropicToolUse("Bash", {"command": "echo from-the-tool"}, text="Let me look."),
            AnthropicText("The tool said hello."),
        ]
    )
    run = await agentrt(
        "ask", "bob", "use a tool", "--json", "--cwd", str(tmp_path), env=claude_env
    )
    assert run.code == 0, run.stderr
    data = json.loads(run.stdout)
    assert data["final_message"] == "The tool said hello."
    assert api.message_requests[-1].tool_results()[0]["content"] == "from-the-tool"


async def test_a_stored_session_is_not_resumed_from_another_directory(
    claude_env: dict[str, str], api: FakeAnthropic, tmp_path: Path
) -> None:
    api.set_script(echo)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = await agentrt("ask", "bob", "hi", "--cwd", str(tmp_path / "a"), env=claude_env)
    assert first.code == 0, first.stderr
    moved = await agentrt("ask", "bob", "hi", "--cwd", str(tmp_path / "b"), env=claude_env)
    assert moved.code == 1 and moved.stdout == ""
    assert "was made in" in moved.stderr
    assert "Fix: pass --cwd with the stored directory" in moved.stderr
    assert len(api.message_requests) == 1
