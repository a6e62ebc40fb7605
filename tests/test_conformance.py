"""Backend conformance: the same behaviour through the public API for every backend.

Each kit plays the same turns with its own backend: the scripted backend (in process), and
Claude and Codex driving `agentrt.testing.fake_cli_executable` as their binary, which replays
the stdout recorded from the real CLIs (tests/fixtures/claude/2.1.332,
tests/fixtures/codex/0.171.0) or hangs over a process tree whose grandchild is in a session
of its own and ignores SIGTERM (what a CLI's shell tool leaves when the CLI dies).

Checked for every kit: one terminal event per turn, and it ends the turn's event stream;
the session id of the first turn is what the second turn's command resumes (``--resume`` /
``exec resume``); a failed turn reaches both the caller (`TurnFailed`) and the agent
(``handle_error``); interrupt, the watchdog and stop_agent end the turn and leave no
process of its tree running.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
from proc_helpers import IGNORE_TERM, Watcher, child, running

import agentrt
from agentrt import (
    AgentStopped,
    ErrorEvent,
    Event,
    SessionEvent,
    StopReason,
    TurnFailed,
    Usage,
    UsageEvent,
)
from agentrt.backend import Backend
from agentrt.backends.claude import ClaudeBackend
from agentrt.backends.codex import CodexBackend
from agentrt.testing import Fail, ScriptedBackend, Sleep, fake_cli_executable, reply

FIXTURES = Path(__file__).parent / "fixtures"
CLAUDE = FIXTURES / "claude" / "2.1.332"
CODEX = FIXTURES / "codex" / "0.171.0"
SCRIPTED_SESSION = "scripted-session-1"

# A turn of the conformance scenarios, played by each kit in its backend's own terms.
TURN_ONE = "turn one"
TURN_TWO = "turn two"  # the same session, resumed
AUTH_ERROR = "auth error"
HANG = "hang"  # a session id, then a process tree that never answers

# The process tree of HANG: the CLI, a child in its group, and a grandchild in a session of
# its own that ignores SIGTERM. Each announces its pid with a {"type": "spawned"} line.
TREE = [child(child(IGNORE_TERM, ["hang"], setsid=True), ["hang"]), ["hang"]]
TREE_SIZE = 2  # announced pids: the child and the grandchild

# Short graces keep the process kits fast; the watchdog leaves the tree time to come up.
FAST = {"kill_grace": 0.3}
WATCHDOG = 1.0


def first_line(path: Path) -> Any:
    return json.loads(path.read_text().splitlines()[0])


@attrs.define
class Kit:
    """One backend, and how it plays the scenario turns."""

    backend: Backend
    # The options of an agent whose turns play ``turns``, in order.
    options: Callable[[Sequence[str]], dict[str, Any]]
    # The session id the n-th turn's command was asked to resume.
    resumed: Callable[[int], str | None]
    # What each successful turn's Response.usage should be.
    usage: dict[str, Usage]


def scripted_kit(tmp_path: Path) -> Kit:
    backend = ScriptedBackend()
    hang: list[object] = [
        SessionEvent(session_id=SCRIPTED_SESSION),
        *([{"type": "spawned"}] * TREE_SIZE),
        Sleep(3600),
    ]
    steps: dict[str, list[object]] = {
        TURN_ONE: [
            SessionEvent(session_id=SCRIPTED_SESSION),
            UsageEvent(usage=Usage(input_tokens=3, output_tokens=2)),
            *reply("one", session_id=SCRIPTED_SESSION)[1:],
        ],
        TURN_TWO: [
            SessionEvent(session_id=SCRIPTED_SESSION),
            UsageEvent(usage=Usage(input_tokens=30, output_tokens=20)),
            *reply("two", session_id=SCRIPTED_SESSION)[1:],
        ],
        AUTH_ERROR: [
            SessionEvent(session_id=SCRIPTED_SESSION),
            Fail(StopReason.AUTHENTICATION_FAILED, "401 Unauthorized"),
        ],
        HANG: hang,
    }

    def options(turns: Sequence[str]) -> dict[str, Any]:
        for turn in turns:
            backend.push(*steps[turn])
        return {}

    return Kit(
        backend,
        options,
        lambda n: backend.calls[n].session_id,
        {
            TURN_ONE: Usage(input_tokens=3, output_tokens=2),
            TURN_TWO: Usage(input_tokens=30, output_tokens=20),
        },
    )


def cli_kit(
    tmp_path: Path,
    name: str,
    backend: Backend,
    steps: dict[str, list[Any]],
    usage: dict[str, Usage],
    resume_word: str,
) -> Kit:
    """A kit whose binary is the fake CLI; every run records what it was given.
    ``resume_word`` is the argument the CLI's session id follows when it resumes."""

    def records() -> list[dict[str, Any]]:
        return [
            json.loads((tmp_path / f"run-{n}.json").read_text())
            for n in range(len(list(tmp_path.glob("run-*.json"))))
        ]

    def agent_options(turns: Sequence[str]) -> dict[str, Any]:
        programs = [
            [["record", str(tmp_path / f"run-{n}.json")], *steps[turn]]
            for n, turn in enumerate(turns)
        ]
        binary = fake_cli_executable(
            str(tmp_path), ["by_run", str(tmp_path / "runs"), programs], name=name
        )
        return {"binary": binary, "cwd": str(tmp_path), "env_policy": "isolated"}

    def resumed(n: int) -> str | None:
        run = records()[n]
        argv = run["argv"]
        at = argv.index(resume_word) + 1 if resume_word in argv else None
        session_id = None if at is None else argv[at]
        # Nothing else differs from the backend's own command for that session id.
        command = backend.command(backend.parse_options({}), "", session_id=session_id)
        assert argv == list(command.argv[1:]), argv
        return session_id

    return Kit(backend, agent_options, resumed, usage)


def claude_kit(tmp_path: Path) -> Kit:
    init = first_line(CLAUDE / "text_turn.jsonl")
    steps = {
        TURN_ONE: [["replay", str(CLAUDE / "text_turn.jsonl")]],
        TURN_TWO: [["replay", str(CLAUDE / "resume_turn.jsonl")]],
        AUTH_ERROR: [["replay", str(CLAUDE / "error_401.jsonl")], ["exit", 1]],
        HANG: [["emit", init], *TREE],
    }
    usage = {
        TURN_ONE: Usage(input_tokens=21, output_tokens=8),
        TURN_TWO: Usage(input_tokens=10, output_tokens=5),
    }
    return cli_kit(tmp_path, "claude", ClaudeBackend(), steps, usage, "--resume")


def codex_kit(tmp_path: Path) -> Kit:
    started = first_line(CODEX / "thread_turn1.jsonl")
    steps = {
        TURN_ONE: [["replay", str(CODEX / "thread_turn1.jsonl")]],
        TURN_TWO: [["replay", str(CODEX / "thread_turn2.jsonl")]],
        AUTH_ERROR: [["replay", str(CODEX / "http_401.jsonl")], ["exit", 1]],
        HANG: [["emit", started], ["emit", {"type": "turn.started"}], *TREE],
    }
    # codex printed the thread's running totals (250 in, 110 cached, 16 out after turn two);
    # each Response reports its own turn's share.
    usage = {
        TURN_ONE: Usage(input_tokens=70, output_tokens=7, cache_read_input_tokens=30),
        TURN_TWO: Usage(input_tokens=70, output_tokens=9, cache_read_input_tokens=80),
    }
    return cli_kit(tmp_path, "codex", CodexBackend(), steps, usage, "resume")


@pytest.fixture(params=["scripted", "claude", "codex"])
def kit(request: pytest.FixtureRequest, tmp_path: Path) -> Kit:
    make = {"scripted": scripted_kit, "claude": claude_kit, "codex": codex_kit}[request.param]
    return make(tmp_path)


async def tree_up(watcher: Watcher) -> None:
    await watcher.wait_for(lambda: len(watcher.announced()) == TREE_SIZE)


@asynccontextmanager
async def agent(
    kit: Kit, turns: Sequence[str], **options: Any
) -> AsyncIterator[tuple[agentrt.Runtime, Watcher]]:
    watcher = Watcher()
    async with agentrt.open_runtime() as rt:
        await rt.start_agent(
            watcher, name="a", backend=kit.backend, **FAST, **options, **kit.options(turns)
        )
        yield rt, watcher


async def collect(rt: agentrt.Runtime, ref: agentrt.Ref) -> list[Event]:
    return [event async for event in rt.stream(ref)]


def assert_tree_gone(watcher: Watcher) -> None:
    assert len(watcher.announced()) == TREE_SIZE, "the process tree never came up"
    assert [pid for pid in watcher.spawned() if running(pid)] == []


async def test_one_terminal_event_per_turn_ending_its_stream(kit: Kit) -> None:
    async with agent(kit, [TURN_ONE, AUTH_ERROR]) as (rt, watcher):
        ok = await collect(rt, await rt.tell("a", "hello"))
        failed = await collect(rt, await rt.tell("a", "again"))
    for events in (ok, failed):
        assert [e.is_terminal for e in events].count(True) == 1 and events[-1].is_terminal
    assert ok[-1].kind == "result"
    assert isinstance(failed[-1], ErrorEvent)
    assert failed[-1].reason is StopReason.AUTHENTICATION_FAILED
    # The agent saw the same two terminal events, once each.
    assert [e for e in watcher.events if e.is_terminal] == [ok[-1], failed[-1]]


async def test_the_session_is_threaded_across_two_turns(kit: Kit) -> None:
    async with agent(kit, [TURN_ONE, TURN_TWO]) as (rt, watcher):
        first = await rt.ask("a", "one")
        second = await rt.ask("a", "two")
    assert first.session_id is not None
    assert kit.resumed(0) is None
    assert kit.resumed(1) == first.session_id
    assert second.session_id is not None
    assert watcher.responses == [first, second]


@pytest.mark.parametrize(
    "kit",
    [
        "scripted",
        "claude",
        "codex",
    ],
    indirect=True,
)
async def test_each_response_reports_its_own_turns_usage(kit: Kit) -> None:
    async with agent(kit, [TURN_ONE, TURN_TWO]) as (rt, _):
        first = await rt.ask("a", "one")
        second = await rt.ask("a", "two")
    assert (first.usage, second.usage) == (kit.usage[TURN_ONE], kit.usage[TURN_TWO])


async def test_an_error_reaches_the_caller_and_the_agent(kit: Kit) -> None:
    async with agent(kit, [AUTH_ERROR]) as (rt, watcher):
        with pytest.raises(TurnFailed) as caught:
            await rt.ask("a", "hello")
        assert (await rt.status("a")).state == "idle"  # the agent survives its failed turn
    error = caught.value
    assert error.reason is StopReason.AUTHENTICATION_FAILED
    assert watcher.errors == [error]
    assert error.session_id is not None


async def test_interrupt_ends_the_turn_and_its_process_tree(kit: Kit) -> None:
    async with agent(kit, [HANG]) as (rt, watcher):
        ref = await rt.tell("a", "hang")
        with trio.fail_after(10):
            await tree_up(watcher)
            assert await rt.interrupt("a")
            result = await rt.wait(ref)
        assert_tree_gone(watcher)
    assert isinstance(result, agentrt.Failed)
    assert isinstance(result.error, TurnFailed)
    assert result.error.reason is StopReason.INTERRUPTED
    assert result.error.session_id is not None  # checkpointed before the interrupt
    assert watcher.errors == [result.error]


async def test_the_watchdog_ends_the_turn_and_its_process_tree(kit: Kit) -> None:
    async with agent(kit, [HANG], watchdog=WATCHDOG) as (rt, watcher):
        with trio.fail_after(10), pytest.raises(TurnFailed) as caught:
            await rt.ask("a", "hang")
        assert_tree_gone(watcher)
    assert caught.value.reason is StopReason.TOTAL_TIMEOUT
    assert watcher.errors == [caught.value]


async def test_stop_agent_ends_the_turn_and_its_process_tree(kit: Kit) -> None:
    async with agent(kit, [HANG]) as (rt, watcher):

        async def stop_when_up() -> None:
            await tree_up(watcher)
            await rt.stop_agent("a")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(stop_when_up)
            with trio.fail_after(10), pytest.raises(AgentStopped):
                await rt.ask("a", "hang")
        # stop_agent has returned: the turn's cleanup is over.
        assert_tree_gone(watcher)
        assert rt.agents() == ()
