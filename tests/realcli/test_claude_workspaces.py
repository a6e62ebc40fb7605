"""Workspaces with the pinned real ``claude`` against the fake API and the real git: two
agents edit the same file, each in its own worktree, and each commits on its own branch
(the fake asks for the Bash tool to edit and commit); the main checkout is untouched."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import trio

from agentrt import Agent, GitWorktree, SQLiteStore, open_runtime
from agentrt.testing import AnthropicText, AnthropicToolUse

from ._claude import Claude

pytestmark = pytest.mark.realcli

TURN_BOUND = 120  # generous: a real CLI start on a loaded machine
IDENTITY = {
    "GIT_AUTHOR_NAME": "Agent",
    "GIT_AUTHOR_EMAIL": "agent@example.invalid",
    "GIT_COMMITTER_NAME": "Agent",
    "GIT_COMMITTER_EMAIL": "agent@example.invalid",
}


def git(cwd: Path | str, *args: str) -> str:
    env = {**os.environ, **IDENTITY, "GIT_CONFIG_GLOBAL": os.devnull}
    done = subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True, env=env)
    return done.stdout.decode().strip()


def edit_and_commit(who: str) -> AnthropicToolUse:
    command = f"printf '{who} was here\\n' >> notes.txt && git commit -qam '{who}: a line'"
    return AnthropicToolUse("Bash", {"command": command, "description": "Edit and commit"})


async def test_two_agents_edit_one_file_each_on_its_own_branch(
    claude: Claude, tmp_path: Path
) -> None:
    repo = claude.project
    git(repo, "init", "-q", "-b", "main")
    (repo / "notes.txt").write_text("shared first line\n")
    git(repo, "add", "notes.txt")
    git(repo, "commit", "-qm", "first")
    env = {**IDENTITY, "GIT_CONFIG_GLOBAL": os.devnull}
    options = claude.agent_options(env=env, allowed_tools=["Bash"])
    del options["cwd"]  # the workspace is where the CLI runs
    store = tmp_path / "sessions.sqlite3"
    async with open_runtime(store=SQLiteStore(store)) as rt:
        for name in ("one", "two"):
            await rt.start_agent(
                Agent, name=name, backend="claude", workspace=GitWorktree(repo), **options
            )
        for name in ("one", "two"):
            claude.api.set_script([edit_and_commit(name), AnthropicText(f"{name}: committed")])
            with trio.fail_after(TURN_BOUND):
                response = await rt.ask(name, "add your line to notes.txt and commit it")
            assert response.text.endswith(f"{name}: committed")
        spaces = {w.stored.name: w for w in await rt.workspaces()}
    for name in ("one", "two"):
        branch = f"agentrt/{name}"
        assert spaces[name].stored.branch == branch and spaces[name].changes == ()
        assert git(repo, "show", f"{branch}:notes.txt") == f"shared first line\n{name} was here"
        assert git(repo, "log", "-1", "--format=%s", branch) == f"{name}: a line"
        assert git(repo, "rev-parse", f"{branch}~1") == git(repo, "rev-parse", "main")
    assert (repo / "notes.txt").read_text() == "shared first line\n"
    assert git(repo, "status", "--porcelain") == ""
