"""Warm sessions (``keep_alive``) on the pinned real claude, through the public API.

One live ``claude -p --input-format stream-json`` process per conversation: its turns share
the process (`AgentStatus.cli_pid`) and the conversation (the fake sees every earlier
message); an in-band interrupt keeps the process; a Bash tool's tree dies with its turn
while the CLI lives; hibernation, a SIGKILL of the idle CLI and recycling each continue the
conversation on a new process with ``--resume``; a runtime SIGKILLed while its warm CLI
idles has that CLI reaped by the next runtime on the store; ``max_processes`` makes an idle
warm CLI give its slot to a waiting turn.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from proc_helpers import (
    KILL_POINTS,
    ask_racing_a_kill,
    fence_guards,
    marked,
    running,
    wait_for_status,
)

from agentrt import (
    Agent,
    Failed,
    MemoryStore,
    Response,
    Runtime,
    SQLiteStore,
    StopReason,
    TurnFailed,
    open_runtime,
)
from agentrt.testing import (
    AnthropicHang,
    AnthropicReply,
    AnthropicText,
    AnthropicToolUse,
    RecordedRequest,
)

from ._claude import MARKER_VAR, Claude, wait_for_process

pytestmark = pytest.mark.realcli

TURN_BOUND = 60
CHILD_PROGRAM = Path(__file__).with_name("claude_child.py")


def echo(request: RecordedRequest) -> AnthropicReply:
    """Answers every model call with what it was asked and how long the conversation is."""
    if "hang" in request.last_user_text() and not request.tool_results():
        return AnthropicHang()
    return AnthropicText(f"said {request.last_user_text()!r}")


@asynccontextmanager
async def warm_agent(claude: Claude, **options: Any) -> AsyncIterator[Runtime]:
    async with open_runtime(store=options.pop("store", None) or MemoryStore()) as rt:
        await rt.start_agent(
            Agent,
            name="coder",
            backend="claude",
            keep_alive=options.pop("keep_alive", 60),
            **claude.agent_options(**{"kill_grace": 1.0, **options}),
        )
        yield rt


async def cli_pid(rt: Runtime, name: str = "coder") -> int:
    pid = (await rt.status(name)).cli_pid
    assert pid is not None
    return pid


def seen_by_model(claude: Claude, *texts: str) -> None:
    """The latest model request carries each of ``texts``: the conversation went on."""
    history = claude.api.message_requests[-1].texts()
    for text in texts:
        assert any(text in t for t in history), (text, history)


async def test_three_turns_on_one_process_with_their_history(claude: Claude) -> None:
    claude.api.set_script(echo)
    async with warm_agent(claude) as rt:
        with trio.fail_after(TURN_BOUND):
            one = await rt.ask("coder", "first prompt")
            pid = await cli_pid(rt)
            two = await rt.ask("coder", "second prompt")
            three = await rt.ask("coder", "third prompt")
        assert await cli_pid(rt) == pid
    assert [r.text for r in (one, two, three)] == [
        "said 'first prompt'",
        "said 'second prompt'",
        "said 'third prompt'",
    ]
    assert one.session_id is not None and {two.session_id, three.session_id} == {one.session_id}
    seen_by_model(claude, "first prompt", "said 'first prompt'", "second prompt")
    # Each turn's own cost, though the CLI reports the session's running total.
    assert one.cost_usd is not None and one.cost_usd > 0
    assert two.cost_usd == pytest.approx(one.cost_usd)
    assert three.cost_usd == pytest.approx(one.cost_usd)
    assert not running(pid)


async def test_an_interrupt_in_band_keeps_the_process(claude: Claude) -> None:
    claude.api.set_script(echo)
    async with warm_agent(claude) as rt:
        with trio.fail_after(TURN_BOUND):
            await rt.ask("coder", "first prompt")
            pid = await cli_pid(rt)
            ref = await rt.tell("coder", "now hang")
            await claude.api.wait_requests(2)  # the hanging model call is under way
            assert await rt.interrupt("coder")
            result = await rt.wait(ref)
            assert isinstance(result, Failed)
            assert isinstance(result.error, TurnFailed)
            assert result.error.reason is StopReason.INTERRUPTED
            after = await rt.ask("coder", "after the interrupt")
        assert await cli_pid(rt) == pid
    assert after.text == "said 'after the interrupt'"
    seen_by_model(claude, "first prompt", "after the interrupt")


async def test_a_tools_tree_dies_with_its_turn_while_the_cli_lives(claude: Claude) -> None:
    def script(request: RecordedRequest) -> AnthropicReply:
        if request.tool_results() or "bash" not in request.last_user_text():
            return echo(request)
        command = "setsid sleep 300 > /dev/null 2>&1 &"
        return AnthropicToolUse("Bash", {"command": command, "description": "Detach"})

    claude.api.set_script(script)
    async with warm_agent(claude, allowed_tools=["Bash"]) as rt:
        with trio.fail_after(TURN_BOUND):
            await rt.ask("coder", "run bash")
            pid = await cli_pid(rt)
            sleepers = [p for p in marked(MARKER_VAR, claude.marker) if p.cmdline == "sleep 300"]
            assert sleepers == []  # gone when ask returned
            assert running(pid)
            again = await rt.ask("coder", "and again")
        assert again.text == "said 'and again'" and await cli_pid(rt) == pid


async def test_hibernation_then_a_resumed_turn(claude: Claude) -> None:
    claude.api.set_script(echo)
    async with warm_agent(claude, keep_alive=1) as rt:
        with trio.fail_after(TURN_BOUND):
            one = await rt.ask("coder", "first prompt")
            pid = await cli_pid(rt)
            await wait_for_status(rt, "coder", lambda s: s.cli_pid is None, TURN_BOUND)
            assert not running(pid)
            two = await rt.ask("coder", "second prompt")
        assert await cli_pid(rt) != pid
    assert two.session_id == one.session_id
    seen_by_model(claude, "first prompt", "said 'first prompt'", "second prompt")


async def test_sigkill_of_the_idle_cli_then_a_resumed_turn(claude: Claude) -> None:
    claude.api.set_script(echo)
    async with warm_agent(claude) as rt:
        with trio.fail_after(TURN_BOUND):
            one = await rt.ask("coder", "first prompt")
            pid = await cli_pid(rt)
            os.kill(pid, signal.SIGKILL)
            await wait_for_status(rt, "coder", lambda s: s.cli_pid is None, TURN_BOUND)
            two = await rt.ask("coder", "second prompt")
        assert await cli_pid(rt) != pid
    assert two.text == "said 'second prompt'" and two.session_id == one.session_id
    seen_by_model(claude, "first prompt", "second prompt")


async def test_recycling_after_recycle_turns(claude: Claude) -> None:
    claude.api.set_script(echo)
    async with warm_agent(claude, recycle_turns=2) as rt:
        pids = []
        with trio.fail_after(TURN_BOUND):
            for prompt in ("first prompt", "second prompt", "third prompt"):
                response = await rt.ask("coder", prompt)
                pids.append((await rt.status("coder")).cli_pid)
    assert pids[0] is None or pids[1] is None  # the second turn ended its process
    assert pids[2] is not None
    assert response.text == "said 'third prompt'"
    seen_by_model(claude, "first prompt", "second prompt", "third prompt")


async def test_the_next_runtime_reaps_an_idle_warm_cli(claude: Claude, tmp_path: Path) -> None:
    store = tmp_path / "sessions.sqlite3"
    claude.api.set_script(echo)
    options = claude.agent_options(keep_alive=600, kill_grace=1.0)
    with trio.fail_after(TURN_BOUND):
        child = await trio.lowlevel.open_process(
            [sys.executable, str(CHILD_PROGRAM), str(store), "--idle"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            # Runtimes of other tests sweep stale cgroups: this one's CLI must be found by
            # the store's record.
            env={**os.environ, "AGENTRT_CGROUP": "off"},
        )
        try:
            assert child.stdin is not None and child.stdout is not None
            await child.stdin.send_all(json.dumps(options).encode())
            await child.stdin.aclose()
            output = await child.stdout.receive_some(65536)
            assert b"ANSWER said 'first prompt'" in output
            warm = await wait_for_process(claude.marker, lambda p: "claude" in p.cmdline)
            # Stopped, so that it cannot see its stdin close with the program and exit by itself
            # (it does, some milliseconds later): a CLI busy or hung when its program dies is the
            # one the reaper exists for, and a stopped one still dies by the ladder's SIGKILL.
            os.kill(warm.pid, signal.SIGSTOP)
            # The program's fence guard would kill its CLI at once (tests/test_fence_guard.py):
            # killed first, as a kill of the whole session does, so the reaper is what is left.
            for pid in fence_guards(child.pid):
                os.kill(pid, signal.SIGKILL)
            child.kill()
            await child.wait()
        finally:
            if child.returncode is None:
                child.kill()
            with trio.CancelScope(shield=True):
                await child.wait()
                assert child.stdout is not None
                await child.stdout.aclose()
        # The dead program's warm CLI idles on without it.
        assert running(warm.pid)
        async with open_runtime(store=SQLiteStore(store)) as rt:
            assert marked(MARKER_VAR, claude.marker) == []
            await rt.start_agent(Agent, name="coder", backend="claude", **options)
            again = await rt.ask("coder", "second prompt")
    assert again.text == "said 'second prompt'"
    seen_by_model(claude, "first prompt", "second prompt")


async def test_an_idle_warm_cli_gives_its_slot_to_a_waiting_turn(claude: Claude) -> None:
    claude.api.set_script(echo)
    async with open_runtime(store=MemoryStore(), max_processes=1) as rt:
        for name in ("a", "b"):
            await rt.start_agent(
                Agent, name=name, backend="claude", keep_alive=600, **claude.agent_options()
            )
        with trio.fail_after(TURN_BOUND):
            await rt.ask("a", "first prompt")
            a_pid = await cli_pid(rt, "a")
            b_answer: Response = await rt.ask("b", "second prompt")
        assert not running(a_pid) and (await rt.status("a")).cli_pid is None
        assert rt.statistics().processes_in_use == 1
    assert b_answer.text == "said 'second prompt'"


async def test_a_cli_killed_racing_the_next_ask_loses_no_prompt(claude: Claude) -> None:
    # However the kill and the ask interleave, before the CLI printed a line of the turn,
    # the ask runs on a new process resuming the conversation, and the model sees its prompt.
    claude.api.set_script(echo)
    async with warm_agent(claude) as rt:
        with trio.fail_after(TURN_BOUND):
            first = await rt.ask("coder", "prompt 0")
        for round in range(1, len(KILL_POINTS) + 1):  # each kill point once
            prompt = f"prompt {round}"
            pid = await cli_pid(rt)
            with trio.fail_after(TURN_BOUND):
                where = KILL_POINTS[round % len(KILL_POINTS)]
                response = await ask_racing_a_kill(rt, "coder", prompt, where)
            assert response.text == f"said {prompt!r}", where
            assert response.session_id == first.session_id
            assert not running(pid) and await cli_pid(rt) != pid
    history = claude.api.message_requests[-1].texts("user")
    assert [t for t in history if t.startswith("prompt ")] == [
        f"prompt {n}" for n in range(len(KILL_POINTS) + 1)
    ]
    assert marked(MARKER_VAR, claude.marker) == []
