"""The runtime's requests to a warm agent's CLI on the pinned real claude, through the public
API: ``set_model`` and ``set_permission_mode`` between turns (the fake API sees the new model;
the next process resumes with both), ``context_usage`` (the CLI's numbers), ``stop_task`` of
a background Bash task during a turn, and the refusals on agents without a warm CLI."""

from __future__ import annotations

import os
import signal
from typing import Any

import pytest
import trio
from proc_helpers import wait_for_status

from agentrt import (
    Agent,
    Completed,
    ContextUsage,
    InvalidOptions,
    MemoryStore,
    RawEvent,
    open_runtime,
)
from agentrt.testing import AnthropicReply, AnthropicText, AnthropicToolUse, RecordedRequest

from ._claude import Claude

pytestmark = pytest.mark.realcli

TURN_BOUND = 60
NEW_MODEL = "claude-haiku-4-5"


def echo(request: RecordedRequest) -> AnthropicReply:
    return AnthropicText(f"heard {len(request.messages)} messages")


def models(claude: Claude) -> list[Any]:
    return [r.body.get("model") for r in claude.api.message_requests]


async def test_set_model_between_turns_reaches_the_model_api(claude: Claude) -> None:
    claude.api.set_script(echo)
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(
            Agent, name="coder", backend="claude", keep_alive=60, **claude.agent_options()
        )
        with trio.fail_after(TURN_BOUND):
            await rt.ask("coder", "one")
            pid = (await rt.status("coder")).cli_pid
            before = len(claude.api.message_requests)
            await rt.set_model("coder", NEW_MODEL)
            response = await rt.ask("coder", "two")
        assert (await rt.status("coder")).cli_pid == pid  # in band: the same process
    assert NEW_MODEL not in models(claude)[:before]
    assert models(claude)[before:] and set(models(claude)[before:]) == {NEW_MODEL}
    assert response.init is not None


async def test_settings_hold_for_the_next_process(claude: Claude) -> None:
    claude.api.set_script(echo)
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(
            Agent, name="coder", backend="claude", keep_alive=60, **claude.agent_options()
        )
        with trio.fail_after(TURN_BOUND):
            await rt.ask("coder", "one")
            await rt.set_model("coder", NEW_MODEL)
            await rt.set_permission_mode("coder", "plan")
            first = (await rt.status("coder")).cli_pid
            assert first is not None
            # The idle CLI dies; the next turn resumes on a new process, with both settings.
            os.kill(first, signal.SIGKILL)
            await wait_for_status(rt, "coder", lambda s: s.cli_pid != first)
            before = len(claude.api.message_requests)
            await rt.ask("coder", "two")
            assert (await rt.status("coder")).cli_pid not in (None, first)
            usage = await rt.context_usage("coder")
    assert set(models(claude)[before:]) == {NEW_MODEL}
    assert usage is not None and usage.model == NEW_MODEL


async def test_set_permission_mode_changes_what_the_cli_allows(claude: Claude) -> None:
    # In the default mode a Write nobody approves is denied; in acceptEdits it runs.
    def script(request: RecordedRequest) -> AnthropicReply:
        last = request.messages[-1].get("content")
        if isinstance(last, list) and any(b.get("type") == "tool_result" for b in last):
            return AnthropicText("wrote")
        target = str(claude.project / "made.txt")
        return AnthropicToolUse("Write", {"file_path": target, "content": "x"})

    claude.api.set_script(script)
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(
            Agent,
            name="coder",
            backend="claude",
            keep_alive=60,
            **claude.agent_options(permission_mode="default"),
        )
        with trio.fail_after(TURN_BOUND):
            first = await rt.ask("coder", "one")
            assert not (claude.project / "made.txt").exists()
            await rt.set_permission_mode("coder", "acceptEdits")
            second = await rt.ask("coder", "two")
    assert [d.tool_name for d in first.permission_denials] == ["Write"]
    assert second.permission_denials == ()
    assert (claude.project / "made.txt").read_text() == "x"


async def test_context_usage_is_the_clis_count(claude: Claude) -> None:
    claude.api.set_script(echo)
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(
            Agent, name="coder", backend="claude", keep_alive=60, **claude.agent_options()
        )
        with trio.fail_after(TURN_BOUND):
            assert await rt.context_usage("coder") is None  # no CLI yet
            await rt.ask("coder", "one")
            usage = await rt.context_usage("coder")
            again = await rt.ask("coder", "two")
    assert isinstance(usage, ContextUsage)
    assert 0 < usage.total_tokens <= usage.max_tokens and 0 < usage.percentage <= 100
    assert usage.categories and all(c.tokens >= 0 for c in usage.categories)
    assert sum(c.tokens for c in usage.categories if c.kind == "used") <= usage.total_tokens + 1
    assert again.text  # the process took its next turn after the request


async def test_stop_task_stops_a_background_command_during_a_turn(claude: Claude) -> None:
    # The model starts `sleep 300` in the background, then waits in a foreground Bash; the
    # test stops the background task meanwhile, and the CLI reports it stopped.
    started: list[str] = []
    seen = trio.Event()

    class Watches(Agent):
        def handle_stream_event(self, event: Any) -> None:
            data = getattr(event, "data", None)
            if isinstance(data, dict) and data.get("subtype") == "task_started":
                started.append(data["task_id"])
                seen.set()

    def script(request: RecordedRequest) -> AnthropicReply:
        results = sum(
            1
            for m in request.messages
            if isinstance(m.get("content"), list)
            for b in m["content"]
            if b.get("type") == "tool_result"
        )
        if results == 0:
            background = {"command": "sleep 300", "description": "Wait", "run_in_background": True}
            return AnthropicToolUse("Bash", background)
        if results == 1:
            return AnthropicToolUse("Bash", {"command": "sleep 4", "description": "Pause"})
        return AnthropicText("done")

    claude.api.set_script(script)
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(
            Watches,
            name="coder",
            backend="claude",
            keep_alive=60,
            **claude.agent_options(allowed_tools=["Bash"]),
        )
        with trio.fail_after(TURN_BOUND):
            ref = await rt.tell("coder", "go")
            await seen.wait()
            await rt.stop_task("coder", started[0])
            result = await rt.wait(ref)
    assert isinstance(result, Completed)
    frames = [e.data for e in result.response.events if isinstance(e, RawEvent)]
    ends = [
        f
        for f in frames
        if isinstance(f, dict)
        and f.get("subtype") == "task_notification"
        and f.get("task_id") == started[0]
    ]
    assert ends and ends[0].get("status") in ("stopped", "killed"), frames


@pytest.mark.parametrize(
    ("options", "mode"),
    [({}, "one_shot"), ({"keep_alive": None}, "one_shot")],
)
async def test_an_agent_without_a_warm_cli_refuses_them(
    claude: Claude, options: dict[str, Any], mode: str
) -> None:
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(
            Agent, name="coder", backend="claude", **claude.agent_options(**options)
        )
        calls = [
            rt.set_model("coder", NEW_MODEL),
            rt.set_permission_mode("coder", "plan"),
            rt.context_usage("coder"),
            rt.stop_task("coder", "t1"),
        ]
        for call in calls:
            with pytest.raises(InvalidOptions, match=f"runs {mode} turns, without a warm CLI"):
                await call
