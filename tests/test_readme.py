"""The README and the site say what the code does: their quickstart and no-login recipe run
here as printed, on the fake model API, as does the testing guide's example; the quickstart
is the example's text; the options reference lists exactly the options there are.
(tests/test_docs.py holds every other block to the test that runs it.)"""

from __future__ import annotations

import os
import re
import shlex
import sys
from pathlib import Path

import pytest
import trio
from doc_blocks import DOCS, ROOT, blocks, doc_block

from agentrt import Agent, InvalidOptions, MemoryStore, open_runtime
from agentrt.backend import Backend
from agentrt.backends.claude import ClaudeBackend
from agentrt.backends.codex import CodexBackend
from agentrt.testing import ScriptedBackend

OPTIONS = (DOCS / "reference" / "options.md").read_text()


def code_blocks(lang: str = "python") -> list[str]:
    """The README's own blocks of ``lang``."""
    return [b.text for b in blocks(ROOT / "README.md") if b.language == lang]


def table_after(heading: str) -> set[str]:
    """The option names in the first column of the first table after ``heading`` in the
    options reference."""
    rest = OPTIONS[OPTIONS.index(heading) :]
    table = re.search(r"(?m)^\|.*(?:\n\|.*)*", rest)
    assert table is not None
    names: set[str] = set()
    for line in table.group(0).splitlines()[2:]:
        names |= set(re.findall(r"`([a-z_]+)`", line.split("|")[1]))
    return names


def test_quickstart_is_the_example() -> None:
    example = (ROOT / "examples" / "quickstart.py").read_text()
    quickstart = code_blocks()[0]
    body = [line for line in quickstart.splitlines() if line.startswith("        ")]
    assert len(quickstart.strip().splitlines()) <= 15 and len(body) == 4
    for line in body:
        assert line.replace('cwd="."', "cwd=cwd") in example


async def test_the_testing_example_passes(tmp_path: Path) -> None:
    # As a user runs it: pytest in a fresh project holding the page's configuration and
    # its test file, nothing of this repository's own configuration around it.
    (tmp_path / "pyproject.toml").write_text(doc_block("trio_mode = true", "toml"))
    example = doc_block("test_a_hung_turn_is_ended_by_the_watchdog")
    (tmp_path / "test_fixer.py").write_text(example)
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST")}
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist"]
    with trio.fail_after(120):
        done = await trio.run_process(
            argv, cwd=tmp_path, env=env, capture_stdout=True, capture_stderr=True, check=False
        )
    out = done.stdout.decode()
    assert done.returncode == 0, out + done.stderr.decode()
    assert out.splitlines()[-1].startswith("1 passed"), out


def known_options(backend: Backend) -> set[str]:
    """Every option ``backend`` knows, as its refusal of an unknown one lists them."""
    with pytest.raises(InvalidOptions) as refused:
        backend.parse_options({"no such option": 1})
    assert refused.value.known_options is not None
    return set(refused.value.known_options)


async def runtime_options() -> set[str]:
    """Every option start_agent knows besides the backend's, as its refusal of an unknown
    one lists them; and `fork_from` (start_agent forks a stored session)."""
    backend = ScriptedBackend()
    async with open_runtime(store=MemoryStore()) as rt:
        with pytest.raises(InvalidOptions) as refused:
            await rt.start_agent(Agent, name="a", backend=backend, **{"no such option": 1})
    assert refused.value.known_options is not None
    return set(refused.value.known_options) - known_options(backend) | {"resume", "fork_from"}


async def test_option_tables_match_the_code() -> None:
    runtime = await runtime_options()
    assert table_after("| Runtime option |") == runtime
    assert table_after('Claude Code (`backend="claude"`)') == known_options(ClaudeBackend())
    assert table_after('Codex (`backend="codex"`)') == known_options(CodexBackend())


def without(path: str, *names: str) -> str:
    """``path`` without the folders that hold one of ``names`` or are this virtualenv's bin:
    the PATH of a fresh shell on a clone after `make demo`."""
    venv_bin = os.path.dirname(sys.executable)
    return os.pathsep.join(
        folder
        for folder in path.split(os.pathsep)
        if folder and folder != venv_bin and not any(os.path.exists(f"{folder}/{n}") for n in names)
    )


async def run_on_the_fake(argv: list[str], cwd: Path) -> list[str]:
    """Run ``argv`` in ``cwd`` as a fresh shell would after `make demo`: no CLAUDE_CLI, no
    AGENTRT_STORE, no claude and no virtualenv on PATH; its stdout lines, after checking it
    succeeded."""
    fresh = ("CLAUDE_CLI", "AGENTRT_STORE")
    env = {key: value for key, value in os.environ.items() if key not in fresh}
    env["PATH"] = without(env.get("PATH", ""), "claude")
    with trio.fail_after(120):
        done = await trio.run_process(
            argv, cwd=cwd, env=env, capture_stdout=True, capture_stderr=True, check=False
        )
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode().splitlines()


def quickstart_answered(lines: list[str]) -> None:
    answer, summary = lines
    assert answer == "You said: In one sentence: what is in this directory?"
    assert re.fullmatch(r"\(\d+\.\d s, complete, session [0-9a-f-]{36}\)", summary), summary


def session_of(lines: list[str]) -> str:
    quickstart_answered(lines)
    return lines[1].rsplit("session ", 1)[1].rstrip(")")


@pytest.mark.realcli
async def test_the_no_login_recipe_runs_as_printed(claude_bin: Path, tmp_path: Path) -> None:
    [command] = doc_block("agentrt.testing.fake_anthropic", "sh").splitlines()
    argv = shlex.split(command)
    # The printed HOME, in this test's own directory: runs beside this one share no HOME.
    argv[argv.index("--home") + 1] = str(tmp_path / "home")
    first = session_of(await run_on_the_fake(argv, ROOT))
    # Run again, it continues the same conversation, as the README says.
    assert session_of(await run_on_the_fake(argv, ROOT)) == first


@pytest.mark.realcli
async def test_the_quickstart_runs_as_printed(claude_bin: Path, tmp_path: Path) -> None:
    (tmp_path / "quickstart.py").write_text(doc_block("trio.run(main)"))
    runner = [sys.executable, "-m", "agentrt.testing.fake_anthropic"]
    quickstart_answered(await run_on_the_fake([*runner, "--", "python", "quickstart.py"], tmp_path))


@pytest.mark.realcli
async def test_the_asyncio_quickstart_runs_as_printed(claude_bin: Path, tmp_path: Path) -> None:
    (tmp_path / "quickstart.py").write_text(doc_block("asyncio.run(main())"))
    runner = [sys.executable, "-m", "agentrt.testing.fake_anthropic"]
    lines = await run_on_the_fake([*runner, "--", "python", "quickstart.py"], tmp_path)
    assert lines == ["You said: In one sentence: what is in this directory?"]


@pytest.mark.realcli
async def test_the_sync_example_runs_as_printed(claude_bin: Path, tmp_path: Path) -> None:
    (tmp_path / "quickstart.py").write_text(doc_block("agentrt.sync.open_runtime(store"))
    runner = [sys.executable, "-m", "agentrt.testing.fake_anthropic"]
    lines = await run_on_the_fake([*runner, "--", "python", "quickstart.py"], tmp_path)
    assert lines == ["You said: In one sentence: what is in this directory?"]
