"""The command's rough edges: advice for a bad DSN, JSON errors with ``--json``, a
subcommand's own usage, the chat's count of its session's turns, a missing CLI found
before the chat opens, and refused input that creates nothing."""

from __future__ import annotations

import json
from pathlib import Path

import trio

from agentrt import SQLiteStore
from agentrt.testing import fake_cli_executable

from ._run import agentrt

BAD_DSN = "host=/nonexistent dbname=agents connect_timeout=2"


def json_error(stdout: str) -> dict[str, object]:
    """The JSON error object a failed command printed on stdout."""
    document = json.loads(stdout)
    assert set(document) == {"error"}, document
    error: dict[str, object] = document["error"]
    return error


async def test_a_bad_dsn_gets_database_advice(base_env: dict[str, str], tmp_path: Path) -> None:
    for args in (
        ("status", "--store", BAD_DSN),
        ("sessions", "--store", BAD_DSN),
        ("ask", "x", "hi", "--cwd", str(tmp_path), "--store", BAD_DSN),
    ):
        run = await agentrt(*args, env=base_env)
        assert run.code == 1, (args, run.stderr)
        assert "session store postgresql host=/nonexistent" in run.stderr
        assert "Fix: check the DSN's host, port, dbname and user" in run.stderr, args
        assert "file" not in run.stderr.split("Fix:")[1], args
    # Nothing was made of the DSN as if it were a file's name, nor the default store.
    assert not await trio.Path(BAD_DSN.split("/")[0]).exists()
    assert not await trio.Path(base_env["AGENTRT_STORE"]).exists()


async def test_failures_with_json_print_a_json_error_object(
    base_env: dict[str, str], tmp_path: Path
) -> None:
    run = await agentrt("ask", "x", "hi", "--cwd", "/nonexistent", "--json", env=base_env)
    assert run.code == 1
    assert json_error(run.stdout) == {
        "message": "the working directory /nonexistent does not exist",
        "fix": "pass --cwd DIR",
        "exit_code": 1,
    }
    assert "agentrt: the working directory /nonexistent does not exist" in run.stderr

    run = await agentrt("sessions", "show", "nobody", "--json", env=base_env)
    assert run.code == 1
    assert "no stored session named 'nobody'" in str(json_error(run.stdout)["message"])

    run = await agentrt("status", "--json", "--store", BAD_DSN, env=base_env)
    assert run.code == 1
    assert "check the DSN's host" in str(json_error(run.stdout)["fix"])

    run = await agentrt("ask", "x", "--json", env=base_env)  # no prompt: a usage error
    assert run.code == 2
    error = json_error(run.stdout)
    assert error["exit_code"] == 2 and "required: prompt" in str(error["message"])


async def test_a_bad_flag_on_a_subcommand_prints_that_subcommands_usage(
    base_env: dict[str, str],
) -> None:
    for args, usage in (
        (("status", "--bogus"), "agentrt status"),
        (("sessions", "show", "x", "--bogus"), "agentrt sessions show"),
        (("ask", "x", "hi", "--bogus"), "agentrt ask"),
        (("chat", "x", "--bogus"), "agentrt chat"),
    ):
        run = await agentrt(*args, env=base_env)
        assert run.code == 2, args
        assert run.stdout == ""
        assert run.stderr.startswith(f"usage: {usage} "), run.stderr
        assert f"{usage}: error: unrecognized arguments: --bogus" in run.stderr


async def test_chat_counts_the_turns_of_the_session_it_continues(
    base_env: dict[str, str], tmp_path: Path
) -> None:
    async with SQLiteStore(base_env["AGENTRT_STORE"]) as store:
        for session, turns in (("s-old", 4), ("s-new", 2)):
            await store.checkpoint_session(
                "alpha", backend="claude", session_id=session, cwd=str(tmp_path)
            )
            for _ in range(turns):
                await store.record_turn(
                    "alpha", stop_reason="complete", cost_usd=None, usage=None, session_id=None
                )
    env = {**base_env, "CLAUDE_CLI": fake_cli_executable(str(tmp_path), ["exit", 0])}
    run = await agentrt("chat", "alpha", env=env)  # stdin at its end: the chat leaves
    assert run.code == 0, run.stderr
    assert "continuing session s-new (2 turns so far)" in run.stdout


async def test_chat_without_its_cli_installed_fails_at_once(
    base_env: dict[str, str], tmp_path: Path
) -> None:
    (tmp_path / "bin").mkdir()
    for env in (
        {**base_env, "CODEX_CLI": "/nonexistent/codex"},
        {**base_env, "PATH": str(tmp_path / "bin")},  # no codex on PATH
    ):
        where = ("--cwd", str(tmp_path))
        run = await agentrt("chat", "x", "--backend", "codex", *where, env=env, stdin=b"hi\n")
        assert run.code == 1, run.stdout
        assert "Chat with" not in run.stdout
        [line] = run.stderr.strip().splitlines()
        assert line.startswith("agentrt: cannot start ")
        assert "codex': not found. Fix: install the CLI" in line


async def test_a_refused_ask_creates_no_state_directory_and_no_store(
    base_env: dict[str, str], tmp_path: Path
) -> None:
    home = trio.Path(base_env["HOME"])
    default_store = {k: v for k, v in base_env.items() if k != "AGENTRT_STORE"}
    named_store = trio.Path(base_env["AGENTRT_STORE"])
    for env in (default_store, base_env):
        for command in ("ask", "chat"):
            args = (command, "x", "hi") if command == "ask" else (command, "x")
            run = await agentrt(*args, "--cwd", "/nonexistent", env=env)
            assert run.code == 1 and "/nonexistent does not exist" in run.stderr
    assert not await (home / ".local").exists()
    assert not await named_store.exists()
