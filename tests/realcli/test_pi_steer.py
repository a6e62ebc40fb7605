"""Steering a running turn of a warm agent on the pinned real pi (``pi --mode rpc``),
through the public API: a ``steer`` while the model call runs reaches the model in that
turn (pi makes one more call with it, before the turn ends), the warm process takes the
next turn; ``when_busy="steer"`` folds a ``tell`` into the running turn; the refusals
where no turn runs and on per-turn pi."""

from __future__ import annotations

import pytest
import trio

from agentrt import Agent, Completed, InvalidOptions, MemoryStore, NoTurnRunning, open_runtime
from agentrt.testing import AnthropicHeld, AnthropicReply, AnthropicText, RecordedRequest

from ._pi import Pi

pytestmark = pytest.mark.realcli

BOUND = 90
STEER = "Also count the tests."


class HeldFirstCall:
    """The fake API's script: the call for "think" is held until ``release``; every other
    call answers the last user text it got."""

    def __init__(self) -> None:
        self.asked = trio.Event()
        self.release = trio.Event()

    def __call__(self, request: RecordedRequest) -> AnthropicReply:
        text = request.last_user_text()
        if text == "think":
            self.asked.set()
            return AnthropicHeld(AnthropicText("first answer"), self.release)
        return AnthropicText(f"answered {text!r}")


async def test_steer_reaches_the_model_in_the_running_turn(pi: Pi) -> None:
    script = HeldFirstCall()
    pi.api.set_script(script)
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(Agent, name="coder", backend="pi", **pi.agent_options(keep_alive=60.0))
        with trio.fail_after(BOUND):
            with pytest.raises(NoTurnRunning, match="'coder' runs no turn"):
                await rt.steer("coder", STEER)  # idle: nothing to join
            ref = await rt.tell("coder", "think")
            await script.asked.wait()
            pid = (await rt.status("coder")).cli_pid
            # Returns once pi has acknowledged the message; the model call is still held.
            await rt.steer("coder", STEER)
            script.release.set()
            result = await rt.wait(ref)
            after = await rt.ask("coder", "next")
            assert (await rt.status("coder")).cli_pid == pid
    assert isinstance(result, Completed)
    # One turn, one answer: the held call's text, then the steered call's.
    text = result.response.text
    assert text.startswith("first answer") and text.endswith(f"answered {STEER!r}")
    assert after.text == "answered 'next'"
    # The steered text went with the model's next call of the same turn, after the held
    # call's answer; nothing of it was left for the next turn.
    think, steered, following = pi.api.message_requests
    assert think.texts("user") == ["think"]
    assert steered.texts("user") == ["think", STEER]
    assert steered.texts("assistant") == ["first answer"]
    assert following.texts("user") == ["think", STEER, "next"]


async def test_when_busy_steer_folds_a_tell_into_the_running_turn(pi: Pi) -> None:
    script = HeldFirstCall()
    pi.api.set_script(script)
    async with open_runtime(store=MemoryStore()) as rt:
        options = pi.agent_options(keep_alive=60.0, when_busy="steer")
        await rt.start_agent(Agent, name="coder", backend="pi", **options)
        with trio.fail_after(BOUND):
            ref = await rt.tell("coder", "think")
            await script.asked.wait()
            joined = await rt.tell("coder", STEER)
            script.release.set()
            result = await rt.wait(ref)
    assert joined == ref
    assert isinstance(result, Completed)
    assert result.response.text.endswith(f"answered {STEER!r}")
    assert len(pi.api.message_requests) == 2


async def test_per_turn_pi_is_not_steered(pi: Pi) -> None:
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(Agent, name="coder", backend="pi", **pi.agent_options())
        with pytest.raises(InvalidOptions, match="keep_alive=SECONDS"):
            await rt.steer("coder", STEER)
        with pytest.raises(InvalidOptions, match="when_busy"):
            await rt.start_agent(
                Agent, name="other", backend="pi", **pi.agent_options(when_busy="steer")
            )
