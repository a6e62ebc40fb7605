"""Every error agentrt raises: one base, flat subclasses that carry their data."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from ._events import StopReason, Usage
from ._records import Lease


class AgentRTError(Exception):
    """Base of every agentrt error."""


class NoRuntime(AgentRTError):
    """A module-level call was made outside ``async with agentrt.open_runtime()``."""


def did_you_mean(given: str, known: Iterable[str], *, most: int = 1) -> str:
    """``"; did you mean 'x'?"`` for the closest of ``known`` to ``given``, or nothing;
    with ``most``, up to that many close ones, closest first (``'x', 'y' or 'z'``)."""
    import difflib  # only when an error is being made: no import cost for every program

    close = [repr(name) for name in difflib.get_close_matches(given, list(known), most, 0.6)]
    if not close:
        return ""
    named = close[0] if len(close) == 1 else f"{', '.join(close[:-1])} or {close[-1]}"
    return f"; did you mean {named}?"


class InvalidOptions(AgentRTError):
    """An option is unknown or has a value it cannot take. For an unknown option,
    ``known_options`` holds the options that are known (None otherwise)."""

    # A class default: an error rebuilt from its attributes alone still has it.
    known_options: tuple[str, ...] | None = None

    def __init__(
        self, key: str, value: object, why: str, *, known_options: tuple[str, ...] | None = None
    ) -> None:
        self.key = key
        self.value = value
        self.why = why
        self.known_options = known_options
        super().__init__(f"option {key!r}={value!r}: {why}")


class AgentNotFound(AgentRTError):
    """No agent of that name is running (``where``, if given, says where it was looked for
    or why it cannot be reached; the message names the closest of ``known``, the names
    that were looked among, if one is close)."""

    def __init__(self, name: str, where: str | None = None, *, known: Iterable[str] = ()) -> None:
        self.name = name
        message = f"no agent named {name!r}" + ("" if where is None else f" {where}")
        super().__init__(message + did_you_mean(name, known))


class AgentAlreadyStarted(AgentRTError):
    """The name is taken: by an agent of this runtime, or (``holder``) by the live lease of
    another runtime sharing the store."""

    def __init__(self, name: str, holder: Lease | None = None) -> None:
        self.name = name
        self.holder = holder
        owner = None if holder is None else holder.owner
        where = (
            ""
            if owner is None
            else f" (owned by node {owner.node!r}, pid {owner.pid}, runtime {owner.runtime_id})"
        )
        super().__init__(f"an agent named {name!r} is already running{where}")


class AgentBusy(AgentRTError):
    """The call needs an idle agent (for example ``reset_session``)."""

    def __init__(self, name: str, state: str) -> None:
        self.name = name
        self.state = state
        super().__init__(f"agent {name!r} is {state}, not idle")


class NoTurnRunning(AgentRTError):
    """The call needs a running turn on the agent's live CLI (``steer``), and none runs:
    the agent is idle, or its turn has not reached its CLI yet or has ended."""

    def __init__(self, name: str, call: str) -> None:
        self.name = name
        self.call = call
        super().__init__(
            f"agent {name!r} runs no turn on its CLI now, so {call} has nothing to join; "
            "send the text as a prompt of its own (ask or tell)"
        )


class ChannelError(AgentRTError):
    """A request to an agent's live CLI (``set_model``, ``context_usage``, ...) got no
    usable answer: the CLI ended, did not answer in time, or answered what cannot be read.
    A CLI that did not answer in time is ended (its next turn starts on a new one)."""

    def __init__(self, name: str, call: str, why: str) -> None:
        self.name = name
        self.call = call
        self.why = why
        super().__init__(f"agent {name!r}: {call} got no answer from its CLI: {why}")


class MailboxFull(AgentRTError):
    """The agent's queue is full, by count or by bytes."""

    def __init__(self, name: str, limit: str, maximum: int, queued: int, queued_bytes: int) -> None:
        self.name = name
        self.limit = limit
        self.maximum = maximum
        self.queued = queued
        self.queued_bytes = queued_bytes
        super().__init__(
            f"agent {name!r}'s mailbox is full: {limit}={maximum} reached "
            f"({queued} prompts, {queued_bytes} bytes queued)"
        )


class AgentStopped(AgentRTError):
    """The agent stopped (or the runtime closed) before this request finished."""

    def __init__(self, name: str, reason: str = "stopped") -> None:
        self.name = name
        self.reason = reason
        super().__init__(f"agent {name!r} stopped: {reason}")


class OwnerDied(AgentRTError):
    """The runtime that was running this request's turn ended mid-turn (killed, or its
    lease lost), and the runtime that owns the agent now did not run it again (the
    agent's ``on_owner_death`` is ``"fail"``, or it had run twice already). What the
    turn did before is in the session ``session_id`` (None if it had none yet), which
    the agent's next turns resume."""

    def __init__(self, name: str, session_id: str | None, why: str = "") -> None:
        self.name = name
        self.session_id = session_id
        self.why = why
        session = "no session yet" if session_id is None else f"session {session_id}"
        super().__init__(
            f"agent {name!r}: the owner running this request ended mid-turn ({session})"
            + (f": {why}" if why else "")
        )


class TurnFailed(AgentRTError):
    """A turn ended without a successful result. ``usage`` and ``cost_usd`` are what it
    spent as far as the CLI reported it (None where it reported nothing)."""

    def __init__(
        self,
        reason: StopReason,
        message: str = "",
        *,
        exit_status: Any = None,
        stderr_tail: str = "",
        session_id: str | None = None,
        usage: Usage | None = None,
        cost_usd: float | None = None,
        detail: Mapping[str, Any] | None = None,
    ) -> None:
        self.reason = reason
        self.message = message
        self.exit_status = exit_status
        self.stderr_tail = stderr_tail
        self.session_id = session_id
        self.usage = usage
        self.cost_usd = cost_usd
        self.detail: Mapping[str, Any] = dict(detail or {})
        super().__init__(f"turn failed ({reason.value}){': ' + message if message else ''}")


class CliVersionMismatch(TurnFailed):
    """A turn refused because its CLI reported a version the agent does not accept
    (``cli_versions``): ``expected`` is the specifiers, ``reported`` the CLI's version
    (None: it reported none). The turn ended before the model was asked to work, when the
    CLI said its version first (reason ``cli_version_mismatch``)."""

    def __init__(
        self,
        expected: str,
        reported: str | None,
        *,
        exit_status: Any = None,
        stderr_tail: str = "",
        session_id: str | None = None,
        usage: Usage | None = None,
        cost_usd: float | None = None,
    ) -> None:
        self.expected = expected
        self.reported = reported
        shown = "no version" if reported is None else f"version {reported}"
        super().__init__(
            StopReason.CLI_VERSION_MISMATCH,
            f"the CLI reported {shown}; this agent accepts cli_versions={expected!r}",
            exit_status=exit_status,
            stderr_tail=stderr_tail,
            session_id=session_id,
            usage=usage,
            cost_usd=cost_usd,
            detail={"expected": expected, "reported": reported},
        )


class ProcessFailure(AgentRTError):
    """The process driver gave up on a turn's process: it could not start, stayed silent past
    a bound, or printed a line past the cap. Raised after the kill ladder has run."""

    def __init__(self, reason: StopReason, message: str) -> None:
        self.reason = reason
        self.message = message
        super().__init__(f"{reason.value}: {message}")


class StoreError(AgentRTError):
    """The session store cannot be opened, read or written."""

    def __init__(self, path: str, why: str) -> None:
        self.path = path
        self.why = why
        super().__init__(f"session store {path}: {why}")


class LeaseLost(StoreError):
    """A write or renewal for an agent whose lease this store handle no longer holds:
    another runtime has taken it (a newer epoch) or it was released. Nothing was written."""

    def __init__(self, path: str, name: str, epoch: int, why: str) -> None:
        self.name = name
        self.epoch = epoch
        super().__init__(path, f"agent {name!r}: lease epoch {epoch} is stale ({why})")


class SessionMismatch(AgentRTError):
    """A stored session cannot be resumed as asked (for example from another cwd)."""

    def __init__(self, name: str, why: str) -> None:
        self.name = name
        self.why = why
        super().__init__(f"agent {name!r}: {why}")


class RestartLimitExceeded(AgentRTError):
    """An agent crashed more than ``max_restarts`` times in ``period`` seconds."""

    def __init__(self, name: str, history: tuple[Any, ...]) -> None:
        self.name = name
        self.history = history
        super().__init__(f"agent {name!r} exceeded its restart intensity ({len(history)} crashes)")


class BackendNotFound(InvalidOptions):
    """No installed backend (entry point group ``agentrt.backends``) has the name given as
    the option ``backend``; ``known`` are those that do."""

    def __init__(self, name: str, known: tuple[str, ...]) -> None:
        self.name = name
        self.known = known
        why = f"no backend named {name!r}{did_you_mean(name, known)}"
        super().__init__("backend", name, f"{why} (known: {', '.join(known) or 'none'})")
        self.args = (self.why,)  # the why says it all: no "option 'backend'=..." before it


class CliNotFound(InvalidOptions):
    """The CLI an agent would run is not there: ``binary`` (given as the backend
    ``backend``'s option ``option``, or its default) is no executable file, found as the
    agent's first turn would look for it (on the PATH of the CLI's own environment); ``fix``
    says what to do."""

    def __init__(self, backend: str, binary: str, fix: str, *, option: str = "binary") -> None:
        self.backend = backend
        self.binary = binary
        self.fix = fix
        where = "no executable file" if os.sep in binary else "not found on the agent's PATH"
        super().__init__(option, binary, f"the {backend} CLI is {where}\nFix: {fix}")


class RoutingError(AgentRTError):
    """A call routed to another runtime (through a `PostgresStore`, or over a `SQLiteStore`'s
    sockets), or its answer, could not be carried: its row (or frame) does not decode, or
    was written in a routing protocol this agentrt does not speak (programs sharing the
    store run agentrt versions that cannot route to each other). ``why`` says what was
    wrong; the call may or may not have run on the owner."""

    def __init__(self, name: str, call: str, why: str) -> None:
        self.name = name
        self.call = call
        self.why = why
        super().__init__(f"agent {name!r}: the routed {call}: {why}")


class WorkspaceError(AgentRTError):
    """An agent's workspace (its git worktree) cannot be made, used or removed: ``path``
    says where, ``why`` what went wrong (git's own message where git refused)."""

    def __init__(self, path: str, why: str) -> None:
        self.path = path
        self.why = why
        super().__init__(f"workspace {path}: {why}")


class BranchInUse(AgentRTError):
    """Two agents never share a branch: ``branch`` of ``repo`` is another agent's
    (``holder``, its name) or checked out in another worktree (``holder``, its path). The
    message names the ways out: another branch, or the holder's worktree removed (a
    worktree whose store is gone, such as a program's that ran on a temporary home, is
    git's alone to remove)."""

    def __init__(self, repo: str, branch: str, holder: str) -> None:
        self.repo = repo
        self.branch = branch
        self.holder = holder
        super().__init__(
            f"branch {branch!r} of {repo} is in use by {holder}; give the agent another "
            "branch (GitWorktree(repo, branch=...)), or free this one: `agentrt workspaces "
            "remove NAME` for an agent's worktree in the store, else `git worktree remove "
            "PATH` (the branch stays, with its commits)"
        )


class UncommittedChanges(AgentRTError):
    """A workspace is not removed while it holds uncommitted work (``changes``, as ``git
    status --porcelain`` lists them), unless forced."""

    def __init__(self, name: str, path: str, changes: tuple[str, ...]) -> None:
        self.name = name
        self.path = path
        self.changes = changes
        shown = ", ".join(changes[:5]) + (", ..." if len(changes) > 5 else "")
        super().__init__(
            f"the workspace of agent {name!r} at {path} has uncommitted changes ({shown}); "
            "commit them, or remove it with force=True to drop them"
        )


def usd(amount: float) -> str:
    # Cents from a dollar up; below, the significant digits (a turn may cost $0.00014).
    return f"${amount:,.2f}" if amount >= 1 else f"${amount:.4g}"


class BudgetExceeded(AgentRTError):
    """A turn was not started: ``spent`` has reached ``budget`` (``unit`` ``"usd"`` or
    ``"tokens"``) of the agent's own budget or of its supervisor's or runtime's
    (``scope``: ``"agent 'x'"``, ``"supervisor"``, ``"runtime"``). The agent is halted,
    its queue kept; `Runtime.unhalt` lets it try again (and fail again while over)."""

    def __init__(self, name: str, scope: str, unit: str, spent: float, budget: float) -> None:
        self.name = name
        self.scope = scope
        self.unit = unit
        self.spent = spent
        self.budget = budget
        shown = (
            f"{usd(spent)} of {usd(budget)}" if unit == "usd" else f"{spent:g} of {budget:g} tokens"
        )
        super().__init__(
            f"agent {name!r}: the budget of {scope} is spent ({shown}); the agent is halted"
        )
