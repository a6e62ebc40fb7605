"""The records the stores keep and give back: a session's record and row, a lease and its
owner, a stored transcript. Plain data on the floor of the package, so that the errors
(`AgentAlreadyStarted.holder`), the stores and the runtime all read them without importing
one another."""

from __future__ import annotations

import attrs

from ._events import NO_TOTALS, SessionTotals, Usage


@attrs.define(kw_only=True)
class SessionRow:
    """The fields of a `SessionRecord`, mutable: a store's own row (MemoryStore keeps these),
    updated field by field, so a misspelled field fails where a dict key would pass."""

    name: str
    backend: str
    session_id: str | None
    cwd: str | None
    turns: int
    cost_usd: float
    usage: Usage
    last_stop_reason: str | None
    created_at: float
    updated_at: float
    live_pgid: int | None
    live_pid: int | None
    live_start_time: int | None
    runtime_id: str | None
    state: bytes | None
    live_marker: str | None = None
    # The live process is a warm CLI idling between turns (kept for the next), not a turn's.
    live_idle: bool = False
    # The figures the turns of the current session reported, summed; zero when the session
    # id changes. A backend whose CLI reports running session totals subtracts them.
    session_totals: SessionTotals = NO_TOTALS


@attrs.frozen(kw_only=True)
class SessionRecord(SessionRow):
    """What the store keeps about one agent name.

    ``created_at`` / ``updated_at`` are wall-clock seconds (``time.time()``). The ``live_*``
    fields and ``runtime_id`` describe the process group of a turn that was running when
    they were written (``live_start_time`` is the leader's start time in clock ticks, from
    ``/proc/<pid>/stat``, to tell a reused pid apart; ``live_marker`` is the turn's
    ``AGENTRT_TURN`` env marker, which finds its setsid'd orphans once the leader is gone);
    all of them are ``None`` when no turn runs. A warm CLI (``keep_alive``) keeps its
    ``live_*`` fields between turns, with ``live_idle`` True while it waits for the next
    turn (False while a turn runs). ``state`` is the agent's own checkpoint blob,
    stored as given.
    """


@attrs.frozen(kw_only=True)
class LeaseOwner:
    """The runtime a lease belongs to: its node (`open_runtime`'s ``node``), the pid and
    start time (clock ticks, from ``/proc/<pid>/stat``) of its process, and its id."""

    node: str
    pid: int
    start_time: int
    runtime_id: str


@attrs.frozen(kw_only=True)
class Lease:
    """Which runtime owns an agent name, as the store saw it when read.

    ``epoch`` grows by one each time the lease is granted; ``owner`` is None once it was
    released. ``age`` is the time since it was granted or last renewed and ``remaining``
    the time until it expires (at most 0: expired), both in seconds on the store's lease
    clock (see each store), never on the reader's wall clock.
    """

    name: str
    epoch: int
    owner: LeaseOwner | None
    age: float
    remaining: float

    @property
    def held(self) -> bool:
        """Whether an owner holds it now: granted, not released, not expired."""
        return self.owner is not None and self.remaining > 0


@attrs.frozen
class StoredTranscript:
    """An agent's stored transcript: the session it belongs to, where it lives relative to
    the CLI's home (``path``, as the CLI named it), and its bytes."""

    session_id: str
    path: str
    data: bytes = attrs.field(repr=lambda data: f"<{len(data)} bytes>")


@attrs.frozen(kw_only=True)
class StoredWorkspace:
    """An agent's git worktree as its record in the store keeps it: the repository (its
    main worktree's top directory), the worktree's path, its branch, the base it was made
    from (None: the repository's HEAD then, or a branch that already existed), and the
    node whose runtime made it (a path means something on that node's disks)."""

    name: str
    repo: str
    path: str
    branch: str
    base: str | None
    node: str


@attrs.frozen(kw_only=True)
class StoredBudget:
    """One budget that applies to an agent, as `start_agent` stores it (`BudgetStore`):
    whose it is (``scope``: ``"agent 'x'"``, ``"supervisor"``, ``"runtime"``), its
    limits (None: no limit of that kind), and ``key``, the identity of that one budget
    (one runtime's, one supervisor's, one start of the agent's): every agent name stored
    with a key counts its stored totals toward it, as the runtime counts it."""

    scope: str
    key: str
    usd: float | None
    tokens: int | None


@attrs.frozen(kw_only=True)
class StoredTurn:
    """One finished turn in an agent's history (`TurnHistoryStore`): which agent and
    node, when it started and ended (wall clock) and how long it took, its outcome (the
    stop reason: ``"complete"`` is success), what it cost and used, and its prompt and
    answer where the agent's retention kept them (redacted and cut; None otherwise).
    Content the console shows; never a secret (see docs/stores.md)."""

    name: str
    node: str
    started_at: float
    ended_at: float
    duration: float
    outcome: str
    cost_usd: float | None
    usage: Usage
    prompt: str | None
    answer: str | None


@attrs.frozen(kw_only=True)
class OperatorDecision:
    """A person's answer to a `PendingApproval`: allow (with ``updated_input``, a JSON text,
    to run the tool with that input instead) or deny (``message`` tells the model why), and
    who decided (``decided_by``, e.g. ``"console"``)."""

    allowed: bool
    message: str | None = None
    updated_input: str | None = None
    decided_by: str


@attrs.frozen(kw_only=True)
class PendingApproval:
    """A tool call waiting for a person (``approve_tool`` returned `AskOperator`).

    ``id`` is unique; ``input`` is the tool's input as JSON text, redacted (the CLI runs the
    original unless the decision replaces it); ``requested_at`` and ``expires_at`` are wall
    clock seconds (``time.time()``): past ``expires_at`` the bound has denied it. ``request``
    is the agent's request id (its `Ref` id) the turn runs for, ``runtime_id`` the
    id of the runtime running it."""

    id: str
    name: str
    tool_name: str
    tool_use_id: str
    input: str
    reason: str
    runtime_id: str
    request: int | None
    requested_at: float
    expires_at: float


# The outcomes a request store gives a request no turn answered (`RequestStore`).
WITHDRAWN = "withdrawn"
OWNER_DIED = "owner_died"


@attrs.frozen(kw_only=True)
class RequestOutcome:
    """How a stored request ended (`RequestStore.settle_request`): ``outcome`` is the turn's
    stop reason (``"complete"`` is success), ``"withdrawn"`` or ``"owner_died"``; ``answer``
    the answer's text, ``error`` the failure's message (redacted as stored), ``session_id``
    the conversation the turn ran on."""

    outcome: str
    answer: str | None = None
    error: str | None = None
    session_id: str | None = None


@attrs.frozen(kw_only=True)
class StoredRequest:
    """A request accepted into an agent's durable queue (`RequestStore`).

    ``state`` is ``"queued"`` (waiting; withdrawable), ``"running"`` (claimed by the owner
    whose lease epoch is ``epoch``) or ``"settled"`` (``outcome`` set; readable by id or key
    until ``expires_at``, wall clock). ``attempts`` counts the starts: 2 only for a request
    handed back for retry after its owner died. ``accepted_at`` and ``settled_at`` are wall
    clock seconds (``time.time()``). ``prompt`` is None once settled: the store keeps a
    prompt, as given, only while its request waits or runs."""

    name: str
    id: str
    prompt: str | None
    key: str | None
    origin: str
    accepted_at: float
    state: str
    epoch: int | None = None
    attempts: int = 0
    outcome: RequestOutcome | None = None
    settled_at: float | None = None
    expires_at: float | None = None


@attrs.frozen(kw_only=True)
class StoredCredential:
    """What holds a credential's agents, as the runtime that saw it stored it
    (`CredentialStore`), so a later program on the store, or another one, holds them too.

    ``key`` names the credential's group without holding it (the ``credential`` option, a
    login file's real path, or a digest of an API key's value); ``label`` is what status
    shows. ``parked_until`` (epoch seconds) and ``park_reason``: a usage limit parks its
    agents until it resets (a time past means no longer). ``halt_reason`` and
    ``halted_since`` (epoch seconds): its login expired, and its agents halt until the
    login file changes after ``halted_since`` or a turn on it is answered. ``agents``: the
    agent names stored as using it, and of those ``ignore_halt`` the ones its halt does not
    hold (``on_credential_expired="fail"``), ``ignore_park`` the ones its park does not
    (``on_usage_limit="fail"``) (filled when read; a save ignores them)."""

    key: str
    label: str
    parked_until: float | None = None
    park_reason: str | None = None
    halt_reason: str | None = None
    halted_since: float | None = None
    agents: tuple[str, ...] = ()
    ignore_halt: tuple[str, ...] = ()
    ignore_park: tuple[str, ...] = ()

    def parked_at(self, now: float) -> bool:
        """Whether the usage limit still parks its agents at ``now`` (epoch seconds)."""
        return self.parked_until is not None and self.parked_until > now
