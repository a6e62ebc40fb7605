"""Forks: an agent started on a copy of another agent's conversation
(``start_agent(name, fork_from=...)``), through the backend's `ForkBackend`: its first
turn forks the session it resumes, so the original's conversation is left as it was."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from typing import Any

import trio

from ._errors import InvalidOptions
from ._mode import Mode
from ._records import SessionRecord
from .backend import Backend, ForkBackend


def check_fork_from(value: object, resume: object) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidOptions("fork_from", value, "must be an agent's name or a session id")
    if resume != "auto":
        why = f"a fork starts a new session from fork_from's; resume={resume!r} contradicts it"
        raise InvalidOptions("fork_from", value, why)
    return value


async def fork_source(
    name: str,
    fork_from: str,
    *,
    backend: Backend,
    options: object,
    choose: Callable[[Any], Mode],
    cwd: str,
    own: SessionRecord | None,
    source: SessionRecord | None,
) -> str:
    """The session id the fork's first turn forks: the stored session of agent
    ``fork_from`` (``source``), else ``fork_from`` taken as a session id. A CLI that finds a
    transcript by its working directory gets a copy of the source's in the fork's ``cwd``.
    ``choose`` is the agent's `choose_mode`, which the fork's options must pass too.
    `InvalidOptions` for a backend that cannot fork, fork options the agent's mode cannot
    run on, a fork into a name that has a session already, or a source on another backend."""
    if not isinstance(backend, ForkBackend):
        why = (
            f"the {backend.name!r} backend cannot fork a conversation (it implements no "
            "agentrt.backend.ForkBackend)"
        )
        raise InvalidOptions("fork_from", fork_from, why)
    if own is not None and own.session_id is not None:
        why = (
            f"agent {name!r} has a conversation of its own (session {own.session_id}); fork "
            "into another name, or forget it first (`agentrt sessions forget`)"
        )
        raise InvalidOptions("fork_from", fork_from, why)
    try:  # its first process runs on the fork's options: they must take the mode too
        choose(backend.with_fork(options))
    except InvalidOptions as exc:
        why = f"{exc.why}; start the fork without {exc.key}"
        raise InvalidOptions("fork_from", fork_from, why) from None
    if source is None or source.session_id is None:
        return fork_from  # a session id
    if source.backend != backend.name:
        why = (
            f"agent {fork_from!r}'s session is on backend {source.backend!r}, not {backend.name!r}"
        )
        raise InvalidOptions("fork_from", fork_from, why)
    if source.cwd is not None and source.cwd != cwd:
        await _copy_transcript(backend, options, source.session_id, source.cwd, cwd)
    return source.session_id


async def _copy_transcript(
    backend: ForkBackend, options: object, session_id: str, source_cwd: str, cwd: str
) -> None:
    """The source's transcript where the fork's CLI looks for it; one already there stays."""
    copied = backend.transcript_path(options, session_id, source_cwd)
    target = backend.transcript_path(options, session_id, cwd)
    if copied is None or target is None or await trio.Path(target).exists():
        return
    if not await trio.Path(copied).exists():
        return  # the CLI says "no conversation found": the turn fails with session_lost
    await trio.Path(target).parent.mkdir(parents=True, exist_ok=True)
    await trio.to_thread.run_sync(shutil.copyfile, copied, target)
