"""Hook events on the pinned real claude against the fake API, through the public API: an
agent that lists every kind sees, typed, what the CLI fires for a prompt,
a tool that fails, a tool that runs, the batch after it, a
permission request, a permission denial, a subagent's start and stop, a model switch made
during a turn, a compaction, and the end of the reply; and its answers act."""

from __future__ import annotations

from typing import Any

import pytest
import trio

import agentrt
import agentrt.hooks
from agentrt import (
    AddContext,
    Agent,
    Block,
    MemoryStore,
    ToolUseEvent,
    open_runtime,
)
from agentrt.hooks import Hook
from agentrt.testing import (
    AnthropicHang,
    AnthropicReply,
    AnthropicText,
    AnthropicToolUse,
    RecordedRequest,
)

from ._claude import Claude

pytestmark = pytest.mark.realcli

TURN_BOUND = 90


class Records(Agent):
    hooks = agentrt.hooks.HOOK_KINDS
    seen: list[Hook] = []
    answers: dict[str, Any] = {}

    def handle_hook(self, hook: Hook) -> Any:
        type(self).seen.append(hook)
        return type(self).answers.get(hook.kind)


def tool_results(request: RecordedRequest) -> int:
    return sum(
        1
        for m in request.messages
        if isinstance(m.get("content"), list)
        for b in m["content"]
        if isinstance(b, dict) and b.get("type") == "tool_result"
    )


def kinds(agent: type[Records]) -> set[str]:
    return {h.kind for h in agent.seen}


def of(agent: type[Records], cls: type[Hook]) -> list[Any]:
    return [h for h in agent.seen if type(h) is cls]


async def run(claude: Claude, agent: type[Records], prompt: str, **options: Any) -> Any:
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(
            agent, name="coder", backend="claude", keep_alive=60, **claude.agent_options(**options)
        )
        with trio.fail_after(TURN_BOUND):
            return await rt.ask("coder", prompt)


async def test_a_turn_with_tools_fires_its_hooks_typed(claude: Claude) -> None:
    missing = str(claude.project / "missing.txt")

    def script(request: RecordedRequest) -> AnthropicReply:
        done = tool_results(request)
        if done == 0:
            return AnthropicToolUse("Read", {"file_path": missing})
        if done == 1:
            return AnthropicToolUse("Bash", {"command": "echo hi", "description": "Echo"})
        if done == 2:  # not allowed, nobody approves: denied
            return AnthropicToolUse("Write", {"file_path": missing, "content": "x"})
        return AnthropicText("done")

    claude.api.set_script(script)
    agent = type("A", (Records,), {"seen": [], "answers": {}})
    response = await run(claude, agent, "go", allowed_tools=["Bash", "Read"])
    assert response.text == "done"
    fired = kinds(agent)
    assert {
        "prompt_submitted",
        "before_tool",
        "tool_failed",
        "after_tool",
        "tool_batch_done",
        "stopping",
    } <= fired, " ".join(sorted(fired))
    [prompt] = of(agent, agentrt.hooks.UserPromptSubmitHook)
    assert prompt.prompt == "go" and prompt.cwd == str(claude.project)
    assert prompt.session_id == response.session_id
    [failed] = of(agent, agentrt.hooks.PostToolUseFailureHook)
    assert failed.tool_name == "Read" and failed.error and failed.tool_use_id
    [ran] = [h for h in of(agent, agentrt.hooks.PostToolUseHook) if h.tool_name == "Bash"]
    assert ran.tool_input["command"] == "echo hi" and "hi" in str(ran.tool_response)
    batches = of(agent, agentrt.hooks.PostToolBatchHook)
    assert batches and all(isinstance(b.tool_calls, tuple) for b in batches)
    assert any(
        h.tool_name == "Write" for h in of(agent, agentrt.hooks.PermissionRequestHook)
    ) or any(h.tool_name == "Write" for h in of(agent, agentrt.hooks.PermissionDeniedHook)), fired
    assert of(agent, agentrt.hooks.StopHook)[-1].stop_hook_active is False


async def test_a_subagent_fires_its_start_and_stop(claude: Claude) -> None:
    def script(request: RecordedRequest) -> AnthropicReply:
        texts = " ".join(request.texts())
        if "say hi as the subagent" in texts:
            return AnthropicText("hi" if tool_results(request) == 0 else "ok")
        if tool_results(request) == 0:
            task = {
                "description": "Look",
                "prompt": "say hi as the subagent",
                "subagent_type": "general-purpose",
            }
            return AnthropicToolUse("Task", task)
        return AnthropicText("ok")

    claude.api.set_script(script)
    agent = type("A", (Records,), {"seen": [], "answers": {}})
    await run(claude, agent, "look around", allowed_tools=["Task"])
    fired = kinds(agent)
    assert {"subagent_started", "subagent_stopping"} <= fired, fired
    [started] = of(agent, agentrt.hooks.SubagentStartHook)
    [stopped] = of(agent, agentrt.hooks.SubagentStopHook)
    assert started.agent_id and started.agent_id == stopped.agent_id
    assert started.agent_type == "general-purpose"


async def test_answers_act_block_a_tool_and_add_context(claude: Claude) -> None:
    def script(request: RecordedRequest) -> AnthropicReply:
        if tool_results(request) == 0:
            return AnthropicToolUse("Bash", {"command": "touch made.txt", "description": "T"})
        return AnthropicText("after the tool")

    claude.api.set_script(script)
    answers = {
        "before_tool": Block("no shell today"),
        "prompt_submitted": AddContext("the context note"),
    }
    agent = type("A", (Records,), {"seen": [], "answers": answers})
    await run(claude, agent, "go", allowed_tools=["Bash"])
    assert not (claude.project / "made.txt").exists()
    texts = " ".join(claude.api.message_requests[-1].texts())
    assert "no shell today" in texts and "the context note" in texts


async def test_a_model_switch_during_a_turn_fires_its_hooks(claude: Claude) -> None:
    in_tool = trio.Event()

    class Switches(Records):
        def handle_stream_event(self, event: Any) -> None:
            if isinstance(event, ToolUseEvent):
                in_tool.set()

    def script(request: RecordedRequest) -> AnthropicReply:
        if tool_results(request) == 0:
            return AnthropicToolUse("Bash", {"command": "sleep 3", "description": "Wait"})
        return AnthropicText(f"answered by {request.body.get('model')}")

    claude.api.set_script(script)
    agent = type("S", (Switches,), {"seen": [], "answers": {}})
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(
            agent,
            name="coder",
            backend="claude",
            keep_alive=60,
            **claude.agent_options(allowed_tools=["Bash"]),
        )
        with trio.fail_after(TURN_BOUND):
            ref = await rt.tell("coder", "go")
            await in_tool.wait()
            await rt.set_model("coder", "claude-haiku-4-5")
            result = await rt.wait(ref)
    assert isinstance(result, agentrt.Completed)
    assert result.response.text == "answered by claude-haiku-4-5"
    fired = kinds(agent)
    assert {"model_switching", "model_switched"} <= fired, fired
    [switching] = of(agent, agentrt.hooks.PreModelSwitchHook)
    assert switching.to_model == "claude-haiku-4-5" and switching.source == "sdk"


async def test_compact_fires_its_hooks(claude: Claude) -> None:
    claude.api.set_script(lambda request: AnthropicText("a summary of it all"))
    agent = type("A", (Records,), {"seen": [], "answers": {}})
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(
            agent, name="coder", backend="claude", keep_alive=60, **claude.agent_options()
        )
        with trio.fail_after(TURN_BOUND):
            await rt.ask("coder", "one")
            await rt.ask("coder", "/compact")
    fired = kinds(agent)
    assert {"compacting", "compacted"} <= fired, fired
    [before] = of(agent, agentrt.hooks.PreCompactHook)
    assert before.trigger == "manual"
    assert of(agent, agentrt.hooks.PostCompactHook)[0].compact_summary


def version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


async def test_an_interrupt_in_band_fires_the_interrupt_hook(claude: Claude) -> None:
    # Claude Code sends Interrupt from 2.1.337; the pinned 2.1.332 accepts it and never does.
    if version(claude.version) < (2, 1, 337):
        pytest.skip(f"claude {claude.version} sends no Interrupt hook (2.1.337 does)")
    agent = type("Interrupted", (Records,), {"hooks": ("interrupted",), "seen": []})
    claude.api.set_script([AnthropicHang(), AnthropicText("after")])
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(
            agent, name="coder", backend="claude", keep_alive=30, **claude.agent_options()
        )
        with trio.fail_after(TURN_BOUND):
            ref = await rt.tell("coder", "one")
            await claude.api.wait_requests(1)  # the model call is out: interrupt it
            await rt.interrupt("coder")
            outcome = await rt.wait(ref)
    assert isinstance(outcome, agentrt.Failed), outcome
    assert isinstance(outcome.error, agentrt.TurnFailed)
    assert outcome.error.reason is agentrt.StopReason.INTERRUPTED
    [hook] = agent.seen
    assert isinstance(hook, agentrt.hooks.InterruptHook)
    assert (hook.source, hook.via) == ("user", "client")
