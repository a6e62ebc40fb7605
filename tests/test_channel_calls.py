"""The runtime's requests to a warm agent's CLI (`Runtime.set_model`, `set_permission_mode`,
`context_usage`, `stop_task`), on the fake live CLI: written in band and answered between
turns, a refusal named as the argument it refuses, an unreadable answer ending the process,
settings kept for the next process, and the refusals where no warm CLI exists."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
from test_warm import FAST, ask, pid, start

import agentrt
import agentrt.hooks
from agentrt import ChannelError, ContextCategory, ContextUsage, InvalidOptions, MemoryStore
from agentrt.testing import ScriptedBackend, fake_cli_executable, reply

USAGE = {
    "categories": [
        {"name": "System prompt", "tokens": 3000, "color": "x", "kind": "used"},
        {"name": "Free space", "tokens": 190000, "color": "y", "kind": "free"},
        {"name": 7, "tokens": "not a row"},
    ],
    "totalTokens": 3000,
    "maxTokens": 200000,
    "rawMaxTokens": 200000,
    "percentage": 1.5,
    "model": "claude-haiku-4-5",
}


async def test_each_call_is_answered_between_turns_on_the_same_process(tmp_path: Path) -> None:
    live = {"session_id": "s-1", "answers": {"get_context_usage": USAGE}}
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        await start(rt, tmp_path, live)
        await ask(rt, "one")
        warm = await pid(rt)
        await rt.set_model("a", "claude-haiku-4-5")
        await rt.set_permission_mode("a", "plan")
        await rt.stop_task("a", "task-1")
        usage = await rt.context_usage("a")
        assert (await ask(rt, "two")).text == "2: two" and await pid(rt) == warm
    assert usage == ContextUsage(
        3000,
        200000,
        1.5,
        "claude-haiku-4-5",
        (
            ContextCategory("System prompt", 3000, "used"),
            ContextCategory("Free space", 190000, "free"),
        ),
    )
    assert usage.raw == USAGE


async def test_a_refused_setting_is_named_and_not_kept(tmp_path: Path) -> None:
    live = {"session_id": "s-1", "refuse_requests": ["set_model", "stop_task"]}
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        await start(rt, tmp_path, live)
        await ask(rt, "one")
        with pytest.raises(InvalidOptions, match="no set_model here") as caught:
            await rt.set_model("a", "nonsense")
        assert (caught.value.key, caught.value.value) == ("model", "nonsense")
        with pytest.raises(InvalidOptions) as stopped:
            await rt.stop_task("a", "task-9")
        assert stopped.value.key == "task_id"
        warm = await pid(rt)
        assert (await ask(rt, "two")).text == "2: two" and await pid(rt) == warm
        assert "set_model" not in rt._context.children["a"].slot.channel_settings()


async def test_an_unreadable_answer_ends_the_process(tmp_path: Path) -> None:
    live = {"session_id": "s-1", "answers": {"get_context_usage": {"totalTokens": "many"}}}
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        await start(rt, tmp_path, live)
        await ask(rt, "one")
        warm = await pid(rt)
        with pytest.raises(ChannelError, match="'many' where a number belongs"):
            await rt.context_usage("a")
        # The next turn resumes the conversation on a new process.
        assert (await ask(rt, "two")).text == "1: two" and await pid(rt) != warm


async def test_settings_without_a_process_go_to_the_next_one(tmp_path: Path) -> None:
    # The fake refuses set_model: a setting kept while no process lives is tried on the
    # next one, and dropped (with a warning) when that CLI refuses it; the turn runs.
    live = {"session_id": "s-1", "refuse_requests": ["set_model"]}
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        await start(rt, tmp_path, live)
        assert await rt.context_usage("a") is None  # no CLI yet: nothing to ask
        await rt.stop_task("a", "task-1")  # nor a task to stop
        await rt.set_model("a", "claude-haiku-4-5")
        await rt.set_permission_mode("a", "plan")
        settings = rt._context.children["a"].slot.channel_settings()
        assert settings == {"set_model": "claude-haiku-4-5", "set_permission_mode": "plan"}
        assert (await ask(rt, "one")).text == "1: one"
        assert settings == {"set_permission_mode": "plan"}


async def test_agents_without_a_warm_cli_refuse_each_call(tmp_path: Path) -> None:
    binary = fake_cli_executable(str(tmp_path), ["live", {}], name="claude-b")
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(agentrt.Agent, name="one_shot", backend="claude", binary=binary)
        scripted = ScriptedBackend(default=lambda call: reply("hi"))
        await rt.start_agent(agentrt.Agent, name="in_process", backend=scripted)

        class Hooks(agentrt.Agent):
            def handle_hook(self, hook: agentrt.hooks.Hook) -> None:
                return None

        await rt.start_agent(Hooks, name="live", backend="claude", binary=binary, **FAST)
        calls: list[tuple[str, tuple[Any, ...]]] = [
            ("set_model", ("m",)),
            ("set_permission_mode", ("plan",)),
            ("context_usage", ()),
            ("stop_task", ("t",)),
        ]
        for name, mode in (
            ("one_shot", "one_shot"),
            ("in_process", "in_process"),
            ("live", "live"),
        ):
            for call, arguments in calls:
                with pytest.raises(InvalidOptions, match=f"runs {mode} turns") as caught:
                    await getattr(rt, call)(name, *arguments)
                assert caught.value.key == call


async def test_wrong_arguments_are_refused_before_routing() -> None:
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        with pytest.raises(TypeError, match="model must be a str or None"):
            await rt.set_model("a", 3)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="mode must be a str"):
            await rt.set_permission_mode("a", None)  # type: ignore[arg-type]
        with pytest.raises(InvalidOptions, match="a task id is a non-empty str"):
            await rt.stop_task("a", "")


async def test_a_call_made_as_the_cli_starts_a_turn_of_its_own_is_answered(
    tmp_path: Path,
) -> None:
    # The CLI starts a turn by itself (here right after its answer, as after a background
    # task's end) while the agent is busy with a notification, so that turn waits. A call
    # made then must be answered, not taken for that turn's output: else it waits out its
    # 30 s bound and ends the CLI, background work and all.
    asked, go_on, applying, applied = trio.Event(), trio.Event(), trio.Event(), trio.Event()
    own: list[agentrt.Response] = []

    class Busy(agentrt.Agent):
        async def approve_tool(self, request: agentrt.ToolRequest) -> agentrt.Allow:
            asked.set()
            await go_on.wait()
            return agentrt.Allow()

        async def handle_event(self, event: Any) -> None:
            applying.set()
            await applied.wait()

        def handle_response(self, ref: agentrt.Ref, response: agentrt.Response) -> None:
            if response.origin == "task":
                own.append(response)

    tool = {"subtype": "can_use_tool", "tool_name": "Bash", "input": {}, "tool_use_id": "t-1"}
    own_turn = [
        ["emit", {"type": "system", "subtype": "init", "session_id": "s-1", "model": "fake"}],
        ["emit", {"type": "result", "subtype": "success", "result": "mine", "session_id": "s-1"}],
    ]
    live = {"session_id": "s-1", "turns": [[["ask", tool], ["answer"], *own_turn]]}
    binary = fake_cli_executable(str(tmp_path), ["live", live])
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(
            Busy, name="a", backend="claude", binary=binary, keep_alive=60, background=True, **FAST
        )
        with trio.fail_after(10):
            first = await rt.tell("a", "go")
            await asked.wait()
            await rt.notify("a", "wait for me")  # applied once the turn ends
            go_on.set()
            assert isinstance(await rt.wait(first), agentrt.Completed)
            await applying.wait()
            warm = await pid(rt)
            await rt.set_model("a", "claude-haiku-4-5")
            applied.set()
            while not own:  # noqa: ASYNC110 (the callback is the only word of it)
                await trio.sleep(0.01)
        assert own[0].text == "mine" and await pid(rt) == warm


async def test_a_question_of_a_turn_the_cli_began_right_after_a_result_is_asked(
    tmp_path: Path,
) -> None:
    # The CLI prints its answer, then at once a turn of its own that asks for a tool: read
    # together, the question came after the result; the end of the turn must not drop it,
    # or the CLI waits for its answer for ever.
    own: list[agentrt.Response] = []

    class Allows(agentrt.Agent):
        async def approve_tool(self, request: agentrt.ToolRequest) -> agentrt.Allow:
            return agentrt.Allow()

        def handle_response(self, ref: agentrt.Ref, response: agentrt.Response) -> None:
            if response.origin == "task":
                own.append(response)

    tool = {"subtype": "can_use_tool", "tool_name": "Bash", "input": {}, "tool_use_id": "t-1"}
    init = {"type": "system", "subtype": "init", "session_id": "s-1", "model": "fake"}
    mine = {"type": "result", "subtype": "success", "result": "mine", "session_id": "s-1"}
    answered = {"type": "result", "subtype": "success", "result": "yours", "session_id": "s-1"}
    steps = [["emit", init], ["ask", tool, [answered, init]], ["emit", mine]]
    live = {"session_id": "s-1", "turns": [steps]}
    binary = fake_cli_executable(str(tmp_path), ["live", live])
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        options: dict[str, Any] = {"keep_alive": 60, "background": True, **FAST}
        await rt.start_agent(Allows, name="a", backend="claude", binary=binary, **options)
        with trio.fail_after(10):
            assert (await rt.ask("a", "go")).text == "yours"
            while not own:  # noqa: ASYNC110 (the callback is the only word of it)
                await trio.sleep(0.01)
        assert own[0].text == "mine"
