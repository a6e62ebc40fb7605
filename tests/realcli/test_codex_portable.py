"""Portable sessions with the pinned real ``codex`` against the fake API: two "hosts" (two
HOMEs, each with its own directory of CLI homes; the user's CODEX_HOME on each holds the
same config.toml) on one store. The rollout travels in the store."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import agentrt
from agentrt.testing import OpenAIReply, open_fake_openai

from ._codex import codex_binary, codex_place

pytestmark = [
    pytest.mark.realcli,
    pytest.mark.skipif(codex_binary() is None, reason="the pinned codex is not installed"),
]


def rollouts(host: Path) -> list[Path]:
    return sorted(host.glob("cli-homes/*/sessions/*/*/*/rollout-*.jsonl"))


async def test_the_thread_moves_to_a_host_with_an_empty_home(tmp_path: Path) -> None:
    """Turn 1 on host A; turn 2 on host B, whose CLI home is empty: it resumes the thread
    and the fake sees turn 1."""
    binary = codex_binary()
    assert binary is not None
    script = [OpenAIReply.text("From host A"), OpenAIReply.text("From host B")]
    store = agentrt.SQLiteStore(tmp_path / "sessions.sqlite3")
    async with open_fake_openai(script) as api, codex_place(api) as place:
        root = Path(place.marker)
        answers = []
        for host_name, prompt in (("host-a", "Question one"), ("host-b", "Question two")):
            host = root / host_name
            user_home = host / ".codex"  # the user's CODEX_HOME on that host
            user_home.mkdir(parents=True)
            shutil.copy(place.codex_home / "config.toml", user_home / "config.toml")
            options = place.raw_options(binary, codex_home=str(user_home))
            async with agentrt.open_runtime(store=store, node=host_name) as rt:
                await rt.start_agent(
                    agentrt.Agent,
                    name="coder",
                    backend="codex",
                    portable=True,
                    cli_homes=str(host / "cli-homes"),
                    **options,
                )
                answers.append(await rt.ask("coder", prompt))
            if host_name == "host-a":
                [rollout] = rollouts(host)
                assert answers[0].session_id is not None
                assert rollout.name.endswith(f"-{answers[0].session_id}.jsonl")
                assert not list(user_home.glob("sessions/**/*.jsonl"))  # the agent's own home
        # Read before the place's directories go.
        [b_rollout] = rollouts(root / "host-b")
        assert b_rollout.read_bytes().startswith(rollout.read_bytes())
        assert (
            b_rollout.relative_to(root / "host-b" / "cli-homes").parts[1:]
            == (rollout.relative_to(root / "host-a" / "cli-homes").parts[1:])
        )
    assert answers[1].session_id == answers[0].session_id
    assert answers[1].text == "From host B"
    sent = [
        part.get("text")
        for item in api.model_calls[1].input_items()
        if item.get("type") == "message"
        for part in item["content"]
    ]
    assert "From host A" in sent and "Question two" in sent
