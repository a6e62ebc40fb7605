"""`agentrt status` shows what each agent has spent (cost, tokens) and its own budget, as
its stored spec names it."""

from __future__ import annotations

import json
from pathlib import Path

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
        assert (capped["name"], capped["cost_usd"], capped["budget_usd"]) == ("capped", 0.01, 0.5)
        assert (free["budget_usd"], free["budget_tokens"], free["tokens"]) == (None, None, 0)
        run = await agentrt("status", "--store", store, env=base_env)
        assert run.code == 0, run.stderr
        assert "BUDGET" in run.stdout and "$0.50" in run.stdout
