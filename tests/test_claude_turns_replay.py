"""Every stream recorded from the real claude 2.1.332 (tests/fixtures/claude/2.1.332),
replayed by a fake CLI through ``ask()``: the Response, or the failure, that each gives.

A fixture recorded with an interrupt is replayed with one: the fake prints the frames from
before the signal, and the rest only when the turn's SIGINT arrives.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
from proc_helpers import wait_for_status

from agentrt import (
    Agent,
    Response,
    ResultEvent,
    StopReason,
    ToolResultEvent,
    ToolUseEvent,
    TurnFailed,
    Usage,
    open_runtime,
)
from agentrt.backend import ExitStatus
from agentrt.testing import fake_cli_executable

RECORDED = Path(__file__).parent / "fixtures" / "claude" / "2.1.332"
with open(RECORDED / "MANIFEST.json") as _f:
    MANIFEST: dict[str, Any] = json.load(_f)["fixtures"]


@attrs.frozen
class Answer:
    text: str
    final_message: str
    usage: Usage
    cost_usd: float
    session_id: str
    num_turns: int
    tools: tuple[str, ...] = ()
    denied: tuple[str, ...] = ()


@attrs.frozen
class Fails:
    reason: StopReason
    message: str
    session_id: str
    # Frames printed before the turn is interrupted (the rest come on SIGINT).
    interrupt_after: int | None = None
    # The tokens the turn used, where the test pins them.
    usage: Usage | None = None


EXPECTED: dict[str, Answer | Fails] = {
    "text_turn": Answer(
        "Hello from the fake.",
        "Hello from the fake.",
        Usage(input_tokens=21, output_tokens=8),
        0.000244,
        "ac1a53d3-7171-4419-b5f4-e4b84a8f338f",
        1,
    ),
    "cut_stream_then_json": Answer(
        "Whole answer.",
        "Whole answer.",
        Usage(input_tokens=10, output_tokens=5),
        0.00014,
        "0c0f5d94-be76-4c99-b188-e1491e9d11a6",
        1,
    ),
    "resume_turn": Answer(
        "It was banana.",
        "It was banana.",
        Usage(input_tokens=10, output_tokens=5),
        0.00028,
        "0282bf18-33e3-4cca-9e17-bf617c5a1f72",
        1,
    ),
    "tool_use_bash": Answer(
        "On it.\n\nTool finished.",
        "Tool finished.",
        Usage(input_tokens=20, output_tokens=10),
        0.00028,
        "ce7534be-c925-4c90-9dbf-e6715948df15",
        2,
        ("Bash",),
    ),
    "permission_denied": Answer(
        "On it.\n\nTool finished.",
        "Tool finished.",
        Usage(input_tokens=20, output_tokens=10),
        0.00028,
        "a1476c3e-4a77-4548-a0a8-51019775bb16",
        2,
        ("Bash",),
        denied=("toolu_fake_1",),
    ),
    "api_timeout": Fails(
        StopReason.CLI_ERROR, "Request timed out", "c982eb95-9bd7-413d-b579-2b277676b1aa"
    ),
    "error_401": Fails(
        StopReason.AUTHENTICATION_FAILED,
        "Invalid API key",
        "dfd5459b-4b74-400d-b0a3-110d1a105c8f",
    ),
    "error_401_api_retry": Fails(
        StopReason.AUTHENTICATION_FAILED,
        "the API rejected the credentials (authentication_failed, HTTP 401)",
        "6ae985a8-e4b6-42ff-9c39-47afc113661e",
    ),
    "error_429": Fails(
        StopReason.RATE_LIMITED,
        "Request rejected (429)",
        "affeb073-8afc-4c5e-b8b8-1a03591ca696",
    ),
    "usage_limit": Fails(
        StopReason.USAGE_LIMIT,
        "You've hit your 5-hour limit · resets ",
        "802cf8df-6393-4886-b1d5-1184efac06ab",
    ),
    "expired_token": Fails(
        StopReason.CREDENTIAL_EXPIRED,
        "the API rejected the credentials (authentication_failed, HTTP 401) after it had "
        "accepted them",
        "cb5c8fbf-f7e8-4c8d-9cc4-39fe53a2a490",
    ),
    "prompt_too_long": Fails(
        StopReason.CONTEXT_EXHAUSTED,
        "Prompt is too long",
        "8a5ce4c5-3a59-4774-a704-404949e7fca9",
    ),
    "error_500": Fails(
        StopReason.CLI_ERROR, "API Error: 500", "6d560366-ba53-4588-8733-51886d4fce8a"
    ),
    "error_529": Fails(
        StopReason.OVERLOADED, "API Error: 529 Overloaded", "f5451a43-ba2e-408f-8289-e08a47b681bb"
    ),
    "max_budget": Fails(
        StopReason.CLI_ERROR,
        "Reached maximum budget ($0.000001)",
        "8449fba9-15f3-449a-b850-063ea5f6d5b2",
        usage=Usage(input_tokens=10, output_tokens=5),  # the result's usage: all zeros
    ),
    "max_budget_resumed": Fails(
        StopReason.CLI_ERROR,
        "Reached maximum budget ($0.0002)",
        "8449fba9-15f3-449a-b850-063ea5f6d5b2",
        # Resumed without the store knowing the session: its running total, as the cost.
        usage=Usage(input_tokens=30, output_tokens=15),
    ),
    "resume_unknown": Fails(
        StopReason.SESSION_LOST,
        "No conversation found with session ID",
        "0b7e4a8e-1111-4222-8333-123456789abc",
    ),
    "sigint_mid_request": Fails(
        StopReason.INTERRUPTED, "interrupted", "d55b508e-4f89-4f5c-a09e-fcf8f577a24b", 1
    ),
    "sigint_mid_tool": Fails(
        StopReason.INTERRUPTED, "interrupted", "f296942b-cdc1-41b7-b4dd-5bd5a850c89e", 3
    ),
    "sigterm_mid_tool": Fails(
        StopReason.MALFORMED_OUTPUT,
        "the CLI exited with code 143 without printing its result",
        "c55a69cd-3d1d-4ca6-821d-07cad8371f94",
    ),
}


def test_every_recorded_fixture_has_an_expectation() -> None:
    assert set(EXPECTED) == set(MANIFEST) == {p.stem for p in RECORDED.glob("*.jsonl")}


def _program(name: str, tmp_path: Path) -> list[Any]:
    facts = MANIFEST[name]
    expected = EXPECTED[name]
    lines = (RECORDED / f"{name}.jsonl").read_text().splitlines(keepends=True)
    if isinstance(expected, Fails) and expected.interrupt_after is not None:
        head, tail = tmp_path / "head.jsonl", tmp_path / "tail.jsonl"
        head.write_text("".join(lines[: expected.interrupt_after]))
        tail.write_text("".join(lines[expected.interrupt_after :]))
        # Claude Code on SIGINT: the rest of its turn, then exit 0 (the recorded exit).
        return [["on", "SIGINT", [["replay", str(tail)]]], ["replay", str(head)], ["hang"]]
    steps: list[Any] = [["replay", str(RECORDED / f"{name}.jsonl")]]
    if facts["stderr"]:
        steps.append(["stderr", facts["stderr"]])
    code = facts["exit"]
    if name == "error_401_api_retry":
        # Recorded cut short by SIGKILL; the CLI itself would go on retrying.
        steps += [["on", "SIGINT", []], ["hang"]]
    else:
        steps.append(["kill", "SIGKILL"] if code < 0 else ["exit", code])
    return steps


@pytest.mark.parametrize("name", sorted(EXPECTED))
async def test_a_recorded_stream_through_ask(tmp_path: Path, name: str) -> None:
    binary = fake_cli_executable(str(tmp_path), *_program(name, tmp_path), name="claude")
    expected = EXPECTED[name]
    options: dict[str, Any] = {"binary": binary, "kill_grace": 0.2}
    if "--resume" in MANIFEST[name]["args"]:
        options["resume"] = MANIFEST[name]["args"][-1]
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend="claude", **options)
        with trio.fail_after(10):
            if isinstance(expected, Answer):
                response = await rt.ask("a", MANIFEST[name]["prompt"])
            else:
                ref = await rt.tell("a", MANIFEST[name]["prompt"])
                if expected.interrupt_after is not None:
                    await wait_for_status(rt, "a", lambda s: s.session_id is not None, 5)
                    assert await rt.interrupt("a")
                error = (await rt.wait(ref)).error  # type: ignore[union-attr]
    if isinstance(expected, Answer):
        assert isinstance(response, Response)
        assert response.stop_reason is StopReason.COMPLETE
        assert response.text == expected.text
        assert response.final_message == expected.final_message
        assert response.usage == expected.usage
        assert response.cost_usd == pytest.approx(expected.cost_usd)
        assert response.session_id == expected.session_id
        assert response.num_turns == expected.num_turns
        assert response.model == "claude-opus-5-5"
        assert isinstance(response.terminal, ResultEvent)
        assert response.raw["type"] == "result"
        assert tuple(e.name for e in response.events if isinstance(e, ToolUseEvent)) == (
            expected.tools
        )
        assert len([e for e in response.events if isinstance(e, ToolResultEvent)]) == len(
            expected.tools
        )
        # A refused tool call does not fail the turn; the Response says which it was.
        assert tuple(d.tool_use_id for d in response.permission_denials) == expected.denied
        assert response.structured_output is None
    else:
        assert isinstance(error, TurnFailed)
        assert error.reason is expected.reason
        assert expected.message in error.message
        assert error.session_id == expected.session_id
        if expected.usage is not None:
            assert error.usage == expected.usage
        if expected.interrupt_after is not None:
            assert error.exit_status == ExitStatus(0)
