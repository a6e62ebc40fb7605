"""Forks with the pinned real ``claude`` against the fake API: an agent started with
``fork_from`` runs on a copy of another agent's conversation (``--resume`` with
``--fork-session``), on a session of its own; the original goes on with its own history
(the fake sees what each conversation holds). With a workspace, the fork's worktree
branches from the original's branch, and the transcript is copied where the fork's CLI,
in its own directory, finds it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import trio

from agentrt import Agent, GitWorktree, InvalidOptions, SQLiteStore, open_runtime
from agentrt.testing import AnthropicText, AnthropicToolUse, ScriptedBackend

from ._claude import Claude

pytestmark = pytest.mark.realcli

TURN_BOUND = 120
IDENTITY = {
    "GIT_AUTHOR_NAME": "Agent",
    "GIT_AUTHOR_EMAIL": "agent@example.invalid",
    "GIT_COMMITTER_NAME": "Agent",
    "GIT_COMMITTER_EMAIL": "agent@example.invalid",
    "GIT_CONFIG_GLOBAL": os.devnull,
}


def git(cwd: Path | str, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(cwd), *args],
        check=True,
        capture_output=True,
        env={**os.environ, **IDENTITY},
    )
    return done.stdout.decode().strip()


def session_of(claude: Claude, index: int) -> str:
    return claude.api.message_requests[index].headers["x-claude-code-session-id"]


async def test_a_fork_has_the_shared_prefix_and_the_original_its_own_history(
    claude: Claude, tmp_path: Path
) -> None:
    claude.api.set_script(
        [
            AnthropicText("Apples, noted."),
            AnthropicText("The fork answers."),
            AnthropicText("The original answers."),
        ]
    )
    async with open_runtime(store=SQLiteStore(tmp_path / "s.sqlite3")) as rt:
        await rt.start_agent(Agent, name="coder", backend="claude", **claude.agent_options())
        with trio.fail_after(TURN_BOUND):
            first = await rt.ask("coder", "remember: apples")
            await rt.start_agent(
                Agent, name="alt", backend="claude", fork_from="coder", **claude.agent_options()
            )
            fork = await rt.ask("alt", "the fork's own question")
            later = await rt.ask("coder", "the original's next question")
        assert fork.session_id not in (None, first.session_id)
        assert later.session_id == first.session_id  # the original's session goes on
        assert (await rt.status("alt")).session_id == fork.session_id
    shared = ["remember: apples", "Apples, noted."]
    fork_texts = claude.api.message_requests[1].texts()
    original_texts = claude.api.message_requests[2].texts()
    assert all(text in fork_texts for text in shared)
    assert "the fork's own question" in fork_texts
    assert all(text in original_texts for text in shared)
    assert "the original's next question" in original_texts
    assert "the fork's own question" not in original_texts
    assert "The fork answers." not in original_texts


async def test_a_fork_with_a_workspace_branches_from_the_originals_branch(
    claude: Claude, tmp_path: Path
) -> None:
    repo = claude.project
    git(repo, "init", "-q", "-b", "main")
    (repo / "notes.txt").write_text("first\n")
    git(repo, "add", "notes.txt")
    git(repo, "commit", "-qm", "first")
    options = claude.agent_options(env=IDENTITY, allowed_tools=["Bash"])
    del options["cwd"]
    commit = "printf 'coder\\n' >> notes.txt && git commit -qam 'coder: a line'"
    claude.api.set_script(
        [
            AnthropicToolUse("Bash", {"command": commit, "description": "Commit"}),
            AnthropicText("Committed."),
            AnthropicText("The fork goes on."),
        ]
    )
    async with open_runtime(store=SQLiteStore(tmp_path / "s.sqlite3")) as rt:
        await rt.start_agent(
            Agent, name="coder", backend="claude", workspace=GitWorktree(repo), **options
        )
        with trio.fail_after(TURN_BOUND):
            first = await rt.ask("coder", "add a line and commit it")
            await rt.start_agent(
                Agent,
                name="alt",
                backend="claude",
                fork_from="coder",
                workspace=GitWorktree(repo),
                **options,
            )
            fork = await rt.ask("alt", "try it another way")
        spaces = {w.stored.name: w.stored for w in await rt.workspaces()}
    assert spaces["alt"].base == "agentrt/coder"
    assert git(spaces["alt"].path, "log", "-1", "--format=%s") == "coder: a line"
    assert fork.session_id not in (None, first.session_id)
    assert "add a line and commit it" in claude.api.message_requests[-1].texts()
    assert "Committed." in claude.api.message_requests[-1].texts()


async def test_a_backend_that_cannot_fork_and_contradictory_options_are_refused(
    claude: Claude, tmp_path: Path
) -> None:
    async with open_runtime(store=SQLiteStore(tmp_path / "s.sqlite3")) as rt:
        with pytest.raises(InvalidOptions, match="cannot fork a conversation") as refused:
            await rt.start_agent(Agent, name="x", backend=ScriptedBackend(), fork_from="coder")
        assert refused.value.key == "fork_from"
        with pytest.raises(InvalidOptions, match="resume=False contradicts it"):
            await rt.start_agent(
                Agent,
                name="x",
                backend="claude",
                fork_from="coder",
                resume=False,
                **claude.agent_options(),
            )
        assert rt.agents() == ()
