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
    AnthropicHang,
    AnthropicReply,
    AnthropicText,
    AnthropicToolUse,
    RecordedRequest,
)

from ._opencode import Opencode, opencode_version

pytestmark = pytest.mark.realcli

# opencode takes 10 to 20 s a turn on a loaded machine (its start-up).
BOUND = 150


def echo(request: RecordedRequest) -> AnthropicReply:
    return AnthropicText(f"said {request.last_user_text()!r}")


@pytest.mark.long
async def test_five_turns_survive_a_supervisor_restart(
    opencode: Opencode, tmp_path: trio.Path
) -> None:
    opencode.api.set_script(echo)
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
    assert [r.text for r in early + late] == [f"said {p!r}" for p in prompts]
    assert {r.cli_version for r in early + late} == {opencode_version()}
    assert opencode.api.message_requests[-1].texts("user") == prompts
    # One model call per turn: the title is given, so none is asked of the model.
    assert len(opencode.api.message_requests) == len(prompts)
    last = late[-1].usage
    assert last is not None and (last.input_tokens, last.output_tokens) == (10, 5)


async def test_a_tool_call_and_its_result_are_events(opencode: Opencode) -> None:
    opencode.api.set_script(
        [
            AnthropicToolUse("bash", {"command": "echo forty-two", "description": "echo"}),
            AnthropicText("It says forty-two."),
        ]
    )
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(Agent, name="coder", backend="opencode", **opencode.agent_options())
        with trio.fail_after(BOUND):
            response = await rt.ask("coder", "run echo")
    assert response.text == "It says forty-two."
    kinds = [e.kind for e in response.events]
    assert kinds.index("tool_use") < kinds.index("tool_result") < kinds.index("result")
    (result,) = [e for e in response.events if e.kind == "tool_result"]
    assert "forty-two" in str(result.content) and not result.is_error
    # Two model calls, each counted.
    assert response.usage is not None and response.usage.output_tokens == 10


async def test_a_rejected_key_is_classified(opencode: Opencode) -> None:
    opencode.api.set_script([AnthropicError.authentication()] * 5)
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(Agent, name="coder", backend="opencode", **opencode.agent_options())
        with trio.fail_after(BOUND), pytest.raises(TurnFailed) as failed:
            await rt.ask("coder", "anything")
    assert failed.value.reason is StopReason.AUTHENTICATION_FAILED, failed.value
    assert failed.value.detail["status"] == 401
    assert len(opencode.api.message_requests) == 1


async def test_a_warm_opencode_runs_its_turns_on_one_acp_process(opencode: Opencode) -> None:
    def script(request: RecordedRequest) -> AnthropicReply:
        if "hang" in request.last_user_text():
            return AnthropicHang()
        return echo(request)

    opencode.api.set_script(script)
    async with open_runtime(store=MemoryStore()) as rt:
        options = opencode.agent_options(keep_alive=60.0)
        await rt.start_agent(Agent, name="coder", backend="opencode", **options)
        with trio.fail_after(BOUND):
            first = await rt.ask("coder", "first question")
            pid = (await rt.status("coder")).cli_pid
            second = await rt.ask("coder", "second question")
            ref = await rt.tell("coder", "now hang")
            await opencode.api.wait_requests(3)
            assert await rt.interrupt("coder")
            result = await rt.wait(ref)
            after = await rt.ask("coder", "after the interrupt")
            assert (await rt.status("coder")).cli_pid == pid
    assert (first.text, second.text) == ("said 'first question'", "said 'second question'")
    assert first.session_id is not None and first.session_id.startswith("ses_")
    assert second.session_id == after.session_id == first.session_id
    assert first.cli_version == after.cli_version == opencode_version()
    assert isinstance(result, Failed) and isinstance(result.error, TurnFailed)
    assert result.error.reason is StopReason.INTERRUPTED
    assert after.text == "said 'after the interrupt'"
    # One model call per turn: the title agent is off, as --title does per turn.
    assert len(opencode.api.message_requests) == 4
    assert opencode.api.message_requests[1].texts("user") == ["first question", "second question"]
    assert second.usage is not None
    assert (second.usage.input_tokens, second.usage.output_tokens) == (10, 5)


async def test_a_warm_conversation_survives_a_supervisor_restart(
    opencode: Opencode, tmp_path: trio.Path
) -> None:
    opencode.api.set_script(echo)
    store_path = str(tmp_path / "sessions.db")
    prompts = [f"turn {n}" for n in range(1, 6)]
    with trio.fail_after(BOUND * 3):
        async with open_runtime(store=SQLiteStore(store_path)) as rt:
            options = opencode.agent_options(keep_alive=60.0)
            await rt.start_agent(Agent, name="coder", backend="opencode", **options)
            early = [await rt.ask("coder", p) for p in prompts[:3]]
        # A new runtime: a new `opencode acp` loads the stored session (session/load).
        async with open_runtime(store=SQLiteStore(store_path)) as rt:
            await rt.start_agent(Agent, name="coder", backend="opencode", **options)
            late = [await rt.ask("coder", p) for p in prompts[3:]]
    (session,) = {r.session_id for r in early + late}
    assert session is not None and session.startswith("ses_")
    assert [r.text for r in early + late] == [f"said {p!r}" for p in prompts]
    assert {r.cli_version for r in early + late} == {opencode_version()}
    assert opencode.api.message_requests[-1].texts("user") == prompts
    # One model call per turn: the title is given, so none is asked of the model.
    assert len(opencode.api.message_requests) == len(prompts)
    last = late[-1].usage
    assert last is not None and (last.input_tokens, last.output_tokens) == (10, 5)
    assert len(opencode.api.message_requests) == len(prompts)
