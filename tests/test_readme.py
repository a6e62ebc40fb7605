"""The README says what the code does: its quickstart is the example's, its test example
passes, and its option tables list exactly the options there are."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import attrs
from trio.testing import MockClock

from agentrt._options import AgentOptions
from agentrt.backends.claude._options import KNOWN_KEYS as CLAUDE_KEYS
from agentrt.backends.codex._options import KNOWN_KEYS as CODEX_KEYS

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text()


def code_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README, re.DOTALL)


def code_block(containing: str) -> str:
    [block] = [b for b in code_blocks() if containing in b]
    return block


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


def test_the_approvals_example_is_the_examples() -> None:
    example = (ROOT / "examples" / "guarded.py").read_text()
    block = code_block("class Guarded")
    for line in block.splitlines():
        assert line in example, line


async def test_the_testing_example_passes(autojump_clock: MockClock) -> None:
    namespace: dict[str, Any] = {}
    exec(compile(code_block("async def test_"), "README.md", "exec"), namespace)
    tests = [f for name, f in namespace.items() if name.startswith("test_")]
    assert len(tests) == 1
    await tests[0](autojump_clock)


def test_option_tables_match_the_code() -> None:
    # `resume` is the supervisor's option (start_agent resumes a stored session).
    runtime = {field.name for field in attrs.fields(AgentOptions)} | {"resume"}
    assert table_after("| Runtime option |") == runtime
    assert table_after('Claude Code (`backend="claude"`)') == set(CLAUDE_KEYS)
    assert table_after('Codex (`backend="codex"`)') == set(CODEX_KEYS)


def test_the_application_tools_block_is_the_example() -> None:
    example = (ROOT / "examples" / "app_tools.py").read_text()
    assert code_block("class Notetaker") in example
