import sys

import msgspec
import pytest
import trio
from _helpers import Recorder
from traced import held_after
from trio.testing import MockClock

from agentrt import (
    Completed,
    Event,
    EventCoverage,
    Failed,
    Omission,
    ResultEvent,
    SessionEvent,
    StopReason,
    TextEvent,
    ToolUseEvent,
    TurnFailed,
    open_runtime,
)
from agentrt._retention import CaptureOverflow, EventLog
from agentrt.testing import ScriptedBackend


def event_size(event: Event) -> int:
    """Bytes an event counts against ``max_event_bytes``: its JSON encoding."""
    return len(msgspec.json.encode(event))


def texts(*sizes: int) -> list[TextEvent]:
    return [TextEvent(text="x" * size) for size in sizes]


def test_compact_keeps_a_prefix_by_count_and_reports_exactly() -> None:
    log = EventLog("compact", max_events=3, max_event_bytes=10**6)
    events = texts(1, 2, 3, 4, 5)
    for event in events:
        log.add(event)
    assert log.events() == tuple(events[:3])
    assert log.coverage() == EventCoverage(
        mode="compact",
        observed=5,
        retained=3,
        omitted=2,
        retained_bytes=sum(event_size(e) for e in events[:3]),
        first_omission=Omission(
            index=3, kind="text", size=event_size(events[3]), limit="max_events"
        ),
    )


def test_compact_by_bytes_omits_everything_after_the_first_omission() -> None:
    big, small = texts(100, 1)
    size = event_size(big)
    log = EventLog("compact", max_events=100, max_event_bytes=2 * size + size - 1)
    for event in [big, big, big, small, small]:
        log.add(event)
    coverage = log.coverage()
    # The small events would fit in the bytes left, but retention keeps a prefix only.
    assert (coverage.observed, coverage.retained, coverage.omitted) == (5, 2, 3)
    assert coverage.retained_bytes == 2 * size
    assert coverage.first_omission == Omission(2, "text", size, "max_event_bytes")
    assert not coverage.complete


def test_an_event_exactly_at_the_byte_limit_is_kept() -> None:
    (event,) = texts(10)
    log = EventLog("compact", max_events=10, max_event_bytes=event_size(event))
    log.add(event)
    assert log.coverage().complete
    assert log.coverage().retained_bytes == event_size(event)


def test_lossless_refuses_the_first_event_over_a_limit_with_its_numbers() -> None:
    log = EventLog("lossless", max_events=2, max_event_bytes=10**6)
    first, second, third = texts(1, 2, 3)
    log.add(first)
    log.add(second)
    with pytest.raises(CaptureOverflow) as info:
        log.add(third)
    assert info.value.detail == {
        "limit": "max_events",
        "max_events": 2,
        "max_event_bytes": 10**6,
        "observed_events": 2,
        "retained_events": 2,
        "retained_bytes": event_size(first) + event_size(second),
        "rejected_event_kind": "text",
        "rejected_event_bytes": event_size(third),
    }
    assert log.coverage().observed == 2


def test_lossless_by_bytes() -> None:
    tool = ToolUseEvent(id="t1", name="Bash", input={"command": "ls " * 50})
    log = EventLog("lossless", max_events=100, max_event_bytes=event_size(tool) - 1)
    with pytest.raises(CaptureOverflow) as info:
        log.add(tool)
    assert info.value.detail["limit"] == "max_event_bytes"
    assert info.value.detail["rejected_event_kind"] == "tool_use"
    assert info.value.detail["rejected_event_bytes"] == event_size(tool)
    assert info.value.detail["retained_events"] == 0


# The runtime stamps every event with trio.current_time(); under MockClock, at t=0.0,
# the stamped events are equal to these unstamped ones and have the same size.
SESSION = SessionEvent(session_id="s1")
STREAM = [SESSION, *texts(10, 20, 30, 40), ResultEvent(text="done", session_id="s1")]


async def test_compact_turn_delivers_everything_and_keeps_what_fits(
    autojump_clock: MockClock,
) -> None:
    backend = ScriptedBackend(STREAM)
    agent = Recorder()
    async with open_runtime() as rt:
        await rt.start_agent(agent, name="a", backend=backend, max_events=3)
        ref = await rt.tell("a", "go")
        kinds: list[str] = []
        async for event in rt.stream(ref):
            kinds.append(event.kind)
        result = await rt.wait(ref)
    assert kinds == ["session", "text", "text", "text", "text", "result"]
    assert agent.only("stream") == kinds
    assert isinstance(result, Completed)
    resp = result.response
    assert resp.events == tuple(STREAM[:3])
    assert resp.terminal == STREAM[-1]  # kept although past the limit
    assert resp.text == "x" * 10 + "x" * 20 + "x" * 30 + "x" * 40  # from the whole stream
    assert resp.session_id == "s1"
    assert resp.event_coverage == EventCoverage(
        mode="compact",
        observed=6,
        retained=3,
        omitted=3,
        retained_bytes=sum(event_size(e) for e in STREAM[:3]),
        first_omission=Omission(3, "text", event_size(STREAM[3]), "max_events"),
    )
    assert trio.current_time() == 0.0


async def test_lossless_overflow_fails_the_turn_keeps_the_checkpoint(
    autojump_clock: MockClock,
) -> None:
    limit = sum(event_size(e) for e in STREAM[:3])
    backend = ScriptedBackend(STREAM, [ResultEvent(text="next")])
    agent = Recorder()
    async with open_runtime() as rt:
        await rt.start_agent(
            agent, name="a", backend=backend, retention="lossless", max_event_bytes=limit
        )
        ref = await rt.tell("a", "go")
        stream = rt.stream(ref)
        seen = [event async for event in stream]
        result = await rt.wait(ref)
        assert (await rt.status("a")).session_id == "s1"
        await rt.ask("a", "again")
    assert isinstance(result, Failed)
    error = result.error
    assert isinstance(error, TurnFailed)
    assert error.reason is StopReason.EVENT_CAPTURE_OVERFLOW
    assert error.session_id == "s1"
    assert error.detail == {
        "limit": "max_event_bytes",
        "max_events": 1000,
        "max_event_bytes": limit,
        "observed_events": 3,
        "retained_events": 3,
        "retained_bytes": limit,
        "rejected_event_kind": "text",
        "rejected_event_bytes": event_size(STREAM[3]),
    }
    # The refused event and everything after it reached neither the agent nor the reader;
    # the reader's stream ends with the failure.
    assert agent.only("stream") == ["session", "text", "text", "result"]  # result: turn 2
    assert [e.kind for e in seen] == ["session", "text", "text", "error"]
    assert seen[-1].reason is StopReason.EVENT_CAPTURE_OVERFLOW  # type: ignore[attr-defined]
    assert agent.only("error") == [StopReason.EVENT_CAPTURE_OVERFLOW]
    # The session id survived the failed turn: the next turn resumes it.
    assert backend.session_ids == [None, "s1"]


def test_retained_events_read_like_the_tuple_of_the_events() -> None:
    tool = ToolUseEvent(id="t1", name="Bash", input={"command": "ls\n", "n": [1, 2.5, None]})
    result = ResultEvent(text="done", session_id="s1", raw={"type": "result"})
    events = [SESSION, *texts(3, 1), tool, result]
    log = EventLog("compact", max_events=10, max_event_bytes=10**6)
    for event in events:
        assert log.add(event)
    retained = log.events({4: result})
    assert len(retained) == 5
    # One event decoded alone, then the rest in one pass: the same values either way.
    assert retained[-2] == tool and retained[3] is retained[-2]
    assert retained[4] is result  # pinned: the very object
    assert retained == tuple(events) and tuple(events) == retained
    assert list(retained) == events
    assert retained[1:3] == tuple(events[1:3])
    assert retained != tuple(events[:4]) and retained != events  # a list is not a tuple
    assert retained == log.events()  # a second copy, nothing decoded yet
    with pytest.raises(IndexError):
        retained[5]
    with pytest.raises(TypeError):  # as a tuple holding a dict
        hash(retained)
    plain = EventLog("compact", max_events=10, max_event_bytes=10**6)
    plain.add(SESSION)
    assert hash(plain.events()) == hash((SESSION,))
    assert EventLog("compact", 1, 1).events() == ()


def test_a_full_log_holds_little_more_than_its_events() -> None:
    # A turn's log lives as long as the turn: with a hundred turns in flight, spare capacity
    # in each buffer adds up, so the buffer is not grown by half again at each step.
    log = EventLog("compact", max_events=1000, max_event_bytes=10**6)
    for event in texts(*range(50, 150)) * 10:
        assert log.add(event)
    assert log.retained_bytes == sum(event_size(event) for event in texts(*range(50, 150))) * 10
    held = log._data
    assert len(held) == log.retained_bytes + 1000  # one newline each
    assert sys.getsizeof(held) < len(held) * 1.15


def test_retained_events_cost_their_json_and_an_offset_each_until_read() -> None:
    # A Response's events are often never read, and a runtime keeps many Responses: no
    # per-event slot exists before the first access, and the offsets take 4 bytes each.
    events: list[Event] = [*texts(*range(50, 150)) * 10]
    events[-1] = result = ResultEvent(text="done", session_id="s1")
    log = EventLog("compact", max_events=1000, max_event_bytes=10**6)
    for event in events:
        assert log.add(event)
    retained, held = held_after(lambda: log.events({999: result}))
    assert held < log.retained_bytes + 1000 + 4 * 1000 + 512  # JSON, newlines, offsets
    assert retained == log.events()  # compared by their JSON: still nothing decoded
    assert retained[999] is result  # pinned before the first access, the very object after
    assert retained[-2] == events[-2]
    assert list(retained) == events and retained[999] is result
