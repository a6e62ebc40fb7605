"""`python -m build` makes an sdist and, from it, a wheel, both carrying the LICENSE, which
installs into a clean virtualenv and runs the demo there, on the bundled fake CLI and on the
claude `$CLAUDE_CLI` names, as a user who installed the package would; building from the
clone, as `make demo` does, prints no setuptools warning."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent


def run(
    argv: list[str | Path], env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env, cwd=cwd)
    assert done.returncode == 0, f"{argv}:\n{done.stdout}\n{done.stderr}"
    return done


def clean_env(home: Path) -> dict[str, str]:
    """The environment of a fresh shell: no virtualenv, no PYTHONPATH, no store or CLI of the
    tests; pip's own settings (its index, proxies) kept, so the dependencies come from the
    registry as `make` installs them."""
    kept = {
        key: value
        for key, value in os.environ.items()
        if key.startswith(("PIP_", "HTTP_", "HTTPS_", "NO_PROXY", "http_", "https_", "no_proxy"))
        or key in ("LANG", "LC_ALL", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE")
    }
    return {**kept, "PATH": "/usr/bin:/bin", "HOME": str(home)}


# One build at a time: the sdist's build writes the egg-info beside pyproject.toml.
@pytest.mark.xdist_group("packaging")
def test_the_sdist_and_the_wheel_install_into_a_clean_virtualenv_and_run_the_demo(
    tmp_path: Path, pinned_claude: Path
) -> None:
    dist = tmp_path / "dist"
    run([sys.executable, "-m", "build", "--outdir", dist, ROOT], cwd=ROOT)
    [sdist] = dist.glob("agentrt-*.tar.gz")
    [wheel] = dist.glob("agentrt-*-py3-none-any.whl")
    with tarfile.open(sdist) as archive:
        top = sdist.name.removesuffix(".tar.gz")
        members = {name.removeprefix(f"{top}/") for name in archive.getnames()}
    assert {
        "CHANGELOG.md",
        "LICENSE",
        "docs/index.md",
        "examples/quickstart.py",
        "tests/conftest.py",
    } <= members
    assert not any(name.startswith("docs/_build") for name in members)
    with zipfile.ZipFile(wheel) as archive:
        license = archive.read("agentrt-0.1.0.dist-info/licenses/LICENSE").decode()
    assert license.startswith("MIT License") and "the agentrt authors" in license

    # `python -m build` builds the wheel from the sdist, so installing the wheel is
    # installing what the sdist builds (without building it a second time).
    venv, home = tmp_path / "venv", tmp_path / "home"
    home.mkdir()
    env = clean_env(home)
    run([sys.executable, "-m", "venv", venv], env=env)
    run([venv / "bin" / "python", "-m", "pip", "install", "--quiet", wheel], env=env)
    # From a directory without the clone, so the installed package is the one imported.
    demo = run(
        [venv / "bin" / "agentrt", "demo", "--fake-cli", "--quick", "--json"], env=env, cwd=home
    )
    report = json.loads(demo.stdout)
    assert report["ok"] is True and all(report["checks"].values()), report
    assert {agent["name"] for agent in report["agents"]} >= {"sleepy", "fragile"}
    # A wheel has no checkout to hold a pinned claude: the demo runs the one named.
    with_claude = {**env, "CLAUDE_CLI": str(pinned_claude)}
    demo = run([venv / "bin" / "agentrt", "demo", "--quick", "--json"], env=with_claude, cwd=home)
    report = json.loads(demo.stdout)
    assert report["cli"] == f"{pinned_claude} ($CLAUDE_CLI)", report
    assert report["ok"] is True and all(report["checks"].values()), report


@pytest.mark.xdist_group("packaging")
def test_building_from_the_clone_prints_no_setuptools_warning(tmp_path: Path) -> None:
    # What `make demo`'s `pip install -e` builds: the package from the tree, not the sdist.
    done = run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", tmp_path, ROOT], cwd=ROOT)
    said = done.stdout + done.stderr
    assert "Warning" not in said, said
    [wheel] = tmp_path.glob("agentrt-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    assert {"agentrt/_console/static/console.js", "agentrt/backends/py.typed"} <= names
