"""The protocol a CLI backend implements.

A backend is pure: given options, a prompt and a session id it returns a `Command`; given
one decoded stdout frame it returns events. All I/O (processes, time, the store) belongs to
agentrt, so one process driver serves every CLI and every backend is tested with plain data.

Besides the protocol, this module is everything a backend imports from agentrt (a backend
imports no other agentrt module): agentrt's event, stop reason, usage, error and ask types
under their agentrt names, `SessionTotals` (a translator's baseline), the child environment
policies (`EnvPolicy`, `child_env`, `default_env_policy`, `bypass_proxy`), redaction
(`redact`, `is_secret_name`, `REDACTED`) and `did_you_mean` (the closest known name, for an
error). For CLIs that speak Claude Code's stream-json (Qwen Code does), the shared pieces:
`StreamJsonTranslator` (frames -> events, told the CLI's differences by a
`StreamJsonDialect`) and `StreamJsonLive` (the live channel's control protocol, with
`control_response` / `control_error` for a backend's own requests). ``parse_options`` raises
`agentrt.InvalidOptions` with ``known_options`` (every option it knows) for an unknown key:
the runtime then names the closest of its own options and the backend's.
"""

from __future__ import annotations

import os
import signal
import urllib.parse
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import attrs

from ._asks import AddContext as AddContext
from ._asks import Allow as Allow
from ._asks import Answers as Answers
from ._asks import Ask, HookCall, ToolApproval
from ._asks import Block as Block
from ._asks import Deny as Deny
from ._asks import McpElicitation as McpElicitation
from ._asks import ToolRequest as ToolRequest
from ._channel import BackgroundTask as BackgroundTask
from ._channel import ChannelCall, ControlAnswer, ControlRequest
from ._channel import ContextCategory as ContextCategory
from ._channel import ContextUsage as ContextUsage
from ._env import (
    AMBIENT_AUTH_VARS,
    ENV_POLICIES,
    EnvPolicy,
    bypass_proxy,
    child_env,
    default_env_policy,
)
from ._errors import InvalidOptions as InvalidOptions
from ._errors import did_you_mean
from ._events import ErrorEvent as ErrorEvent
from ._events import Event, SessionTotals
from ._events import InitEvent as InitEvent
from ._events import McpServerStatus as McpServerStatus
from ._events import PermissionDenial as PermissionDenial
from ._events import RawEvent as RawEvent
from ._events import ResultEvent as ResultEvent
from ._events import SessionEvent as SessionEvent
from ._events import StopReason as StopReason
from ._events import TextEvent as TextEvent
from ._events import TextRetractedEvent as TextRetractedEvent
from ._events import ToolResultEvent as ToolResultEvent
from ._events import ToolUseEvent as ToolUseEvent
from ._events import Usage as Usage
from ._events import UsageEvent as UsageEvent
from ._hooks import HOOK_TYPES
from ._hooks import Hook as Hook
from ._hooks import HookKind as HookKind
from ._redact import REDACTED, is_secret_name, redact, redact_mapping
from ._stream_json._dialect import StreamJsonDialect
from ._stream_json._live import StreamJsonLive, control_error, control_response
from ._stream_json._live_protocol import FrameRole, ProtocolError
from ._stream_json._translator import StreamJsonTranslator
from ._util import fixup_module_metadata as _fixup_module_metadata

__all__ = [
    "AMBIENT_AUTH_VARS",
    "ENV_POLICIES",
    "HOOK_TYPES",
    "REDACTED",
    "AppToolServer",
    "AppToolsBackend",
    "Backend",
    "BackendInfo",
    "Capabilities",
    "ChannelCall",
    "Command",
    "ConfigFile",
    "ControlAnswer",
    "ControlRequest",
    "Credential",
    "CronBackend",
    "CronDeleted",
    "CronRequested",
    "EnvPolicy",
    "ExitStatus",
    "ForkBackend",
    "FrameRole",
    "HookCall",
    "InProcessBackend",
    "LiveBackend",
    "LiveProtocol",
    "PortableBackend",
    "ProtocolError",
    "RunBudgetBackend",
    "SecretFile",
    "SessionTotals",
    "StreamJsonDialect",
    "StreamJsonLive",
    "StreamJsonTranslator",
    "ToolApproval",
    "Translator",
    "WakeupBackend",
    "WakeupRequested",
    "bypass_proxy",
    "child_env",
    "control_error",
    "control_response",
    "default_env_policy",
    "did_you_mean",
    "is_secret_name",
    "redact",
    "redact_mapping",
]


@attrs.frozen
class SecretFile:
    """Content that must not travel on argv. The driver writes it to a 0600 file in a private
    directory before spawning, puts that file's path wherever this object stands in
    ``Command.argv`` (or ``Command.env_files``), and removes it when the turn ends, however
    it ends."""

    name: str
    content: bytes = attrs.field(repr=False)


@attrs.frozen
class ConfigFile:
    """A file the CLI reads from a fixed ``path`` (absolute): its settings in a CLI home
    the backend owns, for a CLI that takes them from no flag and no variable. The driver
    writes it before each spawn (parent directories made 0700; the content written 0600
    beside it and renamed over it, so a CLI never reads half of it) and leaves it there,
    as the CLI's own files are."""

    path: str
    content: bytes = attrs.field(repr=False)

    def __attrs_post_init__(self) -> None:
        if not os.path.isabs(self.path):
            raise ValueError(f"a ConfigFile path must be absolute, got {self.path!r}")


@attrs.frozen
class Command:
    """One process to run for one turn. ``env_files``: environment variables whose value is
    the path of a `SecretFile` the driver writes (for a CLI that reads a file it is pointed
    at only through its environment, such as Qwen Code's settings)."""

    argv: tuple[str | SecretFile, ...]
    env: Mapping[str, str] = attrs.field(factory=dict, repr=False)
    env_files: Mapping[str, SecretFile] = attrs.field(factory=dict, repr=False)
    cwd: str | None = None
    stdin: bytes = attrs.field(default=b"", repr=False)
    # The first signal of an interrupt. Claude Code ends a turn cleanly on SIGINT (exit 0,
    # a final result, the transcript flushed); None means go straight to the kill ladder.
    interrupt_signal: signal.Signals | None = None
    # Written before the spawn, left in place (see ConfigFile).
    config_files: tuple[ConfigFile, ...] = ()

    @property
    def files(self) -> tuple[SecretFile, ...]:
        on_argv = (a for a in self.argv if isinstance(a, SecretFile))
        return (*on_argv, *self.env_files.values())


@attrs.frozen
class ExitStatus:
    """How a turn's process ended: ``returncode`` (None if unknown) or the killing ``signal``."""

    returncode: int | None
    signal: int | None = None

    @property
    def crashed(self) -> bool:
        return self.signal is not None


class Translator(Protocol):
    """Turns the frames of one turn into events. Pure, stateful within one turn."""

    @property
    def decode(self) -> Callable[[bytes], Any] | None:
        """A typed decoder for stdout lines, or None (a plain ``decode = None`` attribute
        will do). The turn tries it first on each line (typed msgspec Structs for the
        common frames are cheaper than dicts); a line it rejects with `msgspec.DecodeError`
        or `msgspec.ValidationError` is decoded generically, as every line is with None.
        ``feed`` gets whichever value came out."""
        ...

    def feed(self, frame: Any) -> Sequence[Event]:
        """Events for one decoded stdout frame (a JSON value)."""
        ...

    def finish(self, exit_status: ExitStatus, stderr_tail: str) -> Event | None:
        """The terminal event, if the stream ended without one: classify the exit."""
        ...

    # Optionally also ``preamble() -> Sequence[Event]``: the events a turn has before its
    # first frame, which the turn records (a session id checkpointed) as soon as its channel
    # is open. For a live protocol that learnt the session id from its handshake (an ACP
    # agent's answer to ``session/new``): a turn whose model never answers prints nothing,
    # and its conversation must still survive it.


@attrs.frozen
class Capabilities:
    """What a backend can do with one agent's options, as ``Backend.capabilities`` declares
    it; the runtime picks the agent's mode from this once, at ``start_agent``, and refuses
    what the backend cannot honour there (`agentrt.InvalidOptions`, naming why).

    ``in_process``: the frames come without a process (an `InProcessBackend`, such as the
    scripted test backend), so nothing below applies. ``live``: a `LiveBackend` process can
    run these options (``keep_alive``); ``approvals``: that process asks the agent before
    tools run (``approve_tool``); ``hooks``: it calls the agent's hooks (``handle_hook``);
    ``calls``: the runtime's requests it takes on a warm agent (`ChannelCall`: the
    ``Runtime`` methods of the same names), which its protocol's ``request`` writes.
    ``not_live`` says why these options have no live process, naming the option
    (``"approval='approve-for-me' runs on codex exec only"``), for the refusal.

    ``per_turn``: a turn can run as one process read to its end (`Backend.command`). False
    for a CLI that takes prompts over its live channel only (an ACP agent, whose session id
    comes in answer to a request): every turn then runs on a live process, one per turn
    unless ``keep_alive`` keeps it; needs ``live``.

    ``version_probe``: the CLI does not report its own version in a turn's frames (an
    `InitEvent`'s ``cli_version``), so the runtime runs `Backend.version_command` before
    the agent's first turn, once per executable file (asked again when the file changes),
    and takes the first ``X.Y.Z`` it prints as every turn's ``cli_version``.

    ``mcp_status``: the CLI's `InitEvent` lists every MCP server it was configured with and
    its status (``mcp_servers``), so the runtime can end a turn whose ``required_mcp``
    server failed; an agent with ``required_mcp`` is refused on a backend without it."""

    in_process: bool = False
    live: bool = False
    approvals: bool = False
    hooks: bool = False
    calls: frozenset[ChannelCall] = frozenset()
    not_live: str | None = None
    version_probe: bool = False
    per_turn: bool = True
    mcp_status: bool = False

    def __attrs_post_init__(self) -> None:
        if (self.approvals or self.hooks or self.calls) and not self.live:
            raise ValueError("approvals, hooks and calls need the live channel: declare live=True")
        if not self.per_turn and not self.live:
            raise ValueError("a backend without per-turn processes needs live=True")
        if self.in_process and self.live:
            raise ValueError("an in-process backend runs no live process")


@attrs.frozen
class Credential:
    """One way a CLI would authenticate: ``label`` names it (an environment variable's
    name, or ``"login file ~/.codex/auth.json"``), ``env_var`` is the variable when it is
    one, ``note`` says what it is ("API key"). Names and paths only, never a value."""

    label: str
    env_var: str | None = None
    note: str = ""


def _no_credentials(env: Mapping[str, str]) -> Sequence[Credential] | None:
    return None


@attrs.frozen
class BackendInfo:
    """What ``agentrt doctor``, ``agentrt demo`` and errors say about a backend, as its optional
    ``info()`` declares it; every field has a default: a backend without it is listed and run.

    ``install``: how to install the CLI (a sentence for "fix:"); ``login``: how a user logs
    it in; ``written_for``: the CLI version the backend was written and checked against
    (doctor warns about another); ``quiet_options``: options of a turn that needs no tools
    (``doctor --smoke``, the demo's workers); ``shell_options``: options of a turn whose
    model may run read-only shell commands (``echo``, ``sleep``) without asking (the demo's
    crashing agent); ``credentials(env)``: what the CLI would authenticate with in the child
    environment ``env``, in its order of preference (None: the backend cannot tell);
    ``binary_option``: the option errors name for the CLI's executable (acp's: ``command``)."""

    install: str | None = None
    login: str | None = None
    written_for: str | None = None
    quiet_options: Mapping[str, Any] = attrs.field(factory=dict)
    shell_options: Mapping[str, Any] = attrs.field(factory=dict)
    credentials: Callable[[Mapping[str, str]], Sequence[Credential] | None] = _no_credentials
    binary_option: str = "binary"


class Backend(Protocol):
    """A coding CLI, described as pure functions.

    Optionally also ``capabilities(options) -> Capabilities``: what the backend can do with
    these options (a live process, approvals, hooks). A backend without it runs one CLI
    process per turn (``Capabilities()``), or none if it is an `InProcessBackend`; a
    `LiveBackend` must declare it, or its live process is never used. And optionally
    ``info() -> BackendInfo``: how to install and log in its CLI, the version it was
    written for, options for a quiet turn (``agentrt doctor``, ``agentrt demo``)."""

    name: str

    def parse_options(self, raw: Mapping[str, Any]) -> Any:
        """Validate options up front; raise `agentrt.InvalidOptions` naming key and value."""
        ...

    def command(self, options: Any, prompt: str, *, session_id: str | None) -> Command:
        """The command for one turn; ``session_id`` is the id to resume, if any."""
        ...

    def translator(self, options: Any, *, baseline: SessionTotals | None = None) -> Translator:
        """A fresh translator for one turn.

        ``baseline`` is what the earlier turns of the session this turn resumes reported,
        summed (each turn's own usage and cost); None when the turn starts a new session.
        A CLI that prints running totals per session (codex's usage, Claude Code's
        ``total_cost_usd``) is reported per turn as its totals minus this."""
        ...

    def version_command(self, options: Any) -> Command:
        """A command that prints the CLI's version (for doctor and the flag canary)."""
        ...


class LiveProtocol(Protocol):
    """One live CLI process that runs many turns of one conversation (warm sessions), as
    pure functions and state: the lines to write and what each stdout frame means. The
    runtime does every write and read; one object serves one process.

    The process is ``command``, run with stdin kept open. The runtime writes ``opening()``
    first and feeds every frame ``classify`` calls ``"control"`` to ``control`` until
    ``ready``; then, per turn, it writes ``prompt(text)``, feeds ``"event"`` and ``"end"``
    frames to a fresh ``translator(...)`` and ends the turn after the ``"end"`` frame.
    ``interrupt()`` asks the CLI to end the running turn in band; the turn then still ends
    at its ``"end"`` frame.
    """

    @property
    def command(self) -> Command:
        """The process to run (``Command.stdin`` is not used: stdin stays open)."""
        ...

    @property
    def ready(self) -> bool:
        """Whether the CLI has answered the opening and takes prompts."""
        ...

    def opening(self) -> bytes:
        """The lines to write once the process runs (a handshake), or b""."""
        ...

    def classify(self, frame: Any) -> FrameRole:
        """``"control"``: for `control`, not a turn's; ``"end"``: the last frame of a turn
        (translated too); ``"event"``: any other frame of a turn; ``"task"``: news of the
        CLI's background tasks, translated during a turn, no turn's output between turns.
        A protocol that returns ``"task"`` also has ``background_tasks(frame)``: the
        `BackgroundTask` values the frame says run now, or None if it does not say."""
        ...

    def control(self, frame: Any) -> bytes | Ask | ControlAnswer:
        """Take a control frame; return the lines to write in answer (b"" for none), the
        question it asks the agent (a `ToolApproval` or a `HookCall`, whose ``answer``
        makes the lines once the agent has answered), or the CLI's reply to a request the
        runtime wrote (a `ControlAnswer`; one whose id the runtime did not write, such as
        an interrupt's acknowledgement, is dropped). Raises `ProtocolError` when the frame
        breaks the protocol.

        A protocol whose `Capabilities` declare ``calls`` also has
        ``request(call, argument) -> ControlRequest``: the line of one of those calls."""
        ...

    def prompt(self, text: str) -> bytes:
        """The lines that start a turn with ``text``."""
        ...

    def interrupt(self) -> bytes:
        """The lines that ask the CLI to end the running turn."""
        ...

    def translator(self, *, baseline: SessionTotals | None = None) -> Translator:
        """A fresh translator for one turn on this process (see `Backend.translator`)."""
        ...


@runtime_checkable
class LiveBackend(Protocol):
    """A backend whose CLI can keep one process for a conversation (``keep_alive``), and
    whose live process answers approvals and hooks; its ``Backend.capabilities`` says for
    which options."""

    def live(
        self,
        options: Any,
        *,
        session_id: str | None,
        approvals: bool = False,
        hooks: frozenset[HookKind] = frozenset(),
    ) -> LiveProtocol:
        """A live process for the conversation ``session_id`` (None: a new one). Called
        only for options whose `Capabilities` say ``live``, with ``approvals`` and
        ``hooks`` only where they say so: ``approvals``, the CLI asks before running a
        tool its settings do not allow (`ToolApproval`); ``hooks``, the hook kinds the CLI
        calls the agent for (`HookCall`; empty: none)."""
        ...


@attrs.frozen
class AppToolServer:
    """The loopback MCP server (streamable HTTP) that serves one agent instance its
    application tools: the server's ``name`` (as the CLI should call it), its ``url``, and
    the bearer ``token`` the CLI must send, a secret (never on argv). The CLI must reach
    ``host`` directly, not through a proxy (`bypass_proxy`)."""

    name: str
    url: str
    token: str = attrs.field(repr=False)

    @property
    def host(self) -> str:
        return urllib.parse.urlsplit(self.url).hostname or ""


@runtime_checkable
class AppToolsBackend(Protocol):
    """A backend whose CLI can call application tools over MCP (``app_tools``)."""

    def with_app_tools(self, options: Any, server: AppToolServer) -> Any:
        """``options`` (as ``parse_options`` returned them) changed so that every turn's CLI
        connects to ``server`` with its token and may call its tools without asking."""
        ...


@runtime_checkable
class ForkBackend(Protocol):
    """A backend whose CLI can start a new session on a copy of another session's
    conversation, leaving the original as it was (``start_agent(fork_from=...)``)."""

    def with_fork(self, options: Any) -> Any:
        """``options`` changed so a turn that resumes a session forks it instead: it runs
        on a new session id, whose conversation starts as a copy of the resumed one's."""
        ...

    def transcript_path(self, options: Any, session_id: str, cwd: str) -> str | None:
        """Where the CLI of these options keeps the transcript of ``session_id`` made in
        ``cwd`` (absolute), for a CLI that finds a transcript by its working directory (a
        fork in another directory gets a copy there first); None for one that does not."""
        ...


@attrs.frozen
class WakeupRequested:
    """A wake-up the model scheduled through its CLI: run ``prompt`` on the agent's
    conversation ``due_in`` seconds after the turn (``reason``: the model's, for people)."""

    due_in: float
    prompt: str
    reason: str | None = None


@runtime_checkable
class WakeupBackend(Protocol):
    """A backend whose CLI lets the model schedule a wake-up it keeps only in its own process
    (Claude's ``ScheduleWakeup``): agentrt stores each one and runs its turn when it is
    due, on whichever program owns the agent then; a warm CLI fires its own while it
    lives, and its turn then drops the stored copy."""

    def wakeups(self, events: Sequence[Event]) -> Sequence[WakeupRequested]:
        """The wake-ups a turn's ``events`` scheduled (the calls the CLI accepted)."""
        ...


@attrs.frozen
class CronRequested:
    """A cron job the model made through its CLI: run ``prompt`` on the agent's conversation
    at each time the five-field cron expression ``cron`` names, or at the next one only when
    not ``recurring``. ``cron_id`` is the CLI's id for it, which the model names to delete
    it (`CronDeleted`)."""

    cron_id: str
    cron: str
    prompt: str
    recurring: bool = True


@attrs.frozen
class CronDeleted:
    """The model deleted its cron job ``cron_id`` through its CLI."""

    cron_id: str


@runtime_checkable
class CronBackend(Protocol):
    """A backend whose CLI lets the model make cron jobs it keeps only in its own process
    (Claude's ``CronCreate`` and ``CronDelete``): agentrt stores each one a per-turn agent's
    CLI made, fires it when due on whichever program owns the agent then, and drops it when
    the model deletes it (a warm CLI fires its own while it lives)."""

    def crons(self, events: Sequence[Event]) -> Sequence[CronRequested | CronDeleted]:
        """The cron jobs a turn's ``events`` made and deleted, in the order of the calls."""
        ...


@runtime_checkable
class RunBudgetBackend(Protocol):
    """A backend whose CLI takes a cost limit per run (Claude's ``--max-budget-usd``): a
    turn of an agent under a budget gets what is left of it, so it cannot run far past."""

    def with_run_budget(self, options: Any, usd: float) -> Any:
        """``options`` changed so the CLI stops spending at ``usd`` (or at the limit the
        options had, if lower)."""
        ...


@runtime_checkable
class PortableBackend(Protocol):
    """A backend whose CLI keeps a conversation's transcript in a file under a home
    directory of its own, which agentrt can carry in the store (``portable=True``)."""

    def cli_home(self, options: Any) -> str:
        """The CLI home these options use (absolute), as the CLI finds it."""
        ...

    def with_cli_home(self, options: Any, home: str) -> Any:
        """``options`` changed so the CLI uses ``home`` as its home, everything else as
        before (the env policy in force included)."""
        ...

    def login_files(self, options: Any) -> Mapping[str, str]:
        """The files that carry the user's login and settings for these options: the name
        each has in a CLI home, and the absolute path it has now (which may not exist)."""
        ...

    def transcript_pattern(self, session_id: str) -> str:
        """A glob, relative to the CLI home, that matches the transcript of ``session_id``."""
        ...


@runtime_checkable
class InProcessBackend(Protocol):
    """A backend that produces its frames without a process (the scripted test backend).

    ``run`` calls ``emit`` with the frames it has at hand, in order (all those made before
    the run next waits, as a CLI's stdout read holds the lines printed since the last), then
    returns how the "process" ended. The frames go through ``translator()`` as a CLI's
    lines would, and a stop takes effect, as for a CLI, from the next ``emit``.
    """

    async def run(
        self, command: Command, emit: Callable[[Iterable[Any]], Awaitable[None]]
    ) -> ExitStatus: ...


_fixup_module_metadata(__name__, {name: globals()[name] for name in __all__})

# agentrt's own types that a backend reads or makes (the events, the stop reasons, usage,
# the error of parse_options, the answers to asks), so that a backend imports this module
# alone. Listed after the fixup: they keep the names they have in agentrt.
__all__ += [
    "AddContext",
    "Allow",
    "Answers",
    "BackgroundTask",
    "Block",
    "ContextCategory",
    "ContextUsage",
    "Deny",
    "ErrorEvent",
    "Event",
    "Hook",
    "HookKind",
    "InitEvent",
    "InvalidOptions",
    "McpElicitation",
    "McpServerStatus",
    "PermissionDenial",
    "RawEvent",
    "ResultEvent",
    "SessionEvent",
    "StopReason",
    "TextEvent",
    "TextRetractedEvent",
    "ToolRequest",
    "ToolResultEvent",
    "ToolUseEvent",
    "Usage",
    "UsageEvent",
]
