"""No test, example or package file names a path that exists on one machine only.

A file under /tmp or a home directory that a test runs passes on the machine that made it and
fails on every fresh clone; CI once went red that way. Recorded fixtures are excepted (their
machine paths are replaced when they are recorded, which tests/realcli/test_fixtures.py checks).
"""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# An absolute path under /tmp, /var/tmp, /root or /home/<user>, not as part of a longer path or
# word (`$HOME/tmp`, `~/tmp`, `home/tmp`).
_MACHINE_PATH = re.compile(r"(?<![\w.~$/`}-])/(?:tmp|var/tmp|root|home/[\w.-]+)(?![\w.-])")

# Places that name such a path on purpose, each with its reason.
_ALLOWED = {
    # The stand-in that replaces the test's HOME in recorded fixtures.
    ("tests/realcli/_claude.py", "/home/user"),
    # The fixture check's own pattern for machine paths.
    ("tests/realcli/test_fixtures.py", "/tmp"),
}

_SCRIPTS = {"Makefile", ".ci/run", "bench/run"}


def _tracked_files() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    return [
        name
        for name in out.splitlines()
        if not name.startswith("tests/fixtures/")
        and name != "tests/test_machine_paths.py"
        and (name.endswith(".py") or name in _SCRIPTS or name.startswith("tools/"))
    ]


def _code_text(name: str, source: str) -> list[tuple[int, str]]:
    """What a file may run: Python's string literals but docstrings, or a script's lines
    without their comments."""
    if not name.endswith(".py"):
        return [
            (number, line.split("#", 1)[0]) for number, line in enumerate(source.splitlines(), 1)
        ]
    tree = ast.parse(source)
    skipped = {  # docstrings, and the pieces of f-strings (read whole below)
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
    }
    skipped |= {
        id(part)
        for node in ast.walk(tree)
        if isinstance(node, ast.JoinedStr)
        for part in ast.walk(node)
        if part is not node
    }
    return [
        (node.lineno, _string_text(node))
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant | ast.JoinedStr)
        and id(node) not in skipped
        and _string_text(node)
    ]


def _string_text(node: ast.Constant | ast.JoinedStr) -> str:
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else ""
    return "".join(
        _string_text(part) if isinstance(part, ast.Constant) else "{}" for part in node.values
    )


def machine_paths(name: str, source: str) -> list[str]:
    found = []
    for number, text in _code_text(name, source):
        for match in _MACHINE_PATH.finditer(text):
            if (name, match.group()) not in _ALLOWED:
                found.append(f"{name}:{number}: {match.group()}")
    return found


def test_no_file_names_a_path_of_one_machine() -> None:
    found = []
    for name in _tracked_files():
        path = ROOT / name
        if path.is_file():
            found += machine_paths(name, path.read_text(encoding="utf-8", errors="replace"))
    assert found == [], "use tmp_path or a path the test creates:\n" + "\n".join(found)


def test_the_check_finds_what_broke_ci() -> None:
    wrapper = 'options = {"binary": "/tmp/pf/tee-claude"}\n'
    assert machine_paths("tests/x.py", wrapper) == ["tests/x.py:1: /tmp"]
    assert machine_paths("tests/x.py", 'HOME = "/home/ada/.claude"\n') == [
        "tests/x.py:1: /home/ada"
    ]
    assert machine_paths("tools/x", "cp a /root/b\n") == ["tools/x:1: /root"]
    assert machine_paths("tests/x.py", 'p = f"{home}/tmp"  # under /tmp\n') == []
    assert machine_paths("tests/x.py", 'def f():\n    """Not under /tmp."""\n') == []
    assert machine_paths("tools/x", "# not under /tmp\n") == []
