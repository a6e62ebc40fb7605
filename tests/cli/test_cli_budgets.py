"""`agentrt status` shows what each agent has spent (cost, tokens) and every budget that
applies to it (its own, its supervisors', its runtime's), each with what its agents spent
and what is left, marking the one that binds."""

from __future__ import annotations

import json
from pathlib import Path

import trio
from cli_programs import FakeClaude
from hosted_agent import Hosted

from agentrt import SQLiteStore, open_runtime

from ._run import agentrt


async def test_status_shows_cost_tokens_and_budget(
    base_env: dict[str, str], tmp_path: Path
) -> None:
    store = base_env["AGENTRT_STORE"]
    cli = FakeClaude(tmp_path / "cli")
    cli.answer()
    async with open_runtime(store=SQLiteStore(store)) as rt:
        options = {"binary": cli.binary, "cwd": str(tmp_path)}
        await rt.start_agent(Hosted, name="capped", backend="claude", budget_usd=0.5, **options)
        await rt.start_agent(Hosted, name="free", backend="claude", **options)
        await rt.ask("capped", "hi")
        await rt.ask("free", "hi")
        run = await agentrt("status", "--store", store, "--json", env=base_env)
        assert run.code == 0, run.stderr
        capped, free = json.loads(run.stdout)
        assert (capped["name"], capped["cost_usd"]) == ("capped", 0.01)
        [own] = capped["budgets"]
        assert (own["scope"], own["usd"], own["spent_usd"], own["left_usd"]) == (
            "agent 'capped'",
            0.5,
            0.01,
            0.49,
        )
        assert own["binding"] is True
        assert (free["budgets"], free["tokens"]) == ([], 0)
        run = await agentrt("status", "--store", store, env=base_env)
        assert run.code == 0, run.stderr
        assert "BUDGETS" in run.stdout and "$0.4900 of $0.5000 left" in run.stdout


async def test_status_shows_an_env_agents_own_supervisor_and_runtime_budgets(
    base_env: dict[str, str], tmp_path: Path
) -> None:
    # As the README's fleet: an agent given env= (no failover spec stored) under a
    # supervisor's and the runtime's budgets, beside an agent spending the runtime's.
    store = base_env["AGENTRT_STORE"]
    secret = "ghp_" + "s3cr3t" * 6
    cli = FakeClaude(tmp_path / "cli")
    cli.answer()
    options = {"binary": cli.binary, "cwd": str(tmp_path)}
    async with open_runtime(store=SQLiteStore(store), budget_usd=0.025) as rt:
        await rt.start_agent(Hosted, name="other", backend="claude", **options)
        async with rt.open_supervisor(budget_usd=0.5, budget_tokens=9_000) as team:
            await team.start_agent(
                Hosted,
                name="coder",
                backend="claude",
                budget_usd=0.3,
                env={"GITHUB_TOKEN": secret},
                **options,
            )
            await rt.ask("coder", "hi")
            await rt.ask("other", "hi")
            # The runtime's own view, which the command's must agree with.
            assert (await rt.status("coder")).budget_left_usd == 0.005
            async with SQLiteStore(store) as reader:
                assert [name for name, _ in await reader.specs()] == ["other"]
            run = await agentrt("status", "--store", store, "--json", env=base_env)
            assert run.code == 0, run.stderr
            coder, other = json.loads(run.stdout)
            table = await agentrt("status", "--store", store, env=base_env)
    assert coder["name"] == "coder"
    shown = [
        (b["scope"], b["usd"], b["tokens"], b["spent_usd"], b["left_usd"], b["binding"])
        for b in coder["budgets"]
    ]
    assert shown == [
        ("agent 'coder'", 0.3, None, 0.01, 0.29, False),
        ("supervisor", 0.5, 9_000, 0.01, 0.49, False),
        # What both agents spent: the runtime's is the one that binds.
        ("runtime", 0.025, None, 0.02, 0.005, True),
    ]
    supervisor = coder["budgets"][1]
    assert supervisor["left_tokens"] == 9_000 - supervisor["spent_tokens"]
    [runtime] = other["budgets"]
    assert (runtime["scope"], runtime["spent_usd"], runtime["binding"]) == ("runtime", 0.02, True)
    assert table.code == 0, table.stderr
    assert "*runtime: $0.0050 of $0.0250 left" in table.stdout
    assert "supervisor: $0.4900 of $0.5000 left" in table.stdout
    assert secret not in run.stdout + table.stdout
    for file in await trio.Path(store).parent.glob("sessions.sqlite3*"):  # the WAL too
        if await file.is_file():  # not the directory of the runtimes' routing sockets
            assert secret.encode() not in await file.read_bytes()
