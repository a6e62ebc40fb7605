"""The fake Anthropic Messages API, driven by a plain HTTP/1.1 client (no CLI)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import http_client
import pytest
import trio
from http_client import Answer, Client

from agentrt.testing import (
    AnthropicCutStream,
    AnthropicError,
    AnthropicHang,
    AnthropicStreamError,
    AnthropicText,
    AnthropicToolUse,
    FakeAnthropic,
    RecordedRequest,
    open_fake_anthropic,
)


async def connect(api: FakeAnthropic) -> Client:
    return await http_client.connect(int(api.base_url.rsplit(":", 1)[1]))


def message_body(prompt: str = "hi", *, stream: bool = True) -> dict[str, Any]:
    return {
        "model": "claude-test-1",
        "max_tokens": 100,
        "stream": stream,
        "messages": [{"role": "user", "content": [{"type": "text", "text": prompt}]}],
    }


async def post_message(
    api: FakeAnthropic, prompt: str = "hi", *, stream: bool = True, **kw: Any
) -> Answer:
    client = await connect(api)
    async with client.stream:
        return await client.request(
            "/v1/messages?beta=true", message_body(prompt, stream=stream), **kw
        )


def joined_text(events: list[tuple[str, Any]], index: int) -> str:
    return "".join(
        d["delta"]["text"]
        for n, d in events
        if n == "content_block_delta" and d["index"] == index and d["delta"]["type"] == "text_delta"
    )


async def test_text_reply_streams_in_the_real_event_order() -> None:
    text = "Hello there, this is a longer answer."
    async with open_fake_anthropic([AnthropicText(text, input_tokens=12, output_tokens=7)]) as api:
        assert api.base_url.startswith("http://127.0.0.1:")
        reply = await post_message(api)
    assert reply.status == 200 and reply.complete
    assert reply.headers["content-type"].startswith("text/event-stream")
    assert reply.headers["transfer-encoding"] == "chunked"
    assert reply.headers["request-id"].startswith("req_")
    events = reply.events()
    names = [n for n, _ in events]
    deltas = names.count("content_block_delta")
    assert deltas > 1  # the text arrives in pieces, as from the real API
    assert names == [
        "message_start",
        "ping",
        "content_block_start",
        *["content_block_delta"] * deltas,
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    start = events[0][1]["message"]
    assert start["model"] == "claude-test-1"  # echoed from the request
    assert start["role"] == "assistant" and start["content"] == [] and start["stop_reason"] is None
    assert start["usage"]["input_tokens"] == 12
    assert events[2][1]["content_block"] == {"type": "text", "text": ""}
    assert joined_text(events, 0) == text
    delta = events[-2][1]
    assert delta["delta"]["stop_reason"] == "end_turn"
    assert delta["usage"] == {"output_tokens": 7}


async def test_tool_use_streams_its_input_as_json_deltas() -> None:
    tool = AnthropicToolUse("Bash", {"command": "echo start; sleep 300"}, text="Running it.")
    async with open_fake_anthropic([tool]) as api:
        reply = await post_message(api)
    events = reply.events()
    starts = [d["content_block"] for n, d in events if n == "content_block_start"]
    assert starts[0] == {"type": "text", "text": ""}
    assert starts[1] == {"type": "tool_use", "id": "toolu_fake_1", "name": "Bash", "input": {}}
    assert joined_text(events, 0) == "Running it."
    partial = [
        d["delta"]["partial_json"]
        for n, d in events
        if n == "content_block_delta" and d["index"] == 1
    ]
    assert all(
        d["delta"]["type"] == "input_json_delta"
        for n, d in events
        if n == "content_block_delta" and d["index"] == 1
    )
    assert len(partial) > 1
    assert json.loads("".join(partial)) == {"command": "echo start; sleep 300"}
    assert events[-2][1]["delta"]["stop_reason"] == "tool_use"


async def test_non_streaming_request_gets_the_whole_message_as_json() -> None:
    tool = AnthropicToolUse("Bash", {"command": "ls"}, id="toolu_given")
    async with open_fake_anthropic([AnthropicText("plain", model="claude-x"), tool]) as api:
        first = await post_message(api, stream=False)
        second = await post_message(api, stream=False)
    assert first.status == 200
    assert first.headers["content-type"] == "application/json"
    message = first.json()
    assert message["model"] == "claude-x"
    assert message["content"] == [{"type": "text", "text": "plain"}]
    assert message["stop_reason"] == "end_turn"
    assert message["usage"]["output_tokens"] == 5
    assert second.json()["content"] == [
        {"type": "tool_use", "id": "toolu_given", "name": "Bash", "input": {"command": "ls"}}
    ]


@pytest.mark.parametrize(
    ("error", "status", "error_type"),
    [
        (AnthropicError.authentication(), 401, "authentication_error"),
        (AnthropicError.rate_limit(retry_after=7), 429, "rate_limit_error"),
        (AnthropicError.overloaded(), 529, "overloaded_error"),
        (AnthropicError.server(), 500, "api_error"),
    ],
)
async def test_http_errors_carry_the_api_error_body(
    error: AnthropicError, status: int, error_type: str
) -> None:
    async with open_fake_anthropic([error]) as api:
        reply = await post_message(api)
    assert reply.status == status and reply.complete
    body = reply.json()
    assert body["type"] == "error"
    assert body["error"]["type"] == error_type
    assert body["request_id"] == reply.headers["request-id"]
    if status == 429:
        assert reply.headers["retry-after"] == "7"


async def test_stream_error_event_after_a_good_start() -> None:
    async with open_fake_anthropic([AnthropicStreamError(), AnthropicStreamError()]) as api:
        streamed = await post_message(api)
        plain = await post_message(api, stream=False)
    assert streamed.status == 200 and streamed.complete
    events = streamed.events()
    assert [n for n, _ in events] == ["message_start", "ping", "error"]
    assert events[-1][1]["error"] == {"type": "overloaded_error", "message": "Overloaded"}
    assert plain.status == 529
    assert plain.json()["error"]["type"] == "overloaded_error"


async def test_cut_stream_closes_the_connection_mid_reply() -> None:
    script = [AnthropicCutStream("Partial answer"), AnthropicCutStream()]
    async with open_fake_anthropic(script) as api:
        streamed = await post_message(api)
        plain = await post_message(api, stream=False)
    assert streamed.status == 200 and not streamed.complete
    # The body breaks off after the text deltas: no block stop, no message_delta/stop.
    events = streamed.events()
    assert [n for n, _ in events][-1] == "content_block_delta"
    assert joined_text(events, 0) == "Partial answer"
    assert plain.status == 200 and not plain.complete
    assert len(plain.body) < int(plain.headers["content-length"])


async def test_cut_stream_can_linger_before_the_close() -> None:
    async with open_fake_anthropic([AnthropicCutStream("Partial answer", linger=0.3)]) as api:
        client = await connect(api)
        async with client.stream:
            await client.send("/v1/messages", message_body())
            await client.head()
            while b"answer" not in client.buf:
                assert await client._fill()
            sent = trio.current_time()
            while await client._fill():  # to the close
                pass
            assert trio.current_time() - sent >= 0.3


async def test_hang_sends_nothing_until_the_client_leaves() -> None:
    async with open_fake_anthropic([AnthropicHang()]) as api:
        client = await connect(api)
        async with client.stream:
            await client.send("/v1/messages", message_body())
            # The request is recorded at once; the answer never comes.
            await api.wait_requests(1)
            with trio.move_on_after(0.3) as scope:
                await client.stream.receive_some(1)
            assert scope.cancelled_caught


async def test_hang_mid_stream_sends_the_start_then_goes_silent() -> None:
    async with open_fake_anthropic([AnthropicHang(mid_stream=True)]) as api:
        client = await connect(api)
        async with client.stream:
            await client.send("/v1/messages", message_body())
            status, _ = await client.head()
            assert status == 200
            with trio.move_on_after(0.3) as scope:
                while await client._fill():
                    pass
            assert scope.cancelled_caught  # silent, not closed
    assert b"event: message_start" in client.buf and b"event: ping" in client.buf
    assert b"content_block" not in client.buf


async def test_leaving_the_fake_ends_hanging_connections() -> None:
    with trio.fail_after(5):
        async with open_fake_anthropic([AnthropicHang()]) as api:
            client = await connect(api)
            await client.send("/v1/messages", message_body())
            await api.wait_requests(1)
        # The server side of the held connection is closed: the client reads EOF.
        assert await client.stream.receive_some(1) == b""
        await client.stream.aclose()


async def test_requests_are_recorded_with_credentials_redacted() -> None:
    async with open_fake_anthropic([AnthropicText("a")]) as api:
        reply = await post_message(
            api,
            "my prompt",
            headers={
                "x-api-key": "sk-ant-api03-verysecretvalue",
                "authorization": "Bearer abcdefghijkl",
                "anthropic-version": "2023-06-01",
            },
        )
    assert reply.status == 200
    (request,) = api.requests
    assert request.method == "POST"
    assert request.path == "/v1/messages?beta=true"
    assert request.is_message and request.stream
    assert request.headers["x-api-key"] == "[REDACTED]"
    assert request.headers["authorization"] == "[REDACTED]"
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert "verysecret" not in repr(api.requests)
    assert request.body == message_body("my prompt")


async def test_request_helpers_read_the_conversation() -> None:
    body = {
        "messages": [
            {"role": "user", "content": "first prompt"},
            {"role": "system", "content": [{"type": "text", "text": "# Environment"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "first answer"}]},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": "tool output"},
                    {"type": "text", "text": "second prompt"},
                ],
            },
        ]
    }
    request = RecordedRequest("POST", "/v1/messages", {}, body)
    assert request.texts() == [
        "first prompt",
        "# Environment",
        "first answer",
        "tool output",
        "second prompt",
    ]
    assert request.texts("assistant") == ["first answer"]
    assert request.last_user_text() == "second prompt"
    assert [r["tool_use_id"] for r in request.tool_results()] == ["t1"]
    empty = RecordedRequest("GET", "/", {}, None)
    assert empty.messages == [] and empty.texts() == [] and empty.last_user_text() == ""
    assert not empty.stream and not empty.is_message


async def test_script_function_decides_from_the_request() -> None:
    seen: list[str] = []

    def answer(request: RecordedRequest) -> AnthropicText:
        seen.append(request.last_user_text())
        return AnthropicText(f"echo: {request.last_user_text()}")

    async with open_fake_anthropic(answer) as api:
        one = await post_message(api, "one", stream=False)
        two = await post_message(api, "two", stream=False)
        with pytest.raises(TypeError):
            api.add_replies(AnthropicText("x"))
    assert seen == ["one", "two"]
    assert one.json()["content"][0]["text"] == "echo: one"
    assert two.json()["content"][0]["text"] == "echo: two"


async def test_script_function_error_propagates_out_of_the_fake() -> None:
    def broken(request: RecordedRequest) -> AnthropicText:
        raise ValueError("script bug")

    # The block is cancelled before the connection closes, so the client never sees the
    # close first: the error is the script's, as itself, every time (once it raced).
    for _ in range(20):
        with pytest.raises(ValueError, match="script bug"):
            async with open_fake_anthropic(broken) as api:
                await post_message(api)
                pytest.fail("the request was answered")


async def test_body_errors_leave_the_fake_unwrapped() -> None:
    with pytest.raises(KeyError):
        async with open_fake_anthropic():
            raise KeyError("from the test body")


async def test_script_runs_out_then_answers_500_and_can_be_extended() -> None:
    async with open_fake_anthropic([AnthropicText("one")]) as api:
        assert (await post_message(api, stream=False)).status == 200
        exhausted = await post_message(api, stream=False)
        api.add_replies(AnthropicText("two"))
        extended = await post_message(api, stream=False)
        api.set_script([AnthropicText("three")])
        replaced = await post_message(api, stream=False)
    assert exhausted.status == 500
    assert "script exhausted after 1 replies" in exhausted.json()["error"]["message"]
    assert extended.json()["content"][0]["text"] == "two"
    assert replaced.json()["content"][0]["text"] == "three"


async def test_other_endpoints_keep_alive_and_do_not_use_the_script() -> None:
    async with open_fake_anthropic([AnthropicText("only")]) as api:
        client = await connect(api)
        async with client.stream:
            counted = await client.request("/v1/messages/count_tokens?beta=true", message_body())
            missing = await client.request("/v1/models", method="GET")
            head = await client.request("/api/hello", method="HEAD")
            answered = await client.request("/v1/messages", message_body(stream=False))
    assert counted.status == 200 and counted.json()["input_tokens"] > 0
    assert missing.status == 404 and missing.json()["error"]["type"] == "not_found_error"
    assert head.status == 404 and head.body == b""
    assert answered.json()["content"][0]["text"] == "only"
    assert len(api.requests) == 4
    assert [r.path for r in api.message_requests] == ["/v1/messages"]


async def test_malformed_request_gets_400() -> None:
    async with open_fake_anthropic() as api:
        host, port = api.base_url.removeprefix("http://").rsplit(":", 1)
        async with await trio.open_tcp_stream(host, int(port)) as stream:
            await stream.send_all(b"NOT HTTP AT ALL\r\n\r\n")
            data = b""
            while chunk := await stream.receive_some(65536):
                data += chunk
    assert data.startswith(b"HTTP/1.1 400 ")
    assert api.requests == []


async def test_wait_requests_returns_once_enough_arrived() -> None:
    script = [AnthropicText("a"), AnthropicText("b")]
    async with open_fake_anthropic(script) as api, trio.open_nursery() as nursery:
        nursery.start_soon(post_message, api)
        first = await api.wait_requests(1)
        assert len(first) == 1
        nursery.start_soon(post_message, api)
        both = await api.wait_requests(2)
    assert len(both) == 2


def test_claude_env_points_the_cli_at_the_fake_only() -> None:
    api = FakeAnthropic(base_url="http://127.0.0.1:4567")
    env = api.claude_env("/srv/home", api_timeout_ms=3000)
    assert env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:4567"
    assert env["HOME"] == "/srv/home"
    assert env["CLAUDE_CODE_MAX_RETRIES"] == "0"
    assert env["API_TIMEOUT_MS"] == "3000"
    assert env["CLAUDE_BYTE_STREAM_IDLE_TIMEOUT_MS"] == "10000"
    assert env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"
    assert env["NO_PROXY"] == env["no_proxy"] == "127.0.0.1,localhost"


async def test_command_line_prints_its_url_and_echoes_prompts() -> None:
    proc = await trio.lowlevel.open_process(
        [sys.executable, "-m", "agentrt.testing.fake_anthropic", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        with trio.fail_after(20):
            line = b""
            while not line.endswith(b"\n"):
                line += await proc.stdout.receive_some(1)
            name, url = line.decode().strip().split("=", 1)
            assert name == "ANTHROPIC_BASE_URL"
            api = FakeAnthropic(base_url=url)  # only for connect(); the server is the child
            reply = await post_message(api, "ping me", stream=False)
            assert reply.json()["content"][0]["text"] == "You said: ping me"
            log = b""
            while b"\n" not in log:
                log += await proc.stderr.receive_some(65536)
            assert log.decode().startswith("POST /v1/messages?beta=true")
        proc.send_signal(signal.SIGINT)
        with trio.fail_after(10):
            assert await proc.wait() == 0
    finally:
        if proc.returncode is None:
            os.killpg(proc.pid, signal.SIGKILL)
            with trio.CancelScope(shield=True):
                await proc.wait()


# A command run by the fake: asks it one question with the environment it was given.
ASKING = """
import json, os, sys, urllib.request
body = {"model": "m", "max_tokens": 9, "messages": [{"role": "user", "content": "ping"}]}
request = urllib.request.Request(
    os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages",
    data=json.dumps(body).encode(),
    headers={"content-type": "application/json", "x-api-key": os.environ["ANTHROPIC_API_KEY"]},
)
with urllib.request.urlopen(request, timeout=10) as answer:
    print(json.load(answer)["content"][0]["text"])
print(os.environ["HOME"], os.path.isdir(os.environ["HOME"]))
print(os.environ["ANTHROPIC_API_KEY"], "XDG_STATE_HOME" in os.environ)
sys.exit(int(sys.argv[1]))
"""

RUNNER = (sys.executable, "-m", "agentrt.testing.fake_anthropic")


async def run_runner(*args: str, env: dict[str, str]) -> tuple[int, str, str]:
    with trio.fail_after(30):
        done = await trio.run_process(
            [*RUNNER, *args],
            env=env,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            start_new_session=True,  # no terminal: signals reach the runner alone
        )
    return done.returncode, done.stdout.decode(), done.stderr.decode()


async def test_the_runner_serves_a_command_and_exits_with_its_status() -> None:
    env = {**os.environ, "ANTHROPIC_API_KEY": "sk-ant-real-0000", "XDG_STATE_HOME": "/x"}
    code, out, err = await run_runner("--", sys.executable, "-c", ASKING, "3", env=env)
    assert code == 3
    [said] = err.splitlines()  # which claude the command gets, and nothing else
    assert said.startswith("fake_anthropic: claude: ")
    echoed, home_line, key_line = out.splitlines()
    assert echoed == "You said: ping"
    home, existed = home_line.split()
    assert existed == "True" and not await trio.Path(home).exists()  # fresh, then removed
    assert key_line == "sk-ant-fake-00000000000000000000 False"
    code, out, _ = await run_runner(
        "--reply", "pong", "--", sys.executable, "-c", ASKING, "0", env=env
    )
    assert code == 0 and out.splitlines()[0] == "pong"
    code, _, err = await run_runner("--", "/nonexistent/command", env=env)
    assert code == 127 and "cannot run '/nonexistent/command'" in err


# Says "ready", then exits 10 + the number of the first SIGINT or SIGTERM it receives.
CATCHING = """
import signal, sys, time
def caught(signum, frame):
    sys.exit(10 + signum)
signal.signal(signal.SIGINT, caught)
signal.signal(signal.SIGTERM, caught)
print("ready", flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
async def test_the_runner_passes_signals_on_to_the_command(signum: signal.Signals) -> None:
    proc = await trio.lowlevel.open_process(
        [*RUNNER, "--", sys.executable, "-c", CATCHING],
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        with trio.fail_after(20):
            seen = b""
            while b"ready\n" not in seen:
                seen += await proc.stdout.receive_some(64)
            proc.send_signal(signum)
            assert await proc.wait() == 10 + signum
    finally:
        if proc.returncode is None:
            os.killpg(proc.pid, signal.SIGKILL)
            with trio.CancelScope(shield=True):
                await proc.wait()


async def test_the_runner_reports_a_command_killed_by_a_signal_as_the_shell_does() -> None:
    code, _, _ = await run_runner(
        "--",
        sys.executable,
        "-c",
        "import os, signal; os.kill(os.getpid(), signal.SIGKILL)",
        env=dict(os.environ),
    )
    assert code == 128 + signal.SIGKILL


# Prints where the command's claude and python are.
WHERE = "import os, shutil; print(os.environ.get('CLAUDE_CLI')); print(shutil.which('python'))"


def without_venv(path: str) -> str:
    """``path`` without this virtualenv's bin: a shell that did not activate it."""
    venv_bin = os.path.dirname(sys.executable)
    return os.pathsep.join(f for f in path.split(os.pathsep) if f and f != venv_bin)


@pytest.mark.skipif(sys.prefix == sys.base_prefix, reason="not run from a virtualenv")
async def test_the_runner_gives_the_command_the_pinned_claude_and_its_virtualenv(
    claude_bin: Path,
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "CLAUDE_CLI"}
    env["PATH"] = without_venv(env.get("PATH", ""))
    code, out, err = await run_runner("--", sys.executable, "-c", WHERE, env=env)
    assert code == 0
    assert out.splitlines() == [
        str(claude_bin),
        os.path.join(os.path.dirname(sys.executable), "python"),
    ]
    version = claude_bin.parents[2].name.removeprefix("claude-")
    assert err == (
        f"fake_anthropic: claude: claude {version} (pinned, .cache/claude-{version}/node_modules"
        "/.bin/claude), installed by `make claude-cli`\n"
    )
    # A claude the user names is the one the command gets.
    code, out, err = await run_runner(
        "--", sys.executable, "-c", WHERE, env={**env, "CLAUDE_CLI": "/opt/my/claude"}
    )
    assert out.splitlines()[0] == "/opt/my/claude"
    assert err == "fake_anthropic: claude: /opt/my/claude ($CLAUDE_CLI)\n"


# Asks three times; prints each answer's content blocks.
ASKING_THRICE = """
import json, os, urllib.request
body = {"model": "m", "max_tokens": 9, "messages": [{"role": "user", "content": "ping"}]}
for _ in range(3):
    request = urllib.request.Request(
        os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages",
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        print(json.dumps([{k: b[k] for k in ("type", "text", "name", "input") if k in b}
                          for b in json.load(answer)["content"]]))
"""


async def test_the_runner_answers_from_a_script_file_then_echoes(tmp_path: Path) -> None:
    script = tmp_path / "replies.json"
    read = {"tool": "Read", "input": {"file_path": "notes.txt"}, "text": "Reading."}
    script.write_text(json.dumps([read, {"text": "Done."}]))
    code, out, _ = await run_runner(
        "--script", str(script), "--", sys.executable, "-c", ASKING_THRICE, env=dict(os.environ)
    )
    assert code == 0
    assert [json.loads(line) for line in out.splitlines()] == [
        [
            {"type": "text", "text": "Reading."},
            {"type": "tool_use", "name": "Read", "input": {"file_path": "notes.txt"}},
        ],
        [{"type": "text", "text": "Done."}],
        [{"type": "text", "text": "You said: ping"}],
    ]


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (
            '[{"text": "ok"}, {"tool": "Read"}]',
            'reply 2 is {"tool":"Read"}: expected {"text": TEXT}',
        ),
        ('[{"text": 3}]', 'reply 1 is {"text":3}: expected'),
        ('{"text": "ok"}', "expected a JSON list of replies"),
        ("[{", "not a JSON document (Input data was truncated)"),
    ],
)
async def test_a_bad_script_file_is_refused_saying_what_is_wrong(
    tmp_path: Path, content: str, why: str
) -> None:
    script = tmp_path / "replies.json"
    script.write_text(content)
    code, out, err = await run_runner("--script", str(script), "--", "true", env=dict(os.environ))
    assert (code, out) == (2, "")
    assert f"--script {script}: {why}" in err


async def test_the_runner_keeps_the_home_it_is_given(tmp_path: Path) -> None:
    home = tmp_path / "home" / "made"
    code, out, _ = await run_runner(
        "--home", str(home), "--", sys.executable, "-c", ASKING, "0", env=dict(os.environ)
    )
    assert code == 0
    assert out.splitlines()[1] == f"{home} True"
    assert home.is_dir()
    code, _, err = await run_runner("--home", str(home), env=dict(os.environ))
    assert code == 2 and "--home is CMD's HOME: give it with -- CMD" in err
    (tmp_path / "a-file").write_text("")
    code, _, err = await run_runner(
        "--home", str(tmp_path / "a-file"), "--", "true", env=dict(os.environ)
    )
    assert code == 2
    assert f"--home {tmp_path / 'a-file'}: cannot be made a directory (File exists)" in err


# Plays the CLI's part of one turn: sends the prompt (after a system text naming its working
# directory, as Claude Code does), answers each tool call with the result argv[3] gives that
# tool, and prints each reply's tool call or text, until a reply calls no tool.
PLAYING_THE_CLI = """
import json, os, sys, urllib.request
prompt, cwd, results = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
messages = [
    {"role": "user", "content": [{"type": "text", "text": "<system-reminder>hi</system-reminder>"},
                                 {"type": "text", "text": prompt}]},
    {"role": "system", "content": f"# Environment\\n - Primary working directory: {cwd}\\n"},
]
for _ in range(6):
    body = {"model": "m", "max_tokens": 9, "messages": messages}
    request = urllib.request.Request(
        os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages",
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        content = json.load(answer)["content"]
    [block] = content
    if block["type"] == "text":
        print(block["text"])
        break
    print(block["name"], json.dumps(block["input"], sort_keys=True))
    messages.append({"role": "assistant", "content": content})
    result = {"type": "tool_result", "tool_use_id": block["id"],
              "content": [{"type": "text", "text": results.get(block["name"], "")}]}
    messages.append({"role": "user", "content": [result]})
"""


@pytest.mark.parametrize(
    ("scenario", "prompt", "results", "expected"),
    [
        (
            "app_tools",
            "How many words are in 'to be or not to be'? Note the answer.",
            {"mcp__agentrt__word_count": "6"},
            [
                'ToolSearch {"max_results": 5, "query": '
                '"select:mcp__agentrt__word_count,mcp__agentrt__note"}',
                'mcp__agentrt__word_count {"text": "to be or not to be"}',
                'mcp__agentrt__note {"tags": ["hamlet"], "text": "6 words"}',
                "6 words; noted.",
            ],
        ),
        (
            "guarded",
            "What is in .git/config?",
            {},
            [
                'Read {"file_path": "/srv/project/.git/config"}',
                "The hook blocked it: I left .git alone.",
            ],
        ),
        (
            "reviewer",
            "Review the Python files here: the worst bug, briefly.",
            {"Glob": "README.md\nsrc/calc.py\nsrc/io.py"},
            [
                'Glob {"pattern": "**/*.py"}',
                'Read {"file_path": "src/calc.py"}',
                "Read calc.py; a real model would name its worst bug here.",
            ],
        ),
        ("reviewer", "Hello", {}, ["You said: Hello"]),
    ],
)
async def test_a_scenario_answers_each_step_of_a_turn_from_the_request(
    scenario: str, prompt: str, results: dict[str, str], expected: list[str]
) -> None:
    code, out, err = await run_runner(
        "--scenario",
        scenario,
        "--",
        sys.executable,
        "-c",
        PLAYING_THE_CLI,
        prompt,
        "/srv/project",
        json.dumps(results),
        env=dict(os.environ),
    )
    assert code == 0, err
    assert out.splitlines() == expected
