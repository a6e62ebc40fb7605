"""A credential's park and halt kept in the store (issue 39): a later program on the store
holds the credential's agents as the program that met the limit or the expiry did, and a
program beside it holds its own agents of the credential at their next turn. On
`MemoryStore` handles (each one a program's) under an autojumping `MockClock`."""

from __future__ import annotations

import time

import attrs
import pytest
import trio
import trio.testing

from agentrt import Agent, MemoryStore, StopReason, TurnFailed, open_runtime
from agentrt.store import StoredCredential
from agentrt.testing import Fail, ScriptedBackend, reply

HOUR = 3600.0


def echo(*scripts: list[object]) -> ScriptedBackend:
    """A backend that runs ``scripts`` first, then answers each prompt with itself."""
    return ScriptedBackend(*scripts, default=lambda call: reply(call.prompt))


async def test_a_usage_limit_met_in_one_program_parks_the_credential_in_another(
    autojump_clock: trio.testing.MockClock,
) -> None:
    store = MemoryStore()
    resets_at = time.time() + HOUR
    limited = echo([Fail(StopReason.USAGE_LIMIT, "usage limit", resets_at=resets_at)])
    other = echo()
    async with (
        open_runtime(store=store) as one,
        open_runtime(store=store.handle()) as two,
    ):
        await one.start_agent(Agent, name="a", backend=limited, credential="team")
        await two.start_agent(Agent, name="b", backend=other, credential="team")
        await two.start_agent(Agent, name="solo", backend=echo(), credential="solo")
        with pytest.raises(TurnFailed):
            await one.ask("a", "x")
        [stored] = await store.credentials()
        assert (stored.key, stored.parked_until, stored.agents) == ("named:team", resets_at, ("a",))
        assert stored.park_reason == "usage limit met by agent 'a'"
        start = trio.current_time()
        assert (await two.ask("solo", "y")).text == "y"  # another credential runs on
        assert trio.current_time() == start
        # Program two's agent of the credential waits for the reset at its next turn.
        assert (await two.ask("b", "after the reset")).text == "after the reset"
        assert trio.current_time() - start == pytest.approx(HOUR, abs=5)
        assert other.prompts == ["after the reset"]
        # Its status said so meanwhile; the store names both agents of the credential now.
        [stored] = await store.credentials()
        assert stored.agents == ("a", "b")


async def test_a_park_outlives_its_program_and_the_next_one_waits_for_the_reset(
    autojump_clock: trio.testing.MockClock,
) -> None:
    store = MemoryStore()
    resets_at = time.time() + HOUR
    async with open_runtime(store=store) as rt:
        limited = echo([Fail(StopReason.USAGE_LIMIT, "usage limit", resets_at=resets_at)])
        await rt.start_agent(Agent, name="a", backend=limited)  # alone on its credential
        with pytest.raises(TurnFailed):
            await rt.ask("a", "x")
    start = trio.current_time()
    after = echo()
    async with open_runtime(store=store) as rt:
        await rt.start_agent(Agent, name="a", backend=after)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(rt.ask, "a", "later")
            await trio.sleep(HOUR / 2)
            status = await rt.status("a")
            assert (status.state, status.parked_until, after.prompts) == ("parked", resets_at, [])
        assert trio.current_time() - start == pytest.approx(HOUR, abs=5)
        assert after.prompts == ["later"]
        assert (await rt.status("a")).state == "idle"


async def test_a_halt_outlives_its_program_until_an_unhalted_agent_is_answered(
    autojump_clock: trio.testing.MockClock,
) -> None:
    store = MemoryStore()
    async with open_runtime(store=store) as rt:
        expired = echo([Fail(StopReason.CREDENTIAL_EXPIRED, "OAuth token has expired")])
        await rt.start_agent(Agent, name="a", backend=expired, credential="team")
        with pytest.raises(TurnFailed):
            await rt.ask("a", "x")
    async with store:
        [stored] = await store.credentials()
    assert stored.halt_reason is not None and stored.halt_reason.startswith("credential_expired")
    assert stored.halted_since is not None and stored.parked_until is None
    async with open_runtime(store=store) as rt:
        renewed = echo()
        await rt.start_agent(Agent, name="a", backend=renewed, credential="team")
        await rt.start_agent(Agent, name="b", backend=echo(), credential="team")
        waiting = await rt.tell("b", "waits")
        await trio.sleep(10 * HOUR)
        b = await rt.status("b")
        assert (b.state, b.queued, b.halt_reason) == ("halted", 1, stored.halt_reason)
        # The operator unhalts one agent after logging in again: its answered turn shows
        # the login works, the others go on, and the store no longer holds the credential.
        await rt.unhalt("b")
        assert (await rt.wait(waiting)).response.text == "waits"  # type: ignore[union-attr]
        assert (await rt.ask("a", "y")).text == "y"
        assert renewed.prompts == ["y"]
    async with store:
        [cleared] = await store.credentials()
    assert (cleared.halt_reason, cleared.halted_since) == (None, None)


async def test_a_stored_park_that_ended_is_not_taken_again(
    autojump_clock: trio.testing.MockClock,
) -> None:
    store = MemoryStore()
    async with store:
        await store.save_credential(
            StoredCredential(key="named:team", label="team", parked_until=time.time() - 1)
        )
    backend = echo()
    async with open_runtime(store=store) as rt:
        await rt.start_agent(Agent, name="a", backend=backend, credential="team")
        start = trio.current_time()
        assert (await rt.ask("a", "now")).text == "now"
        assert trio.current_time() == start


async def test_a_halt_cleared_in_the_store_lets_the_halted_agents_go_on(
    autojump_clock: trio.testing.MockClock,
) -> None:
    store = MemoryStore()
    expired = echo([Fail(StopReason.CREDENTIAL_EXPIRED, "OAuth token has expired")])
    async with open_runtime(store=store) as rt:
        common = {"credential": "team", "login_check": 60.0}
        await rt.start_agent(Agent, name="a", backend=expired, **common)
        await rt.start_agent(Agent, name="b", backend=echo(), **common)
        with pytest.raises(TurnFailed):
            await rt.ask("a", "x")
        waiting = await rt.tell("b", "waits")
        await trio.sleep(HOUR)
        assert (await rt.status("b")).state == "halted"
        # Another program (`agentrt unhalt`) clears the halt in the store: the agents see
        # it at their next look, login_check seconds at most.
        other = store.handle()
        async with other:
            [stored] = await other.credentials()
            await other.save_credential(attrs.evolve(stored, halt_reason=None, halted_since=None))
        cleared = trio.current_time()
        with trio.fail_after(HOUR):  # clock time: never reached when it works
            result = await rt.wait(waiting)
        assert result.response is not None and result.response.text == "waits"
        assert trio.current_time() - cleared <= 60.0
        assert [(await rt.status(n)).state for n in ("a", "b")] == ["idle", "idle"]


async def test_an_agent_started_on_a_held_credential_is_stored_as_held(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # c starts after the credential's login expired and b's after its park: each is held
    # in this program (start_agent), and the store says so for `agentrt status` and the
    # console of every program (it named only the agents of the limit or the expiry).
    store = MemoryStore()
    expired = echo([Fail(StopReason.CREDENTIAL_EXPIRED, "OAuth token has expired")])
    limited = echo([Fail(StopReason.USAGE_LIMIT, "usage limit", resets_at=time.time() + HOUR)])
    async with open_runtime(store=store) as rt:
        await rt.start_agent(Agent, name="a", backend=expired, credential="login")
        await rt.start_agent(Agent, name="p", backend=limited, credential="plan")
        for name in ("a", "p"):
            with pytest.raises(TurnFailed):
                await rt.ask(name, "x")
        await rt.start_agent(Agent, name="c", backend=echo(), credential="login")
        await rt.start_agent(Agent, name="b", backend=echo(), credential="plan")
        assert [(await rt.status(n)).state for n in ("c", "b")] == ["halted", "parked"]
        stored = {c.key: c.agents for c in await store.credentials()}
    assert stored == {"named:login": ("a", "c"), "named:plan": ("b", "p")}
