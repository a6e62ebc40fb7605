"""agentrt: a supervised actor runtime, on trio, for coding-CLI agents."""

# General layout:
#
# One turn's data flows one way, and no module on its path imports one after it:
#
#   _process -> _turn -> _actor -> _supervisor -> _runtime -> _api
#
# _process.py is the process driver: spawn (_spawn: posix_spawn, no fork of the runtime),
# stdout lines (_lines), the stderr ring, the liveness bounds and the kill ladder;
# _proctree.py, _cgroup.py and _orphans.py find and kill every process a turn started.
# _turn.py runs one turn: a backend's Command through the driver (or in process), frames to
# events, the checkpoint, retention (_retention,
# _segment) and the Response. _actor.py is one agent incarnation: its loop and the Agent
# callbacks (_agent). _slot.py is the one owner of an agent's state, kept per name across
# incarnations (each borrows it): the mailbox (_mailbox, _requests: every queued-request
# operation), the session, halted, the counts, the current request and turn, and every
# call other tasks make on the agent. _supervisor.py restarts actors by the rules in
# _restart.py; _options.py checks the runtime's options (each declared with its check).
# _mode.py decides, once per instance, how its turns run (in process, one process per
# turn, live, warm) from the backend's Capabilities, and refuses what it cannot honour.
# _runtime.py owns the root nursery, the registry of names, the store and the process
# limiter; _api.py is the module-level form of its methods.
#
# Beside the path: _events.py (events, Response, stop reasons), _errors.py (every error),
# _store.py (the SessionStore protocol, record and lease; _store_memory.py, _store_sqlite.py,
# _store_postgres.py; _store_transcripts.py the CLI transcripts of portable sessions),
# _portable.py (a portable agent's own CLI home, its transcript between it and the store),
# _reaper.py (turns a dead runtime left running), _ownership.py (the leases through which a
# runtime owns its agent names, their renewal and the fence), _env.py / _secretfiles.py / _redact.py
# (a child's environment, its secret files, redaction), _status.py and _stream.py (what
# callers observe), _arguments.py and _exceptiongroups.py (the API's edges), _telemetry.py
# (OpenTelemetry spans and metrics when an SDK is configured; the fields of log records).
# _tools.py describes application tools (@agentrt.tool); _tool_server.py serves them to
# the CLIs over a loopback MCP server per runtime.
#
# backend.py is the public protocol a CLI adapter implements; _backends.py finds one by
# name through the "agentrt.backends" entry points, and the adapters (the repository's
# backends/ folder) are installed as agentrt.backends. testing/ holds the scripted backend,
# fake CLIs and fake model APIs. _cli/ is the `agentrt` command; nothing else imports it.
#
# This file re-exports the public API; `from x import y as y` marks each name as exported.

from ._agent import Agent as Agent
from ._agent import Halt as Halt
from ._agent import Prompt as Prompt
from ._agent import Stop as Stop
from ._api import agents as agents
from ._api import ask as ask
from ._api import halt as halt
from ._api import interrupt as interrupt
from ._api import interrupt_request as interrupt_request
from ._api import notify as notify
from ._api import open_supervisor as open_supervisor
from ._api import poll as poll
from ._api import reset_session as reset_session
from ._api import start_agent as start_agent
from ._api import statistics as statistics
from ._api import status as status
from ._api import stop_agent as stop_agent
from ._api import stream as stream
from ._api import tell as tell
from ._api import unhalt as unhalt
from ._api import wait as wait
from ._api import whereis as whereis
from ._api import withdraw as withdraw
from ._asks import AddContext as AddContext
from ._asks import Allow as Allow
from ._asks import Block as Block
from ._asks import Deny as Deny
from ._asks import Hook as Hook
from ._asks import HookKind as HookKind
from ._asks import ToolRequest as ToolRequest
from ._errors import AgentAlreadyStarted as AgentAlreadyStarted
from ._errors import AgentBusy as AgentBusy
from ._errors import AgentNotFound as AgentNotFound
from ._errors import AgentRTError as AgentRTError
from ._errors import AgentStopped as AgentStopped
from ._errors import BackendNotFound as BackendNotFound
from ._errors import InvalidOptions as InvalidOptions
from ._errors import LeaseLost as LeaseLost
from ._errors import MailboxFull as MailboxFull
from ._errors import NoRuntime as NoRuntime
from ._errors import RestartLimitExceeded as RestartLimitExceeded
from ._errors import RoutingError as RoutingError
from ._errors import SessionMismatch as SessionMismatch
from ._errors import StoreError as StoreError
from ._errors import TurnFailed as TurnFailed
from ._events import ErrorEvent as ErrorEvent
from ._events import Event as Event
from ._events import EventCoverage as EventCoverage
from ._events import InitEvent as InitEvent
from ._events import McpServerStatus as McpServerStatus
from ._events import Omission as Omission
from ._events import PermissionDenial as PermissionDenial
from ._events import RawEvent as RawEvent
from ._events import Response as Response
from ._events import ResultEvent as ResultEvent
from ._events import SessionEvent as SessionEvent
from ._events import SessionLostEvent as SessionLostEvent
from ._events import StopReason as StopReason
from ._events import TextEvent as TextEvent
from ._events import TextRetractedEvent as TextRetractedEvent
from ._events import ToolDecisionEvent as ToolDecisionEvent
from ._events import ToolResultEvent as ToolResultEvent
from ._events import ToolUseEvent as ToolUseEvent
from ._events import Usage as Usage
from ._events import UsageEvent as UsageEvent
from ._records import Lease as Lease
from ._records import LeaseOwner as LeaseOwner
from ._records import SessionRecord as SessionRecord
from ._records import StoredTranscript as StoredTranscript
from ._requests import Completed as Completed
from ._requests import Failed as Failed
from ._requests import NotFound as NotFound
from ._requests import Pending as Pending
from ._requests import PollResult as PollResult
from ._requests import Ref as Ref
from ._requests import Withdrawn as Withdrawn
from ._restart import Crash as Crash
from ._restart import RestartType as RestartType
from ._restart import Strategy as Strategy
from ._runtime import Runtime as Runtime
from ._runtime import open_runtime as open_runtime
from ._status import AgentHandle as AgentHandle
from ._status import AgentStatus as AgentStatus
from ._status import CurrentRequest as CurrentRequest
from ._status import RuntimeStatistics as RuntimeStatistics
from ._store import SessionStore as SessionStore
from ._store_memory import MemoryStore as MemoryStore
from ._store_postgres import PostgresStore as PostgresStore
from ._store_sqlite import SQLiteStore as SQLiteStore
from ._store_sqlite import default_store_path as default_store_path
from ._stream import EventStream as EventStream
from ._supervisor import Supervisor as Supervisor
from ._tools import Tool as Tool
from ._tools import tool as tool
from ._util import fixup_module_metadata as _fixup_module_metadata

# Every public name (tests/test_public_surface.py checks it against the names above and
# against the documentation).
__all__ = [
    "AddContext",
    "Agent",
    "AgentAlreadyStarted",
    "AgentBusy",
    "AgentHandle",
    "AgentNotFound",
    "AgentRTError",
    "AgentStatus",
    "AgentStopped",
    "Allow",
    "BackendNotFound",
    "Block",
    "Completed",
    "Crash",
    "CurrentRequest",
    "Deny",
    "ErrorEvent",
    "Event",
    "EventCoverage",
    "EventStream",
    "Failed",
    "Halt",
    "Hook",
    "HookKind",
    "InitEvent",
    "InvalidOptions",
    "Lease",
    "LeaseLost",
    "LeaseOwner",
    "MailboxFull",
    "McpServerStatus",
    "MemoryStore",
    "NoRuntime",
    "NotFound",
    "Omission",
    "Pending",
    "PermissionDenial",
    "PollResult",
    "PostgresStore",
    "Prompt",
    "RawEvent",
    "Ref",
    "Response",
    "RestartLimitExceeded",
    "RestartType",
    "ResultEvent",
    "RoutingError",
    "Runtime",
    "RuntimeStatistics",
    "SQLiteStore",
    "SessionEvent",
    "SessionLostEvent",
    "SessionMismatch",
    "SessionRecord",
    "SessionStore",
    "Stop",
    "StopReason",
    "StoreError",
    "StoredTranscript",
    "Strategy",
    "Supervisor",
    "TextEvent",
    "TextRetractedEvent",
    "Tool",
    "ToolDecisionEvent",
    "ToolRequest",
    "ToolResultEvent",
    "ToolUseEvent",
    "TurnFailed",
    "Usage",
    "UsageEvent",
    "Withdrawn",
    "agents",
    "ask",
    "default_store_path",
    "halt",
    "interrupt",
    "interrupt_request",
    "notify",
    "open_runtime",
    "open_supervisor",
    "poll",
    "reset_session",
    "start_agent",
    "statistics",
    "status",
    "stop_agent",
    "stream",
    "tell",
    "tool",
    "unhalt",
    "wait",
    "whereis",
    "withdraw",
]

_fixup_module_metadata(__name__, {name: globals()[name] for name in __all__})
