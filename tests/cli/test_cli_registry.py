"""The command's backends come from the ``agentrt.backends`` entry points: a distribution of
its own (installed on the command's path, with its entry point) adds a backend that
``ask``, ``chat``, ``doctor`` and ``demo`` name, and ``doctor`` checks, beside claude and
codex."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from ._run import SHIPPED, agentrt
from .test_cli_doctor import lines_of

# The shipped backends and the test distribution's own, as the command lists them.
WITH_TOY = sorted({*SHIPPED, "toy"})

TOY_BACKEND = '''
"""A third-party backend: a CLI that prints its version, nothing more (agentrt.backend only)."""

from agentrt.backend import Command, child_env


class ToyBackend:
    name = "toy"

    def parse_options(self, raw):
        return {"binary": "toy-cli", **raw}

    def command(self, options, prompt, *, session_id):
        return Command(argv=(options["binary"],), stdin=prompt.encode())

    def translator(self, options, *, baseline=None):
        raise NotImplementedError("the toy runs no turns")

    def version_command(self, options):
        return Command(argv=(options["binary"], "--version"), env=child_env("inherit", {}))
'''


@pytest.fixture
def toy_env(base_env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """``base_env`` with a distribution ``toy-backend`` (entry point ``toy``) importable, and
    its CLI ``toy-cli`` on PATH."""
    site = tmp_path / "site"
    info = site / "toy_backend-1.0.dist-info"
    info.mkdir(parents=True)
    (site / "toy_backend.py").write_text(TOY_BACKEND)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-backend\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[agentrt.backends]\ntoy = toy_backend:ToyBackend\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    cli = bin_dir / "toy-cli"
    cli.write_text(textwrap.dedent("#!/bin/sh\necho 'toy-cli 1.2.3'\n"))
    cli.chmod(0o755)
    return {**base_env, "PYTHONPATH": str(site), "PATH": f"{bin_dir}:{base_env['PATH']}"}


async def test_doctor_checks_a_backend_of_another_distribution(toy_env: dict[str, str]) -> None:
    run = await agentrt("doctor", env=toy_env)
    found = lines_of(run.stdout)
    assert found["toy binary"].startswith("ok ") and found["toy binary"].endswith("/toy-cli")
    # It declares no written_for version, no info(), no capabilities(): the defaults.
    assert found["toy version"] == "ok 1.2.3 (the version agentrt was written for)"
    assert found["toy supports"] == (
        "ok per turn yes, warm no, approvals no, hooks no, app tools no, portable sessions no"
    )
    assert found["toy auth"] == "-- the backend does not say how its CLI logs in"
    # claude and codex are still there, whether installed or not.
    assert "claude binary" in found and "codex binary" in found
    only = await agentrt("doctor", "--backend", "toy", "--json", env=toy_env)
    assert '"area": "toy"' in only.stdout and '"area": "claude"' not in only.stdout


async def test_ask_chat_and_demo_name_the_installed_backends(toy_env: dict[str, str]) -> None:
    for command in ("ask", "chat"):
        run = await agentrt(command, "--help", env=toy_env)
        assert run.code == 0 and f"one of {', '.join(WITH_TOY)}" in " ".join(run.stdout.split())
    run = await agentrt("ask", "x", "hi", "--backend", "toi", "--cwd", "/", env=toy_env)
    assert run.code == 1
    assert "did you mean 'toy'?" in run.stderr
    assert f"Fix: pass --backend with one of: {', '.join(WITH_TOY)}" in run.stderr
    run = await agentrt("demo", "--backend", "nope", env=toy_env)
    assert run.code == 2 and f"(choose from {', '.join(map(repr, WITH_TOY))})" in run.stderr


async def test_without_the_distribution_it_is_not_listed(base_env: dict[str, str]) -> None:
    run = await agentrt("doctor", "--backend", "toy", env=base_env)
    assert run.code == 2 and f"(choose from {', '.join(map(repr, SHIPPED))})" in run.stderr
