"""Chaos lab: nine faults, each through the public API with a fake ``claude`` binary (real
processes), in the spirit of GenAgent's Chaos Lab. After each: the agent (or the program
restarted) goes on with its session, and no process is left (the autouse fixture checks
this process's descendants and markers; the SIGKILL scenario also checks the dead child's).

A. the CLI is killed mid-turn          F. a sibling crashes under one_for_all
B. a stream callback raises            G. a sibling crashes under rest_for_one
C. the agent crashes                   H. the queue overflows
D. the watchdog ends a turn            I. the whole program is SIGKILLed mid-turn and
E. a sibling crashes under one_for_one    started again
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
from cli_programs import SID, FakeClaude
from proc_helpers import running, turn_processes, wait_for_status, wait_until
from test_durable_cli import CHILD, killed_child

from agentrt import (
    Agent,
    AgentStopped,
    Completed,
    Event,
    Failed,
    MailboxFull,
    Ref,
    Response,
    Runtime,
    SessionEvent,
    SQLiteStore,
    StopReason,
    TurnFailed,
    open_runtime,
)

OURS = f"{os.getpid()}."


class Chaos(Agent):
    """Signals its first session event; can be told to fail once in a callback."""

    def __init__(self, *, fail_in: str | None = None) -> None:
        self.session_seen = trio.Event()
        self.fail_in = fail_in

    def _maybe_fail(self, callback: str) -> None:
        if self.fail_in == callback:
            self.fail_in = None
            raise RuntimeError(f"chaos in {callback}")

    def handle_stream_event(self, event: Event) -> None:
        if isinstance(event, SessionEvent):
            self.session_seen.set()
            self._maybe_fail("handle_stream_event")

    def handle_response(self, ref: Ref, response: Response) -> None:
        self._maybe_fail("handle_response")


async def start(rt: Runtime, name: str, cli: FakeClaude, agent: Any = None, **options: Any) -> Any:
    """Start ``name`` on ``cli`` with short kill graces; ``agent`` defaults to a `Chaos`."""
    agent = agent or Chaos()
    await rt.start_agent(
        agent, name=name, backend="claude", binary=cli.binary, kill_grace=0.3, **options
    )
    return agent


async def mid_turn(rt: Runtime, name: str, agent: Agent) -> tuple[Ref, int]:
    """Tell ``name`` a prompt its hanging CLI takes; return the ref and the CLI's pid."""
    assert isinstance(agent, Chaos)
    ref = await rt.tell(name, "a long job")
    with trio.fail_after(10):
        await agent.session_seen.wait()
    agent.session_seen = trio.Event()
    [live] = [r for r in await rt.store.live_processes() if r.name == name]
    assert live.live_pid is not None and live.live_marker is not None
    marker = live.live_marker
    await wait_until(lambda: len(turn_processes(marker)) == 2)  # the CLI and its tool
    return ref, live.live_pid


async def answers_on_its_session(rt: Runtime, name: str, cli: FakeClaude) -> None:
    cli.answer(f"{name} is back")
    response = await rt.ask(name, "go on")
    assert (response.text, response.session_id) == (f"{name} is back", SID)
    assert cli.resumed() == SID


def store(tmp_path: Path) -> SQLiteStore:
    return SQLiteStore(tmp_path / "sessions.sqlite3")


async def test_a_the_cli_is_killed_mid_turn(tmp_path: Path) -> None:
    cli = FakeClaude(tmp_path / "cli")
    async with open_runtime(store=store(tmp_path)) as rt:
        agent = await start(rt, "coder", cli)
        ref, pid = await mid_turn(rt, "coder", agent)
        os.kill(pid, signal.SIGKILL)
        result = await rt.wait(ref)
        assert isinstance(result, Failed) and isinstance(result.error, TurnFailed)
        assert result.error.reason is StopReason.PROCESS_CRASHED
        assert turn_processes(OURS) == []  # its setsid'd tool went with it
        await answers_on_its_session(rt, "coder", cli)


async def test_b_a_stream_callback_raises(tmp_path: Path) -> None:
    cli = FakeClaude(tmp_path / "cli")
    async with open_runtime(store=store(tmp_path)) as rt:
        await start(rt, "coder", cli, Chaos(fail_in="handle_stream_event"))
        handle = rt.whereis("coder")
        with pytest.raises(TurnFailed) as info:
            await rt.ask("coder", "a long job")
        assert info.value.reason is StopReason.TURN_CRASHED
        assert "chaos in handle_stream_event" in info.value.message
        assert turn_processes(OURS) == []
        assert rt.whereis("coder") == handle  # a failed turn is not a crash
        await answers_on_its_session(rt, "coder", cli)


async def test_c_the_agent_crashes(tmp_path: Path) -> None:
    cli = FakeClaude(tmp_path / "cli")
    cli.answer("first")
    made: list[Chaos] = []

    def factory() -> Chaos:
        made.append(Chaos(fail_in="handle_response" if not made else None))
        return made[-1]

    async with open_runtime(store=store(tmp_path), backoff=0.05) as rt:
        await start(rt, "coder", cli, factory)
        first = rt.whereis("coder")
        with pytest.raises(AgentStopped) as info:
            await rt.ask("coder", "hello")
        assert isinstance(info.value.__cause__, RuntimeError)
        await answers_on_its_session(rt, "coder", cli)
        assert len(made) == 2 and rt.whereis("coder") != first
        assert (await rt.status("coder")).restarts == 1


async def test_d_the_watchdog_ends_a_turn(tmp_path: Path) -> None:
    cli = FakeClaude(tmp_path / "cli")
    async with open_runtime(store=store(tmp_path)) as rt:
        # The watchdog bounds the answer after it too: 0.5 s was less than the fake CLI's
        # whole turn beside load.
        watchdog = 3.0
        await start(rt, "coder", cli, watchdog=watchdog)
        started = trio.current_time()
        with pytest.raises(TurnFailed) as info:
            await rt.ask("coder", "a long job")
        assert info.value.reason is StopReason.TOTAL_TIMEOUT
        assert info.value.session_id == SID
        assert watchdog <= trio.current_time() - started < watchdog + 5
        assert turn_processes(OURS) == []
        await answers_on_its_session(rt, "coder", cli)


@pytest.mark.parametrize(
    ("strategy", "restarted"),
    [("one_for_one", ""), ("one_for_all", "ac"), ("rest_for_one", "c")],
    ids=["e_one_for_one", "f_one_for_all", "g_rest_for_one"],
)
async def test_efg_a_sibling_crashes(tmp_path: Path, strategy: str, restarted: str) -> None:
    clis = {name: FakeClaude(tmp_path / name) for name in "abc"}
    clis["b"].answer("crash")
    async with open_runtime(store=store(tmp_path), strategy=strategy, backoff=0.05) as rt:
        agents: dict[str, Agent] = {}
        for name in "abc":  # start order matters to rest_for_one
            agent = Chaos(fail_in="handle_response" if name == "b" else None)
            agents[name] = await start(rt, name, clis[name], agent)
        handles = {name: rt.whereis(name) for name in "abc"}
        turns = {name: await mid_turn(rt, name, agents[name]) for name in "ac"}
        with pytest.raises(AgentStopped):
            await rt.ask("b", "crash now")
        await wait_for_status(rt, "b", lambda s: s.state != "restarting", bound=10)
        for name in "ac":
            ref, pid = turns[name]
            if name in restarted:
                result = await rt.wait(ref)
                assert isinstance(result, Failed) and isinstance(result.error, AgentStopped)
                assert "restarting with 'b'" in result.error.reason
                assert not running(pid)
                assert rt.whereis(name) != handles[name]
            else:
                assert (await rt.status(name)).state == "processing"
                assert running(pid)
                assert rt.whereis(name) == handles[name]
                await rt.interrupt(name)
                assert isinstance((await rt.wait(ref)), Failed)
        assert rt.whereis("b") != handles["b"]
        for name in "abc":
            await answers_on_its_session(rt, name, clis[name])


async def test_h_the_queue_overflows(tmp_path: Path) -> None:
    cli = FakeClaude(tmp_path / "cli")
    async with open_runtime(store=store(tmp_path)) as rt:
        agent = await start(rt, "coder", cli, max_pending=1)
        running_ref, _ = await mid_turn(rt, "coder", agent)
        queued = await rt.tell("coder", "queued")
        with pytest.raises(MailboxFull) as info:
            await rt.tell("coder", "one too many")
        assert (info.value.limit, info.value.queued) == ("max_pending", 1)
        cli.answer("queued done")
        await rt.interrupt("coder")
        assert isinstance(await rt.wait(running_ref), Failed)
        result = await rt.wait(queued)
        assert isinstance(result, Completed) and result.response.text == "queued done"
        assert cli.resumed() == SID


async def test_i_the_whole_program_is_sigkilled_mid_turn_and_started_again(
    tmp_path: Path,
) -> None:
    cli = FakeClaude(tmp_path / "cli")
    async with killed_child(tmp_path, cli) as (store_path, prefix):
        orphans = turn_processes(prefix)  # the CLI and its tool
        cli.answer("resumed")
        argv = [sys.executable, str(CHILD), str(store_path), cli.binary, str(tmp_path), "ask"]
        with trio.fail_after(60):
            done = await trio.run_process(argv, capture_stdout=True, capture_stderr=True)
        out = done.stdout.decode()
        assert "killed process group" in out, out + done.stderr.decode()
        assert f"ANSWER resumed {SID}" in out
        assert cli.resumed() == SID
        await wait_until(lambda: turn_processes(prefix) == [], bound=5)
        assert not any(running(p.pid) for p in orphans)
