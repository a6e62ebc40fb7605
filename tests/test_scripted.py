"""The scripted backend itself: options, recording, gates."""

from collections.abc import Iterable

import pytest
from _helpers import assert_implements

from agentrt import (
    Agent,
    ErrorEvent,
    InvalidOptions,
    ResultEvent,
    SessionEvent,
    StopReason,
    TextEvent,
    TurnFailed,
    open_runtime,
)
from agentrt.backend import Backend, Command, ExitStatus, InProcessBackend
from agentrt.testing import Fail, Gate, ScriptedBackend, ScriptedOptions, Sleep, reply


def test_it_implements_both_backend_protocols() -> None:
    backend = ScriptedBackend()
    assert_implements(Backend, backend)
    assert_implements(InProcessBackend, backend)
    assert backend.name == "scripted"
    assert backend.version_command(ScriptedOptions()) == Command(argv=("scripted", "--version"))


def test_options_are_validated_naming_the_key() -> None:
    backend = ScriptedBackend()
    assert backend.parse_options({"cwd": "/repo"}) == ScriptedOptions(cwd="/repo")
    assert backend.parse_options({}) == ScriptedOptions()
    with pytest.raises(InvalidOptions) as info:
        backend.parse_options({"cwd": "/repo", "model": "big"})
    assert (info.value.key, info.value.value) == ("model", "big")


def test_reply_makes_a_whole_turn() -> None:
    assert reply("hi", session_id="s") == [
        SessionEvent(session_id="s"),
        TextEvent(text="hi", message_boundary=True),
        ResultEvent(text="hi", session_id="s"),
    ]


async def test_run_emits_frames_records_calls_and_takes_scripts_in_order() -> None:
    backend = ScriptedBackend(["frame one"], default=lambda call: [call.prompt.upper()])
    backend.push("frame two")
    emitted: list[list[object]] = []

    async def emit(frames: Iterable[object]) -> None:
        emitted.append(list(frames))

    options = backend.parse_options({"cwd": "/w"})
    for prompt, session in [("a", None), ("b", "s1"), ("c", "s2")]:
        command = backend.command(options, prompt, session_id=session)
        assert command.cwd == "/w"
        assert await backend.run(command, emit) == ExitStatus(0)
    assert emitted == [["frame one"], ["frame two"], ["C"]]
    assert backend.prompts == ["a", "b", "c"]
    assert backend.session_ids == [None, "s1", "s2"]
    feed = backend.translator(options).feed
    assert feed("C")[0].kind == "raw"
    assert feed(TextEvent(text="t")) == (TextEvent(text="t"),)


async def test_a_gate_remembers_an_early_release() -> None:
    gate = Gate()
    gate.release()
    backend = ScriptedBackend([gate, "after"])
    emitted: list[list[object]] = []

    async def emit(frames: Iterable[object]) -> None:
        emitted.append(list(frames))

    await backend.run(backend.command(ScriptedOptions(), "x", session_id=None), emit)
    assert gate.reached
    assert emitted == [["after"]]


async def test_the_frames_between_two_control_steps_are_emitted_as_one_read() -> None:
    # As a CLI's lines printed together reach the turn in one read: one emit for them.
    gate = Gate()
    gate.release()
    backend = ScriptedBackend(["a", "b", gate, "c", Fail(StopReason.CLI_ERROR, "no"), "never"])
    emitted: list[list[object]] = []

    async def emit(frames: Iterable[object]) -> None:
        emitted.append(list(frames))

    command = backend.command(ScriptedOptions(), "x", session_id=None)
    assert await backend.run(command, emit) == ExitStatus(1)
    assert emitted == [["a", "b"], ["c", ErrorEvent(reason=StopReason.CLI_ERROR, message="no")]]


async def test_a_scripted_usage_limit_carries_its_reset_to_the_turn_failed() -> None:
    backend = ScriptedBackend([Fail(StopReason.USAGE_LIMIT, "spent", resets_at=1_800_000_000)])
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=backend)
        with pytest.raises(TurnFailed) as caught:
            await rt.ask("a", "x")
    assert caught.value.reason is StopReason.USAGE_LIMIT
    assert caught.value.detail == {"status": None, "retryable": False, "resets_at": 1_800_000_000}


async def test_a_stop_a_frame_causes_takes_effect_from_the_next_read() -> None:
    # An interrupt from handle_stream_event, as a CLI's: the result read with the text
    # stands; one read after a Sleep(0) is not taken.
    class Interrupting(Agent):
        async def handle_stream_event(self, event: object) -> None:
            if type(event) is TextEvent:
                await rt.interrupt("a")

    together = [TextEvent(text="t"), ResultEvent(text="t")]
    apart = [TextEvent(text="t"), Sleep(0), ResultEvent(text="t")]
    async with open_runtime() as rt:
        await rt.start_agent(Interrupting, name="a", backend=ScriptedBackend(together, apart))
        assert (await rt.ask("a", "x")).text == "t"
        with pytest.raises(TurnFailed) as caught:
            await rt.ask("a", "x")
    assert caught.value.reason is StopReason.INTERRUPTED
