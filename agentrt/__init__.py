"""agentrt: a supervised actor runtime, on trio, for coding-CLI agents."""

# Layers, lowest first (tests/test_layout.py holds this map against the files and the
# imports, and docs/architecture.md has it as a table): a module imports from its own layer
# or a lower one only, and never in a circle, TYPE_CHECKING and function-local imports
# included. A name is a module under agentrt/ (__init__ is this file; a package whose
# __init__.py is empty needs no entry). The backends (the repository's backends/ folder,
# installed as agentrt.backends) stand beside the layers: they import agentrt.backend only.
#
# L0 floor: data, and helpers that need nothing above the floor
#     _alarm _asks _budget_spending _channel _credentials _env _errors _events _exceptiongroups
#     _hooks _logs _operations _records _redact _requests _restart _schedule _status _stream
#     _stream_json._dialect _stream_json._fields _stream_json._frames _stream_json._live
#     _stream_json._live_protocol _stream_json._translator _stream_json._turn_end
#     _stream_json._untyped
#     _telemetry._log_fields _telemetry._otel _tools _unsolicited _util _worktrees backend
# L1 driver, in _driver/: a CLI process, its tree and cgroup, process slots, runtime ids
#     _driver._background _driver._cgroup _driver._channel_calls _driver._fence_guard
#     _driver._kept_file _driver._lifecycle _driver._limits _driver._lines _driver._live
#     _driver._orphans _driver._process _driver._process_slots _driver._procfs
#     _driver._proctree _driver._runtimes _driver._secretfiles _driver._spawn
# L2 stores, in _stores/: the session stores by capability; calls routed between runtimes
#     _stores._approvals _stores._credential_holds _stores._history _stores._memory
#     _stores._postgres _stores._postgres_router _stores._protocols _stores._request_store
#     _stores._requests _stores._route_codec _stores._route_serving _stores._route_values
#     _stores._schedule_store _stores._schedules _stores._sql _stores._sqlite
#     _stores._sqlite_router _stores._sqlite_schema _stores._transcripts _stores._turns
#     _stores._workspaces
# L3 cluster, in _cluster/: several runtimes on one store: leases, reaper, failover specs
#     _cluster._ownership _cluster._reaper _cluster._specs
# L4 turn: one turn, Command -> events -> Response, its mode and its options
#     _mode _options _retention _segment _stuck _turn _turn_bounds _turn_channel
#     _turn_response _turn_source _turn_stop _versions
# L5 agent: one agent, its state across instances, its loop, records and answers
#     _actor _agent _approvals _arguments _budgets _callbacks _durable _follow
#     _foreign_awaits _forks _held_credentials _instance_end _mailbox _portable _recorder
#     _recovery _scheduling _slot _tool_server _turn_history _turn_host _workspaces
# L6 face: supervision, the runtime, one address per agent, the public modules and forms
#     __init__ _address _agent_calls _api _api_written _backends _console._app
#     _console._desk _console._fleet _console._gate _console._history _console._http
#     _console._pages _console._queue _console._serve _console._shown
#     _faces._asyncio_runtime
#     _faces._forwarding _faces._runtime_thread _faces._sync_runtime _failover _opening
#     _pinned _runtime _scheduler _starting _supervisor asyncio hooks lowlevel store sync
#     testing testing._backend_conformance testing._conformance_core testing._conformance_kit
#     testing._conformance_leases testing._conformance_records
#     testing._conformance_request_machine testing._conformance_requests
#     testing._conformance_schedules
#     testing._fake_anthropic testing._fake_chat testing._fake_gemini testing._fake_openai
#     testing._http testing._scenarios testing._scripted testing._store_conformance
#     testing.fake_anthropic testing.fake_cli
# L7 command: the `agentrt` command; nothing else imports it
#     __main__ _cli _cli._agent _cli._args _cli._chat _cli._console _cli._demo
#     _cli._demo_board _cli._demo_model _cli._doctor _cli._fixes _cli._render _cli._sessions
#     _cli._store _cli._unhalt _cli._workspaces
#
# One turn's data flows up the layers: _driver._process -> _driver._lifecycle -> _turn ->
# _actor -> _requests -> _address -> _agent_calls -> _api (the supervisor starts and
# restarts the actors, beside that path). docs/architecture.md says where each concept lives.
#
# This file re-exports the public API, and imports none of it: each name's module is imported
# the first time the name is asked for (`agentrt.ask`, `from agentrt import ask`: PEP 562's
# module __getattr__, below), so a program, and each run of the `agentrt` command, pays for
# the modules it uses rather than for all of them (bench/README.md, "Starting agentrt").
# Type checkers and readers see the names here, each imported as itself to mark it exported.

import importlib as _importlib
import sys as _sys
import typing as _typing

if _typing.TYPE_CHECKING:
    from ._agent import Agent as Agent
    from ._agent import Halt as Halt
    from ._agent import Prompt as Prompt
    from ._agent import Stop as Stop
    from ._api import agents as agents
    from ._api import ask as ask
    from ._api import context_usage as context_usage
    from ._api import halt as halt
    from ._api import interrupt as interrupt
    from ._api import interrupt_request as interrupt_request
    from ._api import notify as notify
    from ._api import open_supervisor as open_supervisor
    from ._api import poll as poll
    from ._api import remove_workspace as remove_workspace
    from ._api import request as request
    from ._api import reset_session as reset_session
    from ._api import run_schedule as run_schedule
    from ._api import schedule as schedule
    from ._api import schedules as schedules
    from ._api import set_model as set_model
    from ._api import set_permission_mode as set_permission_mode
    from ._api import start_agent as start_agent
    from ._api import statistics as statistics
    from ._api import status as status
    from ._api import steer as steer
    from ._api import stop_agent as stop_agent
    from ._api import stop_task as stop_task
    from ._api import stream as stream
    from ._api import tell as tell
    from ._api import unhalt as unhalt
    from ._api import unschedule as unschedule
    from ._api import unsolicited as unsolicited
    from ._api import wait as wait
    from ._api import whereis as whereis
    from ._api import withdraw as withdraw
    from ._api import workspaces as workspaces
    from ._asks import AddContext as AddContext
    from ._asks import Allow as Allow
    from ._asks import Answers as Answers
    from ._asks import AskOperator as AskOperator
    from ._asks import Block as Block
    from ._asks import Deny as Deny
    from ._asks import McpElicitation as McpElicitation
    from ._asks import PlanApproval as PlanApproval
    from ._asks import Question as Question
    from ._asks import QuestionOption as QuestionOption
    from ._asks import ToolRequest as ToolRequest
    from ._asks import UserQuestions as UserQuestions
    from ._channel import BackgroundTask as BackgroundTask
    from ._channel import ContextCategory as ContextCategory
    from ._channel import ContextUsage as ContextUsage
    from ._console._serve import Console as Console
    from ._console._serve import console_app as console_app
    from ._console._serve import open_console as open_console
    from ._driver._limits import Limits as Limits
    from ._errors import AgentAlreadyStarted as AgentAlreadyStarted
    from ._errors import AgentBusy as AgentBusy
    from ._errors import AgentNotFound as AgentNotFound
    from ._errors import AgentRTError as AgentRTError
    from ._errors import AgentStopped as AgentStopped
    from ._errors import BackendNotFound as BackendNotFound
    from ._errors import BranchInUse as BranchInUse
    from ._errors import BudgetExceeded as BudgetExceeded
    from ._errors import ChannelError as ChannelError
    from ._errors import CliNotFound as CliNotFound
    from ._errors import CliVersionMismatch as CliVersionMismatch
    from ._errors import InvalidOptions as InvalidOptions
    from ._errors import LeaseLost as LeaseLost
    from ._errors import MailboxFull as MailboxFull
    from ._errors import NoRuntime as NoRuntime
    from ._errors import NoTurnRunning as NoTurnRunning
    from ._errors import OwnerDied as OwnerDied
    from ._errors import RestartLimitExceeded as RestartLimitExceeded
    from ._errors import RoutingError as RoutingError
    from ._errors import SessionMismatch as SessionMismatch
    from ._errors import StoreError as StoreError
    from ._errors import TurnFailed as TurnFailed
    from ._errors import UncommittedChanges as UncommittedChanges
    from ._errors import WorkspaceError as WorkspaceError
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
    from ._records import StoredWorkspace as StoredWorkspace
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
    from ._schedule import Schedule as Schedule
    from ._status import AgentHandle as AgentHandle
    from ._status import AgentStatus as AgentStatus
    from ._status import CurrentRequest as CurrentRequest
    from ._status import RuntimeStatistics as RuntimeStatistics
    from ._stores._memory import MemoryStore as MemoryStore
    from ._stores._postgres import PostgresStore as PostgresStore
    from ._stores._protocols import SessionStore as SessionStore
    from ._stores._sqlite import SQLiteStore as SQLiteStore
    from ._stores._sqlite import default_store_path as default_store_path
    from ._stream import EventStream as EventStream
    from ._supervisor import Supervisor as Supervisor
    from ._tools import Tool as Tool
    from ._tools import tool as tool
    from ._unsolicited import UnsolicitedTurn as UnsolicitedTurn
    from ._unsolicited import UnsolicitedTurns as UnsolicitedTurns
    from ._workspaces import Workspace as Workspace
    from ._worktrees import GitWorktree as GitWorktree

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
    "Answers",
    "AskOperator",
    "BackendNotFound",
    "BackgroundTask",
    "Block",
    "BranchInUse",
    "BudgetExceeded",
    "ChannelError",
    "CliNotFound",
    "CliVersionMismatch",
    "Completed",
    "Console",
    "ContextCategory",
    "ContextUsage",
    "Crash",
    "CurrentRequest",
    "Deny",
    "ErrorEvent",
    "Event",
    "EventCoverage",
    "EventStream",
    "Failed",
    "GitWorktree",
    "Halt",
    "InitEvent",
    "InvalidOptions",
    "Lease",
    "LeaseLost",
    "LeaseOwner",
    "Limits",
    "MailboxFull",
    "McpElicitation",
    "McpServerStatus",
    "MemoryStore",
    "NoRuntime",
    "NoTurnRunning",
    "NotFound",
    "Omission",
    "OwnerDied",
    "Pending",
    "PermissionDenial",
    "PlanApproval",
    "PollResult",
    "PostgresStore",
    "Prompt",
    "Question",
    "QuestionOption",
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
    "Schedule",
    "SessionEvent",
    "SessionLostEvent",
    "SessionMismatch",
    "SessionRecord",
    "SessionStore",
    "Stop",
    "StopReason",
    "StoreError",
    "StoredTranscript",
    "StoredWorkspace",
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
    "UncommittedChanges",
    "UnsolicitedTurn",
    "UnsolicitedTurns",
    "Usage",
    "UsageEvent",
    "UserQuestions",
    "Withdrawn",
    "Workspace",
    "WorkspaceError",
    "agents",
    "ask",
    "console_app",
    "context_usage",
    "default_store_path",
    "halt",
    "interrupt",
    "interrupt_request",
    "notify",
    "open_console",
    "open_runtime",
    "open_supervisor",
    "poll",
    "remove_workspace",
    "request",
    "reset_session",
    "run_schedule",
    "schedule",
    "schedules",
    "set_model",
    "set_permission_mode",
    "start_agent",
    "statistics",
    "status",
    "steer",
    "stop_agent",
    "stop_task",
    "stream",
    "tell",
    "tool",
    "unhalt",
    "unschedule",
    "unsolicited",
    "wait",
    "whereis",
    "withdraw",
    "workspaces",
]

# Where the names of __all__ are defined, by module, but for the module-level functions: every
# name of __all__ not here is one of agentrt._api's (their imports above and __all__ are
# written from the operations' declaration: agentrt._api_written). tests/test_public_surface.py
# checks this table against the imports above, in a fresh interpreter.
_DEFINED_IN = {
    "_agent": "Agent Halt Prompt Stop",
    "_asks": (
        "AddContext Allow Answers AskOperator Block Deny McpElicitation PlanApproval Question "
        "QuestionOption ToolRequest UserQuestions"
    ),
    "_channel": "BackgroundTask ContextCategory ContextUsage",
    "_console._serve": "Console console_app open_console",
    "_driver._limits": "Limits",
    "_errors": (
        "AgentAlreadyStarted AgentBusy AgentNotFound AgentRTError AgentStopped BackendNotFound "
        "BranchInUse BudgetExceeded ChannelError CliNotFound CliVersionMismatch InvalidOptions "
        "LeaseLost MailboxFull NoRuntime NoTurnRunning OwnerDied RestartLimitExceeded "
        "RoutingError SessionMismatch StoreError TurnFailed UncommittedChanges WorkspaceError"
    ),
    "_events": (
        "ErrorEvent Event EventCoverage InitEvent McpServerStatus Omission PermissionDenial "
        "RawEvent Response ResultEvent SessionEvent SessionLostEvent StopReason TextEvent "
        "TextRetractedEvent ToolDecisionEvent ToolResultEvent ToolUseEvent Usage UsageEvent"
    ),
    "_records": "Lease LeaseOwner SessionRecord StoredTranscript StoredWorkspace",
    "_requests": "Completed Failed NotFound Pending PollResult Ref Withdrawn",
    "_restart": "Crash RestartType Strategy",
    "_runtime": "Runtime open_runtime",
    "_schedule": "Schedule",
    "_status": "AgentHandle AgentStatus CurrentRequest RuntimeStatistics",
    "_stores._memory": "MemoryStore",
    "_stores._postgres": "PostgresStore",
    "_stores._protocols": "SessionStore",
    "_stores._sqlite": "SQLiteStore default_store_path",
    "_stream": "EventStream",
    "_supervisor": "Supervisor",
    "_tools": "Tool tool",
    "_unsolicited": "UnsolicitedTurn UnsolicitedTurns",
    "_workspaces": "Workspace",
    "_worktrees": "GitWorktree",
}

_HOME = {name: "_api" for name in __all__} | {
    name: module for module, names in _DEFINED_IN.items() for name in names.split()
}

# The public modules `import agentrt` used to import along the way, and so gave as attributes.
_SUBMODULES = ("backend", "hooks", "store")


def __getattr__(name: str) -> object:
    if name in _SUBMODULES:
        return _importlib.import_module(f"{__name__}.{name}")
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    _importlib.import_module(f"{__name__}.{module}")
    _bind_loaded()
    return globals()[name]


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__, *_SUBMODULES})


def _bind_loaded() -> None:
    """Bind every public name whose module is imported by now (one name's module brings many
    others') and make each say it lives in agentrt, as trio does: tracebacks and reprs say
    ``agentrt.TurnFailed``. Then the same for agentrt.hooks' and agentrt.store's names (what
    ``Agent.handle_hook`` is given, what ``Runtime.store_capabilities`` returns) once their
    modules are in: their fix-ups run as they are imported. A name reached only through a
    private module before any is asked for here keeps its module's name until then."""
    from ._util import fixup_module_metadata

    loaded: dict[str, object] = {}
    for name, module in _HOME.items():
        source = _sys.modules.get(f"{__name__}.{module}")
        # A module still being imported (its import asked for a name) may lack it as yet.
        if name not in globals() and hasattr(source, name):
            loaded[name] = getattr(source, name)
    fixup_module_metadata(__name__, loaded)
    globals().update(loaded)
    for home, private in (("hooks", "_hooks"), ("store", "_stores._protocols")):
        if f"{__name__}.{private}" in _sys.modules:
            _importlib.import_module(f"{__name__}.{home}")
