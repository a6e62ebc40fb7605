"""The pinned real opencode through the public API against the fake Anthropic API: one
process per turn (turns resumed with ``--session``, a conversation that survives a
supervisor restart, a tool's call and result, failures classified, the CLI's version on
every turn), and warm, one ``opencode acp`` process for many turns (an interrupt in band, a
conversation that survives a restart)."""

from __future__ import annotations

import pytest
import trio

from agentrt import (
    Agent,
    Failed,
    MemoryStore,
    SQLiteStore,
    StopReason,
    TurnFailed,
    open_runtime,
)
from agentrt.testing import (
    AnthropicError,
    AnthropicReply,
    AnthropicText,
    AnthropicToolUse,
    RecordedRequest,
)

from ._opencode import Opencode, opencode_version
from ._replies import echo, echo_or_hang

pytestmark = pytest.mark.realcli

# opencode takes 10 to 20 s a turn on a loaded machine (its start-up).
BOUND = 150


def echo_or_tool(request: RecordedRequest) -> AnthropicReply:
    # Turn 2 runs a shell command; the call that carries its result is answered.
    if request.tool_results():
        return AnthropicText("It says forty-two.")
    if request.last_user_text() == "turn 2":
        return AnthropicToolUse("bash", {"command": "echo forty-two", "description": "echo"})
    return echo(request)


@pytest.mark.long
async def test_five_turns_with_a_tool_call_survive_a_supervisor_restart_and_report_the_cli_version(
    opencode: Opencode, tmp_path: trio.Path
) -> None:
    opencode.api.set_script(echo_or_tool)
    store_path = str(tmp_path / "sessions.db")
    prompts = [f"turn {n}" for n in range(1, 6)]
    with trio.fail_after(BOUND * 4):
        async with open_runtime(store=SQLiteStore(store_path)) as rt:
            await rt.start_agent(
                Agent, name="coder", backend="opencode", **opencode.agent_options()
            )
            early = [await rt.ask("coder", p) for p in prompts[:3]]
        # A new runtime on the same store: the agent goes on in the same CLI session.
        async with open_runtime(store=SQLiteStore(store_path)) as rt:
            await rt.start_agent(
                Agent, name="coder", backend="opencode", **opencode.agent_options()
            )
            late = [await rt.ask("coder", p) for p in prompts[3:]]
    (session,) = {r.session_id for r in early + late}
    assert session is not None and session.startswith("ses_")
    answers = [f"said {p!r}" for p in prompts]
    answers[1] = "It says forty-two."
    assert [r.text for r in early + late] == answers
    assert {r.cli_version for r in early + late} == {opencode_version()}
    # The tool's call and result are events of turn 2, before its result.
    tool_turn = early[1]
    kinds = [e.kind for e in tool_turn.events]
    assert kinds.index("tool_use") < kinds.index("tool_result") < kinds.index("result")
    (result,) = [e for e in tool_turn.events if e.kind == "tool_result"]
    assert "forty-two" in str(result.content) and not result.is_error
    # The history the fake saw last: every prompt, the tool's output after turn 2's.
    history = opencode.api.message_requests[-1].texts("user")
    assert history[:2] == prompts[:2] and history[3:] == prompts[2:], history
    assert "forty-two" in history[2]
    # One model call per turn, and one for the tool's result: the title is given, so none
    # is asked of the model. Each is counted: the tool's turn had two.
    assert len(opencode.api.message_requests) == len(prompts) + 1
    assert tool_turn.usage is not None and tool_turn.usage.output_tokens == 10
    last = late[-1].usage
    assert last is not None and (last.input_tokens, last.output_tokens) == (10, 5)


async def test_a_rejected_key_is_classified(opencode: Opencode) -> None:
    opencode.api.set_script([AnthropicError.authentication()] * 5)
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(Agent, name="coder", backend="opencode", **opencode.agent_options())
        with trio.fail_after(BOUND), pytest.raises(TurnFailed) as failed:
            await rt.ask("coder", "anything")
    assert failed.value.reason is StopReason.AUTHENTICATION_FAILED, failed.value
    assert failed.value.detail["status"] == 401
    assert len(opencode.api.message_requests) == 1


async def test_a_warm_conversation_keeps_its_process_through_an_interrupt_and_survives_a_restart(
    opencode: Opencode, tmp_path: trio.Path
) -> None:
    opencode.api.set_script(echo_or_hang)
    store_path = str(tmp_path / "sessions.db")
    prompts = [f"turn {n}" for n in range(1, 6)]
    options = opencode.agent_options(keep_alive=60.0)
    with trio.fail_after(BOUND * 3):
        async with open_runtime(store=SQLiteStore(store_path)) as rt:
            await rt.start_agent(Agent, name="coder", backend="opencode", **options)
            early = [await rt.ask("coder", prompts[0])]
            pid = (await rt.status("coder")).cli_pid
            early.append(await rt.ask("coder", prompts[1]))
            # Interrupted in band: the turn ends, the process and its session go on.
            ref = await rt.tell("coder", "now hang")
            await opencode.api.wait_requests(3)
            assert await rt.interrupt("coder")
            result = await rt.wait(ref)
            early.append(await rt.ask("coder", prompts[2]))
            assert (await rt.status("coder")).cli_pid == pid
        # A new runtime: a new `opencode acp` loads the stored session (session/load).
        async with open_runtime(store=SQLiteStore(store_path)) as rt:
            await rt.start_agent(Agent, name="coder", backend="opencode", **options)
            late = [await rt.ask("coder", p) for p in prompts[3:]]
    assert isinstance(result, Failed) and isinstance(result.error, TurnFailed)
    assert result.error.reason is StopReason.INTERRUPTED
    (session,) = {r.session_id for r in early + late}
    assert session is not None and session.startswith("ses_")
    assert [r.text for r in early + late] == [f"said {p!r}" for p in prompts]
    assert {r.cli_version for r in early + late} == {opencode_version()}
    assert opencode.api.message_requests[1].texts("user") == prompts[:2]
    history = opencode.api.message_requests[-1].texts("user")
    assert history == [*prompts[:2], "now hang", *prompts[2:]], history
    # One model call per turn, the interrupted one's included: the title agent is off, as
    # --title does per turn.
    assert len(opencode.api.message_requests) == len(prompts) + 1
    for response in (early[1], late[-1]):
        assert response.usage is not None
        assert (response.usage.input_tokens, response.usage.output_tokens) == (10, 5)
