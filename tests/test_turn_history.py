"""What an agent's turn history keeps of each turn, through the runtime on a MemoryStore: the
prompt and the answer only where retention kept the turn's events whole, redacted and cut;
a failed turn's outcome and its prompt."""

from __future__ import annotations

import pytest
from _helpers import echo_backend

import agentrt
from agentrt import Failed, MemoryStore, StopReason, TextEvent
from agentrt.store import StoredTurn
from agentrt.testing import ScriptedBackend, reply

SECRET = "sk-ant-api03-" + "y" * 40
# docs/console.md: a prompt or an answer is redacted, then cut to 4,000 characters.
HISTORY_TEXT = 4000


def chatty(call: object) -> list[object]:
    return [TextEvent(text="a"), TextEvent(text="b"), TextEvent(text="c"), *reply("abc")]


async def only_turn(rt: agentrt.Runtime, name: str) -> StoredTurn:
    store = rt.store
    assert isinstance(store, agentrt.store.TurnHistoryStore)
    [turn] = await store.turn_history(name, limit=10)
    return turn


async def test_a_turn_whose_events_were_all_kept_keeps_its_prompt_and_answer() -> None:
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(agentrt.Agent, name="a", backend=echo_backend())
        response = await rt.ask("a", f"the key is {SECRET}")
        turn = await only_turn(rt, "a")
    assert (turn.prompt, turn.answer) == ("the key is [REDACTED]", "echo the key is [REDACTED]")
    assert (turn.outcome, turn.cost_usd, turn.usage) == ("complete", None, agentrt.Usage())
    assert response.event_coverage.omitted == 0
    assert turn.ended_at == pytest.approx(turn.started_at + turn.duration)


async def test_a_compact_turn_that_left_events_out_keeps_no_text() -> None:
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        backend = ScriptedBackend(default=chatty)
        await rt.start_agent(agentrt.Agent, name="a", backend=backend, max_events=2)
        response = await rt.ask("a", "talk")
        turn = await only_turn(rt, "a")
    assert response.event_coverage.omitted > 0
    assert (turn.outcome, turn.prompt, turn.answer) == ("complete", None, None)


async def test_a_lossless_overflow_keeps_no_text_and_another_failure_its_prompt() -> None:
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        backend = ScriptedBackend(default=chatty)
        await rt.start_agent(
            agentrt.Agent, name="a", backend=backend, max_events=2, retention="lossless"
        )
        ref = await rt.tell("a", "talk")
        result = await rt.wait(ref)
        assert isinstance(result, Failed)
        assert result.error.reason == StopReason.EVENT_CAPTURE_OVERFLOW
        turn = await only_turn(rt, "a")
        assert (turn.outcome, turn.prompt, turn.answer) == ("event_capture_overflow", None, None)
        await rt.start_agent(agentrt.Agent, name="b", backend=ScriptedBackend(default=crash))
        await rt.wait(await rt.tell("b", "break"))
        turn = await only_turn(rt, "b")
    assert (turn.prompt, turn.answer) == ("break", None)
    assert turn.outcome != "complete"


def crash(call: object) -> list[object]:
    raise RuntimeError("the translator broke")


async def kept_prompts(*prompts: str) -> list[str | None]:
    """What the history keeps of each prompt, each the one turn of an agent of its own."""
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        backend = ScriptedBackend(default=lambda call: reply("ok"))
        for n, prompt in enumerate(prompts):
            await rt.start_agent(agentrt.Agent, name=f"a{n}", backend=backend)
            await rt.ask(f"a{n}", prompt)
        return [(await only_turn(rt, f"a{n}")).prompt for n in range(len(prompts))]


async def test_a_long_text_is_cut_after_it_is_redacted() -> None:
    text = "x" * (HISTORY_TEXT - 5) + " " + SECRET
    huge = "z" * 10**6 + SECRET
    kept, short, whole, cut = await kept_prompts(text, "short", "y" * HISTORY_TEXT, huge)
    # Redacted whole, then cut: no part of the key is left for the cut to keep.
    assert kept is not None and "sk-ant" not in kept and "yyyy" not in kept
    assert kept == "x" * (HISTORY_TEXT - 5) + f" [RED... [cut: {len(text)} characters in all]"
    assert (short, whole) == ("short", "y" * HISTORY_TEXT)
    assert cut is not None and cut.endswith(f"... [cut: {len(huge)} characters in all]")
