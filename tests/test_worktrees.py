"""`agentrt._worktrees`' own unit test: the branch an agent's workspace is on by default.
The workspaces themselves are tested through the public API (tests/test_workspaces.py)."""

from __future__ import annotations

from pathlib import Path

from test_workspaces import git

from agentrt._worktrees import default_branch


def test_a_default_branch_is_a_valid_ref_and_two_names_never_meet_in_one(tmp_path: Path) -> None:
    names = ["coder", "a b", "a-b", "x/../y", "..", "naïve", "end.lock", "-lead", "a" * 255]
    branches = [default_branch(name) for name in names]
    assert branches[0] == "agentrt/coder"
    assert len(set(branches)) == len(names)
    for branch in branches:
        git(tmp_path, "check-ref-format", "--branch", branch)  # raises if not a valid one
