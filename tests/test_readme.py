"""The README says what the code does: every program it shows is run by a test as printed
(its quickstart and its no-login recipe here, on the fake model API), its excerpts are the
examples' own text, and its option tables list exactly the options there are."""

from __future__ import annotations

import os
import re
import shlex
import sys
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
from trio.testing import MockClock

from agentrt import InvalidOptions
from agentrt._options import AgentOptions
from agentrt.backend import Backend
from agentrt.backends.claude import ClaudeBackend
from agentrt.backends.codex import CodexBackend

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text()


def fenced_blocks() -> list[tuple[str, str]]:
    """Every fenced block: its language and its text."""
    return re.findall(r"(?m)^```(\w*)\n(.*?)^```", README, re.DOTALL)


def code_blocks(lang: str = "python") -> list[str]:
    return [text for language, text in fenced_blocks() if language == lang]


def code_block(containing: str, lang: str = "python") -> str:
    [block] = [b for b in code_blocks(lang) if containing in b]
    return block


TESTS = Path(__file__).parent

# Each program block of the README, by a line only it has: the test that runs it as
# printed, and for an excerpt of an example, that example (run by the test as a whole).
RUN_BY: dict[str, tuple[str, str, str | None]] = {
    "trio.run(main)": ("test_readme.py", "test_the_quickstart_runs_as_printed", None),
    "asyncio.run(main())": (
        "test_readme.py",
        "test_the_asyncio_quickstart_runs_as_printed",
        None,
    ),
    "agentrt.testing.fake_anthropic": (
        "test_readme.py",
        "test_the_no_login_recipe_runs_as_printed",
        None,
    ),
    "class Guarded": ("test_examples.py", "test_guardeds_story_in_one_command", "guarded.py"),
    "async def test_": ("test_readme.py", "test_the_testing_example_passes", None),
    "class Notetaker": ("test_examples.py", "test_app_tools_story_in_one_command", "app_tools.py"),
    "workspace=agentrt.GitWorktree(repo)": (
        "test_examples.py",
        "test_fleets_story_in_one_command",
        "fleet.py",
    ),
    "OTLPSpanExporter": (
        "test_telemetry.py",
        "test_the_readmes_otlp_setup_exports_a_turns_span_and_metrics",
        None,
    ),
    "JsonFormatter": (
        "test_telemetry.py",
        "test_the_readmes_json_log_setup_indexes_the_agents_fields",
        None,
    ),
}


def test_every_program_block_is_run_by_a_test() -> None:
    for language, block in fenced_blocks():
        assert language in ("python", "sh"), f"a ```{language} block: say how it is tested"
        markers = [m for m in RUN_BY if m in block]
        assert len(markers) == 1, f"say in RUN_BY which test runs this block:\n{block}"
        [marker] = markers
        test_file, test_name, example = RUN_BY[marker]
        source = (TESTS / test_file).read_text()
        assert f"def {test_name}(" in source, (marker, test_file, test_name)
        if example is not None:
            # Shown as the example has it, line for line, so the example's test runs it.
            assert block in (ROOT / "examples" / example).read_text(), (marker, example)
        else:
            start = source.index(f"def {test_name}(")
            body = re.split(r"\n(?=@|def |async def )", source[start:])[0]
            assert f'block("{marker}"' in body, f"{test_name} does not run the block of {marker!r}"


def table_after(heading: str) -> set[str]:
    """The option names in the first column of the first table after ``heading``."""
    rest = README[README.index(heading) :]
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


async def test_the_testing_example_passes(autojump_clock: MockClock) -> None:
    namespace: dict[str, Any] = {}
    exec(compile(code_block("async def test_"), "README.md", "exec"), namespace)
    tests = [f for name, f in namespace.items() if name.startswith("test_")]
    assert len(tests) == 1
    await tests[0](autojump_clock)


def known_options(backend: Backend) -> set[str]:
    """Every option ``backend`` knows, as its refusal of an unknown one lists them."""
    with pytest.raises(InvalidOptions) as refused:
        backend.parse_options({"no such option": 1})
    assert refused.value.known_options is not None
    return set(refused.value.known_options)


def test_option_tables_match_the_code() -> None:
    # `resume` is the supervisor's option (start_agent resumes a stored session).
    runtime = {field.name for field in attrs.fields(AgentOptions)} | {"resume"}
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
    claude and no virtualenv on PATH; its stdout lines, after checking it succeeded."""
    env = {key: value for key, value in os.environ.items() if key != "CLAUDE_CLI"}
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


@pytest.mark.realcli
async def test_the_no_login_recipe_runs_as_printed(claude_bin: Path) -> None:
    [command] = code_block("agentrt.testing.fake_anthropic", lang="sh").splitlines()
    quickstart_answered(await run_on_the_fake(shlex.split(command), ROOT))


@pytest.mark.realcli
async def test_the_quickstart_runs_as_printed(claude_bin: Path, tmp_path: Path) -> None:
    (tmp_path / "quickstart.py").write_text(code_block("trio.run(main)"))
    runner = [sys.executable, "-m", "agentrt.testing.fake_anthropic"]
    quickstart_answered(await run_on_the_fake([*runner, "--", "python", "quickstart.py"], tmp_path))


@pytest.mark.realcli
async def test_the_asyncio_quickstart_runs_as_printed(claude_bin: Path, tmp_path: Path) -> None:
    (tmp_path / "quickstart.py").write_text(code_block("asyncio.run(main())"))
    runner = [sys.executable, "-m", "agentrt.testing.fake_anthropic"]
    lines = await run_on_the_fake([*runner, "--", "python", "quickstart.py"], tmp_path)
    assert lines == ["You said: In one sentence: what is in this directory?"]
