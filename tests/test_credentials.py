"""What the runtime does when a credential's usage limit is met or its login expires, for
every agent sharing it, and the admission per credential (issue 39, parts 1 and 2): on
`ScriptedBackend` under an autojumping `MockClock`, so every wait is exact and free."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import trio
import trio.testing

from agentrt import (
    Agent,
    BudgetExceeded,
    Completed,
    InvalidOptions,
    Pending,
    Ref,
    ResultEvent,
    Runtime,
    SQLiteStore,
    StopReason,
    TurnFailed,
    open_runtime,
)
from agentrt.testing import Fail, Gate, ScriptedBackend, reply

HOUR = 3600.0


def echo(*scripts: list[object]) -> ScriptedBackend:
    """A backend that runs ``scripts`` first, then answers each prompt with itself."""
    return ScriptedBackend(*scripts, default=lambda call: reply(call.prompt))


async def answer(rt: Runtime, ref: Ref) -> str:
    result = await rt.wait(ref)
    assert isinstance(result, Completed), result
    return result.response.text


class Starts(Agent):
    """Notes when each of its turns starts (on the trio clock)."""

    def __init__(self, log: list[tuple[str, float]], name: str) -> None:
        self.log = log
        self.name = name

    def pre_turn(self, prompt: str) -> None:
        self.log.append((self.name, trio.current_time()))


def limited(resets_in: float) -> ScriptedBackend:
    """A backend whose first turn meets the usage limit, reset ``resets_in`` from now."""
    return echo([Fail(StopReason.USAGE_LIMIT, "usage limit", resets_at=time.time() + resets_in)])


async def test_a_usage_limit_parks_every_agent_of_the_credential_until_its_reset(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=limited(HOUR), credential="team")
        await rt.start_agent(Agent, name="b", backend=echo(), credential="team")
        await rt.start_agent(Agent, name="other", backend=echo(), credential="solo")
        start = trio.current_time()
        with pytest.raises(TurnFailed) as caught:
            await rt.ask("a", "x")  # the request that met the limit is told so
        assert caught.value.reason is StopReason.USAGE_LIMIT
        a, b = (await rt.status("a")), (await rt.status("b"))
        assert (a.state, b.state) == ("parked", "parked")
        assert a.parked_until == pytest.approx(time.time() + HOUR, abs=5)
        assert b.credential == "team"
        assert (await rt.status("other")).state == "idle"
        assert (await rt.ask("other", "y")).text == "y"  # another credential runs on
        queued = [await rt.tell("b", "first"), await rt.tell("b", "second")]
        await trio.sleep(HOUR - 10)
        status = await rt.status("b")
        assert (status.state, status.queued, status.turns) == ("parked", 2, 0)
        answers = [await answer(rt, ref) for ref in queued]
        resumed = trio.current_time() - start
        assert answers == ["first", "second"]
        assert HOUR - 5 <= resumed <= HOUR + 5
        assert ((await rt.status("a")).state, (await rt.status("a")).parked_until) == ("idle", None)


class Slept:
    """The wall clock of a machine that slept ``slept`` seconds: trio's clock (monotonic)
    stood still meanwhile, as Linux's and macOS's do through a suspend."""

    def __init__(self) -> None:
        self.slept = 0.0
        self._awake = time.time

    def time(self) -> float:
        return self._awake() + self.slept


async def test_a_park_ends_at_its_reset_on_the_wall_clock_after_the_machine_slept(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Parked for an hour; ten minutes on, the machine sleeps two hours. On waking the reset
    # is past: the queued work runs within a minute, not fifty minutes on (the rest of the
    # hour on a clock that did not count the sleep).
    wall = Slept()
    monkeypatch.setattr(time, "time", wall.time)
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=limited(HOUR), credential="team")
        await rt.start_agent(Agent, name="b", backend=echo(), credential="team")
        with pytest.raises(TurnFailed):
            await rt.ask("a", "x")
        queued = await rt.tell("b", "after the reset")
        await trio.sleep(600)
        assert (await rt.status("b")).state == "parked"
        wall.slept = 2 * HOUR
        woke = trio.current_time()
        assert await answer(rt, queued) == "after the reset"
        assert trio.current_time() - woke <= 60


async def test_a_request_waits_untaken_while_its_credential_is_parked(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Before a turn the agent reads what holds its credential, not takes its next request:
    # while parked no request runs, so one that rejects prompts during a turn queues them
    # (it refused the second while the first was handed over to be put back), in order.
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=limited(HOUR), credential="team")
        await rt.start_agent(Agent, name="b", backend=echo(), credential="team", when_busy="reject")
        with pytest.raises(TurnFailed):
            await rt.ask("a", "x")
        first, second, third = [await rt.tell("b", text) for text in ("1", "2", "3")]
        status = await rt.status("b")
        assert (status.state, status.queued, status.current) == ("parked", 3, None)
        assert await rt.withdraw(second)
        assert [await answer(rt, ref) for ref in (first, third)] == ["1", "3"]


async def test_an_agent_that_opts_out_fails_its_turn_and_is_not_parked(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=limited(HOUR), credential="team")
        await rt.start_agent(
            Agent, name="b", backend=echo(), credential="team", on_usage_limit="fail"
        )
        with pytest.raises(TurnFailed):
            await rt.ask("a", "x")
        # Its status does not say the park holds it (it said "parked" before, as a's).
        b = await rt.status("b")
        assert (b.state, b.parked_until, b.credential) == ("idle", None, "team")
        start = trio.current_time()
        assert (await rt.ask("b", "y")).text == "y"
        assert trio.current_time() == start
        assert (await rt.status("a")).state == "parked"


async def test_a_usage_limit_met_by_an_opted_out_agent_parks_nobody(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_runtime() as rt:
        backend = limited(HOUR)
        await rt.start_agent(Agent, name="a", backend=backend, on_usage_limit="fail")
        with pytest.raises(TurnFailed):
            await rt.ask("a", "x")
        assert (await rt.status("a")).state == "idle"
        assert (await rt.ask("a", "y")).text == "y"


async def test_a_usage_limit_without_a_reset_time_parks_for_five_minutes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    backend = echo([Fail(StopReason.USAGE_LIMIT, "limit")])
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=backend)
        with pytest.raises(TurnFailed):
            await rt.ask("a", "x")
        start = trio.current_time()
        assert (await rt.ask("a", "y")).text == "y"
        assert 295 <= trio.current_time() - start <= 305


async def test_a_usage_limit_said_to_reset_already_parks_as_one_without_a_reset_time(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The API refused, saying a reset already past (its clock behind this machine's, as
    # the agents resume at the reset): the limit holds still. The queued work waits, as for
    # a reset not said, rather than each request being run at once into the limit.
    backend = echo([Fail(StopReason.USAGE_LIMIT, "limit", resets_at=time.time() - 1)])
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=backend, credential="team")
        await rt.start_agent(Agent, name="b", backend=echo(), credential="team")
        with pytest.raises(TurnFailed) as caught:
            await rt.ask("a", "meets the limit")
        assert caught.value.reason is StopReason.USAGE_LIMIT
        start = trio.current_time()
        queued = [await rt.tell("b", "1"), await rt.tell("b", "2")]
        assert (await rt.status("b")).state == "parked"
        assert [await answer(rt, ref) for ref in queued] == ["1", "2"]
        assert 295 <= trio.current_time() - start <= 305


class Hears(Agent):
    """Notes when each event sent to it is handled (on the trio clock)."""

    def __init__(self, heard: list[tuple[object, float]]) -> None:
        self.heard = heard

    def handle_event(self, event: object) -> None:
        self.heard.append((event, trio.current_time()))


async def test_an_event_reaches_an_agent_at_once_while_its_credential_is_parked(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # notify waits only while a turn runs: a parked agent runs none, its queued work waiting
    # for the reset, so the event is handled now, not at the reset an hour on.
    heard: list[tuple[object, float]] = []
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=limited(HOUR), credential="team")
        await rt.start_agent(Hears(heard), name="b", backend=echo(), credential="team")
        with pytest.raises(TurnFailed):
            await rt.ask("a", "x")
        queued = await rt.tell("b", "after the reset")
        sent = trio.current_time()
        await rt.notify("b", "as its request is handed over")
        await trio.sleep(60)
        await rt.notify("b", "while it waits")
        await trio.sleep(1)
        assert heard == [("as its request is handed over", sent), ("while it waits", sent + 60)]
        assert await answer(rt, queued) == "after the reset"


async def test_an_event_reaches_an_agent_at_once_while_its_credential_admits_no_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The same while its work waits for a turn of the credential's to end.
    heard: list[tuple[object, float]] = []
    gate = Gate()
    async with open_runtime() as rt:
        one = {"credential": "team", "credential_turns": 1}
        await rt.start_agent(Agent, name="a", backend=ScriptedBackend([gate, *reply("a")]), **one)
        b_backend = echo()
        await rt.start_agent(Hears(heard), name="b", backend=b_backend, **one)
        running = await rt.tell("a", "holds the credential's one turn")
        queued = await rt.tell("b", "waits for it")
        await trio.sleep(60)
        sent = trio.current_time()
        await rt.notify("b", "news")
        await trio.sleep(1)
        assert heard == [("news", sent)]
        assert (await rt.status("b")).queued == 1
        later = await rt.tell("b", "told later, runs later")  # queued behind, not handed over
        gate.release()
        answers = [await answer(rt, ref) for ref in (running, queued, later)]
        assert answers == ["a", "waits for it", "told later, runs later"]
        assert b_backend.prompts == ["waits for it", "told later, runs later"]


async def test_at_most_credential_turns_run_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    gates = [Gate() for _ in range(4)]
    async with open_runtime() as rt:
        for i, gate in enumerate(gates):
            backend = ScriptedBackend([gate, *reply("done")])
            await rt.start_agent(
                Agent, name=f"w{i}", backend=backend, credential="team", credential_turns=2
            )
        refs = [await rt.tell(f"w{i}", "go") for i in range(4)]
        await trio.sleep(1)
        states = [(await rt.status(f"w{i}")).state for i in range(4)]
        assert states.count("processing") == 2
        assert [g.reached for g in gates].count(True) == 2
        for gate in gates:
            gate.release()
        for ref in refs:
            assert await answer(rt, ref) == "done"


async def test_credential_turns_per_minute_holds_a_fan_out_back(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log: list[tuple[str, float]] = []
    async with open_runtime() as rt:
        start = trio.current_time()
        for i in range(5):
            await rt.start_agent(
                Starts(log, f"w{i}"),
                name=f"w{i}",
                backend=echo(),
                credential="team",
                credential_turns_per_minute=2,
            )
        refs = [await rt.tell(f"w{i}", "go") for i in range(5)]
        for ref in refs:
            await rt.wait(ref)
    offsets = sorted(round(at - start) for _, at in log)
    assert offsets == [0, 0, 60, 60, 120]


async def test_agents_of_one_credential_cannot_disagree_on_its_admission() -> None:
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=echo(), credential="team", credential_turns=2)
        with pytest.raises(InvalidOptions) as caught:
            await rt.start_agent(
                Agent, name="b", backend=echo(), credential="team", credential_turns=3
            )
        assert caught.value.key == "credential_turns"
        assert "team" in str(caught.value)
        # The same limit, or none, joins it.
        await rt.start_agent(Agent, name="c", backend=echo(), credential="team")


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("credential", ""),
        ("credential", 3),
        ("credential_turns", 0),
        ("credential_turns_per_minute", True),
        ("on_usage_limit", "wait"),
        ("on_credential_expired", "retry"),
        ("on_context_exhausted", "compress"),
        ("compact_at", 1.5),
        ("login_check", 0),
    ],
)
async def test_bad_credential_options_are_refused_naming_them(key: str, value: object) -> None:
    async with open_runtime() as rt:
        with pytest.raises(InvalidOptions) as caught:
            await rt.start_agent(Agent, name="a", backend=echo(), **{key: value})
    assert (caught.value.key, caught.value.value) == (key, value)


async def test_a_secret_given_as_the_credential_name_is_refused_without_showing_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The option names the login or key; the key itself would be its group's label, in
    # status, the logs and the store's rows.
    key = "sk-ant-api03-" + "x" * 40
    async with open_runtime() as rt:
        with pytest.raises(InvalidOptions) as caught:
            await rt.start_agent(Agent, name="a", backend=echo(), credential=key)
    assert caught.value.key == "credential"
    assert key not in str(caught.value) and key not in repr(caught.value.value)
    assert "secret" in str(caught.value)
    assert key not in caplog.text


async def test_an_expired_login_halts_every_agent_of_it_until_a_turn_on_it_works(
    autojump_clock: trio.testing.MockClock,
) -> None:
    expired = echo([Fail(StopReason.CREDENTIAL_EXPIRED, "OAuth token has expired")])
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=expired, credential="team")
        await rt.start_agent(Agent, name="b", backend=echo(), credential="team")
        await rt.start_agent(
            Agent,
            name="c",
            backend=echo(),
            credential="team",
            on_credential_expired="fail",
        )
        with pytest.raises(TurnFailed) as caught:
            await rt.ask("a", "x")
        assert caught.value.reason is StopReason.CREDENTIAL_EXPIRED
        a, b = (await rt.status("a")), (await rt.status("b"))
        assert (a.state, b.state, (await rt.status("c")).state) == ("halted", "halted", "idle")
        assert b.halt_reason is not None and b.halt_reason.startswith("credential_expired: team")
        queued = await rt.tell("b", "waits")
        await trio.sleep(10 * HOUR)
        b = await rt.status("b")
        assert (b.state, b.queued, b.turns, b.restarts) == ("halted", 1, 0, 0)
        # The operator renews the login and unhalts one agent: its answered turn shows the
        # login works, and the others go on.
        await rt.unhalt("a")
        assert (await rt.ask("a", "y")).text == "y"
        assert await answer(rt, queued) == "waits"
        assert ((await rt.status("b")).state, (await rt.status("b")).halt_reason) == ("idle", None)


async def test_an_agent_started_on_an_expired_login_is_halted_with_the_others(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # c joins the credential after its login expired: it waits with the others for the
    # login to work again, rather than running its work into the expired login.
    expired = echo([Fail(StopReason.CREDENTIAL_EXPIRED, "expired")])
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=expired, credential="team")
        with pytest.raises(TurnFailed):
            await rt.ask("a", "x")
        late = echo()
        await rt.start_agent(Agent, name="c", backend=late, credential="team")
        c = await rt.status("c")
        assert c.state == "halted" and c.halt_reason is not None
        assert c.halt_reason.startswith("credential_expired: team")
        queued = await rt.tell("c", "waits for the login")
        await trio.sleep(HOUR)
        assert ((await rt.status("c")).queued, late.prompts) == (1, [])
        await rt.unhalt("a")
        assert (await rt.ask("a", "y")).text == "y"  # the login works again
        assert await answer(rt, queued) == "waits for the login"


async def test_a_halt_by_the_operator_is_not_lifted_by_the_login(
    autojump_clock: trio.testing.MockClock,
) -> None:
    expired = echo([Fail(StopReason.CREDENTIAL_EXPIRED, "expired")])
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=expired, credential="team")
        await rt.start_agent(Agent, name="b", backend=echo(), credential="team")
        with pytest.raises(TurnFailed):
            await rt.ask("a", "x")
        await rt.halt("b")  # halted on purpose now
        await rt.unhalt("a")
        await rt.ask("a", "y")
        assert ((await rt.status("b")).state, (await rt.status("b")).halt_reason) == (
            "halted",
            None,
        )


async def test_a_halt_by_the_operator_before_the_expiry_outlives_the_renewed_login(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The operator halts b, then a's login expires, then a is answered on it again: b's
    # halt was not the login's to lift (it went on, and its queued work ran).
    expired = echo([Fail(StopReason.CREDENTIAL_EXPIRED, "expired")])
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=expired, credential="team")
        await rt.start_agent(Agent, name="b", backend=echo(), credential="team")
        await rt.halt("b")
        queued = await rt.tell("b", "waits for the operator")
        with pytest.raises(TurnFailed):
            await rt.ask("a", "x")
        await rt.unhalt("a")
        assert (await rt.ask("a", "y")).text == "y"
        await trio.sleep(HOUR)
        b = await rt.status("b")
        assert (b.state, b.halt_reason, b.queued, b.turns) == ("halted", None, 1, 0)
        await rt.unhalt("b")
        assert await answer(rt, queued) == "waits for the operator"


async def test_an_agent_its_budget_halted_is_not_unhalted_by_a_renewed_login(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # b's budget is spent (halted, its queue waiting); the login of its credential expires
    # and works again: b stays halted with its queue, not unhalted to have the queued
    # request refused for the budget.
    expired = echo([Fail(StopReason.CREDENTIAL_EXPIRED, "expired")])
    spends = ScriptedBackend(
        default=lambda call: [ResultEvent(text=call.prompt, session_id="s", cost_usd=1.0)]
    )
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=expired, credential="team")
        await rt.start_agent(Agent, name="b", backend=spends, credential="team", budget_usd=1.0)
        await rt.ask("b", "spends it all")
        with pytest.raises(BudgetExceeded):
            await rt.ask("b", "refused: the agent halts")
        queued = await rt.tell("b", "waits for more budget")
        with pytest.raises(TurnFailed):
            await rt.ask("a", "x")
        await rt.unhalt("a")
        await rt.ask("a", "y")
        await trio.sleep(HOUR)
        b = await rt.status("b")
        assert (b.state, b.queued) == ("halted", 1)
        assert isinstance(await rt.poll(queued), Pending)


async def test_a_runtime_opts_its_agents_out_and_one_agent_back_in(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_runtime(on_usage_limit="fail", on_credential_expired="fail") as rt:
        await rt.start_agent(Agent, name="a", backend=limited(HOUR), credential="team")
        await rt.start_agent(Agent, name="b", backend=echo(), credential="team")
        await rt.start_agent(
            Agent, name="parks", backend=limited(HOUR), credential="own", on_usage_limit="park"
        )
        for name in ("a", "parks"):
            with pytest.raises(TurnFailed):
                await rt.ask(name, "x")
        assert [(await rt.status(n)).state for n in ("a", "b", "parks")] == [
            "idle",
            "idle",
            "parked",
        ]


async def test_open_runtime_refuses_a_policy_it_does_not_know() -> None:
    with pytest.raises(InvalidOptions) as caught:
        async with open_runtime(on_usage_limit="wait"):
            pass
    assert (caught.value.key, caught.value.value) == ("on_usage_limit", "wait")


class WallStarts(Agent):
    """Notes the wall-clock time each of its turns starts."""

    def __init__(self, starts: list[float]) -> None:
        self.starts = starts

    def pre_turn(self, prompt: str) -> None:
        self.starts.append(time.time())


async def test_requests_a_store_keeps_wait_for_a_short_reset_in_order(tmp_path: Path) -> None:
    # Real time, on SQLite (its worker thread would let a MockClock run ahead): a reset a
    # few seconds on; the stored requests run after it, in the order they were told.
    resets_at = time.time() + 3
    backend = echo([Fail(StopReason.USAGE_LIMIT, "limit", resets_at=resets_at)])
    starts: list[float] = []
    async with open_runtime(store=SQLiteStore(tmp_path / "s.sqlite3")) as rt:
        await rt.start_agent(Agent, name="a", backend=backend, credential="team")
        await rt.start_agent(WallStarts(starts), name="b", backend=echo(), credential="team")
        with pytest.raises(TurnFailed):
            await rt.ask("a", "x")
        refs = [await rt.tell("b", f"task {i}") for i in range(3)]
        with trio.fail_after(30):
            answers = [await answer(rt, ref) for ref in refs]
    assert answers == ["task 0", "task 1", "task 2"]
    assert len(starts) == 3 and min(starts) >= resets_at - 0.5  # the wall clock may slew
