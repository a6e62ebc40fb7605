"""Forks, with fake CLIs: the fork's first turn resumes the source with the backend's fork
flag, its later turns resume its own session; what cannot fork is refused before anything
runs. (tests/realcli/test_claude_forks.py runs the real claude.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_programs import SID, FakeClaude

import agentrt
from agentrt import InvalidOptions, MemoryStore, open_runtime
from agentrt.backends.claude import ClaudeBackend
from agentrt.backends.codex import CodexBackend
from agentrt.testing import fake_cli_executable

SOURCE = "5d1c7a52-2222-4333-8444-0123456789ab"


async def test_the_first_turn_forks_the_source_and_later_ones_resume_the_fork(
    tmp_path: Path,
) -> None:
    cli = FakeClaude(tmp_path / "cli")
    cli.answer()
    options = {"binary": cli.binary, "cwd": str(tmp_path)}
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(
            agentrt.Agent, name="alt", backend="claude", fork_from=SOURCE, **options
        )
        assert (await rt.status("alt")).session_id is None
        await rt.ask("alt", "one")
        first = cli.argv()
        await rt.ask("alt", "two")
        second = cli.argv()
        assert (await rt.status("alt")).session_id == SID
        # The fork has a session of its own now: forking into its name again is refused.
        await rt.stop_agent("alt")
        with pytest.raises(InvalidOptions, match=f"a conversation of its own \\(session {SID}\\)"):
            await rt.start_agent(
                agentrt.Agent, name="alt", backend="claude", fork_from=SOURCE, **options
            )
    assert first[first.index("--resume") + 1] == SOURCE and "--fork-session" in first
    assert second[second.index("--resume") + 1] == SID and "--fork-session" not in second


async def test_fork_from_is_refused_where_it_cannot_work(tmp_path: Path) -> None:
    cli = FakeClaude(tmp_path / "cli")
    options = {"binary": cli.binary, "cwd": str(tmp_path)}
    async with open_runtime(store=MemoryStore()) as rt:
        with pytest.raises(InvalidOptions) as refused:
            await rt.start_agent(agentrt.Agent, name="x", backend="claude", fork_from="", **options)
        assert refused.value.key == "fork_from"
        with pytest.raises(InvalidOptions, match="resume='s' contradicts it"):
            await rt.start_agent(
                agentrt.Agent, name="x", backend="claude", fork_from="a", resume="s", **options
            )
        codex_cli = fake_cli_executable(str(tmp_path), name="codex")
        codex = {"binary": codex_cli, "cwd": str(tmp_path), "keep_alive": 30}
        with pytest.raises(InvalidOptions, match="fork_session runs on codex exec only") as live:
            await rt.start_agent(
                agentrt.Agent, name="x", backend="codex", fork_from=SOURCE, **codex
            )
        assert "without keep_alive" in str(live.value)
        assert rt.agents() == ()


class Approving(agentrt.Agent):
    async def approve_tool(self, request: agentrt.ToolRequest) -> agentrt.Allow:
        return agentrt.Allow()


async def test_a_fork_is_chosen_its_mode_on_the_fork_options(tmp_path: Path) -> None:
    # approve_tool alone asks codex for its live process, which a fork (codex exec) lacks:
    # the refusal names what the fork must do without, not a keep_alive never given.
    codex = {"binary": fake_cli_executable(str(tmp_path), name="codex"), "cwd": str(tmp_path)}
    async with open_runtime(store=MemoryStore()) as rt:
        with pytest.raises(InvalidOptions, match="fork_session runs on codex exec only") as live:
            await rt.start_agent(Approving, name="x", backend="codex", fork_from=SOURCE, **codex)
        assert live.value.key == "fork_from"
        assert live.value.why.endswith("start the fork without approve_tool")
        assert rt.agents() == ()


def test_each_backend_spells_its_fork() -> None:
    claude = ClaudeBackend()
    options = claude.with_fork(claude.parse_options({"binary": "claude"}))
    argv = claude.command(options, "p", session_id=SOURCE).argv
    assert argv[argv.index("--resume") : argv.index("--resume") + 3] == (
        "--resume",
        SOURCE,
        "--fork-session",
    )
    assert "--fork-session" not in claude.command(options, "p", session_id=None).argv
    assert claude.transcript_path(options, SOURCE, "/w/a b").endswith(
        f"/projects/-w-a-b/{SOURCE}.jsonl"
    )
    codex = CodexBackend()
    plain = codex.parse_options({"binary": "codex"})
    forked = codex.command(codex.with_fork(plain), "p", session_id=SOURCE).argv
    assert forked[forked.index("fork") + 1] == SOURCE and "resume" not in forked
    assert "resume" in codex.command(plain, "p", session_id=SOURCE).argv
    assert codex.transcript_path(plain, SOURCE, "/w") is None
