"""Steering and a busy agent: ``when_busy`` on the scripted backend (exact times), the
refusals of ``steer`` and of ``when_busy="steer"`` where no warm CLI takes a message
mid-turn, and the claude live protocol's steer as plain data (the frames Claude Code 2.1.332
printed for a steered message, measured against the fake API)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio
from _helpers import echo_backend
from trio.testing import MockClock

from agentrt import (
    Agent,
    AgentBusy,
    Completed,
    Failed,
    InvalidOptions,
    SQLiteStore,
    StopReason,
    TurnFailed,
    open_runtime,
)
from agentrt.backend import ControlAnswer
from agentrt.backends.claude import ClaudeBackend
from agentrt.testing import Gate, reply

# --- when_busy, on the scripted backend ---------------------------------------------------


async def test_reject_refuses_a_prompt_while_a_turn_runs(autojump_clock: MockClock) -> None:
    gate = Gate()
    async with open_runtime() as rt:
        backend = echo_backend([gate, *reply("one done")])
        await rt.start_agent(Agent, name="a", backend=backend, when_busy="reject")
        first = await rt.tell("a", "one")
        await gate.wait_reached()
        with pytest.raises(AgentBusy, match="'a' is processing"):
            await rt.ask("a", "two")
        with pytest.raises(AgentBusy):
            await rt.tell("a", "three")
        assert (await rt.status("a")).queued == 0
        gate.release()
        assert isinstance(await rt.wait(first), Completed)
        # Idle again: a prompt runs.
        assert (await rt.ask("a", "four")).text == "echo four"


async def test_interrupt_ends_the_running_turn_and_runs_the_new_prompt_next(
    autojump_clock: MockClock,
) -> None:
    gate = Gate()
    backend = echo_backend([gate])
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=backend, when_busy="interrupt")
        first = await rt.tell("a", "one")
        await gate.wait_reached()
        second = await rt.tell("a", "two")
        result = await rt.wait(first)
        assert isinstance(result, Failed)
        assert isinstance(result.error, TurnFailed)
        assert result.error.reason is StopReason.INTERRUPTED
        done = await rt.wait(second)
        assert isinstance(done, Completed) and done.response.text == "echo two"
    assert [call.prompt for call in backend.calls] == ["one", "two"]
    assert trio.current_time() == 0.0


async def test_interrupt_puts_the_new_prompt_ahead_of_the_queued_ones(
    autojump_clock: MockClock,
) -> None:
    gate = Gate()
    backend = echo_backend([gate, *reply("one done")])
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=backend, when_busy="interrupt")
        await rt.halt("a")  # idle and halted: prompts queue without interrupting anything
        await rt.tell("a", "one")
        last = await rt.tell("a", "two")
        await rt.unhalt("a")
        await gate.wait_reached()  # "one" runs, "two" waits
        urgent = await rt.tell("a", "urgent")
        assert isinstance(await rt.wait(urgent), Completed)
        assert isinstance(await rt.wait(last), Completed)
    assert [call.prompt for call in backend.calls] == ["one", "urgent", "two"]


async def test_enqueue_is_the_default(autojump_clock: MockClock) -> None:
    gate = Gate()
    backend = echo_backend([gate, *reply("one done")])
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=backend)
        first = await rt.tell("a", "one")
        await gate.wait_reached()
        second = await rt.tell("a", "two")
        assert (await rt.status("a")).queued == 1
        gate.release()
        assert isinstance(await rt.wait(first), Completed)
        assert isinstance(await rt.wait(second), Completed)


async def test_when_busy_is_checked_naming_the_choices() -> None:
    async with open_runtime() as rt:
        with pytest.raises(InvalidOptions, match=r"'reject'.*did you mean 'reject'") as caught:
            await rt.start_agent(Agent, name="a", backend=echo_backend(), when_busy="rejct")
    assert caught.value.key == "when_busy"


async def test_steer_is_refused_without_a_warm_cli() -> None:
    async with open_runtime() as rt:
        with pytest.raises(InvalidOptions, match=r"runs its turns in process.*to steer"):
            await rt.start_agent(Agent, name="a", backend=echo_backend(), when_busy="steer")
        await rt.start_agent(Agent, name="b", backend=echo_backend())
        with pytest.raises(InvalidOptions, match="runs in_process turns, without a warm CLI") as e:
            await rt.steer("b", "also this")
        assert "also this" not in str(e.value)  # the user's text, like a prompt
        with pytest.raises(ValueError, match="must not be blank"):
            await rt.steer("b", "  ")


async def test_a_bad_steer_text_is_refused_naming_text(tmp_path: Path) -> None:
    # "text" is steer's argument: an error that said "prompt" would name none of its own.
    # SQLite routes calls: "elsewhere" is checked as a call routed to another runtime is.
    async with open_runtime(store=SQLiteStore(tmp_path / "s.sqlite3")) as rt:
        await rt.start_agent(Agent, name="b", backend=echo_backend())
        for name in ("b", "elsewhere"):  # this runtime's agent; one a call is routed to
            with pytest.raises(TypeError, match=r"^text must be a str, not NoneType"):
                await rt.steer(name, None)  # type: ignore[arg-type]
            with pytest.raises(ValueError, match=r"^text must not be empty"):
                await rt.steer(name, "")
            with pytest.raises(ValueError, match=r"^text must not be blank"):
                await rt.steer(name, " \n")


@pytest.mark.parametrize(
    ("options", "why"),
    [
        ({}, "start the agent with keep_alive=SECONDS"),
        ({"keep_alive": 60, "binary": "qwen"}, "takes no message mid-turn"),
    ],
)
async def test_when_busy_steer_needs_a_cli_that_takes_messages_mid_turn(
    options: dict[str, Any], why: str
) -> None:
    backend = "qwen" if options.get("binary") == "qwen" else "claude"
    async with open_runtime() as rt:
        with pytest.raises(InvalidOptions, match=why) as caught:
            await rt.start_agent(
                Agent,
                name="a",
                backend=backend,
                cwd=".",
                when_busy="steer",
                **{"binary": "claude", **options},
            )
    assert (caught.value.key, caught.value.value) == ("when_busy", "steer")


# --- the claude live protocol's steer, as data --------------------------------------------

CLAUDE = ClaudeBackend()


def claude_live() -> Any:
    return CLAUDE.live(CLAUDE.parse_options({"binary": "claude"}), session_id=None)


def lifecycle(message_id: str, state: str) -> dict[str, Any]:
    return {"type": "command_lifecycle", "command_uuid": message_id, "state": state}


RESULT = {"type": "result", "subtype": "success", "is_error": False, "result": "ok"}


def test_a_steer_is_a_user_message_with_an_id_of_its_own() -> None:
    protocol = claude_live()
    request = protocol.request("steer", "also say hi")
    line = json.loads(request.line)
    assert line == {
        "type": "user",
        "message": {"role": "user", "content": "also say hi"},
        "parent_tool_use_id": None,
        "uuid": request.request_id,
    }
    # The CLI's acknowledgement answers the request.
    queued = lifecycle(request.request_id, "queued")
    assert protocol.classify(queued) == "control"
    assert protocol.control(queued) == ControlAnswer(request.request_id)


def test_a_result_before_the_steered_message_started_is_not_the_turns_end() -> None:
    # Measured: a message queued after the turn's last model call runs next, with a result
    # of its own; its "started" comes between the two results, its "completed" after both.
    protocol = claude_live()
    message_id = protocol.request("steer", "late").request_id
    protocol.control(lifecycle(message_id, "queued"))
    assert protocol.classify(RESULT) == "event"
    assert protocol.classify(lifecycle(message_id, "started")) == "control"
    protocol.control(lifecycle(message_id, "started"))
    assert protocol.classify(RESULT) == "end"
    # After the turn, the trailing "completed" is the protocol's, not output between turns.
    assert protocol.classify(lifecycle(message_id, "completed")) == "control"


def test_a_steer_folded_into_the_turn_ends_it_at_its_one_result() -> None:
    protocol = claude_live()
    message_id = protocol.request("steer", "fold").request_id
    for state in ("queued", "started", "completed"):
        protocol.control(lifecycle(message_id, state))
    assert protocol.classify(RESULT) == "end"
