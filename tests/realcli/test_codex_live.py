"""The pinned ``codex app-server`` driven by hand through `CodexBackend.live`'s protocol
against the fake OpenAI API, as the runtime drives a warm session (see CODEX.md)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import trio
from proc_helpers import kill_marked, wait_until

from agentrt import (
    ErrorEvent,
    Event,
    ResultEvent,
    SessionEvent,
    StopReason,
    ToolResultEvent,
    ToolUseEvent,
    Usage,
)
from agentrt.backend import ExitStatus, LiveBackend, ProtocolError, SessionTotals
from agentrt.backends.codex import CodexBackend, CodexLive
from agentrt.testing import OpenAIError, OpenAIHang, OpenAIReply, open_fake_openai

from ._codex import (
    MARKER_VAR,
    Place,
    call_usage,
    codex_binary,
    codex_place,
    find_marked,
    live_codex,
    run_turn,
)

BINARY = codex_binary()
pytestmark = [
    pytest.mark.realcli,
    pytest.mark.skipif(BINARY is None, reason="codex is not installed: run `make codex-cli`"),
]
backend = CodexBackend()


def protocol(place: Place, session_id: str | None = None, **options: object) -> CodexLive:
    assert BINARY is not None and isinstance(backend, LiveBackend)
    live = backend.live(place.options(Path(BINARY), **options), session_id=session_id)
    assert live is not None
    return live


def conversation(request_input: list[object]) -> list[tuple[object, object]]:
    """The (role, text) of each message a model call was sent, the codex preamble left out."""
    said = [
        (item.get("role"), part.get("text"))
        for item in request_input
        if isinstance(item, dict) and item.get("type") == "message"
        for part in item["content"]
        if item.get("role") in ("user", "assistant")
    ]
    return [(role, text) for role, text in said if not str(text).startswith("<")]


def totals_after(*turns: list[Event]) -> SessionTotals:
    """The baseline the runtime passes the next turn: the earlier turns' usage, summed."""
    totals = SessionTotals()
    for events in turns:
        terminal = events[-1]
        assert isinstance(terminal, ResultEvent | ErrorEvent)
        totals = totals.add(terminal.usage, None)
    return totals


async def test_three_turns_on_one_process_keep_the_history_and_report_their_own_usage() -> None:
    script = [
        OpenAIReply.text("First answer", usage=call_usage(0)),
        OpenAIReply.exec_command("echo from-the-tool", usage=call_usage(1)),
        OpenAIReply.text("Second answer", usage=call_usage(2)),
        OpenAIReply.text("Third answer", usage=call_usage(3)),
    ]
    async with open_fake_openai(script) as api, codex_place(api) as place:
        async with live_codex(protocol(place)) as live:
            pid = live.process.pid
            first = await live.turn("Question one")
            second = await live.turn("Question two", baseline=totals_after(first))
            third = await live.turn("Question three", baseline=totals_after(first, second))
            assert live.process.pid == pid and live.process.poll() is None
            assert await live.close() == 0
        left = await kill_marked(MARKER_VAR, place.marker)
    thread = live.protocol.thread_id
    assert thread is not None and uuid.UUID(thread)
    # Raw events left out: codex's other notifications (output deltas of a command, say)
    # come or not depending on timing.
    kinds = [[e.kind for e in turn if e.kind != "raw"] for turn in (first, second)]
    assert kinds[0] == ["session", "text", "text", "text", "usage", "result"]
    assert first[0] == SessionEvent(session_id=thread, model=None)
    assert kinds[1] == [
        *("session", "tool_use", "tool_result", "text", "text", "text", "usage", "result")
    ]
    use, tool_result = [e for e in second if e.kind in ("tool_use", "tool_result")]
    assert isinstance(use, ToolUseEvent) and "echo from-the-tool" in use.input["command"]
    assert isinstance(tool_result, ToolResultEvent) and not tool_result.is_error
    assert "from-the-tool" in tool_result.content["output"]
    results = [turn[-1] for turn in (first, second, third)]
    assert all(isinstance(r, ResultEvent) and r.session_id == thread for r in results)
    assert [r.text for r in results if isinstance(r, ResultEvent)] == [
        *("First answer", "Second answer", "Third answer")
    ]
    # Each turn its own calls (codex reports the thread's running totals).
    assert [r.usage for r in results if isinstance(r, ResultEvent)] == [
        Usage(input_tokens=2, output_tokens=2, cache_read_input_tokens=1),
        Usage(input_tokens=220, output_tokens=220, cache_read_input_tokens=110),
        Usage(input_tokens=2000, output_tokens=2000, cache_read_input_tokens=1000),
    ]
    # One process, one thread: the model sees the whole conversation in the last call.
    assert conversation(api.model_calls[-1].input_items()) == [
        ("user", "Question one"),
        ("assistant", "First answer"),
        ("user", "Question two"),
        ("assistant", "Second answer"),
        ("user", "Question three"),
    ]
    assert left == [], "codex app-server left processes behind"


async def test_interrupt_of_a_hanging_reply_keeps_the_process_for_the_next_turn() -> None:
    script = [OpenAIReply.text("one"), OpenAIHang(), OpenAIReply.text("after the interrupt")]
    async with (
        open_fake_openai(script) as api,
        codex_place(api) as place,
        live_codex(protocol(place)) as live,
    ):
        first = await live.turn("Turn one")
        async with trio.open_nursery() as nursery:

            async def interrupt_once_asked() -> None:
                await wait_until(lambda: len(api.model_calls) == 2, 30)
                await live.interrupt()

            nursery.start_soon(interrupt_once_asked)
            second = await live.turn("Turn two", baseline=totals_after(first))
        third = await live.turn("Turn three", baseline=totals_after(first, second))
        assert live.process.poll() is None
    interrupted = second[-1]
    assert isinstance(interrupted, ErrorEvent) and interrupted.reason is StopReason.INTERRUPTED
    assert interrupted.session_id == live.protocol.thread_id
    result = third[-1]
    assert isinstance(result, ResultEvent) and result.text == "after the interrupt"
    # The resumed conversation knows the second turn was cut off.
    last_input = str(api.model_calls[-1].input_items())
    assert "Turn two" in last_input and "<turn_aborted>" in last_input


async def test_a_warm_turn_continues_an_exec_thread_and_exec_resume_continues_it() -> None:
    script = [OpenAIReply.text("one"), OpenAIReply.text("two"), OpenAIReply.text("three")]
    async with open_fake_openai(script) as api, codex_place(api) as place:
        assert BINARY is not None
        options = place.options(Path(BINARY))
        first = await run_turn(backend.command(options, "Turn one", session_id=None))
        assert isinstance(first.terminal, ResultEvent), first.stderr
        thread = first.terminal.session_id
        assert thread is not None
        async with live_codex(protocol(place, thread)) as live:
            second = await live.turn("Turn two")
            assert await live.close() == 0
        third = await run_turn(backend.command(options, "Turn three", session_id=thread))
    assert second[0] == SessionEvent(session_id=thread)
    assert isinstance(second[-1], ResultEvent) and second[-1].session_id == thread
    assert isinstance(third.terminal, ResultEvent) and third.terminal.session_id == thread
    assert conversation(api.model_calls[-1].input_items()) == [
        *(("user", "Turn one"), ("assistant", "one"), ("user", "Turn two")),
        *(("assistant", "two"), ("user", "Turn three")),
    ]


async def test_a_thread_has_one_writer_so_exec_resume_waits_for_the_warm_process() -> None:
    script = [OpenAIReply.text("warm"), OpenAIReply.text("still warm"), OpenAIReply.text("cold")]
    async with open_fake_openai(script) as api, codex_place(api) as place:
        assert BINARY is not None
        options = place.options(Path(BINARY))
        async with live_codex(protocol(place)) as live:
            await live.turn("Turn one")
            thread = live.protocol.thread_id
            refused = await run_turn(backend.command(options, "Cold meanwhile", session_id=thread))
            on = await live.turn("Turn two")
        cold = await run_turn(backend.command(options, "Turn three", session_id=thread))
    assert refused.exit_status == ExitStatus(1) and refused.frames == []
    assert f"thread {thread} already has an active writer" in refused.stderr
    assert isinstance(on[-1], ResultEvent) and on[-1].text == "still warm"
    # live_codex killed the warm process's group: the thread is free again.
    assert isinstance(cold.terminal, ResultEvent) and cold.terminal.text == "cold"
    assert len(api.model_calls) == 3


async def test_an_unknown_thread_is_refused_before_ready() -> None:
    lost = str(uuid.uuid4())
    async with open_fake_openai([]) as api, codex_place(api) as place:
        with pytest.raises(ProtocolError, match=f"no rollout found for thread id {lost}"):
            async with live_codex(protocol(place, lost)):
                pass  # pragma: no cover
    assert api.requests == []


async def test_a_failed_turn_is_classified_and_the_process_goes_on() -> None:
    script = [OpenAIError(401, "Incorrect API key provided"), OpenAIReply.text("fine now")]
    async with (
        open_fake_openai(script) as api,
        codex_place(api) as place,
        live_codex(protocol(place)) as live,
    ):
        failed = await live.turn("Hello")
        after = await live.turn("Again")
    error = failed[-1]
    assert isinstance(error, ErrorEvent) and error.reason is StopReason.AUTHENTICATION_FAILED
    assert error.status == 401 and "Incorrect API key provided" in error.message
    assert isinstance(after[-1], ResultEvent) and after[-1].text == "fine now"
    assert len(api.model_calls) == 2


async def test_a_command_can_outlive_its_interrupted_turn_until_the_process_ends() -> None:
    # What the runtime must clean up: a command that has run for a moment (here 2 s) is
    # kept by app-server's unified exec when its turn is interrupted, unlike exec's SIGINT.
    # (Interrupted at once, the command dies with the turn.)
    script = [OpenAIReply.exec_command("sleep 300", yield_time_ms=60_000), OpenAIReply.text("ok")]
    async with open_fake_openai(script) as api, codex_place(api) as place:
        async with live_codex(protocol(place)) as live:
            async with trio.open_nursery() as nursery:

                async def interrupt_once_sleeping() -> None:
                    await wait_until(lambda: find_marked(place.marker, "sleep"), 30)
                    await trio.sleep(2)
                    await live.interrupt()

                nursery.start_soon(interrupt_once_sleeping)
                interrupted = await live.turn("Sleep")
            survivors = find_marked(place.marker, "sleep")
            assert await live.close() == 0
        await wait_until(lambda: not find_marked(place.marker, "sleep"), 10)
    assert isinstance(interrupted[-1], ErrorEvent)
    assert interrupted[-1].reason is StopReason.INTERRUPTED
    assert survivors, "the command died with the interrupt: update CODEX.md and the runtime"
