"""``agentrt workspaces [list | remove NAME [--force] | prune]``: the git worktrees the
agents' records own, over the store; removing refuses while the agent runs or while its
worktree has uncommitted changes (unless ``--force``). An agent runs while a live runtime
holds its lease: a holder of this host (the node ``open_runtime`` names by default) whose
process has ended is not one, by the rule a runtime takes such a name over by."""

from __future__ import annotations

import argparse
import socket
from typing import Any

from .._cluster._ownership import holder_ended
from .._errors import UncommittedChanges, WorkspaceError
from .._stores._postgres import PostgresStore
from .._stores._sqlite import SQLiteStore
from .._workspaces import Workspace, list_workspaces, prune_workspaces, remove_workspace
from ._args import is_dsn
from ._render import CliError, Output
from ._store import store_path


def _data(found: Workspace, running: bool) -> dict[str, Any]:
    w = found.stored
    return {
        "name": w.name,
        "branch": w.branch,
        "path": w.path,
        "repo": w.repo,
        "base": w.base,
        "node": w.node,
        "exists": found.exists,
        "uncommitted": list(found.changes),
        "running": running,
    }


async def run_workspaces(args: argparse.Namespace, out: Output) -> int:
    """List, remove or prune the stored workspaces."""
    if is_dsn(args.store):
        async with PostgresStore(args.store) as store:
            return await _workspaces(store, args, out, "the PostgreSQL store")
    path = store_path(args)
    if not path.exists():
        # Reading must not create the store as a side effect.
        if (args.action or "list") != "remove":
            out.data([]) if out.json_mode else out.say(f"No workspaces (no store at {path}).")
            return 0
        raise _unknown(args.workspace_name, path)
    async with SQLiteStore(path) as store:
        return await _workspaces(store, args, out, path)


async def _workspaces(
    store: SQLiteStore | PostgresStore, args: argparse.Namespace, out: Output, where: object
) -> int:
    action = args.action or "list"
    node = socket.gethostname()
    held = {
        lease.name for lease in await store.leases() if lease.held and not holder_ended(lease, node)
    }
    if action == "list":
        found = await list_workspaces(store)
        if out.json_mode:
            out.data([_data(w, w.stored.name in held) for w in found])
        elif not found:
            out.say(f"No workspaces in {where}.")
        else:
            rows = [
                [
                    w.stored.name,
                    w.stored.branch,
                    "running" if w.stored.name in held else "stopped",
                    ("missing" if not w.exists else f"{len(w.changes)} uncommitted"),
                    w.stored.node,
                    w.stored.path,
                ]
                for w in found
            ]
            headers = ["NAME", "BRANCH", "AGENT", "WORKTREE", "NODE", "PATH"]
            out.table(headers, rows, title=f"Workspaces in {where}")
        return 0
    if action == "prune":
        pruned = await prune_workspaces(store, node=args.node or socket.gethostname())
        if out.json_mode:
            out.data({"pruned": [w.name for w in pruned]})
        else:
            names = ", ".join(w.name for w in pruned) or "none"
            out.say(f"Forgot the workspaces whose worktree is gone: {names}.")
        return 0
    name = args.workspace_name
    if name in held:
        raise CliError(
            f"agent {name!r} is running, so its workspace stays",
            "stop the agent first (`agentrt status` shows its owner)",
        )
    try:
        removed = await remove_workspace(store, name, force=args.force)
    except UncommittedChanges as exc:
        raise CliError(str(exc), "commit them, or pass --force to drop them") from exc
    except WorkspaceError as exc:
        if not any(w.name == name for w in await store.workspaces()):
            raise _unknown(name, where) from exc
        raise
    if out.json_mode:
        out.data({"removed": name, "branch": removed.branch, "path": removed.path})
    else:
        out.say(
            f"Removed the worktree of {name!r} at {removed.path}; branch {removed.branch!r} stays."
        )
    return 0


def _unknown(name: str, where: object) -> CliError:
    return CliError(
        f"no stored workspace of an agent named {name!r} in {where}",
        "`agentrt workspaces` lists them (--store picks another store)",
    )
