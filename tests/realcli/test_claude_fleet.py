"""The pinned real ``claude`` in a fleet against the fake API (issue 39): agents logged in
with one subscription token share its usage limit and its expiry; an agent on an API key is
a credential of its own and runs on."""

from __future__ import annotations

import json
import time

import attrs
import pytest
import trio

from agentrt import Agent, InvalidOptions, MemoryStore, StopReason, TurnFailed, open_runtime
from agentrt.testing import AnthropicError, AnthropicReply, AnthropicText, RecordedRequest

from ._claude import Claude

pytestmark = pytest.mark.realcli

# How long a usage limit whose reset the CLI did not say parks (docs: five minutes).
UNSAID_RESET = 300.0

TURN_BOUND = 60  # generous: the CLI starts in about half a second, CI machines are shared


async def test_a_usage_limit_parks_the_agents_of_the_login_and_not_a_key(claude: Claude) -> None:
    resets_at = int(time.time()) + 3600
    claude.api.set_script([AnthropicError.usage_limit(resets_at), AnthropicText("On a key.")])
    async with open_runtime(store=MemoryStore()) as rt:
        login = claude.agent_options(env=claude.oauth_login())
        await rt.start_agent(Agent, name="a", backend="claude", **login)
        await rt.start_agent(Agent, name="b", backend="claude", **login)
        await rt.start_agent(Agent, name="keyed", backend="claude", **claude.agent_options())
        with trio.fail_after(TURN_BOUND), pytest.raises(TurnFailed) as caught:
            await rt.ask("a", "go")
        assert caught.value.reason is StopReason.USAGE_LIMIT
        a, b, keyed = [await rt.status(name) for name in ("a", "b", "keyed")]
        assert a.credential == b.credential == "claude CLAUDE_CODE_OAUTH_TOKEN"
        assert (a.state, b.state) == ("parked", "parked")
        assert b.parked_until == resets_at
        assert (keyed.state, keyed.credential) == ("idle", "claude ANTHROPIC_API_KEY")
        with trio.fail_after(TURN_BOUND):
            assert (await rt.ask("keyed", "go")).text == "On a key."
        assert (await rt.status("b")).queued == 0


@pytest.mark.parametrize("reset", [1_796_684_952_000, 10**20], ids=["milliseconds", "overflow"])
async def test_a_usage_limit_whose_reset_is_no_time_parks_as_an_unsaid_one(
    claude: Claude, reset: int
) -> None:
    """A reset header past any date (milliseconds read as seconds, an overflow), which the
    CLI passes on in its rate_limit_event: the agent parks as for a reset the CLI did not
    say (`UNSAID_RESET`), and the runtime lives; it crashed the agent and the runtime
    ("year 33658 is out of range") as the park was logged."""
    limit = AnthropicError.usage_limit(time.time() + 3600)
    headers = {**limit.headers, "anthropic-ratelimit-unified-reset": str(reset)}
    claude.api.set_script([attrs.evolve(limit, headers=headers)])
    async with open_runtime(store=MemoryStore()) as rt:
        login = claude.agent_options(env=claude.oauth_login())
        await rt.start_agent(Agent, name="a", backend="claude", **login)
        before = time.time()
        with trio.fail_after(TURN_BOUND), pytest.raises(TurnFailed) as caught:
            await rt.ask("a", "go")
        assert caught.value.reason is StopReason.USAGE_LIMIT
        assert "resets_at" not in caught.value.detail
        status = await rt.status("a")
        assert status.state == "parked" and status.parked_until is not None
        assert before + UNSAID_RESET <= status.parked_until <= time.time() + UNSAID_RESET


async def test_a_usage_limit_said_to_reset_just_now_parks_for_minutes_not_a_day(
    claude: Claude,
) -> None:
    """The API refuses, saying a reset seconds past (its clock behind this one's as the
    fleet resumes at the reset): the CLI sends no rate_limit_event for it, and its text
    says the time cut to the minute ("resets 11:02pm"). The agent parks as for a reset not
    said; it parked until that time tomorrow."""
    limit = AnthropicError.usage_limit(time.time() - 5)
    claude.api.set_script([limit])
    async with open_runtime(store=MemoryStore()) as rt:
        login = claude.agent_options(env=claude.oauth_login())
        await rt.start_agent(Agent, name="a", backend="claude", **login)
        before = time.time()
        with trio.fail_after(TURN_BOUND), pytest.raises(TurnFailed) as caught:
            await rt.ask("a", "go")
        assert caught.value.reason is StopReason.USAGE_LIMIT
        assert "resets" in caught.value.message
        status = await rt.status("a")
        assert status.state == "parked" and status.parked_until is not None
        assert before + UNSAID_RESET <= status.parked_until <= time.time() + UNSAID_RESET


async def test_an_expired_login_halts_its_agents_until_one_is_answered(claude: Claude) -> None:
    claude.api.set_script([AnthropicText("Hello."), *[AnthropicError.expired_token()] * 3])
    async with open_runtime(store=MemoryStore()) as rt:
        login = claude.agent_options(env=claude.oauth_login())
        await rt.start_agent(Agent, name="a", backend="claude", **login)
        await rt.start_agent(Agent, name="b", backend="claude", **login)
        with trio.fail_after(TURN_BOUND):
            await rt.ask("a", "hi")
            with pytest.raises(TurnFailed) as caught:
                await rt.ask("a", "again")
        assert caught.value.reason is StopReason.CREDENTIAL_EXPIRED
        b = await rt.status("b")
        assert b.state == "halted" and b.halt_reason is not None
        assert b.halt_reason.startswith("credential_expired: claude CLAUDE_CODE_OAUTH_TOKEN")
        ref = await rt.tell("b", "queued while halted")
        # The operator renews the login (the API takes it again) and tries one agent.
        claude.api.set_script([AnthropicText("Back."), AnthropicText("Done.")])
        await rt.unhalt("a")
        with trio.fail_after(TURN_BOUND):
            await rt.ask("a", "once more")  # answered: the login works, b goes on
            await rt.wait(ref)
        assert (await rt.status("b")).state == "idle"


def echo(request: RecordedRequest) -> AnthropicReply:
    return AnthropicText(f"heard {len(request.messages)} messages")


async def test_a_warm_agent_compacts_ahead_of_a_full_context(claude: Claude) -> None:
    """compact_at: after an answered turn whose context is that full (the CLI's own count),
    the warm CLI gets /compact before the next request, which then runs on the compacted
    session."""
    claude.api.set_script(echo)
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(
            Agent,
            name="coder",
            backend="claude",
            keep_alive=60,
            compact_at=0.001,  # any context: every answered turn compacts
            **claude.agent_options(),
        )
        with trio.fail_after(TURN_BOUND):
            first = await rt.ask("coder", "one")
            second = await rt.ask("coder", "two")
    bodies = [json.dumps(r.body) for r in claude.api.message_requests]
    compaction = next(i for i, body in enumerate(bodies) if "<summary>" in body)
    two = next(i for i, body in enumerate(bodies) if '"two"' in body and "<summary>" not in body)
    assert compaction < two  # asked of the model between the two turns
    assert first.session_id == second.session_id
    # The turn after it runs on the compacted conversation: the summary, not turn one.
    assert "heard" in bodies[two] and '"one"' not in bodies[two]


async def test_compact_at_needs_a_warm_cli(claude: Claude) -> None:
    async with open_runtime(store=MemoryStore()) as rt:
        with pytest.raises(InvalidOptions) as caught:
            await rt.start_agent(
                Agent, name="coder", backend="claude", compact_at=0.8, **claude.agent_options()
            )
    assert caught.value.key == "compact_at"
    assert "keep_alive" in str(caught.value)


async def test_a_full_context_goes_on_in_a_fresh_session_with_the_hand_off(claude: Claude) -> None:
    """The default on_context_exhausted="fresh": the full session is asked for a hand-off
    (resumed), and the prompt runs once more on a new session that starts with it."""
    claude.api.set_script(
        [
            AnthropicError.prompt_too_long(),
            AnthropicText("HAND-OFF: the parser is done, its tests are left."),
            AnthropicText("Tests written."),
        ]
    )
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(Agent, name="coder", backend="claude", **claude.agent_options())
        with trio.fail_after(TURN_BOUND):
            response = await rt.ask("coder", "write the tests")
    assert response.text == "Tests written."
    full, handoff, fresh = [json.dumps(r.body["messages"]) for r in claude.api.message_requests]
    assert "write the tests" in full
    assert "hand-off" in handoff and "write the tests" in handoff  # the old conversation
    assert "HAND-OFF: the parser is done" in fresh and "write the tests" in fresh
    assert "Reply with the hand-off only" not in fresh  # a new conversation


async def test_a_full_context_whose_hand_off_meets_the_usage_limit_keeps_its_session(
    claude: Claude,
) -> None:
    """The hand-off request meets the subscription's usage limit: the full session is kept
    for a hand-off after the reset, and the prompt is not sent to a new session told that
    no hand-off could be written."""
    limit = AnthropicError.usage_limit(time.time() + 3600)
    claude.api.set_script([AnthropicError.prompt_too_long(), limit, limit])
    async with open_runtime(store=MemoryStore()) as rt:
        login = claude.agent_options(env=claude.oauth_login())
        await rt.start_agent(Agent, name="coder", backend="claude", **login)
        with trio.fail_after(TURN_BOUND), pytest.raises(TurnFailed) as caught:
            await rt.ask("coder", "write the tests")
        status = await rt.status("coder")
    assert caught.value.reason is StopReason.USAGE_LIMIT
    assert status.state == "parked"
    assert status.session_id is not None and status.session_id == caught.value.session_id
    _, handoff, again = [json.dumps(r.body["messages"]) for r in claude.api.message_requests]
    assert "hand-off" in handoff and "write the tests" in handoff
    assert "write the tests" in again and "could write no hand-off" not in again
