"""The codec of routed calls (its own unit test): what a row of the ``routed`` table may
carry, whoever wrote it. Rows that agentrt writes come back as the values and errors they
carried; any other row, arbitrary bytes or arbitrary data, decodes as a valid typed value
or raises `RowRefused` (or the listed agentrt error the row carries), never anything else,
and imports nothing."""

from __future__ import annotations

import pickle
import re
import sys
from typing import Any

import attrs
import msgspec
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import agentrt
import agentrt.backend
import agentrt.lowlevel
import agentrt.testing
from agentrt import (
    AgentAlreadyStarted,
    AgentBusy,
    AgentNotFound,
    AgentRTError,
    AgentStatus,
    AgentStopped,
    BackendNotFound,
    BranchInUse,
    BudgetExceeded,
    ChannelError,
    CliNotFound,
    CliVersionMismatch,
    Completed,
    ContextCategory,
    ContextUsage,
    Crash,
    CurrentRequest,
    EventCoverage,
    Failed,
    InvalidOptions,
    Lease,
    LeaseLost,
    LeaseOwner,
    MailboxFull,
    NoRuntime,
    NotFound,
    NoTurnRunning,
    Omission,
    OwnerDied,
    Pending,
    Ref,
    Response,
    RestartLimitExceeded,
    RoutingError,
    SessionMismatch,
    StopReason,
    StoreError,
    TurnFailed,
    UncommittedChanges,
    Usage,
    Withdrawn,
    WorkspaceError,
)
from agentrt._stores import _route_codec as codec
from agentrt._stores import _route_values as values
from agentrt.backend import ExitStatus
from agentrt.lowlevel import ProcessFailure
from agentrt.testing import ScriptedBackend, reply

CALLS = (
    "ask",
    "tell",
    "poll",
    "wait",
    "notify",
    "interrupt",
    "interrupt_request",
    "withdraw",
    "halt",
    "unhalt",
    "reset_session",
    "status",
    "stop_agent",
    "set_model",
    "set_permission_mode",
    "context_usage",
    "stop_task",
)

# Every error class agentrt exports, raised with every field set.
LEASE = Lease(
    name="x",
    epoch=4,
    owner=LeaseOwner(node="n", pid=7, start_time=99, runtime_id="r"),
    age=1.5,
    remaining=8.0,
)
ERRORS: tuple[AgentRTError, ...] = (
    AgentRTError("plain"),
    NoRuntime("no runtime here"),
    InvalidOptions("watchdog", {"idle": -1}, "must be positive"),
    AgentNotFound("x"),
    AgentAlreadyStarted("x", LEASE),
    AgentBusy("x", "processing"),
    NoTurnRunning("x", "steer"),
    MailboxFull("x", "max_pending", 3, 3, 120),
    AgentStopped("x", "runtime closed"),
    OwnerDied("x", "s-1", "its owner ended"),
    TurnFailed(
        StopReason.PROCESS_CRASHED,
        "killed",
        exit_status=ExitStatus(None, 9),
        stderr_tail="boom",
        session_id="s",
        usage=Usage(input_tokens=3, output_tokens=4),
        cost_usd=0.25,
        detail={"status": 529, "retryable": True},
    ),
    CliVersionMismatch(
        ">=2.1,<3", "3.0.1", exit_status=ExitStatus(None, 9), session_id="s", cost_usd=0.0
    ),
    StoreError("s.db", "locked"),
    LeaseLost("dsn", "x", 3, "taken over"),
    SessionMismatch("x", "another cwd"),
    RestartLimitExceeded("x", (Crash("x", 1.0, "boom"), Crash("x", 2.0, "again"))),
    BackendNotFound("cluade", ("claude", "codex")),
    CliNotFound("claude", "/no/claude", "point binary= at the CLI's executable file"),
    CliNotFound("acp", "/no/agent", "point command= at the agent", option="command"),
    RoutingError("x", "ask", "a bad row"),
    ChannelError("x", "set_model", "it exited"),
    ProcessFailure(StopReason.STARTUP_TIMEOUT, "no output"),
    BudgetExceeded("x", "runtime", "usd", 1.25, 1.0),
    WorkspaceError("/r.worktrees/x", "git refused"),
    BranchInUse("/r", "agentrt/x", "agent 'y'"),
    UncommittedChanges("x", "/r.worktrees/x", (" M a.txt", "?? b.txt")),
)

STATUS = AgentStatus(
    name="x",
    state="processing",
    mode="warm",
    halt_pending=True,
    queued=2,
    queued_bytes=30,
    chained=1,
    pending_notifications=4,
    current=CurrentRequest(Ref("x", 5), "tell", 1.25, True),
    turns=9,
    session_id="sid",
    restarts=2,
    cli_pid=4242,
    spent_usd=1.5,
    spent_tokens=300,
    budget_left_usd=0.5,
    budget_left_tokens=None,
)


async def a_response(text: str = "an answer") -> Response:
    backend = ScriptedBackend(default=lambda call: reply(text, session_id="sid"))
    async with agentrt.open_runtime(store=agentrt.MemoryStore()) as rt:
        await rt.start_agent(agentrt.Agent, name="x", backend=backend)
        return await rt.ask("x", "hi")


def answered(call: str, value: object) -> Any:
    return codec.decode_answer(call, codec.encode_answer("x", call, value))


def test_every_call_kind_comes_back_as_its_arguments() -> None:
    sent = {
        "ask": ("hello", None),
        "tell": ("later", "job-1"),
        "poll": (Ref("x", 3),),
        "wait": (Ref("x", 4),),
        "notify": ({"kind": "deploy", "ids": [1, 2.5, None, True], "blob": b"\x00"},),
        "interrupt": (),
        "interrupt_request": (Ref("x", 5),),
        "withdraw": (Ref("x", 6),),
        "halt": (),
        "unhalt": (),
        "reset_session": (),
        "status": (),
        "stop_agent": (),
        "set_model": ("claude-haiku-4-5",),
        "set_permission_mode": ("plan",),
        "context_usage": (),
        "stop_task": ("b3a28l03l",),
        "cancel": ("0123abcd",),
    }
    assert set(sent) == {*CALLS, "cancel"}
    assert codec.decode_call("set_model", codec.encode_call("set_model", (None,))) == (None,)
    for call, arguments in sent.items():
        back = codec.decode_call(call, codec.encode_call(call, arguments))
        assert back == arguments
        assert [type(a) for a in back] == [type(a) for a in arguments]
    assert hash(codec.decode_call("poll", codec.encode_call("poll", (Ref("x", 3),)))[0]) == hash(
        Ref("x", 3)
    )  # made by its constructor: a Ref is a dict key in the owner's mailbox


async def test_every_answer_kind_comes_back_as_its_value() -> None:
    response = await a_response()
    back = answered("ask", response)
    assert type(back) is Response and back == response
    assert (back.text, back.session_id, back.stop_reason) == ("an answer", "sid", "complete")
    assert back.events == response.events and back.event_coverage == response.event_coverage
    lone = attrs.evolve(response, text="half \ud800", final_message="\udfff")  # JSON escapes
    assert (answered("ask", lone).text, answered("ask", lone).final_message) == (
        "half \ud800",
        "\udfff",
    )
    assert answered("tell", Ref("x", 7)) == Ref("x", 7)
    failed = Failed(TurnFailed(StopReason.INTERRUPTED, "stopped"))
    for result in (Pending(), Completed(response), failed, Withdrawn(), NotFound()):
        assert answered("poll", result) == result or isinstance(result, Failed)
    assert vars(answered("poll", failed).error) == vars(failed.error)
    assert answered("wait", Completed(response)) == Completed(response)
    assert answered("interrupt", True) is True
    assert answered("interrupt", False) is False
    assert answered("status", STATUS) == STATUS
    for call in ("interrupt_request", "withdraw"):
        assert answered(call, True) is True and answered(call, False) is False
    for call in (
        "stop_agent",
        "notify",
        "halt",
        "unhalt",
        "reset_session",
        "set_model",
        "set_permission_mode",
        "stop_task",
    ):
        assert answered(call, None) is None
    usage = ContextUsage(
        1200, 200_000, 0.6, "claude-haiku-4-5", (ContextCategory("Messages", 900, "used"),), {}
    )
    assert answered("context_usage", usage) == usage
    assert answered("context_usage", None) is None


@pytest.mark.parametrize(
    ("event", "part"),
    [
        (("a", "tuple"), "event is a tuple"),
        ({"when": attrs.make_class("Event", ["at"])(1)}, "event['when'] is a Event"),
        ([1, {"nested": {1, 2}}], "event[1]['nested'] is a set"),
        ({1: "int key"}, "event has the key 1"),
        (StopReason.COMPLETE, "event is a StopReason"),  # a str subclass would come back a str
    ],
)
def test_a_notify_event_that_is_not_plain_data_is_refused_naming_the_part(
    event: object, part: str
) -> None:
    with pytest.raises(TypeError, match=re.escape(part)):
        codec.check_event(event)
    with pytest.raises(values.RowRefused, match=re.escape(part)):
        codec.encode_call("notify", (event,))


def test_a_forged_notify_row_delivers_plain_data_only() -> None:
    # MessagePack's own timestamp extension decodes as a datetime, which no sender sent.
    row = envelope({"call": "notify", "event": msgspec.msgpack.Ext(-1, b"\x00" * 4)})
    with pytest.raises(values.RowRefused, match="event is a datetime"):
        codec.decode_call("notify", row)


@pytest.mark.parametrize("error", ERRORS, ids=lambda error: type(error).__name__)
def test_every_agentrt_error_comes_back_as_raised(error: AgentRTError) -> None:
    with pytest.raises(AgentRTError) as caught:
        codec.decode_answer("ask", codec.encode_error(error))
    back = caught.value
    assert type(back) is type(error) and str(back) == str(error)
    assert vars(back) == vars(error)


def test_the_error_list_covers_every_error_agentrt_exports() -> None:
    exported = {
        value
        for module in (agentrt, agentrt.lowlevel, agentrt.backend, agentrt.testing)
        for value in vars(module).values()
        if isinstance(value, type) and issubclass(value, AgentRTError)
    }
    assert exported == {type(error) for error in ERRORS}


def test_an_error_of_another_class_travels_as_its_nearest_listed_base() -> None:
    class Mine(AgentStopped):
        pass

    with pytest.raises(AgentRTError) as caught:
        codec.decode_answer("ask", codec.encode_error(Mine("x", "mine")))
    assert type(caught.value) is AgentStopped and str(caught.value) == "agent 'x' stopped: mine"


def test_an_answer_that_cannot_travel_reaches_its_caller_as_a_routing_error() -> None:
    with pytest.raises(RoutingError, match="could not encode its answer"):
        answered("ask", "not a Response")
    with pytest.raises(RoutingError, match="could not encode its answer"):
        answered("tell", object())
    # A field that is not data: the error still arrives, with its message.
    with pytest.raises(AgentRTError, match="option 'x'=<object"):
        codec.decode_answer("ask", codec.encode_error(InvalidOptions("x", object(), "no")))


@pytest.mark.parametrize(
    ("mirror", "cls"),
    [
        (values._RefData, Ref),
        (values._CurrentRequestData, CurrentRequest),
        (values._StatusData, AgentStatus),
        (values._OmissionData, Omission),
        (values._CoverageData, EventCoverage),
        (values._ExitStatusData, ExitStatus),
        (values._LeaseOwnerData, LeaseOwner),
        (values._LeaseData, Lease),
        (values._CrashData, Crash),
    ],
)
def test_each_mirror_has_its_class_s_fields(mirror: type[msgspec.Struct], cls: type) -> None:
    """A field added to one of the API's classes must be added to what routes it."""
    assert mirror.__struct_fields__ == tuple(field.name for field in attrs.fields(cls))


def test_response_mirror_has_every_field() -> None:
    names = {field.alias for field in attrs.fields(Response)}
    assert set(values._ResponseData.__struct_fields__) == names


def pickled_global(module: str, name: str) -> bytes:
    """A pickle naming ``module.name`` (what rows held before: calling it on load)."""
    return b"\x80\x04c" + f"{module}\n{name}\n".encode() + b")R."


@pytest.mark.parametrize("call", [*CALLS, "cancel"])
def test_a_pickle_or_another_protocol_is_refused_naming_both(call: str) -> None:
    before = set(sys.modules)
    for row in (pickled_global("agentrt.__main__", "main"), pickle.dumps(("error", None))):
        with pytest.raises(values.RowRefused, match=r"pickle.*routing protocol 1"):
            codec.decode_call(call, row)
        if call != "cancel":
            with pytest.raises(values.RowRefused, match=r"pickle.*routing protocol 1"):
                codec.decode_answer(call, row)
    newer = msgspec.msgpack.encode({"protocol": 2, "body": {"call": call}})
    with pytest.raises(values.RowRefused, match=r"routing protocol 2.*speaks routing protocol 1"):
        codec.decode_call(call, newer)
    assert set(sys.modules) == before


def test_an_error_of_a_kind_not_listed_is_refused_naming_it() -> None:
    before = set(sys.modules)
    for kind in ("FakeClaude", "agentrt.__main__", "os.system", "Exception"):
        row = envelope(
            {"answer": "error", "error": {"kind": kind, "message": "m", "fields": {"x": 1}}}
        )
        with pytest.raises(values.RowRefused, match=f"does not know, '{kind}': m"):
            codec.decode_answer("ask", row)
    assert set(sys.modules) == before


def test_a_row_whose_column_and_body_disagree_is_refused() -> None:
    with pytest.raises(values.RowRefused, match="its row says 'status' and its body 'stop_agent'"):
        codec.decode_call("status", codec.encode_call("stop_agent", ()))


# --- arbitrary rows ---

# What MessagePack can carry: the values a forger can put anywhere in a row.
data = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats()
    | st.text(max_size=20)
    | st.binary(max_size=20)
    | st.sampled_from([*CALLS, "cancel", "error", "response", "completed", "failed", "x"]),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(["call", "prompt", "ref", "name", "id", "answer", "result", "kind"])
            | st.text(max_size=8),
            inner,
            max_size=4,
        )
    ),
    max_leaves=12,
)

# Field names of the bodies, so that arbitrary values land in typed fields too.
ANSWER_KINDS: tuple[type[msgspec.Struct], ...] = (
    codec._ErrorAnswer,
    *(returns.answer for returns in codec._ANSWERS.values()),
)
BODIES: tuple[type[msgspec.Struct], ...] = (
    *codec._CALLS.values(),
    *ANSWER_KINDS,
    values._ErrorData,
    values._ResponseData,
    values._StatusData,
    values._RefData,
)
FIELDS = sorted({name for struct in BODIES for name in struct.__struct_fields__})
ANSWER_TAGS = sorted(str(answer.__struct_config__.tag) for answer in ANSWER_KINDS)


def envelope(body: object, protocol: object = codec.PROTOCOL) -> bytes:
    return msgspec.msgpack.encode({"protocol": protocol, "body": body})


@st.composite
def bodies(draw: st.DrawFn, tag_field: str, tags: list[str]) -> dict[str, Any]:
    body: dict[str, Any] = {tag_field: draw(st.sampled_from(tags) | data)}
    for name in draw(st.lists(st.sampled_from(FIELDS), max_size=4)):
        body[name] = draw(data)
    if draw(st.booleans()):  # an error whose fields are arbitrary data
        body["error"] = {
            "kind": draw(st.sampled_from([type(e).__name__ for e in ERRORS]) | st.text()),
            "message": draw(data),
            "fields": draw(data),
        }
    return body


call_rows = (
    st.binary(max_size=64)
    | data.map(msgspec.msgpack.encode)
    | data.map(envelope)
    | bodies("call", [*CALLS, "cancel"]).map(envelope)
    | st.builds(envelope, bodies("call", [*CALLS, "cancel"]), data)
)
answer_rows = (
    st.binary(max_size=64)
    | data.map(msgspec.msgpack.encode)
    | data.map(envelope)
    | bodies("answer", ANSWER_TAGS).map(envelope)
    | st.builds(envelope, bodies("answer", ANSWER_TAGS), data)
)

# Each call's arguments, as the types each may decode as.
TEXT_OR_NONE = (str, type(None))
ARGUMENTS: dict[str, tuple[type | tuple[type, ...], ...]] = {
    "ask": (str, TEXT_OR_NONE),  # the prompt, the idempotency key
    "tell": (str, TEXT_OR_NONE),
    "poll": (Ref,),
    "wait": (Ref,),
    "notify": (object,),  # any plain data (check_event)
    "interrupt": (),
    "interrupt_request": (Ref,),
    "withdraw": (Ref,),
    "halt": (),
    "unhalt": (),
    "reset_session": (),
    "status": (),
    "stop_agent": (),
    "set_model": (TEXT_OR_NONE,),
    "set_permission_mode": (str,),
    "context_usage": (),
    "stop_task": (str,),
    "cancel": (str,),
}
ANSWERS: dict[str, tuple[type, ...]] = {
    "ask": (Response,),
    "tell": (Ref,),
    "poll": (Pending, Completed, Failed, Withdrawn, NotFound),
    "wait": (Completed, Failed, Withdrawn, NotFound),
    "notify": (type(None),),
    "interrupt": (bool,),
    "interrupt_request": (bool,),
    "withdraw": (bool,),
    "halt": (type(None),),
    "unhalt": (type(None),),
    "reset_session": (type(None),),
    "status": (AgentStatus,),
    "stop_agent": (type(None),),
    "set_model": (type(None),),
    "set_permission_mode": (type(None),),
    "context_usage": (ContextUsage, type(None)),
    "stop_task": (type(None),),
}
LISTED = {type(error) for error in ERRORS}


@settings(max_examples=200, deadline=None)
@given(call=st.sampled_from([*CALLS, "cancel"]), row=call_rows)
# Rows that decode, each found once by the search: an ask without its key, a model unset.
@example(call="ask", row=envelope({"call": "ask", "prompt": ""}))
@example(call="set_model", row=envelope({"call": "set_model", "model": None}))
def test_any_call_row_decodes_as_typed_arguments_or_is_refused(call: str, row: bytes) -> None:
    try:
        arguments = codec.decode_call(call, row)
    except values.RowRefused:
        return
    if call == "notify":
        (event,) = arguments
        assert codec.check_event(event) is event
        return
    wanted = ARGUMENTS[call]
    assert len(arguments) == len(wanted), arguments
    for argument, types in zip(arguments, wanted, strict=True):
        assert type(argument) in (types if isinstance(types, tuple) else (types,)), arguments


@settings(max_examples=200, deadline=None)
@given(call=st.sampled_from(CALLS), row=answer_rows)
def test_any_answer_row_decodes_as_a_typed_value_or_a_listed_error(call: str, row: bytes) -> None:
    try:
        value = codec.decode_answer(call, row)
    except values.RowRefused:
        return
    except AgentRTError as error:
        assert type(error) in LISTED
        return
    assert isinstance(value, ANSWERS[call])
    if isinstance(value, Failed):
        assert type(value.error) in LISTED


@settings(max_examples=200, deadline=None)
@given(call=st.sampled_from(CALLS), value=data)
def test_any_value_an_owner_answers_reaches_its_caller_as_it_or_a_routing_error(
    call: str, value: object
) -> None:
    try:
        back = answered(call, value)
    except RoutingError as error:
        assert "could not encode its answer" in str(error)
        return
    assert isinstance(back, ANSWERS[call]) and back == value


@settings(max_examples=200, deadline=None)
@given(call=st.sampled_from([*CALLS, "cancel"]), arguments=st.lists(data, max_size=2))
def test_any_arguments_encode_as_the_call_s_types_or_are_refused(
    call: str, arguments: list[object]
) -> None:
    try:
        row = codec.encode_call(call, tuple(arguments))
    except values.RowRefused:
        return
    back = codec.decode_call(call, row)
    if call == "notify":  # a NaN is not equal to itself: the same row instead
        assert codec.encode_call(call, back) == row
        return
    assert back == tuple(arguments)
