"""Workspaces: a git worktree per agent, owned by its record in the store, with the real
``git``: made at start on the agent's own branch, used again by a restart, a resume and a
host taking the agent over (refused where the path is missing), kept when the agent stops,
removed only on request and never with uncommitted work unless forced."""

from __future__ import annotations

import fcntl
import functools
import json
import logging
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import trio
from _helpers import echo_backend
from cli_programs import FakeClaude
from hosted_agent import Hosted
from proc_helpers import store_programs, wait_until

import agentrt
import agentrt.sync
from agentrt import (
    BranchInUse,
    GitWorktree,
    InvalidOptions,
    MemoryStore,
    SQLiteStore,
    UncommittedChanges,
    WorkspaceError,
    open_runtime,
)

GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "Test",
    "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "Test",
    "GIT_COMMITTER_EMAIL": "test@example.invalid",
}


def git(cwd: Path | str, *args: str) -> str:
    env = {**os.environ, **GIT_IDENTITY, "GIT_CONFIG_GLOBAL": os.devnull}
    return subprocess.run(
        ["git", "-C", str(cwd), *args], check=True, capture_output=True, text=True, env=env
    ).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "notes.txt").write_text("first line\n")
    git(repo, "add", "notes.txt")
    git(repo, "commit", "-q", "-m", "first")
    return repo


def worktree_of(repo: Path, branch: str) -> Path:
    return Path(f"{repo}.worktrees") / branch


class Crashes(agentrt.Agent):
    def handle_response(self, ref: agentrt.Ref, response: agentrt.Response) -> None:
        if "crash" in response.text:
            raise RuntimeError("boom")


async def test_an_agent_runs_in_a_worktree_of_its_own_on_its_own_branch(repo: Path) -> None:
    backend = echo_backend()
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(
            agentrt.Agent, name="coder", backend=backend, workspace=GitWorktree(repo)
        )
        await rt.ask("coder", "hello")
        [found] = await rt.workspaces()
    path = worktree_of(repo, "agentrt/coder")
    assert backend.calls[0].options.cwd == str(path)
    assert git(path, "rev-parse", "--abbrev-ref", "HEAD") == "agentrt/coder"
    assert git(path, "rev-parse", "HEAD") == git(repo, "rev-parse", "main")
    assert (found.stored.name, found.stored.branch, found.stored.path) == (
        "coder",
        "agentrt/coder",
        str(path),
    )
    assert (found.exists, found.changes, found.stored.repo) == (True, (), str(repo))
    assert git(repo, "status", "--porcelain") == ""  # the main checkout is untouched


async def test_branch_base_and_path_are_the_callers_to_choose(repo: Path, tmp_path: Path) -> None:
    git(repo, "branch", "release")
    (repo / "notes.txt").write_text("second\n")
    git(repo, "commit", "-qam", "second")
    backend = echo_backend()
    where = tmp_path / "elsewhere" / "fix"
    async with open_runtime(store=MemoryStore()) as rt:
        workspace = GitWorktree(str(repo / "."), branch="fix/1", base="release", path=str(where))
        await rt.start_agent(agentrt.Agent, name="fixer", backend=backend, workspace=workspace)
        await rt.ask("fixer", "hello")
    assert backend.calls[0].options.cwd == str(where)
    assert git(where, "rev-parse", "HEAD") == git(repo, "rev-parse", "release")
    assert git(where, "rev-parse", "--abbrev-ref", "HEAD") == "fix/1"


@pytest.mark.parametrize("workspace", ["/some/repo", {"repo": "/some/repo"}])
async def test_a_workspace_that_is_not_a_git_worktree_is_refused(workspace: Any) -> None:
    async with open_runtime(store=MemoryStore()) as rt:
        with pytest.raises(InvalidOptions) as refused:
            await rt.start_agent(
                agentrt.Agent, name="x", backend=echo_backend(), workspace=workspace
            )
        assert refused.value.key == "workspace" and "agentrt.GitWorktree" in str(refused.value)
        assert rt.agents() == ()


@pytest.mark.parametrize(
    ("fields", "key"),
    [
        ({"repo": ""}, "workspace.repo"),
        ({"repo": "/r", "branch": ""}, "workspace.branch"),
        ({"repo": "/r", "base": 3}, "workspace.base"),
        ({"repo": 5}, "workspace.repo"),
    ],
)
def test_bad_fields_are_refused_naming_the_field(fields: dict[str, Any], key: str) -> None:
    with pytest.raises(InvalidOptions) as refused:
        GitWorktree(**fields)
    assert refused.value.key == key


async def test_cwd_and_workspace_together_are_refused_naming_both(repo: Path) -> None:
    async with open_runtime(store=MemoryStore()) as rt:
        with pytest.raises(InvalidOptions) as refused:
            await rt.start_agent(
                agentrt.Agent,
                name="x",
                backend=echo_backend(),
                cwd=str(repo),
                workspace=GitWorktree(repo),
            )
        assert refused.value.key == "workspace"
        assert "cwd=" in str(refused.value) and "workspace together" in str(refused.value)
        assert rt.agents() == ()
    assert not worktree_of(repo, "agentrt/x").exists()  # refused before git ran


async def test_a_directory_that_is_no_repository_is_refused_with_gits_reason(
    tmp_path: Path,
) -> None:
    async with open_runtime(store=MemoryStore()) as rt:
        with pytest.raises(WorkspaceError, match="not a git repository"):
            await rt.start_agent(
                agentrt.Agent, name="x", backend=echo_backend(), workspace=GitWorktree(tmp_path)
            )
        with pytest.raises(WorkspaceError, match="does not exist"):
            await rt.start_agent(
                agentrt.Agent,
                name="x",
                backend=echo_backend(),
                workspace=GitWorktree(tmp_path / "missing"),
            )
        assert rt.agents() == ()


async def test_two_agents_never_share_a_branch(repo: Path) -> None:
    async with open_runtime(store=MemoryStore()) as rt:
        one = GitWorktree(repo, branch="shared")
        await rt.start_agent(agentrt.Agent, name="one", backend=echo_backend(), workspace=one)
        with pytest.raises(BranchInUse) as taken:
            await rt.start_agent(agentrt.Agent, name="two", backend=echo_backend(), workspace=one)
        assert (taken.value.branch, taken.value.holder) == ("shared", "agent 'one'")
        # Checked out by hand in the main worktree: another holder, named by its path.
        with pytest.raises(BranchInUse) as checked:
            await rt.start_agent(
                agentrt.Agent,
                name="three",
                backend=echo_backend(),
                workspace=GitWorktree(repo, branch="main"),
            )
        assert checked.value.holder == f"the worktree at {repo}"
        assert rt.agents() == ("one",)


def git_bookkeeping(repo: Path) -> tuple[list[str], list[str]]:
    """The worktrees git lists (path and what is checked out) and the branches."""
    listing = git(repo, "worktree", "list", "--porcelain").split("\n\n")
    worktrees = [" ".join(entry.split("\n")[::2]) for entry in listing]
    return worktrees, git(repo, "branch", "--format=%(refname:short)").splitlines()


async def race(
    rt: agentrt.Runtime, repo: Path, branch: str, names: list[str]
) -> tuple[list[str], list[BranchInUse]]:
    """Start an agent of each name at once on ``branch``: those started, the refusals."""
    started: list[str] = []
    lost: list[BranchInUse] = []

    async def start(name: str) -> None:
        workspace = GitWorktree(repo, branch=branch)
        try:
            await rt.start_agent(
                agentrt.Agent, name=name, backend=echo_backend(), workspace=workspace
            )
        except BranchInUse as exc:
            lost.append(exc)
        else:
            started.append(name)

    async with trio.open_nursery() as nursery:
        for name in names:
            nursery.start_soon(start, name)
    return started, lost


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_agents_racing_for_one_branch_one_wins_every_loser_gets_branch_in_use(
    repo: Path, tmp_path: Path, kind: str
) -> None:
    store = MemoryStore() if kind == "memory" else SQLiteStore(tmp_path / "s.sqlite3")
    rounds, racers = 20, 5
    async with open_runtime(store=store) as rt:
        for round in range(rounds):
            branch = f"race-{round}"
            names = [f"r{round}-{i}" for i in range(racers)]
            started, lost = await race(rt, repo, branch, names)
            assert len(started) == 1 and len(lost) == racers - 1, (round, started, lost)
            assert {exc.holder for exc in lost} == {f"agent {started[0]!r}"}
            stored = [w.stored for w in await rt.workspaces() if w.stored.branch == branch]
            assert [w.name for w in stored] == started
            assert stored[0].path == str(worktree_of(repo, branch))
    worktrees, branches = git_bookkeeping(repo)
    assert sorted(worktrees) == sorted(
        [f"worktree {repo} branch refs/heads/main"]
        + [
            f"worktree {worktree_of(repo, f'race-{n}')} branch refs/heads/race-{n}"
            for n in range(rounds)
        ]
    )
    assert sorted(branches) == sorted(["main", *(f"race-{n}" for n in range(rounds))])


async def test_a_start_cancelled_while_git_makes_the_worktree_leaves_nothing(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A git that makes the worktree, then hangs before it exits: the start is cancelled
    # with the branch and the worktree made and the claim stored.
    wrapper, made = tmp_path / "bin", tmp_path / "made"
    wrapper.mkdir()
    real = shutil.which("git")
    (wrapper / "git").write_text(
        f'#!/bin/sh\n"{real}" "$@" || exit $?\n'
        f'case "$*" in *"worktree add"*) touch "{made}"; exec sleep 600;; esac\n'
    )
    (wrapper / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{wrapper}{os.pathsep}{os.environ['PATH']}")
    async with open_runtime(store=SQLiteStore(tmp_path / "s.sqlite3")) as rt:
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                workspace = GitWorktree(repo, branch="fresh")
                nursery.start_soon(
                    functools.partial(
                        rt.start_agent,
                        agentrt.Agent,
                        name="one",
                        backend=echo_backend(),
                        workspace=workspace,
                    )
                )
                await wait_until(made.exists)
                assert "fresh" in git(repo, "branch", "--list", "fresh")
                scope.cancel()
        assert scope.cancelled_caught
        assert git_bookkeeping(repo) == ([f"worktree {repo} branch refs/heads/main"], ["main"])
        assert not worktree_of(repo, "fresh").exists()
        assert await rt.workspaces() == [] and rt.agents() == ()


CHILD = Path(__file__).parent / "workspace_child.py"


@pytest.mark.parametrize("stores", ["one store", "a store each"])
async def test_two_programs_racing_on_one_repository_one_wins_each_branch(
    repo: Path, tmp_path: Path, stores: str
) -> None:
    branches, gate = 12, tmp_path / "gate"
    gate.touch()
    paths = [tmp_path / "one.sqlite3", tmp_path / "two.sqlite3"]
    if stores == "one store":
        paths[1] = paths[0]
    outcomes: dict[str, list[str]] = {}
    with gate.open() as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # the programs wait for it once ready
        async with (
            store_programs(CHILD, str(paths[0])) as one,
            store_programs(CHILD, str(paths[1])) as two,
        ):
            programs = [
                await run(str(repo), tag, str(branches), str(gate))
                for run, tag in ((one, "a"), (two, "b"))
            ]
            for program in programs:
                assert await program.line() == "READY"
            fcntl.flock(held, fcntl.LOCK_UN)  # both start their agents now
            for program in programs:
                while (line := await program.line()) != "DONE":
                    branch, outcome = line.split(" ", 1)
                    outcomes.setdefault(branch, []).append(outcome)
    for i in range(branches):
        kinds = sorted(outcome.split(" ")[0] for outcome in outcomes[f"race-{i}"])
        assert kinds == ["IN_USE", "STARTED"], outcomes
    worktrees, names = git_bookkeeping(repo)
    assert sorted(worktrees) == sorted(
        [f"worktree {repo} branch refs/heads/main"]
        + [
            f"worktree {worktree_of(repo, f'race-{n}')} branch refs/heads/race-{n}"
            for n in range(branches)
        ]
    )
    assert sorted(names) == sorted(["main", *(f"race-{n}" for n in range(branches))])
    stored = []
    for path in sorted(set(paths)):
        async with SQLiteStore(path) as store:
            stored += [w.branch for w in await store.workspaces()]
    assert sorted(stored) == sorted(f"race-{n}" for n in range(branches))


async def test_a_failed_start_leaves_no_branch_no_worktree_and_no_claim(
    repo: Path, tmp_path: Path
) -> None:
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "file.txt").write_text("someone's\n")
    async with open_runtime(store=SQLiteStore(tmp_path / "s.sqlite3")) as rt:
        with pytest.raises(WorkspaceError, match="already exists"):
            await rt.start_agent(
                agentrt.Agent,
                name="one",
                backend=echo_backend(),
                workspace=GitWorktree(repo, branch="fresh", path=str(taken)),
            )
        # git made the branch before it found the path taken; the start deleted it again,
        # and gave its claim on the branch up.
        assert git_bookkeeping(repo) == ([f"worktree {repo} branch refs/heads/main"], ["main"])
        assert await rt.workspaces() == [] and rt.agents() == ()
        assert (taken / "file.txt").read_text() == "someone's\n"
        workspace = GitWorktree(repo, branch="fresh")
        await rt.start_agent(agentrt.Agent, name="two", backend=echo_backend(), workspace=workspace)
        assert [w.stored.name for w in await rt.workspaces()] == ["two"]


async def test_a_restart_a_resume_and_a_supervisor_restart_use_the_same_worktree(
    repo: Path, tmp_path: Path
) -> None:
    store_path = tmp_path / "sessions.sqlite3"
    backend = echo_backend()
    workspace = GitWorktree(repo)
    async with open_runtime(store=SQLiteStore(store_path)) as rt:
        await rt.start_agent(Crashes, name="coder", backend=backend, workspace=workspace)
        await rt.ask("coder", "hello")
        (Path(backend.calls[0].options.cwd or "") / "work.txt").write_text("in progress\n")
        with pytest.raises(agentrt.AgentStopped):
            await rt.ask("coder", "crash now")
        await rt.ask("coder", "after the restart")
        assert (await rt.status("coder")).restarts == 1
        await rt.stop_agent("coder")
    # Stopped: the worktree and its uncommitted work are kept, and a new program (the first
    # one might have been killed) resumes there.
    async with open_runtime(store=SQLiteStore(store_path)) as rt:
        await rt.start_agent(Crashes, name="coder", backend=backend, workspace=workspace)
        await rt.ask("coder", "resumed")
    path = str(worktree_of(repo, "agentrt/coder"))
    assert {call.options.cwd for call in backend.calls} == {path}
    assert backend.session_ids[-1] == backend.session_ids[0]  # the same conversation
    assert (Path(path) / "work.txt").read_text() == "in progress\n"


async def test_removing_refuses_a_running_agent_and_uncommitted_work_unless_forced(
    repo: Path,
) -> None:
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(
            agentrt.Agent, name="coder", backend=echo_backend(), workspace=GitWorktree(repo)
        )
        path = worktree_of(repo, "agentrt/coder")
        with pytest.raises(WorkspaceError, match="running in this runtime"):
            await rt.remove_workspace("coder")
        await rt.stop_agent("coder")
        (path / "notes.txt").write_text("changed\n")
        (path / "new.txt").write_text("new\n")
        with pytest.raises(UncommittedChanges) as dirty:
            await rt.remove_workspace("coder")
        assert dirty.value.changes == (" M notes.txt", "?? new.txt")
        assert "force=True" in str(dirty.value)
        git(path, "add", "-A")
        git(path, "commit", "-qm", "the agent's work")
        removed = await rt.remove_workspace("coder")
        assert removed.branch == "agentrt/coder"
        assert not path.exists() and await rt.workspaces() == []
        # The branch stays, with the commit.
        assert git(repo, "show", "agentrt/coder:new.txt") == "new"
        with pytest.raises(WorkspaceError, match="the store holds none"):
            await rt.remove_workspace("coder")
        # Started again, it checks its old branch out again.
        await rt.start_agent(
            agentrt.Agent, name="coder", backend=echo_backend(), workspace=GitWorktree(repo)
        )
        assert (path / "new.txt").read_text() == "new\n"
        await rt.stop_agent("coder")
        (path / "scratch.txt").write_text("x\n")
        await rt.remove_workspace("coder", force=True)
        assert not path.exists()


def test_the_sync_face_lists_and_removes_workspaces(repo: Path) -> None:
    with agentrt.sync.open_runtime(store=MemoryStore()) as rt:
        rt.start_agent(
            agentrt.Agent, name="coder", backend=echo_backend(), workspace=GitWorktree(repo)
        )
        with pytest.raises(WorkspaceError, match="running in this runtime"):
            rt.remove_workspace("coder")
        rt.stop_agent("coder")
        [found] = rt.workspaces()
        assert (found.stored.branch, found.exists, found.changes) == ("agentrt/coder", True, ())
        (worktree_of(repo, "agentrt/coder") / "scratch.txt").write_text("x\n")
        with pytest.raises(UncommittedChanges):
            rt.remove_workspace("coder")
        assert rt.remove_workspace("coder", force=True).name == "coder"
        assert rt.workspaces() == []
    assert not worktree_of(repo, "agentrt/coder").exists()


async def test_another_runtimes_agent_keeps_its_workspace(repo: Path) -> None:
    store = MemoryStore()
    async with open_runtime(store=store, node="node-a") as owner:
        await owner.start_agent(
            agentrt.Agent, name="coder", backend=echo_backend(), workspace=GitWorktree(repo)
        )
        async with open_runtime(store=store.handle(), node="node-b") as other:
            with pytest.raises(WorkspaceError, match="running on node 'node-a'"):
                await other.remove_workspace("coder")


async def test_a_killed_programs_workspace_is_removed_at_once_on_its_node(
    repo: Path, tmp_path: Path
) -> None:
    path = tmp_path / "s.sqlite3"
    async with store_programs(CHILD, str(path)) as run:
        program = await run(str(repo), "coder", "1")
        assert [await program.line() for _ in range(3)] == ["READY", "race-0 STARTED", "DONE"]
        async with open_runtime(store=SQLiteStore(path)) as rt:
            with pytest.raises(WorkspaceError, match=f"pid {program.pid}"):
                await rt.remove_workspace("coder-0")
            await program.kill()
            # Its lease has about 60 s left; its pid is gone on this node.
            assert (await rt.remove_workspace("coder-0")).branch == "race-0"
    assert not worktree_of(repo, "race-0").exists()


async def test_a_store_without_workspaces_refuses_them_by_name(repo: Path) -> None:
    from test_store_conformance import ToyStore

    async with open_runtime(store=ToyStore()) as rt:
        with pytest.raises(InvalidOptions) as refused:
            await rt.start_agent(
                agentrt.Agent, name="x", backend=echo_backend(), workspace=GitWorktree(repo)
            )
        assert refused.value.key == "workspace" and "WorkspaceStore" in str(refused.value)
        with pytest.raises(InvalidOptions, match="WorkspaceStore"):
            await rt.workspaces()


# --- failover: a host takes the agent over where its worktree exists ---


def claude_binary(tmp_path: Path) -> dict[str, Any]:
    fake = FakeClaude(tmp_path / "cli")
    fake.answer()
    return {"binary": fake.binary}


async def test_a_host_takes_an_agent_over_in_its_worktree_or_refuses_saying_why(
    repo: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = MemoryStore()
    workspace = GitWorktree(repo)
    async with open_runtime(store=store, node="node-a") as rt:
        await rt.start_agent(
            Hosted, name="kept", backend="claude", workspace=workspace, **claude_binary(tmp_path)
        )
        await rt.start_agent(
            Hosted,
            name="moved",
            backend="claude",
            workspace=GitWorktree(repo, branch="moved"),
            **claude_binary(tmp_path),
        )
    # The host's node lacks the second worktree (made on another machine, say).
    moved = worktree_of(repo, "moved")
    os.rename(moved, tmp_path / "away")
    with caplog.at_level(logging.WARNING, logger="agentrt"):
        async with open_runtime(store=store.handle(), node="node-b", host_agents=True) as host:
            await wait_until(lambda: "kept" in host.agents(), bound=30)
            await wait_until(lambda: "could not be taken over" in caplog.text, bound=30)
            assert host.agents() == ("kept",)
            with trio.fail_after(30):
                await host.ask("kept", "go on")
    recorded = json.loads((tmp_path / "cli" / "record.json").read_text())
    assert recorded["cwd"] == str(worktree_of(repo, "agentrt/kept"))
    assert "the worktree of agent 'moved' (branch 'moved', made on node 'node-a')" in caplog.text
    assert "does not exist on node 'node-b'" in caplog.text
