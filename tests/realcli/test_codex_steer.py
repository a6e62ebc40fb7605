"""Steering a running turn of a warm codex (``codex app-server``'s ``turn/steer``) on the
pinned binary, through the public API: a message steered while the model's command runs
reaches the model's next call in the same turn, and the server takes the next turn."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
from proc_helpers import Watcher

import agentrt
from agentrt import Completed, ToolUseEvent
from agentrt.testing import OpenAIReply, OpenAIRequest, open_fake_openai

from ._codex import codex_binary, codex_place

BINARY = codex_binary()
pytestmark = [
    pytest.mark.realcli,
    pytest.mark.skipif(BINARY is None, reason="codex is not installed: run `make codex-cli`"),
]
BOUND = 60
STEER = "Also count the tests."


def user_texts(request: OpenAIRequest) -> list[str]:
    return [
        part["text"]
        for item in request.input_items()
        if item.get("type") == "message" and item.get("role") == "user"
        for part in item["content"]
        if part.get("type") == "input_text"
    ]


def script(flag: list[Path]) -> Any:
    """The model runs a command that waits until the test creates ``flag[0]`` (set once the
    test's place exists), then says whether it got the steered message."""

    def reply(request: OpenAIRequest) -> OpenAIReply:
        if "next" in user_texts(request)[-1:]:
            return OpenAIReply.text("next done")
        if not request.function_outputs():
            wait = f"while [ ! -e {flag[0]} ]; do sleep 0.05; done"
            return OpenAIReply.exec_command(wait, yield_time_ms=60_000)
        steered = any(STEER in text for text in user_texts(request))
        return OpenAIReply.text("steered" if steered else "not steered")

    return reply


async def test_steer_joins_the_running_turn() -> None:
    assert BINARY is not None
    flag: list[Path] = []
    async with open_fake_openai(script(flag)) as api, codex_place(api) as place:
        flag.append(place.cwd / "go")
        async with agentrt.open_runtime(store=agentrt.MemoryStore()) as rt:
            agent = Watcher()
            await rt.start_agent(
                agent,
                name="coder",
                backend="codex",
                keep_alive=60,
                **place.raw_options(BINARY, sandbox="danger-full-access"),
            )
            with trio.fail_after(BOUND):
                ref = await rt.tell("coder", "run it")
                await agent.wait_for(lambda: any(isinstance(e, ToolUseEvent) for e in agent.events))
                pid = (await rt.status("coder")).cli_pid
                await rt.steer("coder", STEER)
                flag[0].touch()
                result = await rt.wait(ref)
                after = await rt.ask("coder", "next")
                assert (await rt.status("coder")).cli_pid == pid
    assert isinstance(result, Completed) and result.response.text == "steered"
    assert after.text == "next done"
