"""The command's surface: help, usage errors, exit codes, one-line errors, `sessions`."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import trio

from agentrt import SQLiteStore, Usage
from agentrt.testing import fake_cli_executable

from ._run import SHIPPED, agentrt


async def test_help_and_version(base_env: dict[str, str]) -> None:
    run = await agentrt("--help", env=base_env)
    assert run.code == 0
    for command in ("demo", "doctor", "chat", "ask", "sessions"):
        assert command in run.stdout
    run = await agentrt("--version", env=base_env)
    assert run.code == 0 and run.stdout.startswith("agentrt ")


async def test_console_script_is_installed(base_env: dict[str, str]) -> None:
    script = Path(sys.executable).with_name("agentrt")
    result = await trio.run_process(
        [str(script), "sessions"], env=base_env, capture_stdout=True, check=False
    )
    assert result.returncode == 0
    assert b"No sessions yet" in result.stdout


async def test_usage_errors_exit_2(base_env: dict[str, str]) -> None:
    assert (await agentrt(env=base_env)).code == 2
    run = await agentrt("ask", "only-a-name", env=base_env)
    assert run.code == 2 and "PROMPT" in run.stderr.upper()
    assert (await agentrt("ask", "a", "b", "-o", "no-equals", env=base_env)).code == 2


async def seed(path: Path) -> None:
    async with SQLiteStore(path) as store:
        for name, backend in (("alpha", "claude"), ("beta", "codex")):
            await store.checkpoint_session(
                name, backend=backend, session_id=f"{name}-session", cwd=f"/work/{name}"
            )
        await store.record_turn(
            "alpha",
            stop_reason="complete",
            cost_usd=0.25,
            usage=Usage(input_tokens=100, output_tokens=7),
            session_id=None,
        )


async def test_sessions_list_show_forget(base_env: dict[str, str], tmp_path: Path) -> None:
    store = Path(base_env["AGENTRT_STORE"])
    run = await agentrt("sessions", env=base_env)
    assert run.code == 0 and "No sessions yet" in run.stdout
    assert not await trio.Path(store).exists(), "reading must not create the store"
    await seed(store)

    run = await agentrt("sessions", "list", env=base_env)
    assert run.code == 0
    header, alpha, beta = run.stdout.splitlines()[1:4]
    assert header.split()[:4] == ["NAME", "BACKEND", "SESSION", "TURNS"]
    assert alpha.split()[:6] == ["alpha", "claude", "alpha-session", "1", "$0.2500", "complete"]
    assert beta.split()[:4] == ["beta", "codex", "beta-session", "0"]

    listed = json.loads((await agentrt("sessions", "--json", env=base_env)).stdout)
    assert [r["name"] for r in listed] == ["alpha", "beta"]
    assert listed[0]["usage"]["input_tokens"] == 100 and listed[0]["cwd"] == "/work/alpha"

    run = await agentrt("sessions", "show", "alpha", env=base_env)
    assert run.code == 0 and "alpha-session" in run.stdout and "100 in / 7 out" in run.stdout
    shown = json.loads((await agentrt("sessions", "show", "beta", "--json", env=base_env)).stdout)
    assert shown["backend"] == "codex" and shown["session_id"] == "beta-session"

    run = await agentrt("sessions", "forget", "alpha", env=base_env)
    assert run.code == 0 and "Forgot agent 'alpha'" in run.stdout
    run = await agentrt("sessions", "forget", "alpha", env=base_env)
    assert run.code == 1
    assert run.stderr.strip().splitlines() == [
        f"agentrt: no stored session named 'alpha' in {store}. Fix: `agentrt sessions` lists "
        "the stored names (--store picks another store)"
    ]
    other = tmp_path / "other.sqlite3"
    run = await agentrt("sessions", "show", "beta", "--store", str(other), env=base_env)
    assert run.code == 1 and str(other) in run.stderr


async def test_errors_are_one_line_unless_debug(base_env: dict[str, str], tmp_path: Path) -> None:
    bad = tmp_path / "not-a-store.sqlite3"
    bad.write_text("this is not SQLite")
    run = await agentrt("sessions", "--store", str(bad), env=base_env)
    assert run.code == 1
    assert "Traceback" not in run.stderr
    [line] = run.stderr.strip().splitlines()
    assert line.startswith(f"agentrt: session store {bad}")
    assert line.endswith(
        "Fix: move that file aside, or use another store with --store or AGENTRT_STORE"
    )
    assert bad.read_text() == "this is not SQLite"

    run = await agentrt("--debug", "sessions", "--store", str(bad), env=base_env)
    assert run.code == 1
    assert "Traceback" in run.stderr and run.stderr.strip().splitlines()[-1] == line


async def test_ask_refuses_a_session_of_another_backend(base_env: dict[str, str]) -> None:
    await seed(Path(base_env["AGENTRT_STORE"]))
    run = await agentrt("ask", "beta", "hello", "--backend", "claude", env=base_env)
    assert run.code == 1
    assert run.stderr.strip() == (
        "agentrt: agent 'beta' has a codex session, not a claude one. "
        "Fix: pass --backend codex, or --new to start over with claude"
    )


async def test_unknown_backend_and_bad_option(base_env: dict[str, str]) -> None:
    run = await agentrt("ask", "x", "hi", "--backend", "nope", "--cwd", "/", env=base_env)
    assert run.code == 1
    assert "no backend named 'nope'" in run.stderr
    shipped = ", ".join(SHIPPED)
    assert f"Fix: pass --backend with one of: {shipped}" in run.stderr
    run = await agentrt("ask", "x", "hi", "--cwd", "/", "-o", "watchdog=-1", env=base_env)
    assert run.code == 1
    assert (
        "option 'watchdog'=-1" in run.stderr
        and "Fix: check the -o watchdog=VALUE option" in run.stderr
    )
    run = await agentrt("ask", "x", "hi", "--backend", "cluade", "--cwd", "/", env=base_env)
    assert run.code == 1 and "did you mean 'claude'?" in run.stderr
    run = await agentrt("ask", "x", "hi", "--cwd", "/", "-o", "watchdgo=900", env=base_env)
    assert run.code == 1
    [line] = run.stderr.strip().splitlines()
    assert line.startswith(
        "agentrt: option 'watchdgo'=900: unknown option; did you mean 'watchdog'?"
    )
    assert "docs/reference/options.md" in line and "allowed_tools" not in line
    assert "Fix: check the -o watchdgo=VALUE option" in line


async def test_a_missing_cli_is_named_before_any_turn_with_its_fix(
    base_env: dict[str, str],
) -> None:
    env = {**base_env, "CLAUDE_CLI": "/nonexistent/claude"}
    run = await agentrt("ask", "x", "hi", "--cwd", "/", env=env)
    assert run.code == 1
    [line] = run.stderr.strip().splitlines()
    assert line.startswith("agentrt: cannot start '/nonexistent/claude': not found. Fix: ")
    assert "point -o binary=PATH at it" in line


async def test_a_named_store_in_a_missing_directory_is_refused(
    base_env: dict[str, str], tmp_path: Path
) -> None:
    store = tmp_path / "no" / "such" / "sessions.sqlite3"
    run = await agentrt(
        "ask", "bob", "hi", "--cwd", str(tmp_path), "--store", str(store), env=base_env
    )
    assert run.code == 1
    [line] = run.stderr.strip().splitlines()
    assert line.startswith(
        f"agentrt: session store {store}: its directory {store.parent} does not exist"
    )
    assert line.endswith(
        f"Fix: create {store.parent} first, or name a file in an existing directory"
    )
    assert not (tmp_path / "no").exists()


async def test_a_cli_that_is_not_there_does_not_switch_the_stored_backend(
    base_env: dict[str, str], tmp_path: Path
) -> None:
    env = {**base_env, "CLAUDE_CLI": "/nonexistent/claude", "CODEX_CLI": "/nonexistent/codex"}
    where = ("--cwd", str(tmp_path))
    run = await agentrt("ask", "bob", "hi", "--backend", "codex", *where, env=env)
    assert run.code == 1 and "cannot start '/nonexistent/codex'" in run.stderr
    assert json.loads((await agentrt("sessions", "--json", env=env)).stdout) == []
    # Not "agent 'bob' has a codex session": no codex turn ever started.
    run = await agentrt("ask", "bob", "hi", "--backend", "claude", *where, env=env)
    assert run.code == 1 and "cannot start '/nonexistent/claude'" in run.stderr

    await seed(Path(base_env["AGENTRT_STORE"]))  # alpha: a claude session
    run = await agentrt("ask", "alpha", "hi", "--backend", "codex", "--new", *where, env=env)
    assert run.code == 1 and "cannot start '/nonexistent/codex'" in run.stderr
    stored = json.loads((await agentrt("sessions", "show", "alpha", "--json", env=env)).stdout)
    assert (stored["backend"], stored["session_id"], stored["turns"]) == (
        "claude",
        "alpha-session",
        1,
    )


async def test_ctrl_c_while_the_command_starts_prints_no_traceback(
    base_env: dict[str, str], tmp_path: Path
) -> None:
    # Whenever Ctrl+C comes, from the imports to the prompt: a quiet end, never a traceback.
    script = Path(sys.executable).with_name("agentrt")
    # A CLI that is there (chat checks before it opens); no turn runs it.
    env = {**base_env, "CLAUDE_CLI": fake_cli_executable(str(tmp_path), ["exit", 0])}
    for delay in (0.0, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0):
        process = await trio.lowlevel.open_process(
            [str(script), "chat", "bob", "--cwd", str(tmp_path)],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            await trio.sleep(delay)  # the moment of the Ctrl+C is the point of the test
            process.send_signal(signal.SIGINT)
            assert process.stdin is not None and process.stderr is not None
            await process.stdin.aclose()  # at the prompt, after one Ctrl+C: EOF leaves
            err = b""
            with trio.fail_after(30):
                while chunk := await process.stderr.receive_some():
                    err += chunk
                code = await process.wait()
        finally:
            with trio.CancelScope(shield=True):
                if process.returncode is None:
                    process.kill()
                await process.wait()
        if b"Fatal Python error: init_import_site" in err:
            continue  # on a loaded machine: still in the interpreter's start, before our code
        if b"Traceback" in err and not re.search(
            rb'File "[^"]*(agentrt_command\.py|/agentrt/)', err
        ):
            # Still in the launcher that pip writes (its `import re`, the lookup of our module):
            # no line of ours had run, so nothing of ours could set Ctrl+C's default yet.
            continue
        assert b"Traceback" not in err, (delay, err.decode())
        assert code in (0, 130, -signal.SIGINT), (delay, code, err.decode())


async def test_arguments_are_blamed_by_their_own_names(
    base_env: dict[str, str], tmp_path: Path
) -> None:
    run = await agentrt("ask", "", "hi", "--cwd", str(tmp_path), env=base_env)
    assert run.code == 1
    [line] = run.stderr.strip().splitlines()
    assert line.startswith("agentrt: option 'name'=''")
    assert line.endswith("Fix: check the NAME argument (docs/reference/options.md)")

    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    run = await agentrt("ask", "bob", "hi", "--cwd", str(a_file), env=base_env)
    assert run.code == 1
    assert run.stderr.strip() == (
        f"agentrt: the working directory {a_file} is not a directory. Fix: pass --cwd DIR"
    )

    await seed(Path(base_env["AGENTRT_STORE"]))  # alpha: a claude session
    run = await agentrt("chat", "alpha", "--backend", "gemmini", env=base_env)
    assert run.code == 1
    [line] = run.stderr.strip().splitlines()
    assert line.startswith("agentrt: no backend named 'gemmini'")
    assert "--new" not in line
