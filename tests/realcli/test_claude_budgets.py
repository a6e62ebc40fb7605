"""Budgets with the pinned real ``claude`` against the fake API: a turn under a budget gets
what is left as ``--max-budget-usd``, and the CLI itself ends the turn that passes it
("Reached maximum budget"); the runtime counts what it spent, and refuses the next turn
before any CLI starts."""

from __future__ import annotations

import pytest
import trio

from agentrt import Agent, BudgetExceeded, MemoryStore, StopReason, TurnFailed, open_runtime
from agentrt.testing import AnthropicText

from ._claude import Claude

pytestmark = pytest.mark.realcli

TURN_BOUND = 120


async def test_a_spent_budget_refuses_the_next_turn(claude: Claude) -> None:
    claude.api.set_script([AnthropicText("First."), AnthropicText("Second.")])
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(
            Agent, name="coder", backend="claude", budget_usd=1e-6, **claude.agent_options()
        )
        with trio.fail_after(TURN_BOUND), pytest.raises(TurnFailed) as stopped:
            await rt.ask("coder", "the first prompt")
        first = stopped.value
        assert first.reason is StopReason.CLI_ERROR
        assert "Reached maximum budget ($0.000001)" in str(first)
        assert first.cost_usd is not None and first.cost_usd > 1e-6
        status = await rt.status("coder")
        assert status.spent_usd == first.cost_usd and status.budget_left_usd == 0.0
        with pytest.raises(BudgetExceeded) as refused:
            await rt.ask("coder", "the second prompt")
        assert refused.value.spent == first.cost_usd
        assert (await rt.status("coder")).state == "halted"
    [request] = claude.api.message_requests  # the refused turn never reached the model
    assert "the first prompt" in request.texts()
