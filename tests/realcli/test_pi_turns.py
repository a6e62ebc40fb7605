"""The pinned real pi, one process per turn, through the public API against the fake
Anthropic API: turns resumed with ``--session``, a conversation that survives a supervisor
restart, a tool's call and result, failures classified, the CLI's version on every turn;
and warm, one ``pi --mode rpc`` process: an interrupt in band (a prompt that interrupts
runs on it), a restart."""

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

from ._pi import Pi, pi_version
from ._replies import echo, echo_or_hang

pytestmark = pytest.mark.realcli

BOUND = 90


async def test_five_turns_with_a_tool_call_survive_a_supervisor_restart_and_report_the_cli_version(
    pi: Pi, tmp_path: trio.Path
) -> None:
    (pi.project / "notes.txt").write_text("the answer is 42\n")

    def echo_or_read(request: RecordedRequest) -> AnthropicReply:
        # Turn 2 reads a file; the call that carries its result is answered.
        if request.tool_results():
            return AnthropicText("It says 42.")
        if request.last_user_text() == "turn 2":
            return AnthropicToolUse("read", {"path": "notes.txt"})
        return echo(request)

    pi.api.set_script(echo_or_read)
    store_path = str(tmp_path / "sessions.db")
    prompts = [f"turn {n}" for n in range(1, 6)]
    options = pi.agent_options(tools=["read", "ls"])
    with trio.fail_after(BOUND * 3):
        async with open_runtime(store=SQLiteStore(store_path)) as rt:
            await rt.start_agent(Agent, name="coder", backend="pi", **options)
            early = [await rt.ask("coder", p) for p in prompts[:3]]
        # A new runtime on the same store: the agent goes on in the same CLI session.
        async with open_runtime(store=SQLiteStore(store_path)) as rt:
            await rt.start_agent(Agent, name="coder", backend="pi", **options)
            late = [await rt.ask("coder", p) for p in prompts[3:]]
    sessions = {r.session_id for r in early + late}
    assert len(sessions) == 1 and None not in sessions
    answers = [f"said {p!r}" for p in prompts]
    answers[1] = "It says 42."
    assert [r.text for r in early + late] == answers
    assert {r.cli_version for r in early + late} == {pi_version()}
    # The tool's call and result are events of turn 2, before its result.
    kinds = [e.kind for e in early[1].events]
    assert kinds.index("tool_use") < kinds.index("tool_result") < kinds.index("result")
    (result,) = [e for e in early[1].events if e.kind == "tool_result"]
    assert "the answer is 42" in str(result.content) and not result.is_error
    # The tools option is pi's allowlist: nothing else is offered.
    offered = {t["name"] for t in pi.api.message_requests[0].body["tools"]}
    assert offered == {"read", "ls"}
    # The history the fake saw last: every prompt, the file's text after turn 2's.
    history = pi.api.message_requests[-1].texts("user")
    assert history[:2] == prompts[:2] and history[3:] == prompts[2:], history
    assert "the answer is 42" in history[2]
    # One model call per turn and one for the tool's result, and each turn's own usage.
    assert len(pi.api.message_requests) == len(prompts) + 1
    last = late[-1].usage
    assert last is not None and (last.input_tokens, last.output_tokens) == (10, 5)


async def test_a_rejected_key_is_classified(pi: Pi) -> None:
    pi.api.set_script([AnthropicError.authentication()] * 5)
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(Agent, name="coder", backend="pi", **pi.agent_options())
        with trio.fail_after(BOUND), pytest.raises(TurnFailed) as failed:
            await rt.ask("coder", "anything")
    assert failed.value.reason is StopReason.AUTHENTICATION_FAILED, failed.value
    assert failed.value.detail["status"] == 401
    assert len(pi.api.message_requests) == 1


async def test_a_prompt_that_interrupts_a_warm_pi_runs_on_the_same_process(pi: Pi) -> None:
    # when_busy="interrupt" starts the next turn as soon as the interrupted one ended: the
    # interrupt's wait for that end must not take the new turn for its own (issue 40).
    pi.api.set_script(echo_or_hang)
    async with open_runtime(store=MemoryStore()) as rt:
        options = pi.agent_options(keep_alive=60.0, when_busy="interrupt")
        await rt.start_agent(Agent, name="coder", backend="pi", **options)
        with trio.fail_after(BOUND):
            await rt.ask("coder", "first question")
            pid = (await rt.status("coder")).cli_pid
            ref = await rt.tell("coder", "now hang")
            await pi.api.wait_requests(2)
            after = await rt.ask("coder", "instead")
            result = await rt.wait(ref)
            assert (await rt.status("coder")).cli_pid == pid
    assert isinstance(result, Failed) and isinstance(result.error, TurnFailed)
    assert result.error.reason is StopReason.INTERRUPTED
    assert after.text == "said 'instead'"


async def test_a_warm_conversation_keeps_its_process_through_an_interrupt_and_survives_a_restart(
    pi: Pi, tmp_path: trio.Path
) -> None:
    pi.api.set_script(echo_or_hang)
    store_path = str(tmp_path / "sessions.db")
    prompts = [f"turn {n}" for n in range(1, 6)]
    options = pi.agent_options(keep_alive=60.0)
    with trio.fail_after(BOUND * 3):
        async with open_runtime(store=SQLiteStore(store_path)) as rt:
            await rt.start_agent(Agent, name="coder", backend="pi", **options)
            early = [await rt.ask("coder", prompts[0])]
            pid = (await rt.status("coder")).cli_pid
            # Interrupted in band: the turn ends, the process and its session go on.
            ref = await rt.tell("coder", "now hang")
            await pi.api.wait_requests(2)
            assert await rt.interrupt("coder")
            result = await rt.wait(ref)
            early += [await rt.ask("coder", p) for p in prompts[1:3]]
            assert (await rt.status("coder")).cli_pid == pid
        # A new runtime, a new `pi --mode rpc` on the stored session.
        async with open_runtime(store=SQLiteStore(store_path)) as rt:
            await rt.start_agent(Agent, name="coder", backend="pi", **options)
            late = [await rt.ask("coder", p) for p in prompts[3:]]
    assert isinstance(result, Failed) and isinstance(result.error, TurnFailed)
    assert result.error.reason is StopReason.INTERRUPTED
    sessions = {r.session_id for r in early + late}
    assert len(sessions) == 1 and None not in sessions
    assert [r.text for r in early + late] == [f"said {p!r}" for p in prompts]
    history = pi.api.message_requests[-1].texts("user")
    assert history == [prompts[0], "now hang", *prompts[1:]], history
