"""Git worktrees, through the real ``git`` binary: what an agent's workspace is asked to be
(`GitWorktree`), and the git operations that make, inspect and remove one.

``git`` itself, not a library: a worktree is git's own bookkeeping (``.git/worktrees``,
its locks, the rule that one branch is checked out once), which only the user's git
keeps exactly as the user's other tools expect, hooks and config included; the libraries
either run this same binary (GitPython) or reimplement worktrees partially (libgit2,
dulwich).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import logging
import os
import re
import subprocess
from collections.abc import AsyncIterator

import attrs
import trio

from ._errors import InvalidOptions, WorkspaceError

logger = logging.getLogger("agentrt")

# No prompt may wait for a terminal nobody watches; messages in one language, to quote.
_GIT_ENV = {"GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}

# agentrt's lock file in a repository's common git directory (git leaves files it does not
# know there alone), and how often a program waiting for it tries again (from the first
# interval, doubling up to the last): a flock wait cannot be cancelled, a sleep can.
LOCK_FILE = "agentrt-worktrees.lock"
_LOCK_RETRY = (0.005, 0.1)


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


async def _common_dir(repo: str) -> str:
    common = await git("rev-parse", "--path-format=absolute", "--git-common-dir", cwd=repo)
    return common.strip()


async def toplevel(repo: str) -> str:
    """The top directory of the repository ``repo`` is in (its main worktree)."""
    if not await is_directory(repo):
        raise WorkspaceError(repo, "the repository does not exist or is not a directory")
    # The main worktree holds the common .git directory, also when repo is a linked one.
    return _resolved(os.path.dirname(await _common_dir(repo)))


@contextlib.asynccontextmanager
async def repository_lock(repo: str) -> AsyncIterator[None]:
    """Hold agentrt's lock on the worktrees of ``repo``: an exclusive ``flock`` of
    `LOCK_FILE` in its common git directory, so that the programs making or removing
    worktrees of one repository (and the tasks of one program: each takes the lock on a
    descriptor of its own) go one at a time. The kernel drops it with a killed holder.

    Cancellation: the wait for the lock ends; a lock taken is released."""
    path = os.path.join(await _common_dir(repo), LOCK_FILE)
    flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC
    try:
        fd = await trio.to_thread.run_sync(functools.partial(os.open, path, flags, 0o644))
    except OSError as exc:
        raise WorkspaceError(repo, f"cannot open agentrt's lock file {path}: {exc}") from None
    try:
        retry, longest = _LOCK_RETRY
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                await trio.sleep(retry)
                retry = min(2 * retry, longest)
        yield
    finally:
        os.close(fd)  # releases the lock


async def _worktrees(repo: str) -> list[tuple[str, str | None]]:
    """(path, branch or None for a detached HEAD) of every worktree of ``repo``."""
    listing = await git("worktree", "list", "--porcelain", cwd=repo)
    found: list[tuple[str, str | None]] = []
    for line in listing.splitlines():
        if line.startswith("worktree "):
            found.append((_resolved(line.removeprefix("worktree ")), None))
        elif line.startswith("branch refs/heads/") and found:
            found[-1] = (found[-1][0], line.removeprefix("branch refs/heads/"))
    return found


async def checked_out(repo: str) -> dict[str, str]:
    """Branch name -> the worktree it is checked out in, over all worktrees of ``repo``."""
    return {branch: path for path, branch in await _worktrees(repo) if branch is not None}


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
    not exist yet. The caller holds `repository_lock`. A failed or cancelled add is
    undone: the worktree, if git made one at a path that did not exist, and the branch,
    if this call made it (``git worktree add -b`` keeps a branch it made for a worktree
    it then could not make)."""
    new = not await branch_exists(repo, branch)
    fresh = not await trio.Path(path).exists()
    try:
        if new:
            await git("worktree", "add", "-b", branch, path, base or "HEAD", cwd=repo)
        else:
            await git("worktree", "add", path, branch, cwd=repo)
    except BaseException:
        # Shielded, as git's own steps are bounded: a cancelled start leaves nothing.
        with trio.CancelScope(shield=True):
            await _undo_add(repo, path, branch if new else None, fresh=fresh)
        raise


async def _undo_add(repo: str, path: str, made_branch: str | None, *, fresh: bool) -> None:
    try:
        if fresh and _resolved(path) in dict(await _worktrees(repo)):
            await remove_worktree(repo, path, force=True)
        if made_branch is not None and await branch_exists(repo, made_branch):
            await git("branch", "-D", made_branch, cwd=repo)
    except WorkspaceError as exc:  # the add's own error is the one to raise
        logger.warning("could not undo a failed worktree add at %s: %s", path, exc)


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
