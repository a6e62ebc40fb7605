"""A fleet on one repository: two coding agents, each in a git worktree of its own on its
own branch, under one budget for the whole runtime.

    .venv/bin/python -m agentrt.testing.fake_anthropic --scenario fleet \\
        -- python examples/fleet.py REPOSITORY

REPOSITORY is any git repository with at least one commit (the agents' branches start
from its HEAD; an empty one is refused, saying so); nothing in it changes but the two
branches. Each agent appends its line to notes.txt (made if missing) and commits it: on
its own branch, in its own worktree beside the repository
(``REPOSITORY.worktrees/agentrt/...``), so the two never meet in one checkout. The
runtime's budget covers both: alpha's turn runs; beta's starts with what is left as the
CLI's own limit (``--max-budget-usd``), which ends it once its commit is made; the next
request is refused before any CLI starts (``BudgetExceeded``), and alpha is halted with
its queue kept. On the fake model API a
model call costs $0.00014 and a commit takes two, so the $0.0005 buys about three.

At the end the agents are stopped and their worktrees removed (``rt.remove_workspace``):
the branches stay, with the commits. Its store goes with the fake API's temporary home, so
a worktree left behind would hold its branch against the next run (``BranchInUse``); run
again, each agent checks its branch out anew and adds one more commit.
"""

from __future__ import annotations

import sys

import trio

import agentrt

BUDGET_USD = 0.0005


def identity(name: str) -> dict[str, str]:
    """Each agent commits as itself."""
    email = f"{name}@agents.invalid"
    return {
        "GIT_AUTHOR_NAME": name,
        "GIT_AUTHOR_EMAIL": email,
        "GIT_COMMITTER_NAME": name,
        "GIT_COMMITTER_EMAIL": email,
    }


async def last_commit(repo: str, branch: str) -> str:
    done = await trio.run_process(
        ["git", "-C", repo, "log", "-1", "--format=%s", branch], capture_stdout=True
    )
    return done.stdout.decode().strip()


async def has_a_commit(repo: str) -> bool:
    done = await trio.run_process(
        ["git", "-C", repo, "rev-parse", "--verify", "--quiet", "HEAD"],
        capture_stdout=True,
        check=False,
    )
    return done.returncode == 0


async def main(repo: str) -> None:
    if not await has_a_commit(repo):
        sys.exit(f"{repo}: not a git repository with a commit to branch from (commit first)")
    async with agentrt.open_runtime(store=agentrt.SQLiteStore(), budget_usd=BUDGET_USD) as rt:
        for name in ("alpha", "beta"):
            await rt.start_agent(
                agentrt.Agent,
                name=name,
                backend="claude",
                workspace=agentrt.GitWorktree(repo),
                allowed_tools=["Bash"],
                env=identity(name),
            )
        for name in ("alpha", "beta"):
            try:
                response = await rt.ask(name, "Add your line to notes.txt and commit it.")
                print(f"{name}: {response.text}")
            except agentrt.TurnFailed as stopped:
                print(f"{name}: stopped by the CLI's own limit: {stopped.message}")
        try:
            await rt.ask("alpha", "Add another line.")
        except agentrt.BudgetExceeded as refused:
            print(f"refused: {refused}")
        for found in await rt.workspaces():
            workspace = found.stored
            status = await rt.status(workspace.name)
            commit = await last_commit(repo, workspace.branch)
            print(f"{workspace.branch}: {commit!r}, ${status.spent_usd:.5f}, {status.state}")
        for name in ("alpha", "beta"):
            await rt.stop_agent(name)
            try:
                await rt.remove_workspace(name)
            except agentrt.UncommittedChanges as kept:
                print(f"kept: {kept}")


if __name__ == "__main__":
    trio.run(main, sys.argv[1] if len(sys.argv) > 1 else ".")
