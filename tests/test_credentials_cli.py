"""Credentials told from a real process's environment (issue 39, parts 1 and 2): agents of
the claude backend on the fake CLI program, replaying Claude Code 2.1.332's recorded usage
limit and expired token. Agents whose CLI homes link to one login file share it; an API key
is a credential of its own; a login file rewritten after it expired lets its agents go on."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import trio
from proc_helpers import wait_for_status

from agentrt import Agent, Completed, MemoryStore, StopReason, TurnFailed, open_runtime
from agentrt.testing.fake_cli import fake_cli_executable

RECORDED = Path(__file__).parent / "fixtures" / "claude" / "2.1.332"
RECORDED_RESET = "1796619458"  # the usage limit's resetsAt in the recording
BOUND = 20.0


def claude(directory: Path, first: Path | None) -> str:
    """A fake ``claude`` whose first run replays ``first`` (exit 1), and every other run a
    text answer ("Hello! ..."); None: every run answers."""
    directory.mkdir()
    answer = [["replay", str(RECORDED / "text_turn.jsonl")], ["exit", 0]]
    runs = [answer] if first is None else [[["replay", str(first)], ["exit", 1]], answer]
    steps = ["by_run", str(directory / "runs"), runs]
    return fake_cli_executable(str(directory), steps, name="claude")


def login_home(tmp_path: Path, name: str, login: Path) -> str:
    """A CLI home whose login is a link to the user's ``login`` file, as portable agents'
    homes share it."""
    home = tmp_path / name
    home.mkdir()
    (home / ".credentials.json").symlink_to(login)
    return str(home)


def user_login(tmp_path: Path) -> Path:
    """The user's login file, by its real path."""
    login = Path(os.path.realpath(tmp_path)) / "user" / ".credentials.json"
    login.parent.mkdir()
    login.write_text('{"claudeAiOauth": {"accessToken": "old"}}')
    return login


async def test_agents_on_one_login_file_share_its_usage_limit_and_a_key_is_its_own(
    tmp_path: Path,
) -> None:
    login = user_login(tmp_path)
    limit = tmp_path / "usage_limit.jsonl"
    reset = int(time.time()) + 3600
    limit.write_text(
        (RECORDED / "usage_limit.jsonl").read_text().replace(RECORDED_RESET, str(reset))
    )
    key = "sk-ant-api03-" + "k" * 40
    async with open_runtime() as rt:
        common = {"kill_grace": 0.2}
        await rt.start_agent(
            Agent,
            name="a",
            backend="claude",
            binary=claude(tmp_path / "a", limit),
            config_dir=login_home(tmp_path, "home-a", login),
            **common,
        )
        await rt.start_agent(
            Agent,
            name="b",
            backend="claude",
            binary=claude(tmp_path / "b", None),
            config_dir=login_home(tmp_path, "home-b", login),
            **common,
        )
        home_c = tmp_path / "home-c"
        home_c.mkdir()
        await rt.start_agent(
            Agent,
            name="c",
            backend="claude",
            binary=claude(tmp_path / "c", None),
            config_dir=str(home_c),
            env={"ANTHROPIC_API_KEY": key},
            **common,
        )
        a, b, c = [await rt.status(n) for n in "abc"]
        assert a.credential == b.credential == f"claude login file {login}"
        assert c.credential == "claude ANTHROPIC_API_KEY"
        with trio.fail_after(BOUND), pytest.raises(TurnFailed) as caught:
            await rt.ask("a", "hi")
        assert caught.value.reason is StopReason.USAGE_LIMIT
        b, c = await rt.status("b"), await rt.status("c")
        assert (b.state, b.parked_until) == ("parked", reset)
        assert c.state == "idle"
        with trio.fail_after(BOUND):
            assert (await rt.ask("c", "Say hello")).text.startswith("Hello")
    assert key not in repr((a, b, c))


async def test_a_login_rewritten_after_it_expired_lets_its_agents_go_on(tmp_path: Path) -> None:
    login = user_login(tmp_path)
    async with open_runtime() as rt:
        options = {"kill_grace": 0.2, "login_check": 0.05}
        await rt.start_agent(
            Agent,
            name="a",
            backend="claude",
            binary=claude(tmp_path / "a", RECORDED / "expired_token.jsonl"),
            config_dir=login_home(tmp_path, "home-a", login),
            **options,
        )
        await rt.start_agent(
            Agent,
            name="b",
            backend="claude",
            binary=claude(tmp_path / "b", None),
            config_dir=login_home(tmp_path, "home-b", login),
            **options,
        )
        with trio.fail_after(BOUND), pytest.raises(TurnFailed) as caught:
            await rt.ask("a", "hi")
        assert caught.value.reason is StopReason.CREDENTIAL_EXPIRED
        b = await rt.status("b")
        assert b.state == "halted"
        assert b.halt_reason is not None and str(login) in b.halt_reason
        ref = await rt.tell("b", "Say hello")
        await trio.sleep(0.3)  # several looks at the unchanged file: still halted
        assert (await rt.status("b")).state == "halted"
        # A new login, written as the CLI writes it (a new file renamed over the old).
        fresh = login.with_name("fresh.json")
        fresh.write_text('{"claudeAiOauth": {"accessToken": "new"}}')
        fresh.replace(login)
        with trio.fail_after(BOUND):
            result = await rt.wait(ref)
        assert isinstance(result, Completed)
        assert (await rt.status("a")).state == "idle"


async def test_a_stored_halt_holds_the_next_program_until_its_login_file_is_rewritten(
    tmp_path: Path,
) -> None:
    """The halt outlives its program (issue 39): the next program on the store holds the
    login's agents while the file is the one that expired, and not once it was rewritten
    (a login made while no program ran)."""
    login, store = user_login(tmp_path), MemoryStore()
    options = {"kill_grace": 0.2, "config_dir": login_home(tmp_path, "home", login)}
    async with open_runtime(store=store) as rt:
        binary = claude(tmp_path / "expired", RECORDED / "expired_token.jsonl")
        await rt.start_agent(Agent, name="a", backend="claude", binary=binary, **options)
        with trio.fail_after(BOUND), pytest.raises(TurnFailed) as caught:
            await rt.ask("a", "hi")
        assert caught.value.reason is StopReason.CREDENTIAL_EXPIRED
    answers = claude(tmp_path / "answers", None)
    async with open_runtime(store=store) as rt:
        await rt.start_agent(Agent, name="a", backend="claude", binary=answers, **options)
        await rt.tell("a", "Say hello")
        status = await wait_for_status(rt, "a", lambda s: s.state == "halted", BOUND)
        assert status.halt_reason is not None and str(login) in status.halt_reason
        assert status.queued == 1
    fresh = login.with_name("fresh.json")
    fresh.write_text('{"claudeAiOauth": {"accessToken": "new"}}')
    fresh.replace(login)
    async with open_runtime(store=store) as rt:
        await rt.start_agent(Agent, name="a", backend="claude", binary=answers, **options)
        with trio.fail_after(BOUND):
            assert (await rt.ask("a", "Say hello")).text.startswith("Hello")
    async with store:
        [stored] = await store.credentials()
    assert (stored.halt_reason, stored.halted_since) == (None, None)
