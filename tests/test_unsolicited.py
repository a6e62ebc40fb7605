"""``rt.unsolicited(name)``: the turns an agent runs that nobody asked for with ``ask`` or
``tell`` (origin ``schedule``, ``wakeup``, ``task``), each as it ends, with its ref and its
result; from the moment the reader is opened, never making the agent wait (a slow reader
loses the oldest, counted), ended with the agent; the same on the asyncio and sync faces.
(Real claude's task turns: tests/realcli/test_claude_background.py.)"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import trio
from _helpers import echo
from doc_blocks import doc_block
from test_wakeups import WakingBackend, schedules_wakeup
from trio.testing import MockClock

import agentrt
import agentrt.asyncio
import agentrt.sync
from agentrt import (
    Completed,
    Failed,
    InvalidOptions,
    SQLiteStore,
    StopReason,
    TurnFailed,
    UnsolicitedTurn,
    open_runtime,
)
from agentrt.testing import Fail, ScriptedBackend, fake_cli_executable

# The turns a reader may fall behind by (documented on `Runtime.unsolicited`).
HELD_TURNS = 100


def answered(turn: UnsolicitedTurn) -> tuple[str, str]:
    assert isinstance(turn.result, Completed), turn
    assert turn.result.response.origin == turn.origin
    return turn.origin, turn.result.response.text


async def test_each_fire_of_a_schedule_and_a_wakeup_reaches_the_reader_as_it_ends(
    autojump_clock: MockClock,
) -> None:
    backend = WakingBackend(schedules_wakeup(90, "check the CI run"), default=echo)
    async with open_runtime() as rt:
        await rt.start_agent(agentrt.Agent, name="coder", backend=backend)
        start = trio.current_time()
        async with rt.unsolicited("coder") as turns:
            await rt.ask("coder", "start the CI run")  # asked for: not the reader's
            kept = await rt.schedule("coder", "status?", every=60)
            seen = []
            for _ in range(3):
                turn = await turns.__anext__()
                seen.append((trio.current_time() - start, *answered(turn)))
                if turn.origin == "schedule":
                    assert turn.ref == (await rt.schedules("coder"))[-1].last_ref
            await rt.unschedule("coder", kept.id)
        assert seen == [
            (60, "schedule", "echo status?"),
            (90, "wakeup", "echo check the CI run"),
            (120, "schedule", "echo status?"),
        ]
        assert turns.dropped == 0
        # Closed: what ends later is no longer kept for it.
        await rt.schedule("coder", "again", every=10)
        await trio.sleep(35)
        assert [turn async for turn in turns] == []


async def test_a_failed_fire_reaches_the_reader_with_its_error(autojump_clock: MockClock) -> None:
    backend = ScriptedBackend([Fail(StopReason.CLI_ERROR, "the model refused")], default=echo)
    async with open_runtime() as rt:
        await rt.start_agent(agentrt.Agent, name="coder", backend=backend)
        turns = rt.unsolicited("coder")
        await rt.schedule("coder", "status?", every=60)
        turn = await turns.__anext__()
        assert turn.origin == "schedule"
        assert isinstance(turn.result, Failed)
        assert isinstance(turn.result.error, TurnFailed)
        assert turn.result.error.reason is StopReason.CLI_ERROR
        assert answered(await turns.__anext__()) == ("schedule", "echo status?")


async def test_a_slow_reader_loses_the_oldest_counted_and_never_holds_the_agent_back(
    autojump_clock: MockClock,
) -> None:
    async with open_runtime() as rt:
        await rt.start_agent(agentrt.Agent, name="coder", backend=ScriptedBackend(default=echo))
        turns = rt.unsolicited("coder")
        fires = HELD_TURNS + 50
        await rt.schedule("coder", "tick", every=1)
        await trio.sleep(fires + 0.5)  # nobody reads meanwhile
        (kept,) = await rt.schedules("coder")
        assert kept.last_ref is not None
        last = await rt.poll(kept.last_ref)
        assert isinstance(last, Completed)  # the agent went on: every fire ran
        assert turns.dropped == 50
        # The oldest 50 went: the first one read is the 51st fire, the next one after it.
        first, second = await turns.__anext__(), await turns.__anext__()
        assert first.ref.id == kept.last_ref.id - (HELD_TURNS - 1)
        assert second.ref.id == first.ref.id + 1
        assert turns.dropped == 50


async def test_a_reader_ends_with_its_agent_after_the_turns_before(
    autojump_clock: MockClock,
) -> None:
    async with open_runtime() as rt:
        await rt.start_agent(agentrt.Agent, name="coder", backend=ScriptedBackend(default=echo))
        turns = rt.unsolicited("coder")
        kept = await rt.schedule("coder", "tick", every=60)
        await rt.run_schedule("coder", kept.id)
        await trio.sleep(1)
        await rt.stop_agent("coder")
        assert [answered(turn) async for turn in turns] == [("schedule", "echo tick")]
        with pytest.raises(agentrt.AgentNotFound):
            rt.unsolicited("coder")


async def test_an_agent_another_program_owns_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "sessions.sqlite3"
    async with open_runtime(store=SQLiteStore(path)) as owner:
        await owner.start_agent(agentrt.Agent, name="coder", backend=ScriptedBackend(default=echo))
        async with open_runtime(store=SQLiteStore(path)) as other:
            with pytest.raises(InvalidOptions) as refused:
                other.unsolicited("coder")
            assert (refused.value.key, refused.value.value) == ("name", "coder")
            # A name no runtime runs: refused alike, without saying it runs elsewhere.
            with pytest.raises(InvalidOptions, match="another runtime's, or none") as refused:
                other.unsolicited("nobody")
            assert "runs in another runtime" not in str(refused.value)


async def test_a_turn_a_warm_cli_starts_by_itself_reaches_the_reader(tmp_path: Path) -> None:
    # The fake live CLI answers the prompt, then (0.5 s later, between turns) runs a turn of
    # its own, as Claude Code does on a background task's notification.
    own_turn = [
        {"type": "system", "subtype": "init", "session_id": "s-1", "model": "fake"},
        {"type": "assistant", "message": {"content": [{"type": "text", "text": "CI passed."}]}},
        {"type": "result", "subtype": "success", "result": "CI passed.", "session_id": "s-1"},
    ]
    steps = [["answer"], ["sleep", 0.5], *(["emit", frame] for frame in own_turn)]
    binary = fake_cli_executable(str(tmp_path), ["live", {"session_id": "s-1", "turns": [steps]}])
    async with open_runtime() as rt:
        await rt.start_agent(
            agentrt.Agent,
            name="coder",
            backend="claude",
            binary=binary,
            keep_alive=30,
            background=True,
            kill_grace=0.3,
        )
        async with rt.unsolicited("coder") as turns:
            assert (await rt.ask("coder", "run CI")).text == "1: run CI"
            with trio.fail_after(30):
                turn = await turns.__anext__()
        assert answered(turn) == ("task", "CI passed.")
        assert await rt.poll(turn.ref) == turn.result


def test_the_sync_face_reads_the_turns_nobody_asked_for(tmp_path: Path) -> None:
    with agentrt.sync.open_runtime(store=SQLiteStore(tmp_path / "s.sqlite3")) as rt:
        rt.start_agent(agentrt.Agent, name="coder", backend=ScriptedBackend(default=echo))
        with rt.unsolicited("coder") as turns:
            kept = rt.schedule("coder", "status?", every=3600)
            assert rt.run_schedule("coder", kept.id)
            turn = next(turns)
        assert answered(turn) == ("schedule", "echo status?")
        assert turn.ref == rt.schedules("coder")[0].last_ref


def test_the_asyncio_face_reads_the_turns_nobody_asked_for(tmp_path: Path) -> None:
    async def main() -> UnsolicitedTurn:
        store = SQLiteStore(tmp_path / "s.sqlite3")
        async with agentrt.asyncio.open_runtime(store=store) as rt:
            await rt.start_agent(agentrt.Agent, name="coder", backend=ScriptedBackend(default=echo))
            async with rt.unsolicited("coder") as turns:
                kept = await rt.schedule("coder", "status?", every=3600)
                assert await rt.run_schedule("coder", kept.id)
                async for turn in turns:
                    return turn
        raise AssertionError("no turn")

    assert answered(asyncio.run(main())) == ("schedule", "echo status?")


async def test_the_guides_reader_block_runs(
    autojump_clock: MockClock, capsys: pytest.CaptureFixture[str]
) -> None:
    namespace: dict[str, Any] = {"agentrt": agentrt}
    exec(compile(doc_block("async def follow_coder"), "long-lived-coders.md", "exec"), namespace)
    async with open_runtime() as rt, trio.open_nursery() as nursery:
        await rt.start_agent(agentrt.Agent, name="coder", backend=ScriptedBackend(default=echo))
        nursery.start_soon(namespace["follow_coder"], rt)
        await trio.sleep(1)
        await rt.schedule("coder", "status?", every=60)
        await trio.sleep(61)
        await rt.stop_agent("coder")  # the reader's loop ends with the agent
    printed = capsys.readouterr().out.split()
    assert printed[0] == "schedule" and printed[-2:] == ["echo", "status?"]


class CrashesOnce(agentrt.Agent):
    """Crashes on the first answer it is handed: its supervisor restarts it."""

    crashed = False

    def handle_response(self, ref: agentrt.Ref, response: agentrt.Response) -> None:
        if not CrashesOnce.crashed:
            CrashesOnce.crashed = True
            raise RuntimeError("a bug in the agent")


async def test_a_reader_outlives_a_supervised_restart(autojump_clock: MockClock) -> None:
    CrashesOnce.crashed = False  # a class's: each restart makes a new instance
    async with open_runtime() as rt:
        await rt.start_agent(CrashesOnce, name="coder", backend=ScriptedBackend(default=echo))
        async with rt.unsolicited("coder") as turns:
            await rt.schedule("coder", "tick", every=60)
            crashed = await turns.__anext__()  # the fire whose answer crashed the agent
            assert isinstance(crashed.result, Failed)
            assert isinstance(crashed.result.error, agentrt.AgentStopped)
            assert answered(await turns.__anext__()) == ("schedule", "echo tick")
        assert (await rt.status("coder")).restarts == 1
