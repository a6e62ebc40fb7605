"""Warm sessions (``keep_alive``) on the pinned codex, through the public API: one
``codex app-server`` runs the conversation's turns (`AgentStatus.cli_pid`), an interrupt in
band keeps it (a prompt that interrupts runs on it), a command's tree dies with its turn
while the server lives, and a warm thread continues per turn (``codex exec resume``) after
the agent stops."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
from proc_helpers import KILL_POINTS, Watcher, ask_racing_a_kill, marked, running, wait_until

import agentrt
from agentrt import StopReason, ToolUseEvent
from agentrt.testing import (
    FakeOpenAI,
    OpenAIHang,
    OpenAIReply,
    OpenAIRequest,
    OpenAIScript,
    open_fake_openai,
)

from ._codex import MARKER_VAR, Place, codex_binary, codex_place, find_marked

BINARY = codex_binary()
pytestmark = [
    pytest.mark.realcli,
    pytest.mark.skipif(BINARY is None, reason="codex is not installed: run `make codex-cli`"),
]
BOUND = 60


@asynccontextmanager
async def warm_codex(
    script: OpenAIScript, **extra: Any
) -> AsyncIterator[tuple[FakeOpenAI, Place, agentrt.Runtime, Watcher]]:
    assert BINARY is not None
    async with (
        open_fake_openai(script) as api,
        codex_place(api) as place,
        agentrt.open_runtime(store=agentrt.MemoryStore()) as rt,
    ):
        agent = Watcher()
        await rt.start_agent(
            agent,
            name="coder",
            backend="codex",
            kill_grace=1.0,
            keep_alive=60,
            **place.raw_options(BINARY, **extra),
        )
        yield api, place, rt, agent


def user_texts(api: FakeOpenAI) -> list[str]:
    """The user messages the latest model call carried: the conversation so far."""
    return [
        part["text"]
        for item in api.model_calls[-1].input_items()
        if item.get("type") == "message" and item.get("role") == "user"
        for part in item["content"]
        if part.get("type") == "input_text"
    ]


async def test_three_turns_on_one_app_server() -> None:
    script = [OpenAIReply.text("one"), OpenAIReply.text("two"), OpenAIReply.text("three")]
    async with warm_codex(script) as (api, _, rt, _):
        with trio.fail_after(BOUND):
            first = await rt.ask("coder", "Question one")
            pid = (await rt.status("coder")).cli_pid
            second = await rt.ask("coder", "Question two")
            third = await rt.ask("coder", "Question three")
        assert pid is not None and (await rt.status("coder")).cli_pid == pid
    assert [r.text for r in (first, second, third)] == ["one", "two", "three"]
    assert first.session_id is not None
    assert {second.session_id, third.session_id} == {first.session_id}
    history = user_texts(api)
    assert [t for t in history if t.startswith("Question")] == [
        "Question one",
        "Question two",
        "Question three",
    ]
    assert not running(pid)


async def test_an_interrupt_in_band_keeps_the_app_server() -> None:
    script: OpenAIScript = [OpenAIReply.text("one"), OpenAIHang(), OpenAIReply.text("after")]
    async with warm_codex(script) as (api, _, rt, _):
        with trio.fail_after(BOUND):
            await rt.ask("coder", "first")
            pid = (await rt.status("coder")).cli_pid
            ref = await rt.tell("coder", "hang")
            await wait_until(lambda: len(api.model_calls) >= 2, BOUND)
            assert await rt.interrupt("coder")
            result = await rt.wait(ref)
            assert isinstance(result, agentrt.Failed)
            assert isinstance(result.error, agentrt.TurnFailed)
            assert result.error.reason is StopReason.INTERRUPTED
            after = await rt.ask("coder", "again")
        assert (await rt.status("coder")).cli_pid == pid
    assert after.text == "after"


async def test_a_prompt_that_interrupts_runs_on_the_same_app_server() -> None:
    # when_busy="interrupt" starts the next turn as soon as the interrupted one ended: the
    # interrupt's wait for that end must not take the new turn for its own (issue 40).
    script: OpenAIScript = [OpenAIReply.text("one"), OpenAIHang(), OpenAIReply.text("after")]
    async with warm_codex(script, when_busy="interrupt") as (api, _, rt, _):
        with trio.fail_after(BOUND):
            await rt.ask("coder", "first")
            pid = (await rt.status("coder")).cli_pid
            ref = await rt.tell("coder", "hang")
            await wait_until(lambda: len(api.model_calls) >= 2, BOUND)
            after = await rt.ask("coder", "again")
            result = await rt.wait(ref)
        assert (await rt.status("coder")).cli_pid == pid
    assert isinstance(result, agentrt.Failed) and isinstance(result.error, agentrt.TurnFailed)
    assert result.error.reason is StopReason.INTERRUPTED
    assert after.text == "after"


async def test_a_commands_tree_dies_with_its_turn_while_the_server_lives() -> None:
    script = [
        OpenAIReply.exec_command("sleep 300", yield_time_ms=60_000),
        OpenAIReply.text("next"),
    ]
    async with warm_codex(script, sandbox="danger-full-access") as (_, place, rt, agent):
        with trio.fail_after(BOUND):
            ref = await rt.tell("coder", "run it")
            await agent.wait_for(lambda: any(isinstance(e, ToolUseEvent) for e in agent.events))
            (sleeper,) = await wait_until(lambda: find_marked(place.marker, "sleep"), BOUND)
            pid = (await rt.status("coder")).cli_pid
            assert await rt.interrupt("coder")
            await rt.wait(ref)
            assert not running(sleeper)  # gone when the turn ended
            assert pid is not None and running(pid)
            assert (await rt.ask("coder", "next")).text == "next"
        assert (await rt.status("coder")).cli_pid == pid


def last_user_text(request: OpenAIRequest) -> str:
    texts = [
        part["text"]
        for item in request.input_items()
        if item.get("type") == "message" and item.get("role") == "user"
        for part in item["content"]
        if part.get("type") == "input_text"
    ]
    return texts[-1] if texts else ""


async def test_an_app_server_killed_racing_the_next_ask_loses_no_prompt() -> None:
    # However the kill and the ask interleave, before the server printed a line of the
    # turn, the ask runs on a new server resuming the thread, and the model sees its prompt.
    def echo(request: OpenAIRequest) -> OpenAIReply:
        return OpenAIReply.text(f"said {last_user_text(request)!r}")

    async with warm_codex(echo) as (api, place, rt, _):
        with trio.fail_after(BOUND):
            first = await rt.ask("coder", "prompt 0")
        for round in range(1, len(KILL_POINTS) + 1):  # each kill point once
            prompt = f"prompt {round}"
            pid = (await rt.status("coder")).cli_pid
            with trio.fail_after(BOUND):
                where = KILL_POINTS[round % len(KILL_POINTS)]
                response = await ask_racing_a_kill(rt, "coder", prompt, where, group=True)
            assert response.text == f"said {prompt!r}", where
            assert response.session_id == first.session_id
            assert (
                pid is not None and not running(pid) and (await rt.status("coder")).cli_pid != pid
            )
        history = [t for t in user_texts(api) if t.startswith("prompt ")]
        assert history == [f"prompt {n}" for n in range(len(KILL_POINTS) + 1)]
    assert marked(MARKER_VAR, place.marker) == []


async def test_a_warm_thread_continues_per_turn() -> None:
    script = [OpenAIReply.text("warm"), OpenAIReply.text("cold")]
    async with open_fake_openai(script) as api, codex_place(api) as place:
        assert BINARY is not None
        store = agentrt.MemoryStore()
        async with agentrt.open_runtime(store=store) as rt:
            await rt.start_agent(
                agentrt.Agent,
                name="coder",
                backend="codex",
                keep_alive=60,
                **place.raw_options(BINARY),
            )
            with trio.fail_after(BOUND):
                warm = await rt.ask("coder", "on the server")
        async with agentrt.open_runtime(store=store) as rt:
            await rt.start_agent(
                agentrt.Agent, name="coder", backend="codex", **place.raw_options(BINARY)
            )
            with trio.fail_after(BOUND):
                cold = await rt.ask("coder", "per turn")
        assert cold.session_id == warm.session_id
        assert [t for t in user_texts(api) if t in ("on the server", "per turn")] == [
            "on the server",
            "per turn",
        ]


class Decides(agentrt.Agent):
    def __init__(self, decision: agentrt.Allow | agentrt.Deny) -> None:
        self.decision = decision
        self.requests: list[agentrt.ToolRequest] = []

    def approve_tool(self, request: agentrt.ToolRequest) -> agentrt.Allow | agentrt.Deny:
        self.requests.append(request)
        return self.decision


@pytest.mark.parametrize("allowed", [False, True], ids=["denied", "allowed"])
async def test_approve_tool_decides_codexs_commands(allowed: bool) -> None:
    script = [OpenAIReply.exec_command("touch approved.txt"), OpenAIReply.text("done")]
    decision = agentrt.Allow() if allowed else agentrt.Deny("no")
    agent = Decides(decision)
    assert BINARY is not None
    async with (
        open_fake_openai(script) as api,
        codex_place(api) as place,
        agentrt.open_runtime(store=agentrt.MemoryStore()) as rt,
    ):
        await rt.start_agent(
            agent,
            name="coder",
            backend="codex",
            **place.raw_options(BINARY, sandbox="danger-full-access"),
        )
        with trio.fail_after(BOUND):
            response = await rt.ask("coder", "touch it")
        assert (place.cwd / "approved.txt").exists() is allowed
    [request] = agent.requests
    assert request.tool_name == "command_execution"
    assert "touch approved.txt" in str(request.input["command"])
    assert response.text == "done"
    denied = [d.tool_name for d in response.permission_denials]
    assert denied == ([] if allowed else ["command_execution"])
