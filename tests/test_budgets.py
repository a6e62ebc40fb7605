"""Budgets: per agent, per supervisor and per runtime, in USD and in tokens, counted from the
totals the store keeps (so across restarts and resumes). No turn starts past one: the
request fails with `BudgetExceeded`, the agent halts with its queue kept. A turn of a
backend with a per-run limit (Claude's ``--max-budget-usd``) gets what is left."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from cli_programs import FakeClaude, init_frame, result_frame

import agentrt
from agentrt import (
    BudgetExceeded,
    InvalidOptions,
    MemoryStore,
    ResultEvent,
    SQLiteStore,
    StopReason,
    TextEvent,
    TurnFailed,
    Usage,
    UsageEvent,
    open_runtime,
)
from agentrt.testing import Call, ScriptedBackend, Sleep


def costly(usd: float, tokens: int = 0) -> ScriptedBackend:
    """Every turn costs ``usd`` and ``tokens`` (half input, half output)."""

    def turn(call: Call) -> list[Any]:
        usage = Usage(input_tokens=tokens // 2, output_tokens=tokens - tokens // 2)
        return [
            TextEvent(text=f"echo {call.prompt}", message_boundary=True),
            ResultEvent(text=f"echo {call.prompt}", session_id="s1", cost_usd=usd, usage=usage),
        ]

    return ScriptedBackend(default=turn)


async def test_no_turn_starts_past_an_agents_budget_and_it_halts_with_its_queue(
    autojump_clock: trio.testing.MockClock,
) -> None:
    backend = costly(0.4)
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(agentrt.Agent, name="coder", backend=backend, budget_usd=1.0)
        for _ in range(3):  # 0, 0.4, 0.8 spent before each: each starts
            await rt.ask("coder", "work")
        status = await rt.status("coder")
        assert status.spent_usd == pytest.approx(1.2) and status.budget_left_usd == 0.0
        with pytest.raises(BudgetExceeded) as refused:
            await rt.ask("coder", "more")
        error = refused.value
        assert (error.name, error.scope, error.unit) == ("coder", "agent 'coder'", "usd")
        assert error.spent == pytest.approx(1.2) and error.budget == 1.0
        assert "the budget of agent 'coder' is spent ($1.20 of $1.00)" in str(error)
        assert len(backend.calls) == 3  # the refused request never reached the backend
        queued = [await rt.tell("coder", f"later {i}") for i in range(2)]
        status = await rt.status("coder")
        assert (status.state, status.queued) == ("halted", 2)
        # Unhalted while still over: the next request fails too, the rest still waits.
        await rt.unhalt("coder")
        failed = await rt.wait(queued[0])
        assert isinstance(failed, agentrt.Failed) and isinstance(failed.error, BudgetExceeded)
        status = await rt.status("coder")
        assert (status.state, status.queued) == ("halted", 1)


async def test_the_budget_counts_what_the_store_kept_across_restarts_and_resumes(
    tmp_path: Path,
) -> None:
    store = tmp_path / "sessions.sqlite3"
    async with open_runtime(store=SQLiteStore(store)) as rt:
        await rt.start_agent(agentrt.Agent, name="coder", backend=costly(0.3))
        await rt.ask("coder", "one")
        await rt.ask("coder", "two")
    # A new program (the old one might have been killed), a fresh session even: the name
    # has spent 0.6 already.
    async with open_runtime(store=SQLiteStore(store)) as rt:
        await rt.start_agent(
            agentrt.Agent, name="coder", backend=costly(0.3), budget_usd=0.8, resume=False
        )
        assert (await rt.status("coder")).spent_usd == pytest.approx(0.6)
        await rt.ask("coder", "three")
        with pytest.raises(BudgetExceeded, match=r"\$0.9 of \$0.8"):
            await rt.ask("coder", "four")


async def test_a_runtimes_budget_covers_all_its_agents_and_a_token_budget_too(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_runtime(store=MemoryStore(), budget_usd=1.0) as rt:
        for name in ("a", "b"):
            await rt.start_agent(agentrt.Agent, name=name, backend=costly(0.6))
        await rt.ask("a", "work")
        await rt.ask("b", "work")
        with pytest.raises(BudgetExceeded) as refused:
            await rt.ask("a", "more")
        assert refused.value.scope == "runtime" and refused.value.spent == pytest.approx(1.2)
        assert (await rt.status("b")).budget_left_usd == 0.0
        with pytest.raises(BudgetExceeded):
            await rt.ask("b", "more")
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(
            agentrt.Agent, name="t", backend=costly(0.0, tokens=600), budget_tokens=1000
        )
        await rt.ask("t", "one")
        await rt.ask("t", "two")
        status = await rt.status("t")
        assert (status.spent_tokens, status.budget_left_tokens) == (1200, 0)
        with pytest.raises(BudgetExceeded, match="1200 of 1000 tokens") as refused:
            await rt.ask("t", "three")
        assert refused.value.unit == "tokens"


async def test_a_supervisors_budget_covers_its_agents_only(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(agentrt.Agent, name="outside", backend=costly(0.5))
        async with rt.open_supervisor(budget_usd=0.5) as team:
            await team.start_agent(agentrt.Agent, name="inside", backend=costly(0.5))
            await rt.ask("inside", "work")
            with pytest.raises(BudgetExceeded) as refused:
                await rt.ask("inside", "more")
            assert refused.value.scope == "supervisor"
            await rt.ask("outside", "work")
            await rt.ask("outside", "work")  # the runtime has no budget


@pytest.mark.parametrize(
    ("where", "key", "value"),
    [
        ("agent", "budget_usd", -1),
        ("agent", "budget_usd", float("nan")),
        ("agent", "budget_usd", True),
        ("agent", "budget_tokens", 1.5),
        ("agent", "budget_tokens", 0),
        ("runtime", "budget_usd", "1"),
        ("runtime", "budget_tokens", -3),
        ("supervisor", "budget_usd", 0),
    ],
)
async def test_a_bad_budget_is_refused_naming_it(where: str, key: str, value: Any) -> None:
    with pytest.raises(InvalidOptions) as refused:
        if where == "runtime":
            async with open_runtime(store=MemoryStore(), **{key: value}):
                pass
        else:
            async with open_runtime(store=MemoryStore()) as rt:
                if where == "supervisor":
                    async with rt.open_supervisor(**{key: value}):
                        pass
                await rt.start_agent(agentrt.Agent, name="x", backend=costly(0), **{key: value})
    assert refused.value.key == key


async def test_a_claude_turn_gets_what_is_left_as_its_max_budget_usd(tmp_path: Path) -> None:
    """The fake CLI reports a session total of $0.01 per turn and records its argv."""
    cli = FakeClaude(tmp_path / "cli")
    record = cli.record
    cli.run([["record", str(record)], ["emit", init_frame()], ["emit", result_frame("ok")]])
    async with open_runtime(store=MemoryStore(), budget_usd=0.5) as rt:
        await rt.start_agent(
            agentrt.Agent,
            name="coder",
            backend="claude",
            binary=cli.binary,
            cwd=str(tmp_path),
            budget_usd=0.25,
        )
        await rt.ask("coder", "one")
        first = cli.argv()
        await rt.ask("coder", "two")
        second = cli.argv()
    assert first[first.index("--max-budget-usd") + 1] == "0.25"
    assert float(second[second.index("--max-budget-usd") + 1]) == pytest.approx(0.24)


def streams(*estimates: float, then: list[Any]) -> list[Any]:
    """A turn whose stream reports model calls that, summed, cost each of ``estimates``
    (what a backend's price table makes of them), then does ``then``."""
    calls = [
        UsageEvent(usage=Usage(input_tokens=10 * (i + 1)), estimated_cost_usd=usd)
        for i, usd in enumerate(estimates)
    ]
    return [*calls, *then]


async def test_a_turn_killed_before_its_result_counts_what_its_stream_reported(
    autojump_clock: trio.testing.MockClock,
) -> None:
    store = MemoryStore()
    backend = ScriptedBackend()
    backend.push(*streams(0.1, 0.3, then=[Sleep(3600)]))
    async with open_runtime(store=store) as rt:
        await rt.start_agent(
            agentrt.Agent, name="coder", backend=backend, budget_usd=0.5, watchdog=60
        )
        with pytest.raises(TurnFailed) as killed:
            await rt.ask("coder", "work")
        failed = killed.value
        assert failed.reason is StopReason.TOTAL_TIMEOUT
        assert failed.cost_usd == 0.3 and failed.detail["cost_estimated"] is True
        assert failed.usage == Usage(input_tokens=20)
        status = await rt.status("coder")
        assert status.spent_usd == 0.3 and status.spent_tokens == 20
        assert status.budget_left_usd == pytest.approx(0.2)
        record = await store.load("coder")
        assert record is not None and record.cost_usd == 0.3
        assert record.usage == Usage(input_tokens=20)


async def test_a_running_turn_ends_once_its_streamed_cost_reaches_the_budget_left(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The backend has no per-run limit of its own (as Codex, Gemini CLI, Qwen Code): the
    # turn is bounded by what the runtime's budget had left when it started.
    store = MemoryStore()
    backend = ScriptedBackend()
    done = ResultEvent(text="done", session_id="s1", cost_usd=0.9)
    backend.push(*streams(0.1, 0.25, 0.4, 0.9, then=[Sleep(10), done]))
    async with open_runtime(store=store, budget_usd=1.0) as rt:
        await rt.start_agent(agentrt.Agent, name="spender", backend=costly(0.7))
        await rt.start_agent(agentrt.Agent, name="coder", backend=backend)
        await rt.ask("spender", "work")  # 0.3 left
        started = trio.current_time()
        with pytest.raises(TurnFailed) as stopped:
            await rt.ask("coder", "work")
        failed = stopped.value
        assert failed.reason is StopReason.BUDGET_EXCEEDED
        assert trio.current_time() == started  # at the call that crossed, not at the end
        assert "estimated cost ($0.4) reached what its budgets had left" in str(failed)
        assert failed.detail["budget_left_usd"] == pytest.approx(0.3)
        assert failed.cost_usd == 0.4 and failed.detail["cost_estimated"] is True
        assert (await rt.status("coder")).spent_usd == 0.4
        record = await store.load("coder")
        assert record is not None and record.cost_usd == 0.4


async def test_start_agent_stores_every_budget_that_applies_with_its_scope_key(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # What `agentrt status` reads: each agent's own, supervisors' and runtime's budgets,
    # the key of each shared by every agent it covers; an agent under none stores none.
    store = MemoryStore()
    async with open_runtime(store=store, budget_usd=5.0) as rt:
        await rt.start_agent(agentrt.Agent, name="solo", backend=costly(0.5))
        async with rt.open_supervisor(budget_tokens=1_000) as team:
            await team.start_agent(agentrt.Agent, name="a", backend=costly(0.25), budget_usd=1.0)
            await team.start_agent(agentrt.Agent, name="b", backend=costly(0.25))
            stored = dict(await store.budgets())
    solo, (own, supervisor, runtime), b = stored["solo"], stored["a"], stored["b"]
    assert [(x.scope, x.usd, x.tokens) for x in (own, supervisor, runtime)] == [
        ("agent 'a'", 1.0, None),
        ("supervisor", None, 1_000),
        ("runtime", 5.0, None),
    ]
    assert b == (supervisor, runtime) and solo == (runtime,)
    assert len({own.key, supervisor.key, runtime.key}) == 3
    async with open_runtime(store=store) as rt:  # started again under no budget: dropped
        await rt.start_agent(agentrt.Agent, name="solo", backend=costly(0.5))
        assert [name for name, _ in await store.budgets()] == ["a", "b"]
