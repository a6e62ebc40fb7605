"""``agentrt unhalt (CREDENTIAL | --agent NAME | --all)``: clear, in the store, the halt an
expired login put on its credential's agents, once the login works again. Whichever program
owns them lets them go on without a restart (a halted agent reads the store every
``login_check`` seconds), and a program started later does not take the halt; at their next
turn the agents try the login, and one still expired halts them all again."""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from typing import Any

import attrs

from .._credentials import held_agents, held_by
from .._records import StoredCredential
from .._stores._postgres import PostgresStore
from .._stores._sqlite import SQLiteStore
from ._args import is_dsn
from ._render import CliError, Output
from ._store import store_path

_STATUS_FIX = (
    "`agentrt doctor` names each halted credential, `agentrt status --json` each agent's "
    "(credential)"
)


async def run_unhalt(args: argparse.Namespace, out: Output) -> int:
    """Clear the stored halt of the credentials the arguments name; exit 1 when one named
    is not halted."""
    if is_dsn(args.store):
        async with PostgresStore(args.store) as store:
            return await _unhalt(store, args, out, "the PostgreSQL store")
    path = store_path(args)
    if not path.exists():
        # Writing a halt away must not create the store as a side effect.
        if args.all:
            return _said([], out, path)
        raise CliError(f"the store {path} does not exist, so nothing is halted", _STATUS_FIX)
    async with SQLiteStore(path) as store:
        return await _unhalt(store, args, out, path)


async def _unhalt(
    store: SQLiteStore | PostgresStore, args: argparse.Namespace, out: Output, where: object
) -> int:
    credentials = await store.credentials()
    chosen = _chosen(credentials, args, where)
    for credential in chosen:
        # Read again just before the write: a park stored meanwhile is kept.
        latest = await store.credential(credential.key) or credential
        await store.save_credential(attrs.evolve(latest, halt_reason=None, halted_since=None))
    return _said(chosen, out, where)


def _chosen(
    credentials: Sequence[StoredCredential], args: argparse.Namespace, where: object
) -> list[StoredCredential]:
    halted = [c for c in credentials if c.halt_reason is not None]
    if args.all:
        return halted
    if args.agent is not None:
        held = held_agents(credentials, time.time()).get(args.agent)
        if held is None or held.halt_reason is None:
            raise CliError(
                f"agent {args.agent!r} is not halted by an expired login in {where}",
                f"{_STATUS_FIX}; an agent its own program halted is unhalted there "
                "(Runtime.unhalt, or the console)",
            )
        return [held]
    named = [c for c in credentials if args.credential in (c.label, c.key)]
    if not named:
        labels = ", ".join(repr(c.label) for c in halted) or "none"
        raise CliError(
            f"no credential {args.credential!r} in {where} (halted: {labels})",
            f"give the credential as HELD BY names it, or --agent NAME; {_STATUS_FIX}",
        )
    if not any(c.halt_reason is not None for c in named):
        raise CliError(
            f"credential {args.credential!r} is not halted in {where}",
            f"unhalt ends a halt only (a usage limit's park ends at its reset); {_STATUS_FIX}",
        )
    return [c for c in named if c.halt_reason is not None]


def _data(credential: StoredCredential) -> dict[str, Any]:
    return {
        "credential": credential.label,
        "halt_reason": credential.halt_reason,
        "agents": held_by(credential, halt=True),
    }


def _said(chosen: list[StoredCredential], out: Output, where: object) -> int:
    if out.json_mode:
        out.data({"unhalted": [_data(c) for c in chosen]})
        return 0
    if not chosen:
        out.say(f"No credential is halted in {where}.")
    for credential in chosen:
        agents = ", ".join(repr(name) for name in held_by(credential, halt=True)) or "none stored"
        out.say(
            f"Unhalted credential {credential.label} (agents {agents}): the program that "
            "owns them lets them go on within its login_check; their next turn tries the login."
        )
    return 0
