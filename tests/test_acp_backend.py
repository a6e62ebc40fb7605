"""The acp backend through the public API, on a fake ACP agent (tests/acp_agent.py: the
``agent-client-protocol`` package's own agent side), a real process per agent: a live
process per turn, sessions loaded by the next process, the session kept while the model
has not answered, cancel in band, permission requests answered by ``approve_tool``, a
warm agent, an agent that cannot load refused with SESSION_LOST. The pinned Gemini CLI and
Qwen Code run the conformance kit on it in tests/realcli/test_backend_conformance.py."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import trio

import agentrt
from agentrt import (
    Agent,
    Allow,
    CliNotFound,
    Deny,
    InvalidOptions,
    MemoryStore,
    StopReason,
    ToolRequest,
    TurnFailed,
)

AGENT = Path(__file__).with_name("acp_agent.py")
# Bounds a turn on a loaded machine: the fake agent is a Python process importing pydantic.
TURN = 60.0


def acp(tmp_path: Path, **extra: Any) -> dict[str, Any]:
    env = {"FAKE_ACP_DIR": str(tmp_path), **extra.pop("env", {})}
    return {
        "backend": "acp",
        "command": [sys.executable, str(AGENT)],
        "cwd": str(tmp_path),
        "env": env,
        "kill_grace": 2.0,
        **extra,
    }


async def ask(rt: agentrt.Runtime, prompt: str) -> agentrt.Response:
    with trio.fail_after(TURN):
        return await rt.ask("a", prompt)


async def test_each_turn_runs_a_live_process_of_its_own_on_one_session(tmp_path: Path) -> None:
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(Agent, name="a", **acp(tmp_path))
        assert (await rt.status("a")).mode == "live"
        first = await ask(rt, "hello")
        second = await ask(rt, "again")
    assert first.text == "you said: hello; before: "
    # The second process loaded the session the first one opened.
    assert second.text == "you said: again; before: hello"
    assert second.session_id == first.session_id is not None
    assert first.cli_version == "1.2.3"  # the agent's initialize answer (agentInfo)


async def test_the_session_is_stored_before_the_model_answers_and_cancel_ends_the_turn(
    tmp_path: Path,
) -> None:
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(Agent, name="a", **acp(tmp_path))
        failed: list[TurnFailed] = []

        async def hang() -> None:
            with pytest.raises(TurnFailed) as info:
                await ask(rt, "hang")
            failed.append(info.value)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(hang)
            # The agent prints nothing while its model does not answer: the session id
            # comes from the handshake.
            with trio.fail_after(TURN):
                # Polling: the store has no event to wait on.
                record = await rt.store.load("a")
                while record is None or record.session_id is None:
                    await trio.sleep(0.05)
                    record = await rt.store.load("a")
            assert not failed
            assert await rt.interrupt("a")
    assert failed[0].reason is StopReason.INTERRUPTED
    assert failed[0].session_id == record.session_id


class Approves(Agent):
    def __init__(self, allow: bool) -> None:
        self.allow = allow
        self.asked: list[ToolRequest] = []

    async def approve_tool(self, request: ToolRequest) -> Allow | Deny:
        self.asked.append(request)
        return Allow() if self.allow else Deny("no")


@pytest.mark.parametrize("allow", [True, False])
async def test_permission_requests_are_answered_by_approve_tool(
    tmp_path: Path, allow: bool
) -> None:
    agent = Approves(allow)
    ran = tmp_path / "ran"
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(lambda: agent, name="a", **acp(tmp_path))
        response = await ask(rt, f"shell: touch {ran}")
    (asked,) = agent.asked
    # The request names the call by its kind and title (it carries no rawInput).
    assert (asked.tool_name, asked.input) == ("execute", {"title": f"touch {ran}"})
    assert ran.exists() is allow
    assert response.text == ("done" if allow else "denied")
    denied = [d.tool_use_id for d in response.permission_denials]
    assert denied == ([] if allow else [asked.tool_use_id])


async def test_without_approve_tool_the_backend_denies(tmp_path: Path) -> None:
    ran = tmp_path / "ran"
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(Agent, name="a", **acp(tmp_path))
        response = await ask(rt, f"shell: touch {ran}")
    assert response.text == "denied" and not ran.exists()


async def test_a_warm_agent_runs_its_turns_on_one_process(tmp_path: Path) -> None:
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(Agent, name="a", keep_alive=60.0, **acp(tmp_path))
        await ask(rt, "hello")
        pid = (await rt.status("a")).cli_pid
        second = await ask(rt, "again")
        assert pid is not None and (await rt.status("a")).cli_pid == pid
    assert second.text == "you said: again; before: hello"


async def test_an_agent_that_cannot_load_fails_the_next_turn_with_session_lost(
    tmp_path: Path,
) -> None:
    options = acp(tmp_path, env={"FAKE_ACP_NO_LOAD": "1"})
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(Agent, name="a", **options)
        first = await ask(rt, "hello")
        with pytest.raises(TurnFailed) as info:
            await ask(rt, "again")
        assert info.value.reason is StopReason.SESSION_LOST
        assert "does not offer loadSession" in str(info.value)
        assert first.session_id is not None and first.session_id in str(info.value)
        # "fresh": the turn runs again on a new session.
        await rt.stop_agent("a")
        await rt.start_agent(Agent, name="a", on_session_lost="fresh", **options)
        again = await ask(rt, "again")
    assert again.text == "you said: again; before: "
    assert again.session_id != first.session_id


def test_the_agent_command_is_required_and_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    from agentrt.backends.acp import AcpBackend

    with pytest.raises(InvalidOptions) as info:
        AcpBackend(environ={}).parse_options({})
    assert info.value.key == "command" and "AGENTRT_ACP_COMMAND" in info.value.why
    with pytest.raises(InvalidOptions) as info:
        AcpBackend(environ={}).parse_options({"command": "gemini --acp"})
    assert info.value.key == "command" and "list of strings" in info.value.why
    options = AcpBackend(environ={"AGENTRT_ACP_COMMAND": "qwen --acp"}).parse_options({})
    assert options.command == ("qwen", "--acp")


@pytest.mark.parametrize("status", [0, 3])
async def test_an_agent_that_exits_before_its_handshake_fails_the_turn_as_its_exit(
    tmp_path: Path, status: int
) -> None:
    # Its end is read and classified as any CLI's that exits without an answer (its code
    # and stderr's last line), not as a failure of the runtime's own (turn_crashed: a
    # translator asked for before a session was open).
    script = f"import sys; sys.stderr.write('no agent here\\n'); sys.exit({status})"
    options = {**acp(tmp_path), "command": [sys.executable, "-c", script]}
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(Agent, name="a", **options)
        with pytest.raises(TurnFailed) as info:
            await ask(rt, "hello")
    assert info.value.reason is StopReason.MALFORMED_OUTPUT, info.value
    assert f"exited (code {status}) before it answered" in str(info.value), info.value
    assert str(info.value).endswith("no agent here"), info.value


async def test_a_missing_agent_program_is_named_as_the_command_option(tmp_path: Path) -> None:
    missing = str(tmp_path / "no-such-agent")
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        with pytest.raises(CliNotFound) as info:
            await rt.start_agent(Agent, name="a", **{**acp(tmp_path), "command": [missing]})
    assert info.value.key == "command" and info.value.value == missing, info.value
    assert "point command= at" in str(info.value) and "binary" not in str(info.value)
