"""What a routed call carries through the database: data, never instructions.

A row's ``arguments`` (a call) and ``answer`` are MessagePack: an envelope naming the
routing protocol (`PROTOCOL`) around a body of one of the tagged Structs below. A call is
one of the call kinds with its typed arguments (a kind per routed operation, made from its
declaration in `agentrt._operations`); an answer is the value of its call's kind or an
error as data (its kind, its message, its fields), rebuilt on the caller's side as
the agentrt exception of that kind (`agentrt._stores._route_values._ERRORS`, an explicit
list). The attrs classes of the API travel as Structs mirroring them
(`agentrt._stores._route_values`) and are rebuilt through their own constructors; a
value of an ``Any`` field (a CLI's raw frames, a structured output) decodes as plain
JSON-like data. So decoding can only produce these types: it imports nothing and builds
no class a row names, whoever wrote the row.

A row that does not decode, or comes in another protocol, raises `RowRefused` saying why
(the router answers it with a `RoutingError`, or drops it). Encoding an answer never
raises: an answer that cannot travel becomes a `RoutingError` saying so.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Generic, NamedTuple, TypeVar, Union, cast

import attrs
import msgspec

from .._channel import ContextCategory, ContextUsage
from .._errors import AgentRTError, RoutingError
from .._events import AnyEvent, Event, Response
from .._operations import ROUTED_CALLS, Answer, Operation, Travels
from .._requests import Completed, Failed, NotFound, Pending, PollResult, Ref, Withdrawn
from .._status import AgentStatus
from ._route_values import (
    RowRefused,
    _ContextUsageData,
    _decoder,
    _encoder,
    _ErrorData,
    _Fields,
    _RefData,
    _ResponseData,
    _StatusData,
    _value,
    shown,
)

# The routing protocol this agentrt speaks: raised with any change to the bodies below, so
# that hosts running agentrt versions that cannot understand each other say so. A new kind
# of call leaves it: an owner that does not know it answers a `RoutingError` naming it.
PROTOCOL = 1


# What decoding may raise on a row of arbitrary bytes: msgspec's errors, a constructor's or
# a text's ValueError (a refused MessagePack extension too), and too deep a nesting.
_UNDECODABLE = (msgspec.MsgspecError, ValueError, TypeError, RecursionError, OverflowError)


class _Envelope(msgspec.Struct, frozen=True):
    protocol: int
    body: msgspec.Raw


# --- calls ---


class _Call(msgspec.Struct, frozen=True, tag_field="call"):
    def arguments(self) -> tuple[Any, ...]:
        return tuple(_value(getattr(self, name)) for name in self.__struct_fields__)


class _Cancel(_Call, frozen=True, tag="cancel"):
    """The caller of the call ``call_id`` has gone: stop serving it."""

    call_id: str


# How an argument of each way of travelling (`agentrt._operations.Travels`) is typed in a
# call's body.
_TRAVELS: dict[Travels, Any] = {
    "prompt": str,
    "text": str,
    "text_or_none": str | None,
    "ref": _RefData,
    "event": Any,  # plain data only (`check_event`), so it comes back as it was sent
    "count": Annotated[int, msgspec.Meta(ge=0)],
    "key": str | None,
}
# The kinds a row leaves out when None (their field's default): added to a call after
# protocol 1, whose rows they keep as they were.
_OPTIONAL: frozenset[Travels] = frozenset({"key"})


def _call_kind(operation: Operation) -> type[_Call]:
    """The Struct of a routed call of ``operation``, tagged with its name: the `Ref` that
    names its agent if it takes one (a call by name has the name in its row), then its
    arguments as the declaration says they travel."""
    fields: list[Any] = [("ref", _RefData)] if operation.by == "ref" else []
    fields += [
        (name, _TRAVELS[travels], None) if travels in _OPTIONAL else (name, _TRAVELS[travels])
        for name, travels in operation.arguments
    ]
    return cast(
        type[_Call],
        msgspec.defstruct(
            f"_{operation.name}",
            fields,
            bases=(_Call,),
            tag=operation.name,
            frozen=True,
            omit_defaults=True,
        ),
    )


# The call kinds: one per routed operation, as agentrt._operations declares it.
_CALLS: dict[str, type[_Call]] = {
    **{name: _call_kind(operation) for name, operation in ROUTED_CALLS.items()},
    "cancel": _Cancel,
}

# What a notify's event may be, to come back as it was sent.
_PLAIN = (type(None), bool, int, float, str, bytes, list, dict)


def check_event(event: Any) -> Any:
    """``event`` if it is plain data a routed notify carries as it is (None, bool, int,
    float, str, bytes, and lists and str-keyed dicts of those), else `TypeError` naming the
    part that is not (a tuple would arrive as a list, an object not at all)."""
    pending: list[tuple[str, Any]] = [("event", event)]
    while pending:
        where, value = pending.pop()
        if type(value) not in _PLAIN:
            raise TypeError(
                f"{where} is a {type(value).__name__}: a notify routed to another runtime "
                f"carries plain data (None, bool, int, float, str, bytes, and lists and "
                f"dicts with str keys of those)"
            )
        if type(value) is list:
            pending.extend((f"{where}[{i}]", item) for i, item in enumerate(value))
        elif type(value) is dict:
            for key, item in value.items():
                if type(key) is not str:
                    raise TypeError(
                        f"{where} has the key {key!r}: a notify routed to another runtime "
                        f"carries dicts with str keys"
                    )
                pending.append((f"{where}[{key!r}]", item))
    return event


# --- answers ---


class _Answer(msgspec.Struct, frozen=True, tag_field="answer"):
    def value(self) -> Any:
        raise NotImplementedError


class _ErrorAnswer(_Answer, frozen=True, tag="error"):
    error: _ErrorData


class _ResponseAnswer(_Answer, frozen=True, tag="response"):
    response: _ResponseData

    def value(self) -> Response:
        return self.response.value()


class _RefAnswer(_Answer, frozen=True, tag="ref"):
    ref: _RefData

    def value(self) -> Ref:
        return self.ref.value()


class _Result(msgspec.Struct, frozen=True, tag_field="result"):
    def value(self) -> PollResult:
        raise NotImplementedError


class _Pending(_Result, frozen=True, tag="pending"):
    def value(self) -> Pending:
        return Pending()


class _Completed(_Result, frozen=True, tag="completed"):
    response: _ResponseData

    def value(self) -> Completed:
        return Completed(self.response.value())


class _Failed(_Result, frozen=True, tag="failed"):
    error: _ErrorData

    def value(self) -> Failed:
        return Failed(self.error.value())


class _Withdrawn(_Result, frozen=True, tag="withdrawn"):
    def value(self) -> Withdrawn:
        return Withdrawn()


class _NotFound(_Result, frozen=True, tag="not_found"):
    def value(self) -> NotFound:
        return NotFound()


_AnyResult = _Pending | _Completed | _Failed | _Withdrawn | _NotFound


class _PollAnswer(_Answer, frozen=True, tag="poll_result"):
    result: _AnyResult

    def value(self) -> PollResult:
        return self.result.value()


class _SettledAnswer(_Answer, frozen=True, tag="settled"):
    """What `wait` returns: never `Pending`."""

    result: _Completed | _Failed | _Withdrawn | _NotFound

    def value(self) -> PollResult:
        return self.result.value()


class _BoolAnswer(_Answer, frozen=True, tag="bool"):
    result: bool

    def value(self) -> bool:
        return self.result


class _StatusAnswer(_Answer, frozen=True, tag="status"):
    status: _StatusData

    def value(self) -> AgentStatus:
        return self.status.value()


class _NoneAnswer(_Answer, frozen=True, tag="none"):
    def value(self) -> None:
        return None


class _ContextUsageAnswer(_Answer, frozen=True, tag="context_usage"):
    usage: _ContextUsageData | None

    def value(self) -> ContextUsage | None:
        data = self.usage
        if data is None:
            return None
        categories = tuple(ContextCategory(c.name, c.tokens, c.kind) for c in data.categories)
        return ContextUsage(
            data.total_tokens, data.max_tokens, data.percentage, data.model, categories, data.raw
        )


def _context_usage_answer(usage: ContextUsage | None) -> _ContextUsageAnswer:
    if usage is None:
        return _ContextUsageAnswer(None)
    return _ContextUsageAnswer(msgspec.convert(usage, _ContextUsageData, from_attributes=True))


_E = TypeVar("_E")


@attrs.frozen
class EventBatch(Generic[_E]):
    """What a routed ``events`` call returns: the events after the follower's ``after``
    (on the owner's side as `encode_event` made them, on the caller's decoded), the number
    of the last one (the follower's next ``after``), how many between the two were dropped
    (evicted before the follower read them, or not encodable), and whether the request's
    stream ends with them."""

    events: tuple[_E, ...]
    last: int
    dropped: int
    ended: bool


_event_decoder: msgspec.msgpack.Decoder[Event] = _decoder(AnyEvent)


def encode_event(event: Event) -> bytes | None:
    """One event as an ``events`` answer carries it; None for one that cannot travel (a
    text holding a lone surrogate, an integer over 64 bits in a raw frame)."""
    try:
        return _encoder.encode(event)
    except (msgspec.EncodeError, UnicodeEncodeError, OverflowError, TypeError, ValueError):
        return None


class _EventsAnswer(_Answer, frozen=True, tag="events"):
    events: tuple[msgspec.Raw, ...]
    last: Annotated[int, msgspec.Meta(ge=0)]
    dropped: Annotated[int, msgspec.Meta(ge=0)]
    ended: bool

    @classmethod
    def of(cls, batch: EventBatch[bytes]) -> _EventsAnswer:
        events = tuple(msgspec.Raw(data) for data in batch.events)
        return cls(events, batch.last, batch.dropped, batch.ended)

    def value(self) -> EventBatch[Event]:
        events = tuple(_event_decoder.decode(raw) for raw in self.events)
        return EventBatch(events, self.last, self.dropped, self.ended)


def _result_data(result: PollResult) -> _AnyResult:
    if isinstance(result, Completed):
        return _Completed(_ResponseData.of(result.response))
    if isinstance(result, Failed):
        return _Failed(_ErrorData.of(result.error))
    if isinstance(result, Pending):
        return _Pending()
    return _Withdrawn() if isinstance(result, Withdrawn) else _NotFound()


class _Returns(NamedTuple):
    """What a call kind answers (besides an error): its Struct, the API types of its
    value, and how a value becomes the Struct."""

    answer: type[_Answer]
    types: tuple[type, ...]
    make: Callable[[Any], _Answer]


_SETTLED = (Completed, Failed, Withdrawn, NotFound)
# What a routed call answers, by its declared answer (`agentrt._operations.Answer`).
_RETURNS: dict[Answer, _Returns] = {
    "response": _Returns(
        _ResponseAnswer, (Response,), lambda v: _ResponseAnswer(_ResponseData.of(v))
    ),
    "ref": _Returns(_RefAnswer, (Ref,), lambda v: _RefAnswer(_RefData(v.name, v.id))),
    "poll": _Returns(_PollAnswer, (Pending, *_SETTLED), lambda v: _PollAnswer(_result_data(v))),
    "settled": _Returns(_SettledAnswer, _SETTLED, lambda v: _SettledAnswer(_result_data(v))),  # type: ignore[arg-type]
    "bool": _Returns(_BoolAnswer, (bool,), lambda v: _BoolAnswer(v)),
    "status": _Returns(
        _StatusAnswer,
        (AgentStatus,),
        lambda v: _StatusAnswer(msgspec.convert(v, _StatusData, from_attributes=True)),
    ),
    "none": _Returns(_NoneAnswer, (type(None),), lambda v: _NoneAnswer()),
    "context_usage": _Returns(
        _ContextUsageAnswer, (ContextUsage, type(None)), _context_usage_answer
    ),
    "events": _Returns(_EventsAnswer, (EventBatch,), _EventsAnswer.of),
}
_ANSWERS: dict[str, _Returns] = {
    name: _RETURNS[operation.answer]
    for name, operation in ROUTED_CALLS.items()
    if operation.answer is not None
}


# --- the rows ---


_envelopes = msgspec.msgpack.Decoder(_Envelope)
_call_decoder: msgspec.msgpack.Decoder[_Call] = _decoder(cast(Any, Union)[tuple(_CALLS.values())])
_answer_decoders: dict[str, msgspec.msgpack.Decoder[_Answer]] = {
    call: _decoder(_ErrorAnswer | answer) for call, (answer, _types, _make) in _ANSWERS.items()
}


def _seal(body: msgspec.Struct) -> bytes:
    return _encoder.encode(_Envelope(PROTOCOL, msgspec.Raw(_encoder.encode(body))))


def _open(data: bytes) -> msgspec.Raw:
    """The body of a row of this protocol; `RowRefused` for any other."""
    if data[:1] == b"\x80":  # a pickle's first byte: what agentrt routed before protocol 1
        raise RowRefused(
            f"it is a pickle, as agentrt wrote rows before routing protocol 1; this runtime "
            f"speaks routing protocol {PROTOCOL} (hosts sharing the store run agentrt "
            f"versions that cannot route to each other)"
        )
    try:
        envelope = _envelopes.decode(data)
    except _UNDECODABLE as exc:
        raise RowRefused(f"it is not a routed row of any protocol ({exc})") from None
    if envelope.protocol != PROTOCOL:
        raise RowRefused(
            f"it was written in routing protocol {envelope.protocol}, and this runtime speaks "
            f"routing protocol {PROTOCOL} (hosts sharing the store run agentrt versions that "
            f"cannot route to each other)"
        )
    return envelope.body


def encode_call(call: str, arguments: tuple[Any, ...]) -> bytes:
    """A call's row; `RowRefused` for a call this protocol does not route."""
    kind = _CALLS.get(call)
    if kind is None:
        raise RowRefused(f"{call!r} is not a call agentrt routes")
    try:
        if call == "notify":
            check_event(*arguments)
        given = dict(zip(kind.__struct_fields__, arguments, strict=True))
        return _seal(msgspec.convert(given, kind, from_attributes=True))
    except _UNDECODABLE as exc:
        raise RowRefused(f"its arguments cannot be routed ({exc})") from None


def decode_call(call: str, data: bytes) -> tuple[Any, ...]:
    """The arguments of a call's row (``call`` is the row's own column, which its body must
    agree with); `RowRefused` saying why for a row that is not such a call."""
    body = _open(data)
    try:
        made = _call_decoder.decode(body)
        if made.__struct_config__.tag != call:
            raise RowRefused(
                f"its row says {shown(call)!r} and its body {made.__struct_config__.tag!r}"
            )
        if call == "notify":
            check_event(*made.arguments())  # MessagePack's own timestamps decode as datetimes
        return made.arguments()
    except _UNDECODABLE as exc:
        raise RowRefused(f"it is not a routed {shown(call)} of this protocol ({exc})") from None


def encode_answer(name: str, call: str, value: object) -> bytes:
    """The answer row of a call that returned ``value``; one carrying a `RoutingError`
    if the value cannot travel (so the caller still hears why). Never raises: the owner
    answers whatever its call returned."""
    try:
        returns = _ANSWERS[call]
        if not isinstance(value, returns.types):
            raise TypeError(f"a {call} returns no {type(value).__name__}")
        return _seal(returns.make(value))
    except Exception as exc:  # a value of no routed type (a bug) or a text not UTF-8
        why = f"the owner could not encode its answer ({exc})"
        return encode_error(RoutingError(name, call, why))


def encode_error(error: AgentRTError) -> bytes:
    """The answer row of a call that raised ``error``. Never raises."""
    try:
        return _seal(_ErrorAnswer(_ErrorData.of(error)))
    except Exception as exc:  # a field that cannot travel: the message alone, as UTF-8
        message = f"{error} (its fields could not be encoded: {exc})"
        message = message.encode("utf-8", "backslashreplace").decode()
        bare = _ErrorData("AgentRTError", message, msgspec.Raw(_encoder.encode(_Fields())))
        return _seal(_ErrorAnswer(bare))


def decode_answer(call: str, data: bytes) -> Any:
    """The value a routed ``call`` returned; raises the error it raised, or `RowRefused`
    saying why the row is not an answer to such a call."""
    body = _open(data)
    try:
        answer = _answer_decoders[call].decode(body)
        if not isinstance(answer, _ErrorAnswer):
            return answer.value()
        error = answer.error.value()
    except _UNDECODABLE as exc:
        raise RowRefused(f"it is not an answer to a routed {call} ({exc})") from None
    raise error
