"""An agent's workspace: the git worktree its record in the store owns. Made or found
again at ``start_agent`` (a restart keeps the agent's cwd; a resume and a host taking the
agent over find the record), listed, and removed only on request, never with uncommitted
work unless forced."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

import attrs
import trio

from ._errors import BranchInUse, InvalidOptions, StoreError, UncommittedChanges, WorkspaceError
from ._records import StoredWorkspace
from ._stores._protocols import WorkspaceStore
from ._worktrees import (
    GitWorktree,
    add_worktree,
    check_branch_name,
    checked_out,
    current_branch,
    default_branch,
    is_directory,
    remove_worktree,
    repository_lock,
    toplevel,
    uncommitted,
)

logger = logging.getLogger("agentrt")


def _worktree_path(repo: str, branch: str, asked: str | None) -> str:
    # Beside the repository, not in it: the main checkout's status stays clean.
    return os.path.abspath(asked or os.path.join(f"{repo}.worktrees", branch))


async def prepare_workspace(
    store: WorkspaceStore, name: str, asked: GitWorktree, *, node: str
) -> StoredWorkspace:
    """The worktree of agent ``name``: its stored one (which must exist on this node), or
    a new one on its own branch, recorded in ``store``. `BranchInUse` when the branch is
    another agent's or checked out elsewhere; `WorkspaceError` when git refuses or the
    stored worktree is missing; `InvalidOptions` when ``asked`` contradicts the stored one.

    One winner per branch: the record is saved first, as the claim the store grants to
    one agent of a branch (across every program and host sharing it), and the worktree is
    made under the repository's lock (`repository_lock`), so git's bookkeeping sees one
    change at a time whatever the store. A start that fails or is cancelled once it
    claimed the branch undoes the claim, and git's part (see `add_worktree`).

    Cancellation: git is killed, and what this call claimed or made is undone."""
    repo = await toplevel(asked.repo)
    async with repository_lock(repo):
        stored = await store.workspaces()
        mine = next((w for w in stored if w.name == name), None)
        if mine is not None:
            return await _reuse(mine, name, asked, repo, node)
        branch = asked.branch or default_branch(name)
        await check_branch_name(repo, branch)
        path = await trio.Path(_worktree_path(repo, branch, asked.path)).resolve()
        workspace = StoredWorkspace(
            name=name, repo=repo, path=str(path), branch=branch, base=asked.base, node=node
        )
        await store.save_workspace(workspace)  # the claim: BranchInUse if another's
        try:
            await add_worktree(repo, workspace.path, branch, asked.base)
        except BaseException as exc:
            # Shielded: bounded by the store's own timeouts.
            with trio.CancelScope(shield=True):
                await _give_up_claim(store, name)
            if isinstance(exc, WorkspaceError):
                holder = (await checked_out(repo)).get(branch)
                if holder is not None:
                    raise BranchInUse(repo, branch, f"the worktree at {holder}") from None
            raise
    return workspace


async def _give_up_claim(store: WorkspaceStore, name: str) -> None:
    try:
        await store.drop_workspace(name)
    except StoreError as exc:  # the failed start's own error is the one to raise
        logger.warning(
            "agent %r: could not forget the workspace it claimed (%s); `agentrt workspaces "
            "remove` forgets it",
            name,
            exc,
        )


async def _reuse(
    mine: StoredWorkspace, name: str, asked: GitWorktree, repo: str, node: str
) -> StoredWorkspace:
    fix = f"remove it first (rt.remove_workspace({name!r}) or `agentrt workspaces remove`)"
    if mine.repo != repo:
        why = f"agent {name!r} owns a worktree of {mine.repo}, not of {repo}; {fix}"
        raise InvalidOptions("workspace", asked, why)
    if asked.branch is not None and asked.branch != mine.branch:
        why = f"agent {name!r} owns a worktree on branch {mine.branch!r}, not {asked.branch!r}"
        raise InvalidOptions("workspace", asked, f"{why}; {fix}")
    if not await is_directory(mine.path):
        raise WorkspaceError(
            mine.path,
            f"the worktree of agent {name!r} (branch {mine.branch!r}, made on node "
            f"{mine.node!r}) does not exist on node {node!r}, so the agent is not started "
            f"here; {fix} and a start makes a new one from its branch",
        )
    held = await current_branch(mine.path)
    if held != mine.branch:
        raise WorkspaceError(
            mine.path,
            f"the worktree of agent {name!r} has {held or 'a detached HEAD'!r} checked out, "
            f"not its branch {mine.branch!r}; check the branch out there again",
        )
    return mine


@attrs.frozen
class Workspace:
    """A stored workspace as found on this node: its record, whether its path exists here,
    and what ``git status`` lists there (empty when the path is missing)."""

    stored: StoredWorkspace
    exists: bool
    changes: tuple[str, ...]


async def inspect_workspace(stored: StoredWorkspace) -> Workspace:
    if not await is_directory(stored.path):
        return Workspace(stored, exists=False, changes=())
    return Workspace(stored, exists=True, changes=tuple(await uncommitted(stored.path)))


async def list_workspaces(store: WorkspaceStore) -> Sequence[Workspace]:
    """Every stored workspace, inspected; also those a dead program left (nothing here
    deletes one)."""
    return [await inspect_workspace(stored) for stored in await store.workspaces()]


async def remove_workspace(store: WorkspaceStore, name: str, *, force: bool) -> StoredWorkspace:
    """Remove the worktree of ``name`` (its branch stays, with every commit) and forget it;
    `UncommittedChanges` while it has some, unless ``force``; `WorkspaceError` when it has
    none stored. The caller makes sure no runtime runs the agent."""
    stored = next((w for w in await store.workspaces() if w.name == name), None)
    if stored is None:
        raise WorkspaceError(f"of agent {name!r}", "the store holds none")
    found = await inspect_workspace(stored)
    if found.changes and not force:
        raise UncommittedChanges(name, stored.path, found.changes)
    async with repository_lock(stored.repo):
        await remove_worktree(stored.repo, stored.path, force=force)
    await store.drop_workspace(name)
    return stored


async def prune_workspaces(store: WorkspaceStore, *, node: str) -> list[StoredWorkspace]:
    """Forget the workspaces made on ``node`` whose path is gone (git's list of worktrees
    is pruned too); those that exist, dirty or not, are kept."""
    pruned = []
    for stored in await store.workspaces():
        if stored.node == node and not await is_directory(stored.path):
            if await is_directory(stored.repo):
                async with repository_lock(stored.repo):
                    await remove_worktree(stored.repo, stored.path, force=False)
            await store.drop_workspace(stored.name)
            pruned.append(stored)
    return pruned
