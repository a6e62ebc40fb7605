"""The pinned real qwen, one process per turn, through the public API against the fake
Anthropic API: turns resumed with ``--resume``, a conversation that survives a supervisor
restart (a read tool run headless in it, a turn interrupted), a hang bounded, failures
classified, the CLI's version on every turn."""

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

from ._qwen import Qwen, qwen_version, user_prompts

pytestmark = pytest.mark.realcli

BOUND = 90


def echo(request: RecordedRequest) -> AnthropicReply:
    # Qwen Code sends the prompt it read on stdin with a blank line after it.
    return AnthropicText(f"said {request.last_user_text().strip()!r}")


async def test_five_turns_with_a_read_and_an_interrupt_survive_a_restart_and_report_the_version(
    qwen: Qwen, tmp_path: trio.Path
) -> None:
    notes = qwen.project / "notes.txt"
    notes.write_text("the answer is 42\n")

    def script(request: RecordedRequest) -> AnthropicReply:
        # Turn 2 reads a file; the call that carries its result is answered.
        if request.tool_results():
            return AnthropicText("It says 42.")
        if request.last_user_text().strip() == "turn 2":
            return AnthropicToolUse("read_file", {"file_path": str(notes)})
        if "hang" in request.last_user_text():
            return AnthropicHang()
        return echo(request)

    qwen.api.set_script(script)
    store_path = str(tmp_path / "sessions.db")
    prompts = [f"turn {n}" for n in range(1, 6)]
    with trio.fail_after(BOUND * 4):
        async with open_runtime(store=SQLiteStore(store_path)) as rt:
            await rt.start_agent(
                Agent, name="coder", backend="qwen", kill_grace=2.0, **qwen.agent_options()
            )
            early = [await rt.ask("coder", p) for p in prompts[:3]]
            # An interrupt ends a headless turn; the session goes on.
            ref = await rt.tell("coder", "now hang")
            await qwen.api.wait_requests(5)
            assert await rt.interrupt("coder")
            result = await rt.wait(ref)
        # A new runtime on the same store: the agent goes on in the same CLI session.
        async with open_runtime(store=SQLiteStore(store_path)) as rt:
            await rt.start_agent(Agent, name="coder", backend="qwen", **qwen.agent_options())
            late = [await rt.ask("coder", p) for p in prompts[3:]]
    assert isinstance(result, Failed) and isinstance(result.error, TurnFailed)
    assert result.error.reason is StopReason.INTERRUPTED
    sessions = {r.session_id for r in early + late}
    assert len(sessions) == 1 and None not in sessions
    answers = [f"said {p!r}" for p in prompts]
    answers[1] = "It says 42."
    assert [r.text for r in early + late] == answers
    assert {r.cli_version for r in early + late} == {qwen_version()}
    calls = qwen.api.message_requests
    # The file's text went back to the model in the call after turn 2's.
    (result,) = calls[2].tool_results()
    assert "the answer is 42" in str(result.get("content"))
    # approval_mode "default", headless: the tools that need an approval are not offered.
    offered = {t["name"] for t in calls[0].body["tools"]}
    assert "read_file" in offered
    assert not offered & {"run_shell_command", "edit", "write_file"}
    # The last call carried every turn: the CLI resumed the session from its file.
    history = user_prompts(calls[-1])
    assert history[:2] == prompts[:2] and "the answer is 42" in history[2], history
    assert history[3:] == [prompts[2], "now hang", *prompts[3:]], history
    # One model call per turn (the interrupted one's too) and one for the file's text: no
    # memory extraction after a turn, nothing else.
    assert len(calls) == len(prompts) + 2
    # Each turn's own usage, though the CLI prints the session's running total.
    last = late[-1].usage
    assert last is not None and (last.input_tokens, last.output_tokens) == (10, 5)


async def test_a_hang_is_bounded_by_the_idle_limit(qwen: Qwen) -> None:
    qwen.api.set_script([AnthropicHang()])
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(
            Agent, name="coder", backend="qwen", idle=3.0, kill_grace=1.0, **qwen.agent_options()
        )
        with trio.fail_after(BOUND), pytest.raises(TurnFailed) as failed:
            await rt.ask("coder", "anything")
    assert failed.value.reason is StopReason.IDLE_TIMEOUT


async def test_a_rejected_key_is_classified_and_fails_at_once(qwen: Qwen) -> None:
    qwen.api.set_script([AnthropicError.authentication()] * 5)
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(Agent, name="coder", backend="qwen", **qwen.agent_options())
        with trio.fail_after(BOUND), pytest.raises(TurnFailed) as failed:
            await rt.ask("coder", "anything")
    assert failed.value.reason is StopReason.AUTHENTICATION_FAILED
    assert "401" in str(failed.value)
    # Qwen Code does not retry a 401.
    assert len(qwen.api.message_requests) == 1


async def test_a_prompt_too_long_is_context_exhausted(qwen: Qwen) -> None:
    qwen.api.set_script([AnthropicError.prompt_too_long()] * 5)
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(Agent, name="coder", backend="qwen", **qwen.agent_options())
        with trio.fail_after(BOUND), pytest.raises(TurnFailed) as failed:
            await rt.ask("coder", "anything")
    assert failed.value.reason is StopReason.CONTEXT_EXHAUSTED, failed.value
    assert failed.value.detail["retryable"] is False


async def test_an_expired_token_is_credential_expired(qwen: Qwen) -> None:
    qwen.api.set_script([AnthropicError.expired_token()] * 5)
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(Agent, name="coder", backend="qwen", **qwen.agent_options())
        with trio.fail_after(BOUND), pytest.raises(TurnFailed) as failed:
            await rt.ask("coder", "anything")
    assert failed.value.reason is StopReason.CREDENTIAL_EXPIRED, failed.value
