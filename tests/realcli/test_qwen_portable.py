"""Portable sessions with the pinned real qwen against the fake API: two "hosts" (two
HOMEs, each with its own directory of CLI homes) on one store. The transcript travels in
the store, so the second host resumes a session its CLI home never held."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

import agentrt
from agentrt.testing import AnthropicText

from ._qwen import Qwen

pytestmark = pytest.mark.realcli


def transcripts(host: Path) -> list[Path]:
    return sorted(host.glob("cli-homes/*/projects/*/chats/*.jsonl"))


async def test_the_session_moves_to_a_host_with_an_empty_home(qwen: Qwen, tmp_path: Path) -> None:
    qwen.api.set_script([AnthropicText("From host A"), AnthropicText("From host B")])
    store = agentrt.SQLiteStore(tmp_path / "sessions.sqlite3")
    answers = []
    for host_name, prompt in (("host-a", "Question one"), ("host-b", "Question two")):
        host = tmp_path / host_name
        user_home = host / ".qwen"  # the user's QWEN_HOME on that host, empty
        user_home.mkdir(parents=True)
        options = qwen.agent_options(qwen_home=str(user_home))
        async with agentrt.open_runtime(store=store, node=host_name) as rt:
            await rt.start_agent(
                agentrt.Agent,
                name="coder",
                backend="qwen",
                portable=True,
                cli_homes=str(host / "cli-homes"),
                **options,
            )
            with trio.fail_after(90):
                answers.append(await rt.ask("coder", prompt))
        if host_name == "host-a":
            [transcript] = transcripts(host)
            assert transcript.name == f"{answers[0].session_id}.jsonl"
            assert not list(user_home.glob("projects/**/*.jsonl"))  # the agent's own home
    [b_transcript] = transcripts(tmp_path / "host-b")
    assert b_transcript.read_bytes().startswith(transcript.read_bytes())
    assert answers[1].session_id == answers[0].session_id
    assert answers[1].text == "From host B"
    history = qwen.api.message_requests[-1].texts()
    assert "From host A" in history and any("Question two" in t for t in history)
