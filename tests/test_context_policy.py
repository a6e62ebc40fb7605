"""What the runtime does when a turn finds the conversation's context full (issue 39, part
3, ``on_context_exhausted``), on `ScriptedBackend`: the calls show each extra turn, its
prompt and the session it resumed."""

from __future__ import annotations

import time

import pytest
import trio
import trio.testing

from agentrt import Agent, InvalidOptions, StopReason, TurnFailed, open_runtime
from agentrt.testing import Fail, ScriptedBackend, reply

FULL = Fail(StopReason.CONTEXT_EXHAUSTED, "Prompt is too long")


def full_session() -> ScriptedBackend:
    """Turn 1 opens session s1; turn 2, on it, finds the context full."""
    return ScriptedBackend(reply("ok", session_id="s1"), [FULL])


async def test_by_default_the_prompt_goes_on_in_a_new_session_with_the_old_ones_hand_off() -> None:
    backend = full_session()
    backend.push(*reply("HANDOFF: tests pass, docs left", session_id="s1"))
    backend.push(*reply("docs written", session_id="s2"))
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="coder", backend=backend)
        await rt.ask("coder", "start")
        response = await rt.ask("coder", "write the docs")
        status = await rt.status("coder")
    assert response.text == "docs written"
    assert status.session_id == "s2"
    handoff, fresh = backend.calls[2], backend.calls[3]
    assert handoff.session_id == "s1" and "hand-off" in handoff.prompt
    assert fresh.session_id is None
    assert "HANDOFF: tests pass, docs left" in fresh.prompt
    assert fresh.prompt.endswith("write the docs")


async def test_a_session_too_full_to_write_a_hand_off_goes_on_without_one() -> None:
    backend = full_session()
    backend.push(FULL)
    backend.push(*reply("done", session_id="s2"))
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="coder", backend=backend)
        await rt.ask("coder", "start")
        assert (await rt.ask("coder", "next")).text == "done"
    fresh = backend.calls[3]
    assert fresh.session_id is None
    assert "could write no hand-off" in fresh.prompt and fresh.prompt.endswith("next")


async def test_compact_compacts_the_session_in_band_and_runs_the_prompt_again() -> None:
    backend = full_session()
    backend.push(*reply("Compacted.", session_id="s1"))
    backend.push(*reply("answered", session_id="s1"))
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="coder", backend=backend, on_context_exhausted="compact")
        await rt.ask("coder", "start")
        assert (await rt.ask("coder", "next")).text == "answered"
    assert [(c.prompt, c.session_id) for c in backend.calls[2:]] == [
        ("/compact", "s1"),
        ("next", "s1"),
    ]


async def test_a_compaction_that_made_no_room_fails_the_request() -> None:
    backend = full_session()
    backend.push(*reply("Compacted.", session_id="s1"))
    backend.push(FULL)
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="coder", backend=backend, on_context_exhausted="compact")
        await rt.ask("coder", "start")
        with pytest.raises(TurnFailed) as caught:
            await rt.ask("coder", "next")
    assert caught.value.reason is StopReason.CONTEXT_EXHAUSTED
    assert len(backend.calls) == 4


async def test_fail_fails_the_turn_and_keeps_the_session() -> None:
    backend = full_session()
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="coder", backend=backend, on_context_exhausted="fail")
        await rt.ask("coder", "start")
        with pytest.raises(TurnFailed) as caught:
            await rt.ask("coder", "next")
        assert (await rt.status("coder")).session_id == "s1"
    assert caught.value.reason is StopReason.CONTEXT_EXHAUSTED
    assert len(backend.calls) == 2


async def test_compact_at_is_refused_without_a_warm_cli() -> None:
    async with open_runtime() as rt:
        with pytest.raises(InvalidOptions) as caught:
            await rt.start_agent(Agent, name="coder", backend=ScriptedBackend(), compact_at=0.8)
    assert (caught.value.key, caught.value.value) == ("compact_at", 0.8)
    assert "keep_alive" in str(caught.value)


@pytest.mark.parametrize(
    ("held", "state"),
    [(StopReason.USAGE_LIMIT, "parked"), (StopReason.CREDENTIAL_EXPIRED, "halted")],
)
async def test_a_hand_off_its_credential_refused_keeps_the_full_session_for_later(
    autojump_clock: trio.testing.MockClock, held: StopReason, state: str
) -> None:
    # The full session could not be asked for its hand-off: the credential's usage limit
    # (or expired login) refused it. It is kept, to be asked once the credential works
    # again, and the prompt is not sent on to a new session that starts without it (the
    # work's context was lost).
    backend = full_session()
    refused = Fail(held, "refused", resets_at=time.time() + 3600)
    backend.push(refused)  # the hand-off
    backend.push(refused)  # the prompt once more, on the kept session: refused too
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="coder", backend=backend)
        await rt.ask("coder", "start")
        with pytest.raises(TurnFailed) as caught:
            await rt.ask("coder", "next")
        status = await rt.status("coder")
    assert caught.value.reason is held
    assert (status.state, status.session_id) == (state, "s1")
    assert [c.session_id for c in backend.calls[1:]] == ["s1", "s1", "s1"]
    assert "could write no hand-off" not in backend.calls[3].prompt
