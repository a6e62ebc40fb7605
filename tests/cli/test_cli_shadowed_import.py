"""From the parent directory of a clone named ``agentrt``, Python imports the clone's folder
as an empty namespace package: `agentrt doctor` run there says so."""

from __future__ import annotations

import sys
from pathlib import Path

import trio

from .test_cli_doctor import lines_of

SCRIPT = Path(sys.executable).with_name("agentrt")


def _clone(parent: Path) -> None:
    """A folder laid out as agentrt's repository is: no __init__.py at its top."""
    (parent / "agentrt" / "agentrt").mkdir(parents=True)
    (parent / "agentrt" / "agentrt" / "__init__.py").write_text("")
    (parent / "agentrt" / "pyproject.toml").write_text("")


async def _run(cwd: Path, env: dict[str, str], *argv: str) -> str:
    with trio.fail_after(60):
        done = await trio.run_process(
            list(argv), cwd=cwd, env=env, capture_stdout=True, capture_stderr=True, check=False
        )
    return done.stdout.decode()


async def test_doctor_notices_the_parent_of_a_clone_named_agentrt(
    base_env: dict[str, str], tmp_path: Path
) -> None:
    _clone(tmp_path)
    # What a user meets there: `import agentrt` succeeds, with nothing in it.
    code = "import agentrt; print(agentrt.__file__, hasattr(agentrt, 'open_runtime'))"
    assert await _run(tmp_path, base_env, sys.executable, "-c", code) == "None False\n"

    output = await _run(tmp_path, base_env, str(SCRIPT), "doctor", "--backend", "claude")
    assert lines_of(output)["agentrt import"] == (
        f"WARN Python started in {tmp_path} imports its folder agentrt/ (no __init__.py: a "
        "clone of agentrt's repository?) as an empty namespace package, not agentrt"
    )
    assert "fix: run Python from inside the clone (cd agentrt) or from any directory" in output
    elsewhere = tmp_path / "agentrt"  # inside the clone: the real package
    assert "agentrt import" not in lines_of(
        await _run(elsewhere, base_env, str(SCRIPT), "doctor", "--backend", "claude")
    )
