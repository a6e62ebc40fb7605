"""A fleet left to run (issue 39): ten agents on one credential and two on another, under an
autojumping `MockClock`, with admission per credential, a usage limit met in the middle of
a fan-out and a login that expires. The fleet parks, recovers and loses no queued work."""

from __future__ import annotations

import time

import pytest
import trio
import trio.testing
from doc_blocks import doc_block

from agentrt import Agent, Completed, Failed, Ref, Response, StopReason, TurnFailed, open_runtime
from agentrt.testing import Fail, ScriptedBackend, Sleep, reply

HOUR = 3600.0
TURN = 10.0  # seconds each scripted turn takes
TEAM, CI = [f"team-{i}" for i in range(10)], ["ci-0", "ci-1"]


class Worker(Agent):
    """Notes when its turns start and how many of its credential's run at once."""

    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet

    def pre_turn(self, prompt: str) -> None:
        self.fleet.started(prompt)

    def post_turn(self, ref: Ref, outcome: Response | TurnFailed) -> None:
        self.fleet.running -= 1


class Fleet:
    def __init__(self) -> None:
        self.starts: list[tuple[str, float]] = []
        self.running = 0
        self.most = 0

    def started(self, prompt: str) -> None:
        self.starts.append((prompt, trio.current_time()))
        if prompt.startswith("team"):
            self.running += 1
            self.most = max(self.most, self.running)


def worker(*first: list[object]) -> ScriptedBackend:
    """Turns that take `TURN` seconds and answer with their prompt, after ``first``."""
    return ScriptedBackend(*first, default=lambda call: [Sleep(TURN), *reply(call.prompt)])


async def test_a_fleet_parks_at_a_usage_limit_resumes_at_the_reset_and_halts_on_an_expired_login(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fleet = Fleet()
    resets_at = time.time() + HOUR
    limited = Sleep(1), Fail(StopReason.USAGE_LIMIT, "You've hit your limit", resets_at=resets_at)
    expired = Fail(StopReason.CREDENTIAL_EXPIRED, "OAuth token has expired")
    backends = {name: worker() for name in TEAM + CI}
    backends["team-0"] = worker([*limited])
    async with open_runtime() as rt:
        for name in TEAM:
            await rt.start_agent(
                Worker(fleet),
                name=name,
                backend=backends[name],
                credential="team",
                credential_turns=4,
            )
        for name in CI:
            await rt.start_agent(Worker(fleet), name=name, backend=backends[name], credential="ci")
        start = trio.current_time()
        # team-0's first turn runs a second, then meets the limit; three more of the team
        # are admitted meanwhile (credential_turns=4), and finish theirs.
        refs = {("team-0", 0): await rt.tell("team-0", "team-0 task 0")}
        await trio.sleep(0.5)
        for i in range(3):
            for name in TEAM + CI:
                if (name, i) not in refs:
                    refs[name, i] = await rt.tell(name, f"{name} task {i}")
        # Halfway to the reset: the team is parked with its work queued; the other
        # credential's agents have done theirs.
        await trio.sleep(HOUR / 2)
        team = [await rt.status(name) for name in TEAM]
        assert {s.state for s in team} == {"parked"}
        assert {s.parked_until for s in team} == {resets_at}
        # team-0's first request met the limit; the three admitted beside it finished.
        assert sum(s.queued for s in team) == 30 - 1 - 3
        assert [(await rt.status(name)).turns for name in CI] == [3, 3]
        results = {key: await rt.wait(ref) for key, ref in refs.items()}
        failed = results.pop(("team-0", 0))
        assert isinstance(failed, Failed) and isinstance(failed.error, TurnFailed)
        assert failed.error.reason is StopReason.USAGE_LIMIT
        assert all(isinstance(r, Completed) for r in results.values())
        team_starts = [at - start for prompt, at in fleet.starts if prompt.startswith("team")]
        assert not [at for at in team_starts if TURN < at < HOUR - 5]  # none while parked
        assert fleet.most == 4  # the credential's admission held through the fan-out
        # 26 turns, four at a time, after the reset: within greedy list scheduling's bound
        # (the work over the slots, plus the longest agent's own queue of 3), since which
        # agents get the four slots first is trio's scheduling order, not a rule of ours.
        assert trio.current_time() - start <= HOUR + 5 + 26 * TURN / 4 + 3 * TURN

        # The login expires under the team: every agent of it halts, work kept, until a
        # turn on it works again.
        backends["team-5"].push(expired)
        with pytest.raises(TurnFailed) as caught:
            await rt.ask("team-5", "team-5 after the reset")
        assert caught.value.reason is StopReason.CREDENTIAL_EXPIRED
        later = [await rt.tell(name, f"{name} later") for name in TEAM]
        await trio.sleep(HOUR)
        halted = [await rt.status(name) for name in TEAM]
        assert {s.state for s in halted} == {"halted"}
        assert sum(s.queued for s in halted) == 10
        assert {s.restarts for s in halted} == {0}
        assert [(await rt.status(name)).state for name in CI] == ["idle", "idle"]
        await rt.unhalt("team-5")  # the operator logged in again and tries one agent
        for ref in later:
            assert isinstance(await rt.wait(ref), Completed)


async def test_the_guides_fleet_starts_on_one_credential() -> None:
    namespace: dict[str, object] = {}
    exec(compile(doc_block('credential="team-max"'), "unattended-fleets.md", "exec"), namespace)
    start_fleet = namespace["start_fleet"]
    assert callable(start_fleet)
    async with open_runtime() as rt:
        await start_fleet(rt, worker())
        statuses = [await rt.status(name) for name in rt.agents()]
    assert len(statuses) == 10
    assert {s.credential for s in statuses} == {"team-max"}
