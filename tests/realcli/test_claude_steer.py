"""Steering a running turn of a warm agent on the pinned real claude, through the public API:
``steer`` while the model's Bash tool runs folds the message into that turn (the model gets
it with the tool's result, the turn has one answer, the warm process takes the next turn;
one that comes as the model gives its last answer runs after it, still in the turn);
``when_busy="steer"`` does the same for a ``tell``, which returns the running request's
`Ref`; the refusals where no turn runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from agentrt import (
    Agent,
    Completed,
    InvalidOptions,
    MemoryStore,
    NoTurnRunning,
    ResultEvent,
    ToolUseEvent,
    open_runtime,
)
from agentrt.testing import (
    AnthropicHeld,
    AnthropicReply,
    AnthropicText,
    AnthropicToolUse,
    RecordedRequest,
)

from ._claude import Claude

pytestmark = pytest.mark.realcli

TURN_BOUND = 60
STEER = "Also count the tests."


def waiting_tool(flag: Path) -> AnthropicToolUse:
    """A Bash call that runs until the test creates ``flag``: the turn is busy until then."""
    command = f"while [ ! -e {flag} ]; do sleep 0.05; done"
    return AnthropicToolUse("Bash", {"command": command, "description": "Wait for the flag"})


def script(flag: Path) -> Any:
    def answer(request: RecordedRequest) -> AnthropicReply:
        if not request.tool_results():
            if request.last_user_text() == "next":
                return AnthropicText("next done")
            return waiting_tool(flag)
        steered = any(STEER in text for text in request.texts("user"))
        return AnthropicText("steered" if steered else "not steered")

    return answer


class WatchesTools(Agent):
    def __init__(self) -> None:
        self.tool_running = trio.Event()

    def handle_stream_event(self, event: Any) -> None:
        if isinstance(event, ToolUseEvent) and event.name == "Bash":
            self.tool_running.set()


async def test_steer_joins_the_running_turn(claude: Claude) -> None:
    flag = claude.project / "go"
    claude.api.set_script(script(flag))
    agent = WatchesTools()
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(
            agent,
            name="coder",
            backend="claude",
            keep_alive=60,
            **claude.agent_options(allowed_tools=["Bash"]),
        )
        with trio.fail_after(TURN_BOUND):
            with pytest.raises(NoTurnRunning, match="'coder' runs no turn"):
                await rt.steer("coder", STEER)  # idle: nothing to join
            ref = await rt.tell("coder", "run the tool")
            await agent.tool_running.wait()
            pid = (await rt.status("coder")).cli_pid
            # Returns once the CLI has taken the message, so the tool may end now.
            await rt.steer("coder", STEER)
            flag.touch()
            result = await rt.wait(ref)
            # The warm process takes the next turn: nothing of the steer was left over.
            after = await rt.ask("coder", "next")
            assert (await rt.status("coder")).cli_pid == pid
    assert isinstance(result, Completed)
    assert result.response.text == "steered"
    assert after.text == "next done"
    # The model had the message with the tool's result, in the same turn: three model calls.
    assert len(claude.api.message_requests) == 3


async def test_when_busy_steer_folds_an_ask_into_the_running_turn(claude: Claude) -> None:
    flag = claude.project / "go"
    claude.api.set_script(script(flag))
    agent = WatchesTools()
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(
            agent,
            name="coder",
            backend="claude",
            keep_alive=60,
            when_busy="steer",
            **claude.agent_options(allowed_tools=["Bash"]),
        )
        with trio.fail_after(TURN_BOUND):
            first = await rt.tell("coder", "run the tool")
            await agent.tool_running.wait()
            joined = await rt.tell("coder", STEER)
            assert joined == first  # it joined the running request
            assert (await rt.status("coder")).queued == 0
            flag.touch()
            result = await rt.wait(first)
    assert isinstance(result, Completed) and result.response.text == "steered"


async def test_steer_is_refused_on_a_one_process_per_turn_agent(claude: Claude) -> None:
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(Agent, name="coder", backend="claude", **claude.agent_options())
        with pytest.raises(InvalidOptions, match="runs one_shot turns, without a warm CLI"):
            await rt.steer("coder", STEER)


async def test_a_steer_after_the_last_model_call_is_still_the_turns(claude: Claude) -> None:
    # The model is answering (its call held open) when the message comes: the CLI prints
    # that answer's result, then runs the message with a result of its own; the turn reads
    # on to the second, which is its answer, and the warm process takes the next turn.
    asked, release = trio.Event(), trio.Event()
    steered: list[str] = []

    def answer(request: RecordedRequest) -> AnthropicReply:
        text = request.last_user_text()
        if text == "think":
            asked.set()
            return AnthropicHeld(AnthropicText("first answer"), release)
        steered.append(text)
        return AnthropicText(f"answered {text!r}")

    claude.api.set_script(answer)
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(
            Agent, name="coder", backend="claude", keep_alive=60, **claude.agent_options()
        )
        with trio.fail_after(TURN_BOUND):
            ref = await rt.tell("coder", "think")
            await asked.wait()
            pid = (await rt.status("coder")).cli_pid
            await rt.steer("coder", STEER)
            release.set()
            result = await rt.wait(ref)
            after = await rt.ask("coder", "next")
            assert (await rt.status("coder")).cli_pid == pid
    assert isinstance(result, Completed)
    assert result.response.text == f"answered {STEER!r}"
    results = [e for e in result.response.events if isinstance(e, ResultEvent)]
    assert [r.text for r in results] == ["first answer", f"answered {STEER!r}"]
    assert after.text == "answered 'next'"
    assert steered == [STEER, "next"]
