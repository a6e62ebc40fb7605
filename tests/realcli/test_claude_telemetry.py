"""Telemetry of turns of the pinned real ``claude`` binary against the fake API: the span of
a complete turn (its session, tokens, model, exit code) under the caller's span, and the
interrupt and kill events of a turn whose Bash tool runs in a session of its own."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import trio
from opentelemetry.trace import StatusCode
from otel_helpers import Telemetry, events, parent_id, recording, span_id

from agentrt import Agent, MemoryStore, Runtime, StopReason, TurnFailed, open_runtime
from agentrt.testing import AnthropicText, AnthropicToolUse

from ._claude import Claude, wait_for_process

pytestmark = pytest.mark.realcli

TURN_BOUND = 60  # generous: CI machines are shared
PROMPT = "PROMPTCANARY say hello"


@pytest.fixture
def otel() -> Iterator[Telemetry]:
    with recording() as telemetry:
        yield telemetry


async def start_with_bash(rt: Runtime, claude: Claude) -> None:
    await rt.start_agent(
        Agent,
        name="coder",
        backend="claude",
        kill_grace=1.0,
        **claude.agent_options(allowed_tools=["Bash"]),
    )


async def test_a_real_turn_is_a_span_with_its_session_tokens_and_model(
    claude: Claude, otel: Telemetry
) -> None:
    claude.api.set_script([AnthropicText("ANSWERCANARY hello", input_tokens=11, output_tokens=7)])
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(Agent, name="coder", backend="claude", **claude.agent_options())
        with trio.fail_after(TURN_BOUND), otel.tracer.start_as_current_span("caller") as caller:
            response = await rt.ask("coder", PROMPT)

    [span] = otel.named("invoke_agent")
    assert parent_id(span) == span_id(caller)
    attributes = dict(span.attributes or {})
    assert response.session_id is not None
    assert attributes["gen_ai.conversation.id"] == response.session_id
    assert attributes["agentrt.stop_reason"] == "complete"
    assert (attributes["gen_ai.usage.input_tokens"], attributes["gen_ai.usage.output_tokens"]) == (
        11,
        7,
    )
    assert attributes["gen_ai.response.model"] == response.model
    assert attributes["agentrt.cost_usd"] == response.cost_usd
    assert attributes["process.exit.code"] == 0
    assert attributes["agentrt.events.retained"] == response.event_coverage.retained
    assert {"agentrt.spawn", "agentrt.first_event"} <= set(events(span))
    assert span.status.status_code is StatusCode.UNSET
    exported = otel.exported_text()
    assert "PROMPTCANARY" not in exported and "ANSWERCANARY" not in exported
    assert "sk-" not in exported  # the dummy key the agent's environment carries
    assert otel.total("agentrt.turns", **{"agentrt.stop_reason": "complete"}) == 1
    assert otel.count("agentrt.turn.time_to_first_event", **{"agentrt.backend": "claude"}) == 1


async def test_an_interrupted_real_turn_is_an_error_span_with_the_interrupt(
    claude: Claude, otel: Telemetry
) -> None:
    claude.api.set_script(
        [AnthropicToolUse("Bash", {"command": "echo start; sleep 300", "description": "Run"})]
    )
    async with open_runtime(store=MemoryStore()) as rt:
        await start_with_bash(rt, claude)
        with trio.fail_after(TURN_BOUND):
            async with trio.open_nursery() as nursery:

                async def interrupt_once_the_tool_runs() -> None:
                    await wait_for_process(claude.marker, lambda p: p.cmdline == "sleep 300")
                    assert await rt.interrupt("coder")

                nursery.start_soon(interrupt_once_the_tool_runs)
                with pytest.raises(TurnFailed) as failed:
                    await rt.ask("coder", "run it")
    assert failed.value.reason is StopReason.INTERRUPTED

    [span] = otel.named("invoke_agent")
    found = events(span)
    assert found["agentrt.interrupt"] == {"agentrt.stop_reason": "interrupted"}
    assert span.status.status_code is StatusCode.ERROR
    assert dict(span.attributes or {})["error.type"] == "interrupted"


async def test_a_process_a_real_turn_leaves_behind_is_killed_and_counted(
    claude: Claude, otel: Telemetry
) -> None:
    # The tool starts a process in a session of its own and returns: the turn completes
    # with it still running, and the ladder kills it at the turn's end.
    command = "setsid sleep 300 < /dev/null > /dev/null 2>&1 & echo started"
    claude.api.set_script(
        [AnthropicToolUse("Bash", {"command": command, "description": "Run"}), AnthropicText("ok")]
    )
    async with open_runtime(store=MemoryStore()) as rt:
        await start_with_bash(rt, claude)
        with trio.fail_after(TURN_BOUND):
            response = await rt.ask("coder", "run it")
    assert response.stop_reason is StopReason.COMPLETE

    [span] = otel.named("invoke_agent")
    killed = events(span)["agentrt.kill"]["agentrt.processes.killed"]
    assert killed >= 1
    assert dict(span.attributes or {})["agentrt.processes.killed"] == killed
