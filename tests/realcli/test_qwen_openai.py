"""The pinned real qwen in its OpenAI-compatible modes (how users run local models: an
OpenAI-compatible server on their own machine), against the fake OpenAI API: the
Responses wire (``auth_type="openai-responses"``) and chat completions (``"openai"``),
two turns resumed on one session."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from agentrt import Agent, MemoryStore, open_runtime
from agentrt.testing import OpenAIReply, OpenAIRequest, open_fake_openai

from ._qwen import Qwen

pytestmark = pytest.mark.realcli

BOUND = 90


def echo(request: OpenAIRequest) -> OpenAIReply:
    return OpenAIReply.text(f"said {len(request.body.get('input') or request.body['messages'])}")


@pytest.fixture
async def qwen_openai(qwen_bin: Path, tmp_path: Path, process_marker: str) -> AsyncIterator[Qwen]:
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    async with open_fake_openai(echo) as api:
        yield Qwen(qwen_bin, api, home, project, process_marker)


@pytest.mark.parametrize("auth_type", ["openai-responses", "openai"])
async def test_two_turns_on_an_openai_compatible_server(qwen_openai: Qwen, auth_type: str) -> None:
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(
            Agent, name="coder", backend="qwen", **qwen_openai.agent_options(auth_type=auth_type)
        )
        with trio.fail_after(BOUND):
            first = await rt.ask("coder", "first question")
            second = await rt.ask("coder", "second question")
    assert first.text.startswith("said ") and second.text.startswith("said ")
    assert second.session_id == first.session_id is not None
    calls = qwen_openai.api.model_calls
    assert len(calls) == 2
    wire = "/responses" if auth_type == "openai-responses" else "/chat/completions"
    assert all(call.path.endswith(wire) for call in calls)
    # The second call carried the first turn's question and answer.
    assert "first question" in str(calls[-1].body) and first.text in str(calls[-1].body)
    assert first.usage is not None and first.usage.output_tokens == 5
