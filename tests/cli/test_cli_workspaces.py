"""`agentrt workspaces list | remove | prune`, over SQLite and PostgreSQL stores, with the
real git: a running agent's worktree and one with uncommitted work are not removed (unless
``--force``), a worktree left by a program that is gone is listed, not deleted."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from proc_helpers import store_programs

from agentrt import Agent, GitWorktree, PostgresStore, SessionStore, SQLiteStore, open_runtime
from agentrt.testing import ScriptedBackend, reply

from ._run import agentrt

CHILD = Path(__file__).parent.parent / "workspace_child.py"


def echo() -> ScriptedBackend:
    return ScriptedBackend(default=lambda call: reply(f"echo {call.prompt}"))


@pytest.fixture(params=["sqlite", "postgres"])
def store_argument(request: pytest.FixtureRequest, base_env: dict[str, str]) -> str:
    if request.param == "sqlite":
        return base_env["AGENTRT_STORE"]
    dsn: str = request.getfixturevalue("postgres_dsn")
    return dsn


def opened(argument: str) -> SessionStore:
    return PostgresStore(argument) if "host=" in argument else SQLiteStore(argument)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    identity = ["-c", "user.name=T", "-c", "user.email=t@example.invalid"]
    subprocess.run(["git", "-C", str(repo), "init", "-q", "-b", "main"], check=True)
    (repo / "a.txt").write_text("a\n")
    subprocess.run(["git", "-C", str(repo), "add", "a.txt"], check=True)
    subprocess.run(["git", "-C", str(repo), *identity, "commit", "-qm", "a"], check=True)
    return repo


async def test_list_remove_and_prune(
    base_env: dict[str, str], store_argument: str, repo: Path
) -> None:
    async with open_runtime(store=opened(store_argument), node="host-a") as rt:
        for name in ("busy", "left", "gone"):
            await rt.start_agent(Agent, name=name, backend=echo(), workspace=GitWorktree(repo))
        await rt.stop_agent("left")
        await rt.stop_agent("gone")
        left = Path(f"{repo}.worktrees/agentrt/left")
        (left / "wip.txt").write_text("work in progress\n")
        shutil.rmtree(f"{repo}.worktrees/agentrt/gone")

        run = await agentrt("workspaces", "--store", store_argument, "--json", env=base_env)
        assert run.code == 0, run.stderr
        listed = {w["name"]: w for w in json.loads(run.stdout)}
        assert listed["busy"]["running"] is True and listed["busy"]["exists"] is True
        assert listed["left"]["uncommitted"] == ["?? wip.txt"]
        assert listed["left"]["running"] is False and listed["left"]["branch"] == "agentrt/left"
        assert listed["gone"]["exists"] is False

        run = await agentrt("workspaces", "list", "--store", store_argument, env=base_env)
        assert run.code == 0 and "1 uncommitted" in run.stdout and "missing" in run.stdout

        run = await agentrt("workspaces", "remove", "busy", "--store", store_argument, env=base_env)
        assert run.code == 1 and "is running" in run.stderr
        run = await agentrt("workspaces", "remove", "left", "--store", store_argument, env=base_env)
        assert run.code == 1 and "uncommitted changes (?? wip.txt)" in run.stderr
        assert "--force" in run.stderr and left.is_dir()  # noqa: ASYNC240

        prune = ("workspaces", "prune", "--node", "host-a", "--store", store_argument, "--json")
        run = await agentrt(*prune, env=base_env)
        assert run.code == 0, run.stderr
        assert json.loads(run.stdout) == {"pruned": ["gone"]}  # the dirty one stays

        remove = ("workspaces", "remove", "left", "--force", "--store", store_argument)
        run = await agentrt(*remove, env=base_env)
        assert run.code == 0, run.stderr
        assert "branch 'agentrt/left' stays" in run.stdout and not left.exists()  # noqa: ASYNC240
        run = await agentrt(
            "workspaces", "remove", "nobody", "--store", store_argument, env=base_env
        )
        assert run.code == 1 and "no stored workspace of an agent named 'nobody'" in run.stderr
        assert [w.stored.name for w in await rt.workspaces()] == ["busy"]


async def test_a_killed_programs_agent_is_stopped_at_once_and_its_workspace_removable(
    base_env: dict[str, str], store_argument: str, repo: Path
) -> None:
    listing = ("workspaces", "--store", store_argument, "--json")
    remove = ("workspaces", "remove", "coder-0", "--store", store_argument)
    async with store_programs(CHILD, store_argument) as run:
        program = await run(str(repo), "coder", "1")
        assert [await program.line() for _ in range(3)] == ["READY", "race-0 STARTED", "DONE"]
        run_list = await agentrt(*listing, env=base_env)
        assert [(w["name"], w["running"]) for w in json.loads(run_list.stdout)] == [
            ("coder-0", True)
        ]
        await program.kill()
        # Its lease has about 60 s left, but its pid is gone on this very host: what
        # start_agent takes over at once is not running.
        run_list = await agentrt(*listing, env=base_env)
        assert [(w["name"], w["running"]) for w in json.loads(run_list.stdout)] == [
            ("coder-0", False)
        ]
        removed = await agentrt(*remove, env=base_env)
        assert removed.code == 0, removed.stderr
        assert "branch 'race-0' stays" in removed.stdout
        assert not Path(f"{repo}.worktrees/race-0").exists()  # noqa: ASYNC240
