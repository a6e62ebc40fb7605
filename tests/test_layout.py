"""The package layout's two rules that an import can break: the repository's backends/ folder
is installed as agentrt.backends and nowhere else, and the core never imports the command."""

from __future__ import annotations

import subprocess
import sys
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
