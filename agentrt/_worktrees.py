"""Git worktrees, through the real ``git`` binary: what an agent's workspace is asked to be
(`GitWorktree`), and the git operations that make, inspect and remove one.

``git`` itself, not a library: a worktree is git's own bookkeeping (``.git/worktrees``,
its locks, the rule that one branch is checked out once), which only the user's git
keeps exactly as the user's other tools expect, hooks and config included; the libraries
either run this same binary (GitPython) or reimplement worktrees partially (libgit2,
dulwich).
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess

import attrs
import trio

from ._errors import InvalidOptions, WorkspaceError

# No prompt may wait for a terminal nobody watches; messages in one language, to quote.
_GIT_ENV = {"GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}


def _str_or_none(instance: object, attribute: attrs.Attribute[str | None], value: object) -> None:
    if value is not None and (not isinstance(value, str) or not value):
        why = "must be a non-empty str, or None"
        raise InvalidOptions(f"workspace.{attribute.name}", value, why)


def _repo(value: object) -> str:
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str) or not value:
        raise InvalidOptions("workspace.repo", value, "must be the path of a git repository")
    return value


def _optional_path(value: object) -> str | None:
    # Checked by _str_or_none; a PathLike is taken as its str.
    return os.fspath(value) if isinstance(value, os.PathLike) else value  # type: ignore[return-value]


@attrs.frozen
class GitWorktree:
    """A git worktree of its own for an agent: ``start_agent(..., workspace=GitWorktree(repo))``.

    ``repo`` is a git repository (any directory inside one); the agent's worktree is made
    on ``branch`` (default: ``agentrt/`` and the agent's name, made a valid branch name)
    from ``base`` (a commit, branch or tag; default: the repository's ``HEAD``) at
    ``path`` (default: ``<repo>.worktrees/<branch>`` beside the repository), and its CLI
    runs there. A branch that exists already is checked out as it is (``base`` is not
    used). The worktree belongs to the agent's record in the store: a restart, a resume
    and a host taking the agent over use it again. Bad values raise `InvalidOptions`
    naming the field.
    """

    repo: str = attrs.field(converter=_repo)
    branch: str | None = attrs.field(default=None, validator=_str_or_none)
    base: str | None = attrs.field(default=None, validator=_str_or_none)
    path: str | None = attrs.field(default=None, converter=_optional_path, validator=_str_or_none)

    def to_json(self) -> dict[str, str | None]:
        """As stored in a failover spec."""
        return attrs.asdict(self)

    @classmethod
    def from_json(cls, data: object) -> GitWorktree:
        """Back from `to_json`; `ValueError` for anything else."""
        if not isinstance(data, dict) or set(data) - {"repo", "branch", "base", "path"}:
            raise ValueError(f"not a stored workspace: {data!r}")
        try:
            return cls(**data)
        except InvalidOptions as exc:
            raise ValueError(str(exc)) from None


_NOT_IN_REF = re.compile(r"[^A-Za-z0-9._-]+")


def default_branch(name: str) -> str:
    """``agentrt/<name>``, with what a branch name cannot hold replaced by ``-``; a name
    that had to change gets a short hash of itself, so two names never meet in one."""
    leaf = _NOT_IN_REF.sub("-", name).strip("-.")
    leaf = re.sub(r"\.{2,}", ".", leaf).removesuffix(".lock") or "agent"
    if leaf != name:
        leaf = f"{leaf[:80]}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"
    return f"agentrt/{leaf}"


def _resolved(path: str) -> str:
    return os.path.realpath(path)


async def is_directory(path: str) -> bool:
    """Whether ``path`` is a directory (in a worker thread: a stat may block on a network
    file system)."""
    return await trio.Path(path).is_dir()


async def git(*args: str, cwd: str) -> str:
    """``git -C cwd args``'s stdout; `WorkspaceError` with git's own message if it fails.

    Cancellation: the git process is killed (trio's ``run_process``)."""
    try:
        done = await trio.run_process(
            ["git", "-C", cwd, *args],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            env={**os.environ, **_GIT_ENV},
            stdin=subprocess.DEVNULL,
        )
    except FileNotFoundError:
        raise WorkspaceError(cwd, "the git binary is not on PATH") from None
    if done.returncode != 0:
        message = done.stderr.decode(errors="replace").strip() or f"exit {done.returncode}"
        raise WorkspaceError(cwd, f"git {' '.join(args)}: {message}")
    return done.stdout.decode(errors="replace")


async def toplevel(repo: str) -> str:
    """The top directory of the repository ``repo`` is in (its main worktree)."""
    if not await is_directory(repo):
        raise WorkspaceError(repo, "the repository does not exist or is not a directory")
    common = await git("rev-parse", "--path-format=absolute", "--git-common-dir", cwd=repo)
    # The main worktree holds the common .git directory, also when repo is a linked one.
    return _resolved(os.path.dirname(common.strip()))


async def checked_out(repo: str) -> dict[str, str]:
    """Branch name -> the worktree it is checked out in, over all worktrees of ``repo``."""
    listing = await git("worktree", "list", "--porcelain", cwd=repo)
    found: dict[str, str] = {}
    path = ""
    for line in listing.splitlines():
        if line.startswith("worktree "):
            path = line.removeprefix("worktree ")
        elif line.startswith("branch refs/heads/"):
            found[line.removeprefix("branch refs/heads/")] = _resolved(path)
    return found


async def branch_exists(repo: str, branch: str) -> bool:
    try:
        await git("rev-parse", "--verify", "--quiet", f"refs/heads/{branch}", cwd=repo)
    except WorkspaceError:
        return False
    return True


async def check_branch_name(repo: str, branch: str) -> None:
    try:
        await git("check-ref-format", "--branch", branch, cwd=repo)
    except WorkspaceError:
        raise InvalidOptions("workspace.branch", branch, "is not a valid git branch name") from None


async def add_worktree(repo: str, path: str, branch: str, base: str | None) -> None:
    """Check ``branch`` out at ``path``: made from ``base`` (``HEAD`` if None) when it does
    not exist yet."""
    if await branch_exists(repo, branch):
        await git("worktree", "add", path, branch, cwd=repo)
    else:
        await git("worktree", "add", "-b", branch, path, base or "HEAD", cwd=repo)


async def current_branch(path: str) -> str | None:
    """The branch checked out at ``path`` (None: a detached HEAD)."""
    head = (await git("symbolic-ref", "--quiet", "HEAD", cwd=path)).strip()
    return head.removeprefix("refs/heads/") or None


async def uncommitted(path: str) -> list[str]:
    """What ``git status`` lists at ``path`` (changed, staged and untracked files)."""
    return (await git("status", "--porcelain", "--untracked-files=all", cwd=path)).splitlines()


async def remove_worktree(repo: str, path: str, *, force: bool) -> None:
    """Remove the worktree at ``path`` (its branch stays); ``force`` drops uncommitted
    changes. A path already gone is pruned from git's list."""
    if await is_directory(path):
        forced = ["--force", "--force"] if force else []
        await git("worktree", "remove", *forced, path, cwd=repo)
    else:
        await git("worktree", "prune", cwd=repo)
