"""Background work on a warm agent, on the pinned real claude through the public API: a
background ``sleep 30`` lives across turns with ``background=True``, counted in the status,
and is gone after ``stop_agent``, ``halt``, the runtime's exit or the program's SIGKILL; an
interrupt in band spares it; without the option a turn's end kills it; a bound stops it;
and the turn the CLI starts by itself when a background task ends reaches the agent as a
turn of origin ``task``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio
from proc_helpers import SLACK, store_programs, wait_for_status

from agentrt import (
    Agent,
    Failed,
    MemoryStore,
    Ref,
    Response,
    StopReason,
    TurnFailed,
    open_runtime,
)
from agentrt.testing import AnthropicReply, AnthropicText, AnthropicToolUse, RecordedRequest

from ._claude import Claude, sleeping, tool_results, wait_for_process, wait_until_gone

pytestmark = pytest.mark.realcli

TURN_BOUND = 30
CHILD = Path(__file__).parents[1] / "background_child.py"


def starts_in_background(command: str) -> Any:
    """A script: the first prompt's model call starts ``command`` in the background, then
    answers; every later call (a second prompt, a task's notification) answers with text."""

    def script(request: RecordedRequest) -> AnthropicReply:
        last = json.dumps(request.messages[-1].get("content"))
        if "task-notification" in last or "background-task" in last:
            return AnthropicText("the task ended")
        if "start it" in json.dumps(request.messages) and tool_results(request) == 0:
            arguments = {"command": command, "description": "Wait", "run_in_background": True}
            return AnthropicToolUse("Bash", arguments)
        return AnthropicText("ok")

    return script


async def test_background_sleep_lives_across_turns_until_stop_agent(claude: Claude) -> None:
    claude.api.set_script(starts_in_background("sleep 30"))
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(
            Agent,
            name="coder",
            backend="claude",
            keep_alive=60,
            background=True,
            **claude.agent_options(allowed_tools=["Bash"]),
        )
        with trio.fail_after(TURN_BOUND):
            await rt.ask("coder", "start it")
            sleep = await wait_for_process(claude.marker, lambda p: p.cmdline == "sleep 30")
            status = await wait_for_status(rt, "coder", lambda s: len(s.background) == 1)
            assert status.background[0].kind == "local_bash"
            pid = status.cli_pid
            second = await rt.ask("coder", "and now?")
        assert second.text == "ok"
        status = await rt.status("coder")
        assert status.cli_pid == pid  # the same warm CLI
        assert sleeping(claude, 30) == [sleep.pid]  # across the second turn
        assert [t.task_id for t in status.background] != []
        await rt.stop_agent("coder")
        with trio.fail_after(SLACK):
            await wait_until_gone(claude.marker)
        assert sleeping(claude, 30) == []


async def test_halt_ends_the_background_work(claude: Claude) -> None:
    claude.api.set_script(starts_in_background("sleep 30"))
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(
            Agent,
            name="coder",
            backend="claude",
            keep_alive=60,
            background=True,
            **claude.agent_options(allowed_tools=["Bash"]),
        )
        with trio.fail_after(TURN_BOUND):
            await rt.ask("coder", "start it")
            await wait_for_process(claude.marker, lambda p: p.cmdline == "sleep 30")
            await rt.halt("coder")
            await wait_until_gone(claude.marker)
        status = await rt.status("coder")
        assert status.state == "halted" and status.background == ()


async def test_without_background_the_turns_end_kills_it(claude: Claude) -> None:
    claude.api.set_script(starts_in_background("sleep 30"))
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(
            Agent,
            name="coder",
            backend="claude",
            keep_alive=60,
            **claude.agent_options(allowed_tools=["Bash"]),
        )
        with trio.fail_after(TURN_BOUND):
            await rt.ask("coder", "start it")
        assert sleeping(claude, 30) == []
        assert (await rt.status("coder")).background == ()


async def test_a_bound_stops_a_background_task(claude: Claude) -> None:
    claude.api.set_script(starts_in_background("sleep 30"))
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(
            Agent,
            name="coder",
            backend="claude",
            keep_alive=60,
            background=2,
            **claude.agent_options(allowed_tools=["Bash"]),
        )
        with trio.fail_after(TURN_BOUND):
            await rt.ask("coder", "start it")
            pid = (await rt.status("coder")).cli_pid
            await wait_for_status(rt, "coder", lambda s: s.background == (), bound=TURN_BOUND)
            while sleeping(claude, 30):  # noqa: ASYNC110 (no event for another process's end)
                await trio.sleep(0.05)
        assert (await rt.status("coder")).cli_pid == pid  # stopped in band; the CLI lives


async def test_a_task_end_starts_a_turn_of_origin_task(claude: Claude) -> None:
    seen: list[tuple[Ref, Response]] = []
    arrived = trio.Event()

    class Watches(Agent):
        def handle_response(self, ref: Ref, response: Response) -> None:
            seen.append((ref, response))
            if response.origin == "task":
                arrived.set()

    claude.api.set_script(starts_in_background("sleep 3"))
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(
            Watches,
            name="coder",
            backend="claude",
            keep_alive=60,
            background=True,
            **claude.agent_options(allowed_tools=["Bash"]),
        )
        with trio.fail_after(TURN_BOUND):
            first = await rt.ask("coder", "start it")
            pid = (await rt.status("coder")).cli_pid
            await arrived.wait()
            status = await wait_for_status(rt, "coder", lambda s: s.state == "idle_warm")
            after = await rt.ask("coder", "and now?")
    assert first.origin == "user" and after.origin == "user" and after.text == "ok"
    own = [r for _, r in seen if r.origin == "task"]
    assert len(own) == 1 and own[0].text == "the task ended"
    assert status.turns == 2 and status.cli_pid == pid and status.background == ()


async def test_an_interrupt_in_band_spares_the_background_task(claude: Claude) -> None:
    # The model starts `sleep 30` in the background, then waits in a foreground `sleep 20`;
    # the interrupt ends the turn (and the foreground command), not the background task.
    def script(request: RecordedRequest) -> AnthropicReply:
        results = tool_results(request)
        if results == 0:
            arguments = {"command": "sleep 30", "description": "Wait", "run_in_background": True}
            return AnthropicToolUse("Bash", arguments)
        if results == 1:
            return AnthropicToolUse("Bash", {"command": "sleep 20", "description": "Pause"})
        return AnthropicText("ok")

    claude.api.set_script(script)
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(
            Agent,
            name="coder",
            backend="claude",
            keep_alive=60,
            background=True,
            **claude.agent_options(allowed_tools=["Bash"]),
        )
        with trio.fail_after(TURN_BOUND):
            ref = await rt.tell("coder", "go")
            await wait_for_process(claude.marker, lambda p: p.cmdline == "sleep 20")
            pid = (await rt.status("coder")).cli_pid
            assert await rt.interrupt("coder")
            result = await rt.wait(ref)
            while sleeping(claude, 20):  # noqa: ASYNC110 (no event for another process's end)
                await trio.sleep(0.05)
        assert isinstance(result, Failed) and isinstance(result.error, TurnFailed)
        assert result.error.reason is StopReason.INTERRUPTED
        status = await rt.status("coder")
        assert status.cli_pid == pid and [t.kind for t in status.background] == ["local_bash"]
        assert len(sleeping(claude, 30)) == 1


async def test_the_runtimes_exit_ends_the_background_work(claude: Claude) -> None:
    claude.api.set_script(starts_in_background("sleep 30"))
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(
            Agent,
            name="coder",
            backend="claude",
            keep_alive=60,
            background=True,
            **claude.agent_options(allowed_tools=["Bash"]),
        )
        with trio.fail_after(TURN_BOUND):
            await rt.ask("coder", "start it")
            await wait_for_process(claude.marker, lambda p: p.cmdline == "sleep 30")
    assert sleeping(claude, 30) == []
    with trio.fail_after(SLACK):
        await wait_until_gone(claude.marker)


@pytest.mark.parametrize("store", ["memory", "sqlite"])
async def test_a_killed_program_leaves_no_background_work(
    claude: Claude, store: str, tmp_path: Path
) -> None:
    # The program is SIGKILLed between turns while its warm CLI keeps a background task:
    # both must go with it. On a MemoryStore nothing else would ever kill them (no next
    # program reads that store); its fence guard does, as on a shared store.
    claude.api.set_script(starts_in_background("sleep 30"))
    where = "memory" if store == "memory" else str(tmp_path / "s.sqlite3")
    options = tmp_path / "options.json"
    options.write_text(json.dumps(claude.agent_options(allowed_tools=["Bash"])))
    async with store_programs(CHILD, where) as start:
        program = await start(str(options))
        with trio.fail_after(TURN_BOUND):
            assert await program.line() == "ASKED"
            await wait_for_process(claude.marker, lambda p: p.cmdline == "sleep 30")
        await program.kill()
        with trio.fail_after(SLACK):
            await wait_until_gone(claude.marker)


async def test_stop_task_between_turns_ends_one(claude: Claude) -> None:
    claude.api.set_script(starts_in_background("sleep 30"))
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(
            Agent,
            name="coder",
            backend="claude",
            keep_alive=60,
            background=True,
            **claude.agent_options(allowed_tools=["Bash"]),
        )
        with trio.fail_after(TURN_BOUND):
            await rt.ask("coder", "start it")
            status = await wait_for_status(rt, "coder", lambda s: len(s.background) == 1)
            await rt.stop_task("coder", status.background[0].task_id)
            await wait_for_status(rt, "coder", lambda s: s.background == (), bound=TURN_BOUND)
            while sleeping(claude, 30):  # noqa: ASYNC110 (no event for another process's end)
                await trio.sleep(0.05)
            usage = await rt.context_usage("coder")  # the channel still answers
            again = await rt.ask("coder", "and now?")
        # The CLI tells the model of the stopped task with the next prompt: no turn of its own.
        assert usage is not None and again.origin == "user" and again.text == "the task ended"
        assert (await rt.status("coder")).turns == 2
        assert (await rt.status("coder")).cli_pid == status.cli_pid


async def test_a_restart_ends_the_background_work(claude: Claude) -> None:
    class Crashes(Agent):
        def handle_event(self, event: Any) -> None:
            raise RuntimeError("boom")

    claude.api.set_script(starts_in_background("sleep 30"))
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(
            Crashes,
            name="coder",
            backend="claude",
            keep_alive=60,
            background=True,
            **claude.agent_options(allowed_tools=["Bash"]),
        )
        with trio.fail_after(TURN_BOUND):
            await rt.ask("coder", "start it")
            await wait_for_process(claude.marker, lambda p: p.cmdline == "sleep 30")
            await rt.notify("coder", "crash")
            await wait_for_status(rt, "coder", lambda s: s.restarts == 1, bound=TURN_BOUND)
            while sleeping(claude, 30):  # noqa: ASYNC110 (no event for another process's end)
                await trio.sleep(0.05)
        assert (await rt.status("coder")).background == ()


async def test_a_cli_with_background_work_does_not_hibernate(claude: Claude) -> None:
    claude.api.set_script(starts_in_background("sleep 30"))
    keep_alive = 1.0
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(
            Agent,
            name="coder",
            backend="claude",
            keep_alive=keep_alive,
            background=True,
            **claude.agent_options(allowed_tools=["Bash"]),
        )
        with trio.fail_after(TURN_BOUND):
            await rt.ask("coder", "start it")
            pid = (await rt.status("coder")).cli_pid
            # Three times keep_alive: an idle CLI would have hibernated by now.
            await trio.sleep(3 * keep_alive)
        status = await rt.status("coder")
        assert status.cli_pid == pid and status.state == "idle_warm"
        assert len(status.background) == 1 and len(sleeping(claude, 30)) == 1
