"""Budgets with the pinned real ``claude`` against the fake API: a turn under a budget gets
what is left as ``--max-budget-usd``, and the CLI itself ends the turn that passes it
("Reached maximum budget"); the runtime counts what it spent, and refuses the next turn
before any CLI starts."""

from __future__ import annotations

import os
import signal
from typing import Any

import attrs
import pytest
import trio

from agentrt import (
    Agent,
    BudgetExceeded,
    Failed,
    MemoryStore,
    Response,
    StopReason,
    TurnFailed,
    Usage,
    open_runtime,
)
from agentrt.testing import AnthropicError, AnthropicReply, AnthropicText, AnthropicToolUse

from ._claude import Claude, wait_for_process

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


def echo() -> AnthropicToolUse:
    return AnthropicToolUse("Bash", {"command": "echo hi", "description": "Say hi"})


async def test_a_turn_its_max_budget_usd_ends_reports_its_counts_in_model_usage(
    claude: Claude,
) -> None:
    """The CLI's fact (2.1.332): a result ``error_max_budget_usd`` has ``usage`` all zeros in
    a new session, and one call's (not the turn's) in a resumed one, while ``modelUsage``
    holds the session's counts, as ``total_cost_usd`` holds its cost."""
    claude.api.set_script([AnthropicText("Spent.")])
    with trio.fail_after(TURN_BOUND):
        first = await claude.run(["--max-budget-usd", "0.000001"], prompt="spend")
    claude.record("max_budget", first, description=_doc_line(0), script="text")
    claude.api.set_script([echo(), echo(), AnthropicText("Not reached.")])
    assert first.session_id is not None
    args = ["--max-budget-usd", "0.0002", "--allowedTools", "Bash", "--resume", first.session_id]
    with trio.fail_after(TURN_BOUND):
        resumed = await claude.run(args, prompt="spend more")
    claude.record("max_budget_resumed", resumed, description=_doc_line(1), script="2 x Bash")

    def counts(result: dict[str, Any] | None) -> tuple[tuple[int, int], list[tuple[int, int]]]:
        assert result is not None and result["subtype"] == "error_max_budget_usd"
        usage, models = result["usage"], result["modelUsage"].values()
        return (usage["input_tokens"], usage["output_tokens"]), [
            (m["inputTokens"], m["outputTokens"]) for m in models
        ]

    assert counts(first.result) == ((0, 0), [(10, 5)])
    assert counts(resumed.result) == ((10, 5), [(30, 15)])  # the turn: 2 calls, (20, 10)
    assert len(claude.api.message_requests) == 3


def _doc_line(n: int) -> str:
    return [
        "--max-budget-usd below one call: the CLI ends the turn after it (usage all zeros).",
        "--resume, --max-budget-usd of two calls: ended after the second (usage: one call's).",
    ][n]


@attrs.frozen
class Case:
    script: list[AnthropicReply]
    options: dict[str, Any]
    reason: StopReason
    usage: Usage


CASES = {
    "success": Case(
        [echo(), AnthropicText("Done.")],
        {},
        StopReason.COMPLETE,
        Usage(input_tokens=20, output_tokens=10),
    ),
    "error_max_turns": Case(
        [echo(), AnthropicText("Not reached.")],
        {"max_turns": 1},
        StopReason.CLI_ERROR,
        Usage(input_tokens=10, output_tokens=5),
    ),
    "error_max_budget_usd": Case(
        [echo(), echo(), AnthropicText("Not reached.")],
        {"max_budget_usd": 0.0002},
        StopReason.CLI_ERROR,
        Usage(input_tokens=20, output_tokens=10),
    ),
    "api_error": Case([AnthropicError.server()], {}, StopReason.CLI_ERROR, Usage()),
}


@pytest.mark.parametrize("subtype", sorted(CASES))
async def test_every_result_subtype_counts_the_turns_tokens(claude: Claude, subtype: str) -> None:
    # A resumed second turn: the case where error_max_budget_usd's usage is one call's.
    case = CASES[subtype]
    claude.api.set_script([AnthropicText("First.", input_tokens=7, output_tokens=3)])
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(
            Agent,
            name="coder",
            backend="claude",
            allowed_tools=["Bash"],
            **claude.agent_options(**case.options),
        )
        with trio.fail_after(TURN_BOUND):
            await rt.ask("coder", "first")
        claude.api.set_script(case.script)
        with trio.fail_after(TURN_BOUND):
            try:
                outcome: Response | TurnFailed = await rt.ask("coder", "second")
            except TurnFailed as failed:
                outcome = failed
        reason = outcome.stop_reason if isinstance(outcome, Response) else outcome.reason
        assert reason is case.reason, outcome
        assert outcome.usage == case.usage
        status = await rt.status("coder")
        assert status.spent_tokens == 10 + case.usage.input_tokens + case.usage.output_tokens


# claude-opus-5-5, the pinned CLI's default model, as it prices it: $4 in, $20 out per
# million tokens.
def opus_usd(input_tokens: int, output_tokens: int) -> float:
    return (input_tokens * 4 + output_tokens * 20) * 1e-6


async def test_a_warm_turn_is_bounded_by_what_the_budget_has_left_when_it_starts(
    claude: Claude,
) -> None:
    # The warm CLI started with the whole runtime budget as its --max-budget-usd (which
    # counts its own spending only); another agent spends most of the budget meanwhile.
    budget = 0.01
    call = AnthropicToolUse("Bash", {"command": "echo hi"}, input_tokens=200, output_tokens=20)
    async with open_runtime(store=MemoryStore(), budget_usd=budget) as rt:
        await rt.start_agent(
            Agent,
            name="warm",
            backend="claude",
            allowed_tools=["Bash"],
            **claude.agent_options(keep_alive=600),
        )
        await rt.start_agent(Agent, name="other", backend="claude", **claude.agent_options())
        claude.api.set_script([AnthropicText("Warm.")])
        with trio.fail_after(TURN_BOUND):
            await rt.ask("warm", "one")
        pid = (await rt.status("warm")).cli_pid
        claude.api.set_script([AnthropicText("Spent.", input_tokens=1500, output_tokens=100)])
        with trio.fail_after(TURN_BOUND):
            await rt.ask("other", "spend")
        left = budget - opus_usd(10, 5) - opus_usd(1500, 100)
        assert (await rt.status("warm")).budget_left_usd == pytest.approx(left)
        # Six calls of $0.0012 each would run the budget to 155 %.
        claude.api.set_script([*[call] * 6, AnthropicText("Not reached.")])
        requests = len(claude.api.message_requests)
        with trio.fail_after(TURN_BOUND), pytest.raises(TurnFailed) as stopped:
            await rt.ask("warm", "two")
        failed = stopped.value
        assert failed.reason is StopReason.BUDGET_EXCEEDED, failed
        assert failed.detail["budget_left_usd"] == pytest.approx(left)
        # Stopped at the second call, whose input alone crossed what was left; ended in band,
        # so the CLI billed the turn itself and stays warm. The CLI may have sent a third
        # call by the time the interrupt reaches it (seen beside load), never more.
        calls = len(claude.api.message_requests) - requests
        assert calls in (2, 3)
        # Billed by the CLI: the first call whole, the one it was stopped in as far as it ran.
        assert opus_usd(200, 20) < failed.cost_usd <= calls * opus_usd(200, 20) + 1e-9
        spent = sum([(await rt.status(name)).spent_usd for name in ("warm", "other")])
        assert spent < budget + (calls - 1) * opus_usd(200, 20)
        assert (await rt.status("warm")).cli_pid == pid
        with pytest.raises(BudgetExceeded):
            await rt.ask("warm", "three")


async def test_a_cli_killed_before_its_result_is_billed_with_its_streamed_usage(
    claude: Claude,
) -> None:
    command = {"command": "echo start; sleep 300; echo end"}
    sleeper = AnthropicToolUse("Bash", command, input_tokens=100, output_tokens=10)
    claude.api.set_script([sleeper, AnthropicText("Not reached.")])
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(
            Agent,
            name="coder",
            backend="claude",
            allowed_tools=["Bash"],
            budget_usd=1.0,
            **claude.agent_options(),
        )
        ref = await rt.tell("coder", "sleep")
        with trio.fail_after(TURN_BOUND):
            await wait_for_process(claude.marker, lambda p: p.cmdline == "sleep 300")
        pid = (await rt.status("coder")).cli_pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        with trio.fail_after(TURN_BOUND):
            outcome = await rt.wait(ref)
        assert isinstance(outcome, Failed)
        failed = outcome.error
        assert isinstance(failed, TurnFailed) and failed.reason is StopReason.PROCESS_CRASHED
        assert failed.usage == Usage(input_tokens=100, output_tokens=10)
        assert failed.cost_usd == pytest.approx(opus_usd(100, 10))
        assert failed.detail["cost_estimated"] is True
        status = await rt.status("coder")
        assert status.spent_usd == pytest.approx(opus_usd(100, 10))
        assert status.budget_left_usd == pytest.approx(1.0 - opus_usd(100, 10))
