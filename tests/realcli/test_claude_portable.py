"""Portable sessions with the pinned real ``claude`` against the fake API: two "hosts" (two
HOMEs, each with its own directory of CLI homes) on one store. The transcript travels in the
store, so each host resumes the conversation the other one continued."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from agentrt import Agent, PostgresStore, SessionStore, SQLiteStore, open_runtime
from agentrt.testing import AnthropicText

from ._claude import Claude, project_folder_name

pytestmark = pytest.mark.realcli

TURN_BOUND = 60


def host_options(claude: Claude, host: Path, **extra: Any) -> dict[str, Any]:
    """The agent's options on one host: its own HOME (the user's login and settings would
    be there) and its CLI homes under it."""
    (host / "tmp").mkdir(parents=True, exist_ok=True)
    env = {"HOME": str(host), "TMPDIR": str(host / "tmp")}
    return claude.agent_options(env=env, portable=True, cli_homes=str(host / "cli-homes"), **extra)


async def turn_on(
    store: SessionStore, claude: Claude, host: Path, prompt: str, **extra: Any
) -> str:
    async with open_runtime(store=store, node=host.name) as rt:
        options = host_options(claude, host, **extra)
        await rt.start_agent(Agent, name="coder", backend="claude", **options)
        with trio.fail_after(TURN_BOUND):
            response = await rt.ask("coder", prompt)
    assert response.session_id is not None
    return response.session_id


def transcripts(host: Path) -> list[Path]:
    return sorted(host.glob("cli-homes/*/projects/*/*.jsonl"))


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_the_conversation_moves_between_hosts(
    claude: Claude, tmp_path: Path, kind: str, request: pytest.FixtureRequest
) -> None:
    """Turn 1 on host A; turn 2 on host B, whose home is empty: it resumes turn 1's session
    (the fake sees turn 1). Turn 3 back on A, whose copy lacks turn 2 (stale): A's copy is
    replaced by the stored one, and the fake sees turns 1 and 2."""
    if kind == "postgres":
        dsn = request.getfixturevalue("postgres_dsn")

        def store() -> SessionStore:
            return PostgresStore(dsn)
    else:

        def store() -> SessionStore:
            return SQLiteStore(tmp_path / "sessions.sqlite3")

    claude.api.set_script(
        [AnthropicText("First answer."), AnthropicText("Second answer."), AnthropicText("Third.")]
    )
    host_a, host_b = tmp_path / "host-a", tmp_path / "host-b"

    one = await turn_on(store(), claude, host_a, "first prompt")
    [a_copy] = transcripts(host_a)
    assert a_copy.name == f"{one}.jsonl"
    assert a_copy.parent.name == project_folder_name(claude.project)
    after_one = a_copy.read_bytes()
    assert transcripts(host_b) == []
    # Host B's user has a global config (as the CLI writes it); the agent's home links to it.
    config = (host_a / "cli-homes").glob("*/.claude.json")
    host_b.mkdir()
    (host_b / ".claude.json").write_bytes(next(config).read_bytes())

    two = await turn_on(store(), claude, host_b, "second prompt")
    assert two == one
    [b_copy] = transcripts(host_b)
    assert (
        b_copy.relative_to(host_b / "cli-homes").parts[1:]
        == a_copy.relative_to(host_a / "cli-homes").parts[1:]
    )
    assert b_copy.read_bytes().startswith(after_one)
    assert a_copy.read_bytes() == after_one  # host A never saw turn 2
    [linked] = (host_b / "cli-homes").glob("*/.claude.json")
    # The CLI writes its config through the link: the login stays the user's, not a copy.
    assert linked.is_symlink() and linked.resolve() == (host_b / ".claude.json").resolve()

    three = await turn_on(store(), claude, host_a, "third prompt")
    assert three == one

    first, second, third = claude.api.message_requests
    assert all(r.headers["x-claude-code-session-id"] == one for r in (first, second, third))
    assert "First answer." in second.texts() and "second prompt" in second.texts()
    texts = third.texts()
    positions = [texts.index(t) for t in ("first prompt", "Second answer.", "third prompt")]
    assert positions == sorted(positions)
    # Each agent's home is its own: nothing in the HOME's own ~/.claude.
    assert not list(host_a.glob(".claude/projects/*/*.jsonl"))
    assert not list(claude.home.glob(".claude/projects/*/*.jsonl"))


async def test_a_warm_cli_s_turns_travel_too(claude: Claude, tmp_path: Path) -> None:
    """Two turns on one warm CLI (keep_alive) on host A, the third on host B: B's fresh CLI
    resumes with both earlier turns."""
    claude.api.set_script([AnthropicText("One."), AnthropicText("Two."), AnthropicText("Three.")])
    store = SQLiteStore(tmp_path / "sessions.sqlite3")
    host_a, host_b = tmp_path / "host-a", tmp_path / "host-b"
    async with open_runtime(store=store, node="host-a") as rt:
        options = host_options(claude, host_a, keep_alive=60)
        await rt.start_agent(Agent, name="coder", backend="claude", **options)
        with trio.fail_after(TURN_BOUND):
            one = await rt.ask("coder", "first prompt")
            two = await rt.ask("coder", "second prompt")
    assert one.session_id == two.session_id is not None
    three = await turn_on(store, claude, host_b, "third prompt")
    assert three == one.session_id
    texts = claude.api.message_requests[2].texts()
    positions = [texts.index(t) for t in ("One.", "second prompt", "Two.", "third prompt")]
    assert positions == sorted(positions)
