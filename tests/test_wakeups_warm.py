"""A warm agent's wake-ups (Claude's ``ScheduleWakeup`` on a live CLI): stored as a
per-turn agent's are, and fired once, by the CLI if it still lives when it is due (its turn
of its own is the wake-up's, origin ``wakeup``, and the stored copy is dropped), else, once
the CLI has ended (here: ``keep_alive`` ran out), by the runtime from the store.

The fake live CLI plays Claude Code (`agentrt.testing.fake_cli`, step "live"): the turn
calls ScheduleWakeup with a delay of a second or two, and the CLI fires it by printing a turn
of its own between turns. (The real claude: tests/realcli/test_claude_wakeups_warm.py.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio

import agentrt
from agentrt import Completed, open_runtime
from agentrt.testing import fake_cli_executable

SESSION = "s-1"
WAKEUP_PROMPT = "check the CI run"


def frame(kind: str, *content: dict[str, Any]) -> list[object]:
    role = "assistant" if kind == "assistant" else "user"
    message = {"role": role, "content": list(content)}
    return ["emit", {"type": kind, "message": message, "session_id": SESSION}]


def text_turn(text: str) -> list[list[object]]:
    """The frames of a Claude turn that answers ``text``."""
    return [
        ["emit", {"type": "system", "subtype": "init", "session_id": SESSION, "model": "fake"}],
        frame("assistant", {"type": "text", "text": text}),
        ["emit", {"type": "result", "subtype": "success", "result": text, "session_id": SESSION}],
    ]


def schedules_wakeup(delay: float) -> list[list[object]]:
    """A turn whose model calls ScheduleWakeup, accepted by the CLI, then answers."""
    call = {"delaySeconds": delay, "reason": "wait for CI", "prompt": WAKEUP_PROMPT}
    return [
        ["emit", {"type": "system", "subtype": "init", "session_id": SESSION, "model": "fake"}],
        frame(
            "assistant",
            {"type": "tool_use", "id": "toolu_1", "name": "ScheduleWakeup", "input": call},
        ),
        frame(
            "user",
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "Next wakeup scheduled"},
        ),
        *text_turn("Scheduled.")[1:],
    ]


async def start(rt: agentrt.Runtime, binary: str, keep_alive: float) -> None:
    await rt.start_agent(
        agentrt.Agent,
        name="coder",
        backend="claude",
        binary=binary,
        keep_alive=keep_alive,
        kill_grace=0.3,
        startup=10,
    )


async def test_a_live_cli_fires_its_wakeup_once_and_the_stored_copy_is_dropped(
    tmp_path: Path,
) -> None:
    # Due 1 s after the turn; the CLI fires it 2.5 s after its answer: the stored copy,
    # due meanwhile, waits for the CLI that holds it, and its turn drops it.
    steps = [*schedules_wakeup(1), ["sleep", 2.5], *text_turn("Woke.")]
    live = {"session_id": SESSION, "turns": [steps, [["answer"]]]}
    binary = fake_cli_executable(str(tmp_path), ["live", live])
    async with open_runtime() as rt:
        await start(rt, binary, keep_alive=30)
        async with rt.unsolicited("coder") as turns:
            with trio.fail_after(30):
                assert (await rt.ask("coder", "start the CI run")).text == "Scheduled."
                pid = (await rt.status("coder")).cli_pid
                (kept,) = await rt.schedules("coder")
                assert (kept.origin, kept.prompt) == ("wakeup", WAKEUP_PROMPT)
                turn = await turns.__anext__()
        assert turn.origin == "wakeup"
        assert isinstance(turn.result, Completed)
        assert (turn.result.response.text, turn.result.response.origin) == ("Woke.", "wakeup")
        # Dropped before the turn settled: the runtime never fires a second one.
        assert await rt.schedules("coder") == ()
        # The CLI it was warm on ran it, and runs the next prompt too.
        assert (await rt.ask("coder", "next")).text == "2: next"
        assert (await rt.status("coder")).cli_pid == pid


async def test_a_wakeup_whose_warm_cli_ended_first_is_fired_by_the_runtime(
    tmp_path: Path,
) -> None:
    # The CLI hibernates 0.5 s after the turn (keep_alive), before its wake-up is due (2 s):
    # the stored copy fires then, on a new process resuming the conversation.
    runs = str(tmp_path / "runs")
    first = {"session_id": SESSION, "turns": [schedules_wakeup(2)]}
    then = {"turns": [[["answer"]]]}
    program = ["by_run", runs, [[["live", first]], [["live", then]]]]
    binary = fake_cli_executable(str(tmp_path), program)
    async with open_runtime() as rt:
        await start(rt, binary, keep_alive=0.5)
        async with rt.unsolicited("coder") as turns:
            with trio.fail_after(30):
                assert (await rt.ask("coder", "start the CI run")).text == "Scheduled."
                turn = await turns.__anext__()
        assert turn.origin == "wakeup"
        assert isinstance(turn.result, Completed)
        assert turn.result.response.text == f"1: {WAKEUP_PROMPT}"
        assert turn.result.response.session_id == SESSION  # resumed
        assert await rt.schedules("coder") == ()


async def test_a_wakeup_outlives_its_warm_cli_stopped_with_the_agent(tmp_path: Path) -> None:
    # stop_agent ends the CLI that held it: the stored copy fires once the agent runs again.
    runs = str(tmp_path / "runs")
    first = {"session_id": SESSION, "turns": [schedules_wakeup(1)]}
    then = {"turns": [[["answer"]]]}
    program = ["by_run", runs, [[["live", first]], [["live", then]]]]
    binary = fake_cli_executable(str(tmp_path), program)
    async with open_runtime() as rt:
        await start(rt, binary, keep_alive=30)
        with trio.fail_after(30):
            assert (await rt.ask("coder", "start the CI run")).text == "Scheduled."
            await rt.stop_agent("coder")
            (kept,) = await rt.schedules("coder")
            assert kept.origin == "wakeup"
            await start(rt, binary, keep_alive=30)
            async with rt.unsolicited("coder") as turns:
                turn = await turns.__anext__()
        assert isinstance(turn.result, Completed)
        assert (turn.origin, turn.result.response.text) == ("wakeup", f"1: {WAKEUP_PROMPT}")
        assert await rt.schedules("coder") == ()


async def test_a_halt_ends_the_cli_holding_a_wakeup_whose_copy_then_waits_for_unhalt(
    tmp_path: Path,
) -> None:
    # Halted, the agent takes no turn its CLI would start: the CLI ends, and the stored copy
    # queues when due, running once the agent is unhalted.
    runs = str(tmp_path / "runs")
    first = {"session_id": SESSION, "turns": [schedules_wakeup(1)]}
    then = {"turns": [[["answer"]]]}
    program = ["by_run", runs, [[["live", first]], [["live", then]]]]
    binary = fake_cli_executable(str(tmp_path), program)
    async with open_runtime() as rt:
        await start(rt, binary, keep_alive=30)
        async with rt.unsolicited("coder") as turns:
            with trio.fail_after(30):
                assert (await rt.ask("coder", "start the CI run")).text == "Scheduled."
                await rt.halt("coder")
                while (await rt.status("coder")).queued == 0:  # noqa: ASYNC110 (no event)
                    await trio.sleep(0.05)
                assert (await rt.status("coder")).cli_pid is None
                await rt.unhalt("coder")
                turn = await turns.__anext__()
        assert isinstance(turn.result, Completed)
        assert (turn.origin, turn.result.response.text) == ("wakeup", f"1: {WAKEUP_PROMPT}")
