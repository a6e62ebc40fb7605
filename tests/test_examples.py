"""Every example runs: the scripted one on the mock clock, the others on the fake model API."""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
from proc_helpers import ProcInfo, processes_below, turn_processes
from trio.testing import MockClock

import agentrt
from agentrt import SQLiteStore
from agentrt.testing import (
    AnthropicText,
    AnthropicToolUse,
    FakeAnthropic,
)

EXAMPLES = Path(__file__).parent.parent / "examples"


def load(name: str) -> object:
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


async def test_scripted_team(autojump_clock: MockClock) -> None:
    module = load("scripted_team")
    out: list[str] = []
    await module.main(out)  # type: ignore[attr-defined]
    # The reviewer and the flaky agent hold both process slots; the writer starts when
    # the reviewer is done (0.5 s), the flaky turn holds its slot until its watchdog (1 s).
    assert out == [
        "[ 0.00s] told the reviewer; poll says Pending()",
        "[ 0.03s] writer is processing (waiting for a slot) with 2 asks queued",
        "[ 0.70s] writer answered 'done: outline'",
        "[ 0.90s] writer answered 'done: draft'",
        "[ 1.10s] writer answered 'done: polish'",
        "[ 1.10s] reviewer finished: Completed (1 reviewed)",
        "[ 1.10s] flaky turn ended by its watchdog: total_timeout",
        "[ 1.20s] flaky answered 'done: try again' on its next turn",
        "[ 1.20s] writer's session: writer-1",
    ]


async def test_scripted_team_as_printed_leaves_the_users_home_alone(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    # A user's shell: their HOME, no store of the tests', no XDG directories.
    env = {
        key: value
        for key, value in os.environ.items()
        if key != "AGENTRT_STORE" and not key.startswith("XDG_")
    }
    with trio.fail_after(60):
        done = await trio.run_process(
            [sys.executable, str(EXAMPLES / "scripted_team.py")],
            env={**env, "HOME": str(home)},
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    assert done.returncode == 0, done.stderr.decode()
    assert "writer's session: writer-1" in done.stdout.decode()
    assert list(home.rglob("*")) == []  # no default store made there


async def test_restart_resume_on_its_sqlite_store() -> None:
    module = load("restart_resume")
    out: list[str] = []
    await module.main(out)  # type: ignore[attr-defined]
    # Real time: the same story, the same lines after the timestamps.
    assert [line[9:] for line in out] == [line[9:] for line in RESTART_RESUME]


async def test_restart_resume(autojump_clock: MockClock) -> None:
    module = load("restart_resume")
    out: list[str] = []
    await module.main(out, agentrt.MemoryStore())  # type: ignore[attr-defined]
    assert out == RESTART_RESUME


# The crash is at 0 s; the supervisor restarts the ledger after its 0.1 s backoff, with its
# state and its session, and the queued prompt runs on the new instance.
RESTART_RESUME = [
    "[ 0.00s] init_agent: a new Ledger instance",
    "[ 0.00s] CLI turn for 'coffee 3.50' (a new session)",
    "[ 0.00s] answer: 'filed: coffee 3.50'",
    "[ 0.00s] CLI turn for '??? smudged receipt' (--resume ledger-1)",
    "[ 0.00s] the agent crashed: agent 'ledger' stopped: handle_response raised"
    " ValueError: cannot read this entry",
    "[ 0.00s] status: restarting, 1 prompt queued",
    "[ 0.10s] init_agent: a new Ledger instance",
    "[ 0.10s] restore_state: entries filed so far: 1",
    "[ 0.10s] CLI turn for 'lunch 12.00' (--resume ledger-1)",
    "[ 0.10s] answer: 'filed: lunch 12.00' (after 1 restart)",
    "[ 0.10s] -- the program exits and starts again --",
    "[ 0.10s] init_agent: a new Ledger instance",
    "[ 0.10s] restore_state: entries filed so far: 2",
    "[ 0.10s] CLI turn for 'train 7.20' (--resume ledger-1)",
    "[ 0.10s] answer: 'filed: train 7.20' on session ledger-1",
    "[ 0.10s] the store: 4 turns, last one complete",
]


# The examples written for the real claude CLI run here with the pinned binary against the
# fake Anthropic API. First as the README says to run them, one command each, the fake
# answering every call with an echo of its prompt; then in-process where the story needs
# a scripted model (a tool call, a chain of turns on one session).


async def run_on_the_fake(
    name: str, cwd: Path, claude: Path, *options: str, check: bool = True
) -> list[str]:
    """``python -m agentrt.testing.fake_anthropic [OPTIONS] -- python examples/NAME.py CWD``:
    its stdout lines, after checking it succeeded (unless ``check`` is false: then its
    stdout and stderr)."""
    env = {**os.environ, "CLAUDE_CLI": str(claude)}
    with trio.fail_after(120):
        done = await trio.run_process(
            [
                sys.executable,
                "-m",
                "agentrt.testing.fake_anthropic",
                *options,
                "--",
                sys.executable,
                str(EXAMPLES / f"{name}.py"),
                str(cwd),
            ],
            env=env,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    if not check:
        return [done.stdout.decode(), done.stderr.decode()]
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode().splitlines()


@pytest.mark.realcli
async def test_quickstart_in_one_command(pinned_claude: Path, tmp_path: Path) -> None:
    answer, summary = await run_on_the_fake("quickstart", tmp_path, pinned_claude)
    assert answer == "You said: In one sentence: what is in this directory?"
    assert summary.startswith("(") and ", complete, session " in summary
    # Its store: $AGENTRT_STORE, which the command passes on (the tests set a private one).
    async with SQLiteStore(Path(os.environ["AGENTRT_STORE"])) as store:
        record = await store.load("quickstart")
    assert record is not None and summary.endswith(f"session {record.session_id})")


@pytest.mark.realcli
async def test_poll_in_one_command(pinned_claude: Path, tmp_path: Path) -> None:
    told, first, second, same = await run_on_the_fake("poll", tmp_path, pinned_claude)
    assert told == "told twice; poll says Pending()"
    assert first.startswith("first (after ")
    assert first.endswith(" ticks of our own work): You said: Which files are here? One line.")
    assert second == ("second: You said: Which of them looks most important, and why? One line.")
    assert same == "both turns in one session: True"


@pytest.mark.realcli
async def test_reviewer_in_one_command(pinned_claude: Path, tmp_path: Path) -> None:
    lines = await run_on_the_fake("reviewer", tmp_path, pinned_claude)
    assert lines == [
        "You said: Review the Python files here: the worst bug, briefly.",
        "(read: nothing)",
    ]


@pytest.mark.realcli
async def test_reviewers_story_in_one_command(pinned_claude: Path, tmp_path: Path) -> None:
    # Scripted: the Python files listed, one of them read.
    (tmp_path / "calc.py").write_text("def ratio(a, b):\n    return a / b\n")
    lines = await run_on_the_fake("reviewer", tmp_path, pinned_claude, "--scenario", "reviewer")
    assert lines == ["Read calc.py; a real model would name its worst bug here.", "(read: calc.py)"]


@pytest.mark.realcli
async def test_guardeds_story_in_one_command(pinned_claude: Path, tmp_path: Path) -> None:
    (tmp_path / "build").mkdir()
    lines = await run_on_the_fake("guarded", tmp_path, pinned_claude, "--scenario", "guarded")
    assert lines == [
        "Clean up the build output. -> Deleting was denied, so I proposed build for deletion.",
        "What is in .git/config? -> The hook blocked it: I left .git alone.",
        "  denied 'rm -rf build'",
        "  blocked Read on .git",
        "  proposed for deletion: build",
    ]
    assert (tmp_path / "build").is_dir()


@pytest.mark.realcli
async def test_chain_in_one_command(pinned_claude: Path, tmp_path: Path) -> None:
    lines = await run_on_the_fake("chain", tmp_path, pinned_claude)
    tightened = "You said: Tighten that to at most eight words."
    assert lines == [
        "draft 1: You said: Write a tagline for a runtime that supervises coding agents.",
        f"draft 2: {tightened}",
        f"critic: You said: Critique this tagline in one sentence: {tightened}",
    ]


@pytest.mark.realcli
async def test_pool_in_one_command(pinned_claude: Path, tmp_path: Path) -> None:
    lines = await run_on_the_fake("pool", tmp_path, pinned_claude)
    jobs = load("pool").JOBS  # type: ignore[attr-defined]
    *answers, summary = lines
    assert sorted(line.split(": ", 1)[1] for line in answers) == sorted(
        f"You said: {job}" for job in jobs
    )
    assert summary.startswith(f"{len(jobs)} jobs on ")
    assert summary.endswith(" agents, at most 2 CLIs at once")


def prompts(api: FakeAnthropic) -> list[str]:
    """The prompt of each model call that started a turn (tool follow-ups left out)."""
    return [r.last_user_text() for r in api.message_requests if not r.tool_results()]


@pytest.mark.realcli
async def test_reviewer(fake_claude: FakeAnthropic, tmp_path: Path) -> None:
    source = tmp_path / "calc.py"
    source.write_text("def ratio(a, b):\n    return a / b\n")
    fake_claude.set_script(
        [
            AnthropicToolUse("Read", {"file_path": str(source)}, text="Reading."),
            AnthropicText("calc.py: ratio() divides by zero when b == 0."),
        ]
    )
    text, read = await load("reviewer").main(str(tmp_path))  # type: ignore[attr-defined]
    assert text == "Reading.\n\ncalc.py: ratio() divides by zero when b == 0."
    assert read == [str(source)]
    first, second = fake_claude.message_requests
    # The CLI adds a placeholder it marks "never call this tool" (defer_loading).
    offered = {t["name"] for t in first.body["tools"] if not t.get("defer_loading")}
    assert offered == {"Read", "Grep", "Glob"}
    assert "never change files" in json.dumps(first.body["system"])
    assert "return a / b" in json.dumps(second.tool_results())


@pytest.mark.realcli
async def test_chain(fake_claude: FakeAnthropic, tmp_path: Path) -> None:
    fake_claude.set_script(
        [
            AnthropicText("Agents that crash, restart and remember where they were."),
            AnthropicText("Crash, restart, remember."),
            AnthropicText("Punchy, but say what it supervises."),
        ]
    )
    drafts, verdict = await load("chain").main(str(tmp_path))  # type: ignore[attr-defined]
    assert drafts == [
        "Agents that crash, restart and remember where they were.",
        "Crash, restart, remember.",
    ]
    assert verdict == "Punchy, but say what it supervises."
    writer_1, writer_2, critic = fake_claude.message_requests
    assert prompts(fake_claude)[1:] == [
        "Tighten that to at most eight words.",
        "Critique this tagline in one sentence: Crash, restart, remember.",
    ]
    # The chained turn resumed the writer's session; the critic has its own.
    assert (
        writer_2.headers["x-claude-code-session-id"] == writer_1.headers["x-claude-code-session-id"]
    )
    assert (
        critic.headers["x-claude-code-session-id"] != writer_1.headers["x-claude-code-session-id"]
    )


@pytest.mark.realcli
async def test_guarded(fake_claude: FakeAnthropic, tmp_path: Path) -> None:
    (tmp_path / "build").mkdir()
    proposal = AnthropicToolUse.mcp("agentrt", "propose_deletion", {"paths": ["build"]})
    fake_claude.set_script(
        [
            AnthropicToolUse("Bash", {"command": "rm -rf build", "description": "Clean"}),
            AnthropicToolUse.tool_search(proposal.name),
            proposal,
            AnthropicText("Proposed."),
            AnthropicToolUse("Read", {"file_path": str(tmp_path / ".git" / "config")}),
            AnthropicText("Left it alone."),
        ]
    )
    decisions, proposed = await load("guarded").main(str(tmp_path))  # type: ignore[attr-defined]
    assert decisions == ["denied 'rm -rf build'", "blocked Read on .git"]
    assert proposed == ["build"] and (tmp_path / "build").exists()
    texts = [t for r in fake_claude.message_requests for t in r.texts()]
    assert "deleting needs a human: call propose_deletion instead" in texts
    assert "1 paths proposed for deletion" in texts
    assert any("leave .git alone" in t for t in texts)


@pytest.mark.realcli
async def test_app_tools_in_one_command(pinned_claude: Path, tmp_path: Path) -> None:
    # The echoing fake calls no tool: the answer is the echo, and nothing was noted.
    lines = await run_on_the_fake("app_tools", tmp_path, pinned_claude)
    assert lines == [
        "You said: How many words are in 'to be or not to be'? Note the answer.",
        "(notes: none)",
    ]


@pytest.mark.realcli
async def test_app_tools_story_in_one_command(pinned_claude: Path, tmp_path: Path) -> None:
    # Scripted: the plain tool counts, the method tool notes the count.
    lines = await run_on_the_fake("app_tools", tmp_path, pinned_claude, "--scenario", "app_tools")
    assert lines == ["6 words; noted.", "(notes: 6 words #hamlet)"]


@pytest.mark.realcli
async def test_app_tools_from_a_script_file(pinned_claude: Path, tmp_path: Path) -> None:
    counted = "mcp__agentrt__word_count"
    replies = [
        {"tool": "ToolSearch", "input": {"query": f"select:{counted}", "max_results": 5}},
        {"tool": counted, "input": {"text": "a b c"}, "text": "Counting."},
        {"text": "Three words."},
    ]
    script = tmp_path / "replies.json"
    script.write_text(json.dumps(replies))
    lines = await run_on_the_fake("app_tools", tmp_path, pinned_claude, "--script", str(script))
    assert lines == ["Counting.", "", "Three words.", "(notes: none)"]


@pytest.mark.realcli
async def test_a_second_run_with_the_same_home_continues_the_session(
    pinned_claude: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    _, first = await run_on_the_fake("quickstart", tmp_path, pinned_claude, "--home", str(home))
    _, second = await run_on_the_fake("quickstart", tmp_path, pinned_claude, "--home", str(home))
    session = first.rsplit("session ", 1)[1].rstrip(")")
    assert second.endswith(f", complete, session {session})")
    async with SQLiteStore(Path(os.environ["AGENTRT_STORE"])) as store:
        record = await store.load("quickstart")
    assert record is not None and (record.session_id, record.turns) == (session, 2)
    # Without that HOME the CLI has no transcript of it: the turn says how to go on.
    out, err = await run_on_the_fake("quickstart", tmp_path, pinned_claude, check=False)
    assert out == "" and "turn failed (session_lost): No conversation found" in err
    assert "rt.reset_session(name), start_agent(..., resume=False)" in err


@pytest.mark.realcli
async def test_app_tools(fake_claude: FakeAnthropic, tmp_path: Path) -> None:
    counted = AnthropicToolUse.mcp("agentrt", "word_count", {"text": "to be or not to be"})
    noted = AnthropicToolUse.mcp("agentrt", "note", {"text": "6 words", "tags": ["hamlet"]})
    fake_claude.set_script(
        [
            AnthropicToolUse.tool_search(counted.name, noted.name),
            counted,
            noted,
            AnthropicText("Six words; noted."),
        ]
    )
    text, notes = await load("app_tools").main(str(tmp_path))  # type: ignore[attr-defined]
    assert text == "Six words; noted."
    assert notes == ["6 words #hamlet"]
    *_, after_count, after_note = fake_claude.message_requests
    assert [r["content"] for r in after_count.tool_results()] == [[{"type": "text", "text": "6"}]]
    (note_result,) = after_note.tool_results()
    assert note_result["content"] == [{"type": "text", "text": "noted (1 so far)"}]


FLEET = [
    "alpha: Committed on my branch.",
    "beta: stopped by the CLI's own limit: Reached maximum budget ($0.00022)",
    "refused: agent 'alpha': the budget of runtime is spent ($0.00056 of $0.0005); "
    "the agent is halted",
    "agentrt/alpha: 'alpha: a line', $0.00028, halted",
    "agentrt/beta: 'beta: a line', $0.00028, idle",
]


@pytest.mark.realcli
async def test_fleets_story_in_one_command(
    pinned_claude: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two agents commit in their own worktrees under one budget; the CLI's own limit ends
    the turn that reaches it, and the next request is refused. On any repository with a
    commit (this one has no notes.txt), twice: each run leaves the branches, not the
    worktrees."""
    # As the README runs it: its store is in the fake API's temporary HOME, each run's own.
    monkeypatch.delenv("AGENTRT_STORE")
    repo = tmp_path / "repo"
    repo.mkdir()
    identity = ["-c", "user.name=T", "-c", "user.email=t@example.invalid"]
    await trio.run_process(["git", "-C", str(repo), "init", "-q", "-b", "main"])
    # An empty repository: nothing to branch from, and the example says so.
    out, err = await run_on_the_fake(
        "fleet", repo, pinned_claude, "--scenario", "fleet", check=False
    )
    assert out == "" and "not a git repository with a commit to branch from" in err
    (repo / "README").write_text("a project\n")
    for git in (["add", "README"], [*identity, "commit", "-qm", "1"]):
        await trio.run_process(["git", "-C", str(repo), *git])
    for run in (1, 2):
        assert await run_on_the_fake("fleet", repo, pinned_claude, "--scenario", "fleet") == FLEET
        for name in ("alpha", "beta"):
            shown = await trio.run_process(
                ["git", "-C", str(repo), "show", f"agentrt/{name}:notes.txt"],
                capture_stdout=True,
            )
            assert shown.stdout.decode() == f"{name} was here\n" * run
        listed = await trio.run_process(
            ["git", "-C", str(repo), "worktree", "list", "--porcelain"], capture_stdout=True
        )
        assert listed.stdout.decode().count("worktree ") == 1  # the repository's own
    assert not (repo / "notes.txt").exists()
    # A worktree a run left (killed before its end), its store gone with its HOME: the
    # next run's refusal names the ways out.
    left = f"{repo}.worktrees/agentrt/alpha"
    await trio.run_process(["git", "-C", str(repo), "worktree", "add", "-q", left, "agentrt/alpha"])
    out, err = await run_on_the_fake(
        "fleet", repo, pinned_claude, "--scenario", "fleet", check=False
    )
    assert f"BranchInUse: branch 'agentrt/alpha' of {repo} is in use by the worktree at" in err
    assert "`git worktree remove PATH`" in err and "GitWorktree(repo, branch=...)" in err


def _sleeping(app: int) -> list[ProcInfo]:
    """The Bash tool's ``sleep 300`` among the turn processes of the runtime in ``app``."""
    return [p for p in turn_processes(f"{app}.") if p.cmdline == "sleep 300"]


async def _get(port: int, path: str) -> tuple[int, dict[str, Any]]:
    """One HTTP/1.1 GET on loopback: the status and the JSON body."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(
            f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode()
        )
        raw = b""
        while chunk := await stream.receive_some():
            raw += chunk
    head, body = raw.split(b"\r\n\r\n", 1)
    return int(head.split()[1]), json.loads(body)


@pytest.mark.realcli
async def test_asgi_app_in_one_command(pinned_claude: Path, tmp_path: Path) -> None:
    # The fake model's first answer is a Bash tool call that sleeps; every later one echoes.
    script = tmp_path / "script.json"
    # (A standalone sleep is refused by Claude Code; one inside a command runs.)
    wait = {"command": "echo start; sleep 300; echo end", "description": "Wait"}
    script.write_text(json.dumps([{"tool": "Bash", "input": wait}]))
    # The example as its main() serves it, its agent allowed to run Bash.
    serve = tmp_path / "serve.py"
    serve.write_text(
        f"import sys\nsys.path.insert(0, {str(EXAMPLES)!r})\nimport asgi_app\n"
        f"asgi_app.main({str(tmp_path)!r}, allowed_tools=['Bash'])\n"
    )
    command = [sys.executable, "-m", "agentrt.testing.fake_anthropic", "--script", str(script)]
    command += ["--", sys.executable, str(serve)]
    env = {**os.environ, "CLAUDE_CLI": str(pinned_claude)}
    async with trio.open_nursery() as nursery:
        start = functools.partial(
            trio.run_process, command, env=env, stdout=subprocess.PIPE, check=False
        )
        server: trio.Process = await nursery.start(start)
        assert server.stdout is not None
        lines = _Lines(server.stdout)
        with trio.fail_after(60):
            first = await lines.next()
        port = int(first.rsplit(":", 1)[1])
        (app,) = [p.pid for p in processes_below(server.pid) if "serve.py" in p.cmdline]

        # A client that goes away while the turn's tool runs: the turn is cancelled and its
        # whole tree killed (the tool's own session included) before the handler returns.
        client = await trio.open_tcp_stream("127.0.0.1", port)
        await client.send_all(b"GET /ask?prompt=wait HTTP/1.1\r\nHost: x\r\n\r\n")
        # Real processes on a loaded machine: the bounds are generous. Another program's
        # processes have no event to wait on, and each look reads every environ in /proc.
        with trio.fail_after(120):
            while not (tool := _sleeping(app)):  # noqa: ASYNC110
                await trio.sleep(0.1)
        assert tool[0].sid == tool[0].pgid  # in a session of its own, as Claude Code runs it
        await client.aclose()
        with trio.fail_after(60):
            assert await lines.next() == "turn failed: cancelled"
        # Nothing of the turn is left, reparented orphans included (they carry its marker);
        # below the runner, only the example (and its runtime's fence guard).
        assert turn_processes(f"{app}.") == []
        left = [p.cmdline for p in processes_below(server.pid)]
        assert [c for c in left if "serve.py" not in c and "_fence_guard.py" not in c] == []

        # The service goes on, on the same conversation.
        with trio.fail_after(120):
            status, body = await _get(port, "/ask?prompt=hello")
        assert (status, body["text"]) == (200, "You said: hello")
        assert (await _get(port, "/ask?prompt=%20"))[0] == 400
        server.send_signal(signal.SIGINT)  # uvicorn stops, then the runtime
        with trio.fail_after(60):
            assert await server.wait() == 0
    async with SQLiteStore(Path(os.environ["AGENTRT_STORE"])) as store:
        record = await store.load("helper")
    assert record is not None and record.session_id == body["session"] and record.turns == 2


class _Lines:
    """A process's stdout, line by line."""

    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self._stream = stream
        self._buffer = b""

    async def next(self) -> str:
        while b"\n" not in self._buffer:
            chunk = await self._stream.receive_some()
            assert chunk, f"stdout ended: {self._buffer!r}"
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.decode()
