"""A fleet on one repository: two coding agents, each in a git worktree of its own on its
own branch, under one budget for the whole runtime.

    .venv/bin/python -m agentrt.testing.fake_anthropic --scenario fleet \\
        -- python examples/fleet.py REPOSITORY

Each agent appends its line to the same file, notes.txt, and commits it: on its own
branch, in its own worktree beside the repository (``REPOSITORY.worktrees/agentrt/...``),
so the two never meet in one checkout. The runtime's budget covers both: alpha's turn
runs; beta's starts with what is left as the CLI's own limit (``--max-budget-usd``),
which ends it once its commit is made; the next request is refused before any CLI starts
(``BudgetExceeded``), and alpha is halted with its queue kept. On the fake model API a
model call costs $0.00014 and a commit takes two, so the $0.0005 buys about three.
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


async def main(repo: str) -> None:
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


if __name__ == "__main__":
    trio.run(main, sys.argv[1] if len(sys.argv) > 1 else ".")
