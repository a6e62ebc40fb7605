"""The runtime's own options, checked: per agent (split from the options meant for
``init_agent``), and those of supervisors and ``start_agent`` itself."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

import attrs

from ._driver._limits import Limits
from ._driver._process import ProcessLimits
from ._errors import InvalidOptions, did_you_mean
from ._redact import redact
from ._restart import RestartIntensity, RestartType, Strategy
from ._tools import Tool, check_tools
from ._util import finite_number
from ._versions import cli_versions_option
from ._worktrees import GitWorktree

if TYPE_CHECKING:
    from .backend import Backend

Retention = Literal["compact", "lossless"]
SessionLostPolicy = Literal["fail", "fresh"]
OwnerDeathPolicy = Literal["fail", "retry"]
UsageLimitPolicy = Literal["park", "fail"]
ExpiryPolicy = Literal["halt", "fail"]
ContextPolicy = Literal["fresh", "compact", "fail"]
WhenBusy = Literal["enqueue", "reject", "interrupt", "steer"]
_WHEN_BUSY: tuple[WhenBusy, ...] = ("enqueue", "reject", "interrupt", "steer")


def _seconds_or_none(key: str, value: object) -> float | None:
    if value is None:
        return None
    if not finite_number(value) or value <= 0:
        raise InvalidOptions(key, value, "must be a positive number of seconds, or None (no bound)")
    return float(value)


def _count(key: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidOptions(key, value, "must be an int >= 0")
    return value


def _positive_int(key: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidOptions(key, value, "must be an int >= 1")
    return value


def _seconds(key: str, value: object) -> float:
    seconds = _seconds_or_none(key, value)
    if seconds is None:
        raise InvalidOptions(key, value, "must be a positive number of seconds")
    return seconds


def _keep_alive(key: str, value: object) -> float | None:
    if value is None:
        return None
    try:
        return _seconds(key, value)
    except InvalidOptions:
        raise InvalidOptions(
            key,
            value,
            "must be a positive number of seconds to keep the CLI between turns, "
            "or None (one CLI process per turn)",
        ) from None


def _background(key: str, value: object) -> float | None:
    # False: none (the turn's end kills it); True: no bound of its own; else its bound.
    if value is False:
        return None
    if value is True:
        return math.inf
    if not finite_number(value) or value <= 0:
        raise InvalidOptions(
            key,
            value,
            "must be False (a turn's end kills what it started), True (background work "
            "lives until the agent's CLI ends) or a positive number of seconds each "
            "background task may run",
        )
    return float(value)


def _retention(key: str, value: object) -> Retention:
    if value == "compact":
        return "compact"
    if value == "lossless":
        return "lossless"
    raise InvalidOptions(key, value, "must be 'compact' or 'lossless'")


def _session_lost(key: str, value: object) -> SessionLostPolicy:
    if value == "fail":
        return "fail"
    if value == "fresh":
        return "fresh"
    raise InvalidOptions(key, value, "must be 'fail' or 'fresh'")


def _when_busy(key: str, value: object) -> WhenBusy:
    for policy in _WHEN_BUSY:
        if value == policy:
            return policy
    raise InvalidOptions(
        key,
        value,
        "must be 'enqueue' (it waits its turn), 'reject' (AgentBusy), 'interrupt' (the "
        "running turn ends, the prompt runs next) or 'steer' (it joins the running turn)"
        + (did_you_mean(value, _WHEN_BUSY) if isinstance(value, str) else ""),
    )


def _owner_death(key: str, value: object) -> OwnerDeathPolicy:
    if value == "fail":
        return "fail"
    if value == "retry":
        return "retry"
    raise InvalidOptions(
        key,
        value,
        "must be 'fail' (the request ends OwnerDied) or 'retry' (it runs once more, on the "
        "same session)",
    )


def _choice(*choices: str) -> Check:
    """The check of an option that is one of ``choices`` (strings)."""

    def check(key: str, value: object) -> Any:
        if isinstance(value, str) and value in choices:
            return value
        listed = ", ".join(repr(choice) for choice in choices)
        raise InvalidOptions(key, value, f"must be one of {listed}")

    return check


def _credential(key: str, value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise InvalidOptions(
            key,
            value,
            "must be a non-empty name for the login or key the agent uses (agents given the "
            "same name share its usage limits), or None (told from the CLI's environment)",
        )
    if (shown := redact(value)) != value:  # the name is shown in status, logs and the store
        raise InvalidOptions(
            key,
            shown,
            "looks like a secret (an API key or token): give a name for the login or key "
            "the agent uses, not the secret itself",
        )
    return value


def _per_credential(key: str, value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidOptions(
            key, value, "must be an int >= 1 (turns of the agent's credential), or None"
        )
    return value


def _fraction(key: str, value: object) -> float | None:
    if value is None:
        return None
    if not finite_number(value) or not 0 < value < 1:
        raise InvalidOptions(
            key, value, "must be a fraction of the context window, between 0 and 1, or None"
        )
    return float(value)


def _result_ttl(key: str, value: object) -> float:
    if not finite_number(value) or value < 0:
        raise InvalidOptions(
            key, value, "must be a finite number of seconds >= 0 (how long a result is kept)"
        )
    return float(value)


def _failover(key: str, value: object) -> bool | None:
    """``start_agent``'s ``failover``: None, True or False."""
    if value is not None and not isinstance(value, bool):
        raise InvalidOptions(
            key, value, "must be True (store the spec or refuse), False (never) or None"
        )
    return value


def _restart(key: str, value: object) -> RestartType:
    for restart in RestartType:
        if value == restart.value:
            return restart
    choices = ", ".join(repr(t.value) for t in RestartType)
    raise InvalidOptions(key, value, f"must be one of {choices}")


def app_tools_option(key: str, value: object) -> tuple[Tool, ...]:
    """``value`` as a tuple of tools, or `InvalidOptions` naming ``key`` and why."""
    try:
        return check_tools(value, key)
    except (TypeError, ValueError) as exc:
        raise InvalidOptions(key, value, str(exc)) from None


def _flag(key: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise InvalidOptions(key, value, "must be True or False")
    return value


def _absolute_directory(key: str, value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not os.path.isabs(value):
        raise InvalidOptions(key, value, "must be an absolute path, or None (the default)")
    return value


def _limits(key: str, value: object) -> Limits | None:
    if value is not None and not isinstance(value, Limits):
        raise InvalidOptions(
            key,
            value,
            'must be an agentrt.Limits, e.g. Limits(memory="2G", tasks=512, cpus=1.5), or None',
        )
    return value


def _servers(key: str, value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        raise InvalidOptions(key, value, f"must be a tuple of names, not one string: ({value!r},)")
    if not isinstance(value, list | tuple) or not all(
        isinstance(name, str) and name.strip() for name in value
    ):
        raise InvalidOptions(
            key, value, "must be a tuple of MCP server names, as the CLI's MCP config names them"
        )
    return tuple(value)


def _repeats(key: str, value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 2:
        raise InvalidOptions(key, value, "must be an int >= 2 (times in a row), or None (off)")
    return value


def _workspace(key: str, value: object) -> GitWorktree | None:
    if value is not None and not isinstance(value, GitWorktree):
        raise InvalidOptions(key, value, "must be an agentrt.GitWorktree, or None (no workspace)")
    return value


def budget_usd_option(key: str, value: object) -> float | None:
    if value is None:
        return None
    if not finite_number(value) or value <= 0:
        raise InvalidOptions(key, value, "must be a positive number of US dollars, or None")
    return float(value)


def budget_tokens_option(key: str, value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidOptions(key, value, "must be an int >= 1 (tokens), or None")
    return value


# Each option's check: called with its key and the value given, it returns the value to
# keep or raises InvalidOptions naming the key.
Check = Callable[[str, object], Any]


def _checked_by(check: Check) -> dict[str, Check]:
    return {"check": check}


@attrs.frozen
class AgentOptions:
    """Options the runtime itself consumes; every other ``start_agent`` keyword goes to
    ``Agent.init_agent``. Each is declared once, here, with its check (the table of runtime
    options in docs/reference/options.md documents them, and a test keeps the two equal)."""

    # Seconds a turn may run before it ends with ``total_timeout``; None turns it off.
    watchdog: float | None = attrs.field(default=600.0, metadata=_checked_by(_seconds_or_none))
    # Seconds a CLI may go on after printing a result (Claude Code waits for its background
    # tasks and may print a later result, which replaces the earlier one); past it the tree
    # is killed and the turn completes with the last result. None: only the watchdog.
    after_result: float | None = attrs.field(default=30.0, metadata=_checked_by(_seconds_or_none))
    # Seconds from the start of a turn to its first content event (anything but session
    # and raw events) before it ends with ``first_event_timeout``; None turns it off.
    first_event: float | None = attrs.field(default=None, metadata=_checked_by(_seconds_or_none))
    # CLI process bounds (see agentrt.lowlevel.ProcessLimits): spawn -> first stdout line, the
    # longest gap between lines, the longest line, and the SIGTERM -> SIGKILL grace.
    startup: float | None = attrs.field(default=120.0, metadata=_checked_by(_seconds_or_none))
    idle: float | None = attrs.field(default=None, metadata=_checked_by(_seconds_or_none))
    max_line_bytes: int = attrs.field(default=8 * 1024 * 1024, metadata=_checked_by(_positive_int))
    kill_grace: float = attrs.field(default=2.0, metadata=_checked_by(_seconds))
    # Warm sessions: seconds the agent's CLI process is kept between turns (the next turn
    # runs on it); None runs one process per turn. A warm process is recycled (the next turn
    # resumes on a new one) after ``recycle_turns`` turns or once its resident memory
    # passes ``recycle_rss_bytes``.
    keep_alive: float | None = attrs.field(default=None, metadata=_checked_by(_keep_alive))
    # Background work (the CLI's background Bash commands and subagents) that outlives the
    # turn that started it, on a warm agent: None (``background=False``, the default) kills
    # it at the turn's end; else the seconds each background task may run (``True``: no
    # bound of its own), after which the runtime stops it. It is killed with the warm CLI.
    background: float | None = attrs.field(default=None, metadata=_checked_by(_background))
    # Seconds ``approve_tool`` and ``handle_hook`` may take to answer; past it the tool is
    # denied (a hook gets no answer), and a warning is logged.
    approval_timeout: float = attrs.field(default=60.0, metadata=_checked_by(_seconds))
    recycle_turns: int = attrs.field(default=100, metadata=_checked_by(_positive_int))
    recycle_rss_bytes: int = attrs.field(default=2 * 1024**3, metadata=_checked_by(_positive_int))
    retention: Retention = attrs.field(default="compact", metadata=_checked_by(_retention))
    max_events: int = attrs.field(default=1000, metadata=_checked_by(_count))
    # Finished turns of the agent the store's history keeps (TurnHistoryStore), the newest:
    # a bound, so a fleet running for months does not grow its store; 0 keeps none.
    turn_history: int = attrs.field(default=1000, metadata=_checked_by(_count))
    max_event_bytes: int = attrs.field(default=1024 * 1024, metadata=_checked_by(_count))
    max_pending: int = attrs.field(default=1000, metadata=_checked_by(_count))
    max_pending_bytes: int = attrs.field(default=1024 * 1024, metadata=_checked_by(_count))
    max_results: int = attrs.field(default=100, metadata=_checked_by(_count))
    max_result_bytes: int = attrs.field(default=8 * 1024 * 1024, metadata=_checked_by(_count))
    restart: RestartType = attrs.field(
        default=RestartType.PERMANENT, metadata=_checked_by(_restart)
    )
    # When the CLI no longer knows the resumed session: None follows the agent class's
    # ``on_session_lost``; "fail" or "fresh" override it (None cannot be given).
    on_session_lost: SessionLostPolicy | None = attrs.field(
        default=None, metadata=_checked_by(_session_lost)
    )
    # On a store that keeps requests: what becomes of the request whose turn was running
    # when its owner died ("fail": it ends OwnerDied, as a turn that ran tools may have
    # changed things a second run would change again; "retry": it runs once more, resumed),
    # and how long a settled request's outcome is kept for `wait`, `poll` and its key.
    on_owner_death: OwnerDeathPolicy = attrs.field(
        default="fail", metadata=_checked_by(_owner_death)
    )
    result_ttl: float = attrs.field(default=86400.0, metadata=_checked_by(_result_ttl))
    # What a prompt (ask, tell) that arrives while the agent runs a turn does: waits its
    # turn ("enqueue"), is refused ("reject": AgentBusy), ends the running turn, whose
    # session stays, and runs next ("interrupt"), or joins the running turn ("steer", a
    # warm agent whose CLI takes messages mid-turn: Runtime.steer), queueing when no turn
    # runs on the CLI to join.
    when_busy: WhenBusy = attrs.field(default="enqueue", metadata=_checked_by(_when_busy))

    # Memory, tasks and CPU of each turn's processes (and of a warm CLI's), in the turn's
    # cgroup: see agentrt.Limits. None: unlimited.
    limits: Limits | None = attrs.field(default=None, metadata=_checked_by(_limits))
    # A turn ends ``stuck`` when its model makes the same tool call with the same result
    # ``stuck_repeats`` times in a row, or the same call with the same error ``stuck_errors``
    # times in a row (agentrt._stuck); None turns that check off.
    stuck_repeats: int | None = attrs.field(default=4, metadata=_checked_by(_repeats))
    stuck_errors: int | None = attrs.field(default=3, metadata=_checked_by(_repeats))
    # MCP servers a turn cannot do without: one the CLI reports failed, needing
    # authentication, or not configured ends the turn ``mcp_unavailable`` at once.
    required_mcp: tuple[str, ...] = attrs.field(default=(), metadata=_checked_by(_servers))
    # The login or key the agent's CLI uses (_credentials): agents that share one share its
    # usage limit, its expiry and its admission. None: told from the CLI's environment.
    credential: str | None = attrs.field(default=None, metadata=_checked_by(_credential))
    # Admission per credential, beside max_processes: turns at once, turns a minute.
    credential_turns: int | None = attrs.field(default=None, metadata=_checked_by(_per_credential))
    credential_turns_per_minute: int | None = attrs.field(
        default=None, metadata=_checked_by(_per_credential)
    )
    # A usage limit parks every agent of the credential until it resets ("park"), or only
    # fails the turn ("fail"); an expired login halts every agent of it until the login
    # works again ("halt"), or only fails the turn ("fail").
    on_usage_limit: UsageLimitPolicy = attrs.field(
        default="park", metadata=_checked_by(_choice("park", "fail"))
    )
    on_credential_expired: ExpiryPolicy = attrs.field(
        default="halt", metadata=_checked_by(_choice("halt", "fail"))
    )
    # Seconds between looks at the login file of an agent its login's expiry halted: a
    # rewritten file (a new login) lets the login's agents go on.
    login_check: float = attrs.field(default=30.0, metadata=_checked_by(_seconds))
    # A full context: the prompt runs again on a new session seeded with the old one's
    # hand-off ("fresh"), or after an in-band compaction of the session ("compact"), or
    # the turn fails ("fail"). See _recovery.Recovery.run_again.
    on_context_exhausted: ContextPolicy = attrs.field(
        default="fresh", metadata=_checked_by(_choice("fresh", "compact", "fail"))
    )
    # A warm agent whose context is this full (a fraction of its window, as the CLI counts
    # it) after a turn compacts it in band before its next request. None: never ahead.
    compact_at: float | None = attrs.field(default=None, metadata=_checked_by(_fraction))

    @property
    def process_limits(self) -> ProcessLimits:
        """The bounds of the agent's CLI processes, per turn or warm."""
        return ProcessLimits(
            startup=self.startup,
            idle=self.idle,
            max_line_bytes=self.max_line_bytes,
            term_grace=self.kill_grace,
            eof_grace=self.kill_grace,
            resources=self.limits,
        )

    # Whether the agent's spec goes into the store for a host to take it over (_failover):
    # None stores it when it can be stored, True refuses a start whose spec cannot be.
    failover: bool | None = attrs.field(default=None, metadata=_checked_by(_failover))

    # Application tools the model may call (see agentrt.tool); None: the agent class's
    # ``app_tools``.
    app_tools: tuple[Tool, ...] | None = attrs.field(
        default=None, metadata=_checked_by(app_tools_option)
    )
    # Portable sessions (_portable.py): the agent's own CLI home under ``cli_homes`` (None:
    # default_cli_homes()), its transcript carried in the store.
    portable: bool = attrs.field(default=False, metadata=_checked_by(_flag))
    cli_homes: str | None = attrs.field(default=None, metadata=_checked_by(_absolute_directory))
    # Seconds a portable agent's turn waits for the store to give its transcript before it
    # starts (then ``store_failed``) and to take it before it answers (then the Response
    # says ``transcript_stored=False``); None: no bound.
    transcript_wait: float | None = attrs.field(
        default=10.0, metadata=_checked_by(_seconds_or_none)
    )
    # A git worktree of the agent's own, owned by its record in the store (_workspaces):
    # its CLI runs there (so ``cwd`` is refused beside it).
    workspace: GitWorktree | None = attrs.field(default=None, metadata=_checked_by(_workspace))
    # The agent's own budgets (_budgets), counted from its stored totals: no turn starts
    # once one is spent.
    budget_usd: float | None = attrs.field(default=None, metadata=_checked_by(budget_usd_option))
    budget_tokens: int | None = attrs.field(
        default=None, metadata=_checked_by(budget_tokens_option)
    )
    # The versions of its CLI the agent accepts (PEP 440 specifiers, ">=2.1,<3"); a turn
    # whose CLI reports another ends with CliVersionMismatch as soon as it says so.
    cli_versions: str | None = attrs.field(default=None, metadata=_checked_by(cli_versions_option))


_CHECKS: dict[str, Check] = {
    field.name: field.metadata["check"] for field in attrs.fields(AgentOptions)
}
DEFAULT_OPTIONS = AgentOptions()
_NO_REST: Mapping[str, Any] = MappingProxyType({})


def split_options(
    options: Mapping[str, Any], defaults: AgentOptions = DEFAULT_OPTIONS
) -> tuple[AgentOptions, Mapping[str, Any]]:
    """Validate the runtime's options; return them (``defaults`` for those not given) and
    the rest (for ``init_agent``)."""
    ours: dict[str, Any] = {}
    rest: dict[str, Any] = {}
    for key, value in options.items():
        check = _CHECKS.get(key)
        if check is None:
            rest[key] = value
        else:
            ours[key] = check(key, value)
    # Agents started with the defaults (and no options for init_agent) share one options
    # object and one empty mapping (memory per idle agent).
    return (attrs.evolve(defaults, **ours) if ours else defaults), (rest or _NO_REST)


def kill_grace_option(value: object) -> float:
    """``open_runtime``'s ``kill_grace`` (its agents' default), checked as an agent's is."""
    return _seconds("kill_grace", value)


# Where the options are explained, for messages that cannot list them all.
OPTIONS_PAGE = "docs/reference/options.md"

# What start_agent takes besides the agent, its name and its backend: the runtime's options.
_RUNTIME_KEYS = ("resume", *_CHECKS)


def backend_options(backend: Backend, raw: Mapping[str, Any]) -> Any:
    """``backend.parse_options(raw)``. A key the backend does not know (it says so with
    ``known_options``) is refused naming the closest few of every option the agent takes,
    the runtime's and the backend's (a misspelt runtime option reaches the backend, which
    knows only its own), and the options page for the rest; ``known_options`` holds them
    all."""
    try:
        return backend.parse_options(raw)
    except InvalidOptions as exc:
        if exc.known_options is None:
            raise
        key, value, theirs = exc.key, exc.value, exc.known_options
    if key in _CHECKS:  # returned by an init_agent: the runtime never sees it there
        why = "a runtime option, for start_agent, not for what init_agent returns"
    else:
        why = "unknown option" + did_you_mean(key, (*_RUNTIME_KEYS, *theirs), most=3)
    # The list itself (some 65 names) would bury the close ones; the page explains each.
    where = f"every option of the runtime and of the {backend.name!r} backend: {OPTIONS_PAGE}"
    raise InvalidOptions(
        key, value, f"{why} ({where})", known_options=(*_RUNTIME_KEYS, *theirs)
    ) from None


# The options of supervisors (open_runtime, open_supervisor) and of start_agent itself.


def strategy_option(value: object) -> Strategy:
    """``value`` as a `Strategy`, or `InvalidOptions` naming the choices."""
    for strategy in Strategy:
        if value == strategy.value:
            return strategy
    choices = ", ".join(repr(s.value) for s in Strategy)
    raise InvalidOptions("strategy", value, f"must be one of {choices}")


def intensity_option(
    max_restarts: object, period: object, backoff: object, max_backoff: object
) -> RestartIntensity:
    """A `RestartIntensity` from validated arguments (`InvalidOptions` names a bad one); a
    backoff of 0 restarts at once."""

    def delay(key: str, value: object) -> float:
        return 0.0 if value == 0 and not isinstance(value, bool) else _seconds(key, value)

    return RestartIntensity(
        _count("max_restarts", max_restarts),
        _seconds("period", period),
        delay("backoff", backoff),
        delay("max_backoff", max_backoff),
    )


def resume_option(value: object) -> str | bool:
    if value is False:
        return False
    if isinstance(value, str) and value:
        return value
    raise InvalidOptions(
        "resume", value, "must be 'auto', False (a new session) or a session id to resume"
    )
