"""The pinned real ``claude`` in a fleet against the fake API (issue 39): agents logged in
with one subscription token share its usage limit and its expiry; an agent on an API key is
a credential of its own and runs on."""

from __future__ import annotations

import time

import pytest
import trio

from agentrt import Agent, MemoryStore, StopReason, TurnFailed, open_runtime
from agentrt.testing import AnthropicError, AnthropicText

from ._claude import Claude

pytestmark = pytest.mark.realcli

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
