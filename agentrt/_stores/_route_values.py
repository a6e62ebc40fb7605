"""The values a routed row carries, as data: the attrs classes of the API as Structs that
mirror them (rebuilt through their own constructors) and the agentrt errors as their kind,
message and fields (`_ERRORS`, an explicit list). `agentrt._stores._route_codec` puts them
in its call and answer kinds; decoding them imports nothing and builds no class a row
names.
"""

from __future__ import annotations

from typing import Any, Literal, cast

import msgspec

from .._channel import BackgroundTask
from .._errors import (
    AgentAlreadyStarted,
    AgentBusy,
    AgentNotFound,
    AgentRTError,
    AgentStopped,
    BackendNotFound,
    BranchInUse,
    BudgetExceeded,
    ChannelError,
    CliNotFound,
    CliVersionMismatch,
    InvalidOptions,
    LeaseLost,
    MailboxFull,
    NoRuntime,
    NoTurnRunning,
    OwnerDied,
    ProcessFailure,
    RestartLimitExceeded,
    RoutingError,
    SessionMismatch,
    StoreError,
    TurnFailed,
    UncommittedChanges,
    WorkspaceError,
)
from .._events import (
    TEXT_CODEC,
    AnyEvent,
    EventCoverage,
    InitEvent,
    Omission,
    PermissionDenial,
    Response,
    StopReason,
    TurnOrigin,
    Usage,
    response_with_text,
)
from .._records import Lease, LeaseOwner
from .._redact import redact
from .._requests import Origin, Ref
from .._restart import Crash
from .._status import AgentState, AgentStatus, CurrentRequest, ModeName
from ..backend import ExitStatus

# How much of a row's own text a message shows.
_SHOWN = 200


class RowRefused(Exception):
    """A row that is not a routed call (or answer) of this protocol; the message says why."""


def _no_extension(code: int, data: memoryview) -> Any:
    raise ValueError(f"a MessagePack extension (type {code}) is not data agentrt routes")


def _decoder(of: Any) -> msgspec.msgpack.Decoder[Any]:
    return msgspec.msgpack.Decoder(of, ext_hook=_no_extension)


_encoder = msgspec.msgpack.Encoder()


# --- the API's attrs classes, as data ---


class _Data(msgspec.Struct, frozen=True):
    def value(self) -> Any:
        """The API's object this data stands for, made by its own constructor."""
        raise NotImplementedError


class _RefData(_Data, frozen=True):
    name: str
    id: int

    def value(self) -> Ref:
        return Ref(self.name, self.id)


class _CurrentRequestData(_Data, frozen=True):
    ref: _RefData
    origin: Origin
    elapsed: float
    waiting_for_process: bool

    def value(self) -> CurrentRequest:
        return CurrentRequest(self.ref.value(), self.origin, self.elapsed, self.waiting_for_process)


class _BackgroundTaskData(_Data, frozen=True):
    task_id: str
    description: str
    kind: str | None

    def value(self) -> BackgroundTask:
        return BackgroundTask(self.task_id, self.description, self.kind)


class _StatusData(_Data, frozen=True):
    name: str
    state: AgentState
    mode: ModeName
    halt_pending: bool
    queued: int
    queued_bytes: int
    chained: int
    pending_notifications: int
    current: _CurrentRequestData | None
    turns: int
    session_id: str | None
    restarts: int
    cli_pid: int | None
    spent_usd: float
    spent_tokens: int
    budget_left_usd: float | None
    budget_left_tokens: int | None
    cli_version: str | None = None
    oldest_queued: float | None = None
    queued_keys: tuple[str, ...] = ()
    credential: str | None = None
    parked_until: float | None = None
    halt_reason: str | None = None
    background: tuple[_BackgroundTaskData, ...] = ()

    def value(self) -> AgentStatus:
        fields = {name: getattr(self, name) for name in self.__struct_fields__}
        return AgentStatus(
            **{**fields, "current": _value(self.current), "background": _value(self.background)}
        )


class _OmissionData(_Data, frozen=True):
    index: int
    kind: str
    size: int
    limit: Literal["max_events", "max_event_bytes"]

    def value(self) -> Omission:
        return Omission(self.index, self.kind, self.size, self.limit)


class _CoverageData(_Data, frozen=True):
    mode: Literal["compact", "lossless"]
    observed: int
    retained: int
    omitted: int
    retained_bytes: int
    first_omission: _OmissionData | None

    def value(self) -> EventCoverage:
        return EventCoverage(
            self.mode,
            self.observed,
            self.retained,
            self.omitted,
            self.retained_bytes,
            _value(self.first_omission),
        )


class _ResponseData(_Data, frozen=True):
    # Texts as UTF-8 with lone surrogates passed through (a CLI's JSON escapes may hold
    # them, and MessagePack's strings cannot).
    text: bytes
    final_message: bytes
    events: tuple[AnyEvent, ...]
    terminal: AnyEvent
    event_coverage: _CoverageData
    usage: Usage | None
    cost_usd: float | None
    duration: float
    num_turns: int | None
    session_id: str | None
    model: str | None
    stop_reason: StopReason
    raw: Any
    init: InitEvent | None
    structured_output: Any
    permission_denials: tuple[PermissionDenial, ...]
    cli_version: str | None = None
    transcript_stored: bool | None = None
    origin: TurnOrigin = "user"

    @classmethod
    def of(cls, response: Response) -> _ResponseData:
        return cls(
            text=response.text.encode(*TEXT_CODEC),
            final_message=response.final_message.encode(*TEXT_CODEC),
            events=cast(tuple[AnyEvent, ...], tuple(response.events)),
            terminal=cast(AnyEvent, response.terminal),
            event_coverage=msgspec.convert(
                response.event_coverage, _CoverageData, from_attributes=True
            ),
            usage=response.usage,
            cost_usd=response.cost_usd,
            duration=response.duration,
            num_turns=response.num_turns,
            session_id=response.session_id,
            model=response.model,
            stop_reason=response.stop_reason,
            raw=response.raw,
            init=response.init,
            structured_output=response.structured_output,
            permission_denials=response.permission_denials,
            cli_version=response.cli_version,
            transcript_stored=response.transcript_stored,
            origin=response.origin,
        )

    def value(self) -> Response:
        return response_with_text(
            self.text,
            final_message=self.final_message.decode(*TEXT_CODEC),
            events=self.events,
            terminal=self.terminal,
            event_coverage=self.event_coverage.value(),
            usage=self.usage,
            cost_usd=self.cost_usd,
            duration=self.duration,
            num_turns=self.num_turns,
            session_id=self.session_id,
            model=self.model,
            stop_reason=self.stop_reason,
            raw=self.raw,
            init=self.init,
            structured_output=self.structured_output,
            permission_denials=self.permission_denials,
            cli_version=self.cli_version,
            transcript_stored=self.transcript_stored,
            origin=self.origin,
        )


class _ExitStatusData(_Data, frozen=True):
    returncode: int | None
    signal: int | None

    def value(self) -> ExitStatus:
        return ExitStatus(self.returncode, self.signal)


class _LeaseOwnerData(_Data, frozen=True):
    node: str
    pid: int
    start_time: int
    runtime_id: str

    def value(self) -> LeaseOwner:
        return LeaseOwner(
            node=self.node, pid=self.pid, start_time=self.start_time, runtime_id=self.runtime_id
        )


class _LeaseData(_Data, frozen=True):
    name: str
    epoch: int
    owner: _LeaseOwnerData | None
    age: float
    remaining: float

    def value(self) -> Lease:
        return Lease(
            name=self.name,
            epoch=self.epoch,
            owner=_value(self.owner),
            age=self.age,
            remaining=self.remaining,
        )


class _CrashData(_Data, frozen=True):
    name: str
    at: float
    reason: str

    def value(self) -> Crash:
        return Crash(self.name, self.at, self.reason)


def _value(data: object) -> Any:
    """A field's value as the API has it: data rebuilt into its class."""
    if isinstance(data, _Data):
        return data.value()
    if isinstance(data, tuple):
        return tuple(_value(item) for item in data)
    return data


# --- errors, as data ---


class _Fields(msgspec.Struct, frozen=True):
    """An error's own attributes (each error kind's below names them all)."""


class _InvalidOptionsFields(_Fields, frozen=True):
    key: str
    value: Any
    why: str
    known_options: tuple[str, ...] | None = None


class _NameFields(_Fields, frozen=True):
    name: str


class _AlreadyStartedFields(_Fields, frozen=True):
    name: str
    holder: _LeaseData | None


class _BusyFields(_Fields, frozen=True):
    name: str
    state: str


class _NoTurnFields(_Fields, frozen=True):
    name: str
    call: str


class _MailboxFullFields(_Fields, frozen=True):
    name: str
    limit: str
    maximum: int
    queued: int
    queued_bytes: int


class _StoppedFields(_Fields, frozen=True):
    name: str
    reason: str


class _OwnerDiedFields(_Fields, frozen=True):
    name: str
    session_id: str | None
    why: str


class _TurnFailedFields(_Fields, frozen=True):
    reason: StopReason
    message: str
    exit_status: _ExitStatusData | None
    stderr_tail: str
    session_id: str | None
    usage: Usage | None
    cost_usd: float | None
    detail: dict[str, Any]


class _VersionMismatchFields(_TurnFailedFields, frozen=True):
    expected: str
    reported: str | None


class _StoreFields(_Fields, frozen=True):
    path: str
    why: str


class _LeaseLostFields(_StoreFields, frozen=True):
    name: str
    epoch: int


class _MismatchFields(_Fields, frozen=True):
    name: str
    why: str


class _RestartLimitFields(_Fields, frozen=True):
    name: str
    history: tuple[_CrashData, ...]


class _BackendNotFoundFields(_Fields, frozen=True):
    key: str
    value: Any
    why: str
    name: str
    known: tuple[str, ...]
    known_options: tuple[str, ...] | None = None


class _CliNotFoundFields(_Fields, frozen=True):
    key: str
    value: Any
    why: str
    backend: str
    binary: str
    fix: str
    known_options: tuple[str, ...] | None = None


class _ProcessFailureFields(_Fields, frozen=True):
    reason: StopReason
    message: str


class _BudgetFields(_Fields, frozen=True):
    name: str
    scope: str
    unit: str
    spent: float
    budget: float


class _BranchFields(_Fields, frozen=True):
    repo: str
    branch: str
    holder: str


class _UncommittedFields(_Fields, frozen=True):
    name: str
    path: str
    changes: tuple[str, ...]


class _RoutingFields(_Fields, frozen=True):
    name: str
    call: str
    why: str


# The errors an answer may carry, by kind (their class's name), with their fields. An
# error of another class travels as its nearest listed base class.
_ERRORS: dict[str, tuple[type[AgentRTError], type[_Fields]]] = {
    cls.__name__: (cls, fields)
    for cls, fields in (
        (AgentRTError, _Fields),
        (NoRuntime, _Fields),
        (InvalidOptions, _InvalidOptionsFields),
        (AgentNotFound, _NameFields),
        (AgentAlreadyStarted, _AlreadyStartedFields),
        (AgentBusy, _BusyFields),
        (NoTurnRunning, _NoTurnFields),
        (MailboxFull, _MailboxFullFields),
        (AgentStopped, _StoppedFields),
        (OwnerDied, _OwnerDiedFields),
        (TurnFailed, _TurnFailedFields),
        (CliVersionMismatch, _VersionMismatchFields),
        (StoreError, _StoreFields),
        (LeaseLost, _LeaseLostFields),
        (SessionMismatch, _MismatchFields),
        (RestartLimitExceeded, _RestartLimitFields),
        (BackendNotFound, _BackendNotFoundFields),
        (CliNotFound, _CliNotFoundFields),
        (RoutingError, _RoutingFields),
        (ChannelError, _RoutingFields),
        (ProcessFailure, _ProcessFailureFields),
        (BudgetExceeded, _BudgetFields),
        (WorkspaceError, _StoreFields),
        (BranchInUse, _BranchFields),
        (UncommittedChanges, _UncommittedFields),
    )
}
_KINDS = {cls: kind for kind, (cls, _fields) in _ERRORS.items()}
_FIELD_DECODERS = {kind: _decoder(fields) for kind, (_cls, fields) in _ERRORS.items()}


class _ErrorData(msgspec.Struct, frozen=True):
    kind: str
    message: str
    fields: msgspec.Raw

    @classmethod
    def of(cls, error: AgentRTError) -> _ErrorData:
        kind = next(_KINDS[c] for c in type(error).__mro__ if c in _KINDS)
        try:
            fields = msgspec.convert(error, _ERRORS[kind][1], from_attributes=True)
        except msgspec.ValidationError:  # a subclass that changed a field: its message
            kind, fields = "AgentRTError", _Fields()
        return cls(kind, str(error), msgspec.Raw(_encoder.encode(fields)))

    def value(self) -> AgentRTError:
        listed = _ERRORS.get(self.kind)
        if listed is None:
            raise RowRefused(
                f"it holds an error of a kind this agentrt does not know, {shown(self.kind)!r}:"
                f" {shown(self.message)}"
            )
        cls, _fields = listed
        fields = _FIELD_DECODERS[self.kind].decode(self.fields)
        # As it was raised: its message, then its fields (an __init__ would make a new
        # message from other arguments).
        error = cls.__new__(cls)
        error.args = (self.message,)
        for name in fields.__struct_fields__:
            setattr(error, name, _value(getattr(fields, name)))
        return error


class _CategoryData(msgspec.Struct, frozen=True):
    name: str
    tokens: int
    kind: str | None


class _ContextUsageData(msgspec.Struct, frozen=True):
    total_tokens: int
    max_tokens: int
    percentage: float
    model: str | None
    categories: tuple[_CategoryData, ...]
    raw: Any  # the CLI's JSON answer


def shown(text: str) -> str:
    """Text a row brought (anyone may have written it), redacted and cut short for a
    message or a log."""
    text = redact(text)
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "..."
