"""Frozen, content-free snapshots: agent handles, agent status, runtime statistics."""

from __future__ import annotations

from typing import Literal

import attrs

from ._channel import BackgroundTask
from ._requests import Origin, Ref

# What `AgentStatus.mode` reports: "in_process" (the backend makes the frames, no process:
# the scripted backend), "one_shot" (one CLI process per turn), "live" (a live CLI per
# turn, for the approvals and hooks the agent answers), "warm" (a live CLI kept between
# turns, ``keep_alive``).
ModeName = Literal["in_process", "one_shot", "live", "warm"]

# "idle_warm": idle, its warm CLI (``keep_alive``) kept alive for the next turn.
# "parked": its credential's usage limit holds its turns until it resets (parked_until).
# "restarting": crashed, its supervisor starts a new instance (after a backoff delay); work
# sent meanwhile queues for it.
AgentState = Literal["idle", "idle_warm", "processing", "halted", "parked", "restarting"]


@attrs.frozen
class AgentHandle:
    """One running incarnation of a named agent (a restarted agent gets a new one)."""

    name: str
    incarnation: int
    backend: str


@attrs.frozen
class CurrentRequest:
    """The request an agent is processing: its `Ref`, where it came from (``origin``), how long
    ago the agent took it, and whether its turn waits for a process slot."""

    ref: Ref
    origin: Origin
    elapsed: float  # seconds since the agent took the request
    # The turn waits for a process slot (``open_runtime(max_processes=...)``).
    waiting_for_process: bool


@attrs.frozen
class AgentStatus:
    """What `status` says of one agent: its state and mode, its queue, the request it is
    processing (``current``), its turns, session and restarts, and the pid of its live CLI.
    A snapshot: it does not change as the agent goes on."""

    name: str
    state: AgentState
    mode: ModeName  # how its turns run (see ModeName)
    halt_pending: bool  # halt() while processing: halts when the current turn ends
    queued: int
    queued_bytes: int
    chained: int  # prompts the agent chained to itself, run before queued ones
    pending_notifications: int
    current: CurrentRequest | None
    turns: int  # turns finished, successful or not
    session_id: str | None
    restarts: int = 0  # how often its supervisor has started a new instance of it
    # The pid of its live CLI process (running a turn, or kept warm between turns).
    cli_pid: int | None = None
    # What the agent's name has spent, all its turns as the store counts them (tokens as
    # budgets count them: input, output, cache writes), and what is left of the tightest
    # of its budgets (its own, its supervisor's, the runtime's; None: no such limit).
    spent_usd: float = 0.0
    spent_tokens: int = 0
    budget_left_usd: float | None = None
    budget_left_tokens: int | None = None
    # The version its latest turn's CLI reported (or printed when asked); None before one.
    cli_version: str | None = None
    # Seconds the oldest queued request has waited (None: none queued), and the
    # idempotency keys of the queued requests that have one, in the order they will run.
    oldest_queued: float | None = None
    queued_keys: tuple[str, ...] = ()
    # The credential its CLI uses, as agentrt names it (a name, a variable's name or a login
    # file's path; never a value); while parked, when its usage limit resets (epoch
    # seconds); while the runtime holds it halted, why ("credential_expired: ...").
    credential: str | None = None
    parked_until: float | None = None
    halt_reason: str | None = None
    # The background tasks its warm CLI runs (``background``): they outlived their turns.
    background: tuple[BackgroundTask, ...] = ()


@attrs.frozen
class RuntimeStatistics:
    """What `statistics` says of this runtime: its agents, the CLI processes holding a slot
    (running turns and warm CLIs), and the turns waiting for one. A snapshot."""

    agents: int
    # CLI processes holding a process slot: running turns and warm CLIs (all of them
    # without max_processes)
    processes_in_use: int
    turns_waiting: int  # turns waiting for a process slot
