"""The package layout's two rules that an import can break: the repository's backends/ folder
is installed as agentrt.backends and nowhere else, and the core never imports the command."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path


def _run(code: str, cwd: Path) -> list[str]:
    # A fresh interpreter, away from the repository: what an installed agentrt imports.
    return subprocess.run(
        [sys.executable, "-I", "-c", code], cwd=cwd, capture_output=True, text=True, check=True
    ).stdout.split()


def test_the_backends_are_installed_under_agentrt_only(tmp_path: Path) -> None:
    code = (
        "import importlib.util, agentrt.backends.claude, agentrt.backends.codex\n"
        "print(importlib.util.find_spec('backends') is None)\n"
    )
    assert _run(code, tmp_path) == ["True"]


def test_the_core_never_imports_the_command(tmp_path: Path) -> None:
    code = (
        "import sys, agentrt, agentrt.backend, agentrt.testing, agentrt._backends\n"
        "agentrt._backends.resolve_backend('claude'), agentrt._backends.resolve_backend('codex')\n"
        "print(sorted(m for m in sys.modules if m.startswith('agentrt._cli')))\n"
    )
    assert _run(code, tmp_path) == ["[]"]


def test_the_wheel_lists_every_package_folder() -> None:
    # setuptools is given the packages by name (package-dir cannot be combined with
    # find), so a new subpackage missing from the list would be left out of the wheel only.
    root = Path(__file__).resolve().parent.parent
    config = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = {"agentrt": root / "agentrt", **config["package-dir"]}
    found = {
        ".".join((name, *init.parent.relative_to(root / folder).parts))
        for name, folder in folders.items()
        for init in (root / folder).rglob("__init__.py")
    }
    assert sorted(config["packages"]) == sorted(found)
