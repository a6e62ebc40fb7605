"""An agent's mode (in process, one process per turn, live, warm), chosen once at
``start_agent`` from its backend's capabilities, its options and the callbacks it overrides;
what a backend cannot honour is refused there, naming why. Through the public API only."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import pytest
import trio
from trio.testing import MockClock

import agentrt
from agentrt import Agent, Allow, InvalidOptions, MemoryStore, ToolRequest
from agentrt.hooks import Hook
from agentrt.testing import ScriptedBackend, fake_cli_executable, reply


class Approver(Agent):
    def approve_tool(self, request: ToolRequest) -> Allow:
        return Allow()


class Both(Approver):
    def handle_hook(self, hook: Hook) -> None:
        return None


def tripwire(tmp_path: Path) -> tuple[str, Path]:
    """A CLI binary that leaves a file behind if anything ever runs it."""
    ran = tmp_path / "ran"
    binary = tmp_path / "codex"
    binary.write_text(f"#!/bin/sh\ntouch {ran}\n")
    binary.chmod(binary.stat().st_mode | stat.S_IXUSR)
    return str(binary), ran


async def test_a_codex_agent_with_hooks_is_refused_at_start_agent(tmp_path: Path) -> None:
    # The defect this refuses: codex has no hooks, so such an agent got no live channel at
    # all, and its approve_tool silently stopped being asked (a log warning said so).
    binary, ran = tripwire(tmp_path)
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        with pytest.raises(InvalidOptions) as info:
            await rt.start_agent(Both, name="a", backend="codex", binary=binary, cwd=str(tmp_path))
        assert rt.agents() == ()
        assert rt.statistics().processes_in_use == 0
    assert info.value.key == "handle_hook"
    assert info.value.value == "Both.handle_hook"
    assert "'codex' backend has no hooks" in info.value.why
    assert not ran.exists()


async def test_approve_tool_on_codex_exec_only_options_names_the_option(tmp_path: Path) -> None:
    binary, ran = tripwire(tmp_path)
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        with pytest.raises(InvalidOptions) as info:
            await rt.start_agent(
                Approver,
                name="a",
                backend="codex",
                binary=binary,
                cwd=str(tmp_path),
                approval="approve-for-me",
            )
        assert rt.agents() == ()
    assert info.value.key == "approve_tool"
    assert "approval='approve-for-me' runs on codex exec only" in info.value.why
    assert not ran.exists()


async def test_keep_alive_on_exec_only_options_is_refused(tmp_path: Path) -> None:
    binary, _ = tripwire(tmp_path)
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        with pytest.raises(InvalidOptions) as info:
            await rt.start_agent(
                Agent, name="a", backend="codex", binary=binary, profile="work", keep_alive=30
            )
    assert (info.value.key, info.value.value) == ("keep_alive", 30)
    assert "profile='work' runs on codex exec only" in info.value.why


@pytest.mark.parametrize(
    ("agent", "options", "key"),
    [
        (Agent, {"keep_alive": 30}, "keep_alive"),
        (Approver, {}, "approve_tool"),
        (Both, {}, "handle_hook"),
    ],
)
async def test_the_scripted_backend_has_no_cli_to_keep_or_ask(
    agent: type[Agent], options: dict[str, Any], key: str
) -> None:
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        with pytest.raises(InvalidOptions) as info:
            await rt.start_agent(agent, name="a", backend=ScriptedBackend(), **options)
        assert rt.agents() == ()
    assert info.value.key == key
    assert "'scripted' backend runs its turns in process" in info.value.why


async def test_status_reports_each_mode(tmp_path: Path) -> None:
    binary = fake_cli_executable(str(tmp_path), ["live", {"turns": [[["answer"]]]}])
    claude = {"backend": "claude", "binary": binary, "cwd": str(tmp_path)}
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(Agent, name="scripted", backend=ScriptedBackend(reply("hi")))
        await rt.start_agent(Agent, name="one_shot", **claude)
        await rt.start_agent(Approver, name="live", **claude)
        await rt.start_agent(Agent, name="warm", keep_alive=30, **claude)
        modes = {name: (await rt.status(name)).mode for name in rt.agents()}
        assert (await rt.ask("scripted", "hello")).text == "hi"
        assert (await rt.status("scripted")).mode == "in_process"
    assert modes == {
        "scripted": "in_process",
        "one_shot": "one_shot",
        "live": "live",
        "warm": "warm",
    }


async def test_a_restart_whose_options_cannot_run_its_mode_is_one_more_crash(
    tmp_path: Path, autojump_clock: MockClock
) -> None:
    # init_agent runs again on each restart and may return other options.
    binary, ran = tripwire(tmp_path)
    starts: list[dict[str, Any]] = []

    class Drifting(Approver):
        def init_agent(self, **options: Any) -> dict[str, Any]:
            starts.append(options)
            if len(starts) > 1:
                return {**options, "approval": "approve-for-me"}
            return options

        def pre_turn(self, prompt: str) -> None:
            raise RuntimeError("crash")

    with pytest.raises(agentrt.RestartLimitExceeded) as info:
        async with agentrt.open_runtime(store=MemoryStore(), max_restarts=2) as rt:
            await rt.start_agent(
                Drifting, name="a", backend="codex", binary=binary, cwd=str(tmp_path)
            )
            assert (await rt.status("a")).mode == "live"
            await rt.tell("a", "go")
            with trio.fail_after(60):  # the supervisor gives up long before
                await trio.sleep_forever()
    assert len(starts) == 3
    reasons = [crash.reason for crash in info.value.history]
    assert "restart failed: InvalidOptions" in reasons[1]
    assert "approve_tool" in reasons[1] and "approve-for-me" in reasons[1]
    assert not ran.exists()
