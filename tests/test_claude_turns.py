"""The Claude backend end to end through the public API, with real processes: a fake CLI
(agentrt.testing.fake_cli) is the agent's ``binary``, and ask / tell / interrupt /
stop_agent drive it. Replays of the streams recorded from claude 2.1.332 are in
test_claude_turns_replay.py.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest
import trio
from proc_helpers import (
    IGNORE_INT,
    IGNORE_TERM,
    SLACK,
    Watcher,
    child,
    running,
    wait_for_status,
    wait_until,
)

from agentrt import (
    Agent,
    ErrorEvent,
    Failed,
    InitEvent,
    MemoryStore,
    ResultEvent,
    Runtime,
    StopReason,
    TurnFailed,
    open_runtime,
)
from agentrt.backend import ExitStatus
from agentrt.testing import fake_cli_executable

RECORDED = Path(__file__).parent / "fixtures" / "claude" / "2.1.332"
SYNTHETIC = Path(__file__).parent / "fixtures" / "claude"

# Short graces keep these fast; each test sets the bound it is about.
FAST: dict[str, Any] = {"kill_grace": 0.2, "startup": 10, "watchdog": 30}

TEXT_TURN = str(RECORDED / "text_turn.jsonl")
TEXT_TURN_ID = "ac1a53d3-7171-4419-b5f4-e4b84a8f338f"
PREFIX = ["-p", "--output-format", "stream-json", "--verbose", "--include-partial-messages"]


def frames(name: str, directory: Path = RECORDED) -> list[Any]:
    with open(directory / f"{name}.jsonl") as f:
        return [json.loads(line) for line in f]


INIT = frames("text_turn")[0]


def on_sigint_result(session_id: str) -> list[Any]:
    """A step: on SIGINT, print what Claude Code prints when SIGINT ends a turn (recorded:
    sigint_mid_request, a result with subtype error_during_execution), then exit 0."""
    result = {**frames("sigint_mid_request")[-1], "session_id": session_id}
    return ["on", "SIGINT", [["emit", result]]]


def recorded(path: Path) -> dict[str, Any]:
    with open(path) as f:
        return json.load(f)  # type: ignore[no-any-return]


async def start(
    rt: Runtime,
    tmp_path: Path,
    *steps: Any,
    name: str = "a",
    agent: Agent | None = None,
    **options: Any,
) -> str:
    """Start a claude agent whose binary runs ``steps``; return the binary's path."""
    binary = fake_cli_executable(str(tmp_path), *steps, name=f"claude-{name}")
    await rt.start_agent(
        agent or Agent, name=name, backend="claude", binary=binary, **{**FAST, **options}
    )
    return binary


def reprogram(tmp_path: Path, *steps: Any, name: str = "a") -> None:
    """Give the agent's binary a new program (same path) for its next turns."""
    fake_cli_executable(str(tmp_path), *steps, name=f"claude-{name}")


async def failure(rt: Runtime, prompt: str = "hi", name: str = "a") -> TurnFailed:
    with pytest.raises(TurnFailed) as info:
        await rt.ask(name, prompt)
    return info.value


# --- sessions -----------------------------------------------------------------------------


async def test_ask_twice_resumes_the_first_turns_session(tmp_path: Path) -> None:
    record = tmp_path / "record.json"
    async with open_runtime() as rt:
        await start(rt, tmp_path, ["record", str(record)], ["replay", TEXT_TURN])
        first = await rt.ask("a", "Say hello")
        turn1 = recorded(record)
        second = await rt.ask("a", "And again")
        turn2 = recorded(record)
    assert first.text == "Hello from the fake."
    assert first.session_id == second.session_id == TEXT_TURN_ID
    assert turn1["argv"] == PREFIX
    assert turn1["stdin"] == "Say hello"
    assert turn2["argv"] == [*PREFIX, "--resume", TEXT_TURN_ID]
    assert turn2["stdin"] == "And again"


async def test_an_interrupted_turn_checkpoints_its_id_and_the_next_turn_resumes_it(
    tmp_path: Path,
) -> None:
    head, tail = frames("sigint_mid_request")[:1], frames("sigint_mid_request")[1:]
    session_id = head[0]["session_id"]
    store = MemoryStore()
    record = tmp_path / "record.json"
    async with open_runtime(store=store) as rt:
        # Like Claude Code: SIGINT ends the turn with its last frames and exit 0.
        await start(
            rt,
            tmp_path,
            ["on", "SIGINT", [["emit", frame] for frame in tail]],
            ["emit", head[0]],
            ["hang"],
        )
        ref = await rt.tell("a", "hi")
        await wait_for_status(rt, "a", lambda s: s.session_id == session_id, 5)
        stored = await store.load("a")
        assert stored is not None and stored.session_id == session_id
        assert await rt.interrupt("a")
        outcome = await rt.wait(ref)
        reprogram(tmp_path, ["record", str(record)], ["replay", TEXT_TURN])
        await rt.ask("a", "go on")
    assert isinstance(outcome, Failed) and isinstance(outcome.error, TurnFailed)
    assert outcome.error.reason is StopReason.INTERRUPTED
    assert outcome.error.exit_status == ExitStatus(0)  # the CLI ended on SIGINT by itself
    assert outcome.error.session_id == session_id
    assert recorded(record)["argv"] == [*PREFIX, "--resume", session_id]


async def test_an_interrupt_escalates_to_sigterm_when_sigint_is_ignored(tmp_path: Path) -> None:
    async with open_runtime() as rt:
        await start(rt, tmp_path, IGNORE_INT, ["emit", INIT], ["hang"])
        ref = await rt.tell("a", "hi")
        await wait_for_status(rt, "a", lambda s: s.session_id is not None, 5)
        assert await rt.interrupt("a")
        with trio.fail_after(5):
            outcome = await rt.wait(ref)
    assert isinstance(outcome, Failed) and isinstance(outcome.error, TurnFailed)
    assert outcome.error.reason is StopReason.INTERRUPTED
    assert outcome.error.exit_status == ExitStatus(None, signal.SIGTERM)
    assert outcome.error.session_id == INIT["session_id"]


async def test_several_results_the_last_one_is_the_response(tmp_path: Path) -> None:
    # A background task: result, then (after the task) a second init and result.
    stream = frames("background_task", SYNTHETIC)
    (later,) = [i for i, f in enumerate(stream) if f.get("subtype") == "init" and i > 0]
    stream[later] = {**stream[later], "permissionMode": "plan"}
    async with open_runtime() as rt:
        await start(rt, tmp_path, *(["emit", frame] for frame in stream))
        response = await rt.ask("a", "start the task")
    assert response.text == response.final_message == "The task printed done."
    assert response.cost_usd == 0.0118
    assert response.num_turns == 1
    results = [e for e in response.events if isinstance(e, ResultEvent)]
    assert [r.text for r in results] == ["Started it; I'll report back.", "The task printed done."]
    assert response.terminal is results[-1]
    # What the CLI started with after the task is what the Response shows.
    assert response.init is not None and response.init.permission_mode == "plan"
    assert [e.permission_mode for e in response.events if isinstance(e, InitEvent)] == [
        "default",
        "plan",
    ]


def billed(subtype: str, total_cost_usd: float, output_tokens: int) -> dict[str, Any]:
    """A result frame of INIT's session: the CLI's running total cost and this run's usage."""
    return {
        **frames("text_turn")[-1],
        "subtype": subtype,
        "is_error": subtype != "success",
        "total_cost_usd": total_cost_usd,
        "usage": {"input_tokens": 3, "output_tokens": output_tokens},
    }


async def test_a_failed_turn_is_billed_and_the_resumed_turn_reports_only_its_own_cost(
    tmp_path: Path,
) -> None:
    store = MemoryStore()
    watcher = Watcher()
    async with open_runtime(store=store) as rt:
        await start(
            rt,
            tmp_path,
            ["emit", INIT],
            ["emit", billed("error_max_turns", 0.05, 7)],
            agent=watcher,
        )
        failed = await failure(rt)
        reprogram(tmp_path, ["emit", INIT], ["emit", billed("success", 0.08, 2)])
        response = await rt.ask("a", "go on")
        stored = await store.load("a")
    assert failed.reason is StopReason.CLI_ERROR
    assert failed.cost_usd == 0.05
    assert failed.usage is not None and failed.usage.output_tokens == 7
    terminal = [e for e in watcher.events if isinstance(e, ErrorEvent)]
    assert [(e.cost_usd, e.usage and e.usage.output_tokens) for e in terminal] == [(0.05, 7)]
    # The CLI's 0.08 is the session's total: this turn cost 0.03.
    assert response.cost_usd == pytest.approx(0.03)
    assert stored is not None and stored.cost_usd == pytest.approx(0.08)
    assert stored.session_totals.cost_usd == pytest.approx(0.08)
    assert stored.session_totals.usage.output_tokens == 9


async def test_an_interrupted_turn_is_billed_with_what_the_cli_prints_on_sigint(
    tmp_path: Path,
) -> None:
    bill = billed("error_during_execution", 0.02, 5)
    async with open_runtime() as rt:
        await start(rt, tmp_path, ["on", "SIGINT", [["emit", bill]]], ["emit", INIT], ["hang"])
        ref = await rt.tell("a", "hi")
        await wait_for_status(rt, "a", lambda s: s.session_id is not None, 5)
        assert await rt.interrupt("a")
        outcome = await rt.wait(ref)
    assert isinstance(outcome, Failed) and isinstance(outcome.error, TurnFailed)
    assert outcome.error.reason is StopReason.INTERRUPTED
    assert outcome.error.cost_usd == 0.02
    assert outcome.error.usage is not None and outcome.error.usage.output_tokens == 5


# --- bounds and stop reasons --------------------------------------------------------------

ASSISTANT = frames("text_turn")[1]
HANG_AFTER_INIT = (["emit", INIT], ["hang"])


@pytest.mark.parametrize(
    ("steps", "options", "reason", "message"),
    [
        pytest.param(
            [["hang"]],
            {"startup": 1.5},
            StopReason.STARTUP_TIMEOUT,
            "no stdout line within 1.5 s of spawn",
            id="startup",
        ),
        pytest.param(
            HANG_AFTER_INIT,
            {"first_event": 1.5},
            StopReason.FIRST_EVENT_TIMEOUT,
            "no content within 1.5 s of the turn's start",
            id="first_event",
        ),
        pytest.param(
            HANG_AFTER_INIT,
            {"idle": 1.5},
            StopReason.IDLE_TIMEOUT,
            "no stdout line for 1.5 s",
            id="idle",
        ),
        pytest.param(
            HANG_AFTER_INIT,
            {"watchdog": 1.5},
            StopReason.TOTAL_TIMEOUT,
            "the turn ran longer than its watchdog (1.5 s)",
            id="watchdog",
        ),
        pytest.param(
            [["emit", INIT], ["emit", ASSISTANT], ["exit", 0]],
            {},
            StopReason.MALFORMED_OUTPUT,
            "the CLI exited with code 0 without printing its result",
            id="no_result",
        ),
        pytest.param(
            [["emit", INIT], ["stderr", "segfault-ish\n"], ["kill", "SIGKILL"]],
            {},
            StopReason.PROCESS_CRASHED,
            "the CLI was killed by SIGKILL without printing its result: segfault-ish",
            id="killed_by_signal",
        ),
        pytest.param(
            [["replay", str(RECORDED / "error_429.jsonl")], ["exit", 1]],
            {},
            StopReason.RATE_LIMITED,
            "API Error: Request rejected (429)",
            id="rate_limited",
        ),
        pytest.param(
            [["replay", str(RECORDED / "error_529.jsonl")], ["exit", 1]],
            {},
            StopReason.OVERLOADED,
            "API Error: 529 Overloaded",
            id="overloaded",
        ),
        pytest.param(
            [["replay", str(RECORDED / "error_500.jsonl")], ["exit", 1]],
            {},
            StopReason.CLI_ERROR,  # is_error true with subtype success
            "API Error: 500 Internal server error",
            id="cli_error",
        ),
        pytest.param(
            [["stderr", "Error: Please run /login\n"], ["exit", 1]],
            {},
            StopReason.AUTHENTICATION_FAILED,
            "the CLI exited with code 1 without printing its result: Error: Please run /login",
            id="stderr_marker",
        ),
    ],
)
async def test_every_bound_and_stop_reason_through_ask(
    tmp_path: Path, steps: list[Any], options: dict[str, Any], reason: StopReason, message: str
) -> None:
    async with open_runtime() as rt:
        await start(rt, tmp_path, *steps, **options)
        with trio.fail_after(10):
            error = await failure(rt)
        # The agent lives on and answers the next ask, under the same bound: it must leave
        # room for a fake CLI's start on a loaded machine.
        reprogram(tmp_path, ["replay", TEXT_TURN])
        assert (await rt.ask("a", "again")).text == "Hello from the fake."
    assert error.reason is reason
    assert message in error.message


RETRY_ID = frames("error_401_api_retry")[0]["session_id"]


async def test_a_rejected_key_fails_on_the_first_api_retry_not_after_the_retries(
    tmp_path: Path,
) -> None:
    # Recorded from claude 2.1.332: init, then api_retry 401; the CLI would go on retrying
    # for about 170 s. The turn interrupts it at once (SIGINT: it prints its result, exit 0).
    async with open_runtime() as rt:
        await start(
            rt,
            tmp_path,
            on_sigint_result(RETRY_ID),
            ["replay", str(RECORDED / "error_401_api_retry.jsonl")],
            ["hang"],
        )
        started = trio.current_time()
        error = await failure(rt)
        elapsed = trio.current_time() - started
    assert error.reason is StopReason.AUTHENTICATION_FAILED
    assert "HTTP 401" in error.message
    assert error.exit_status == ExitStatus(0)
    assert error.session_id == RETRY_ID
    assert elapsed < SLACK  # the fake would hang for ever


async def test_session_lost_names_the_unknown_id(tmp_path: Path) -> None:
    lost = "0b7e4a8e-1111-4222-8333-123456789abc"
    record = tmp_path / "record.json"
    async with open_runtime() as rt:
        await start(
            rt,
            tmp_path,
            ["record", str(record)],
            ["replay", str(RECORDED / "resume_unknown.jsonl")],
            ["stderr", f"No conversation found with session ID: {lost}\n"],
            ["exit", 1],
            resume=lost,
        )
        error = await failure(rt)
    assert recorded(record)["argv"] == [*PREFIX, "--resume", lost]
    assert error.reason is StopReason.SESSION_LOST
    assert error.session_id == lost


async def test_a_10_mib_line_fails_the_turn_not_the_agent(tmp_path: Path) -> None:
    record = tmp_path / "record.json"
    async with open_runtime() as rt:
        await start(rt, tmp_path, ["emit", INIT], ["big_line", 10 * 1024 * 1024], ["hang"])
        error = await failure(rt)
        reprogram(tmp_path, ["record", str(record)], ["replay", TEXT_TURN])
        response = await rt.ask("a", "again")
    assert error.reason is StopReason.OUTPUT_LINE_TOO_LONG
    assert "max_line_bytes=8,388,608" in error.message
    assert error.session_id == INIT["session_id"]
    assert response.text == "Hello from the fake."
    assert recorded(record)["argv"] == [*PREFIX, "--resume", INIT["session_id"]]


async def test_a_10_mib_line_passes_a_16_mib_cap(tmp_path: Path) -> None:
    async with open_runtime() as rt:
        await start(
            rt,
            tmp_path,
            ["emit", INIT],
            ["big_line", 10 * 1024 * 1024],
            ["replay", TEXT_TURN],
            max_line_bytes=16 * 1024 * 1024,
        )
        response = await rt.ask("a", "hi")
    assert response.text == "Hello from the fake."
    # The 10 MiB raw event is over max_event_bytes: counted, not kept (compact retention).
    omission = response.event_coverage.first_omission
    assert omission is not None and omission.kind == "raw" and omission.size > 10 * 1024 * 1024


async def test_a_binary_gone_by_the_turn_is_spawn_failed_naming_the_path(tmp_path: Path) -> None:
    missing = fake_cli_executable(str(tmp_path), ["answer"], name="claude")
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend="claude", binary=missing, **FAST)
        os.unlink(missing)  # start_agent found it; the turn does not
        error = await failure(rt)
    assert error.reason is StopReason.SPAWN_FAILED
    assert missing in error.message


# --- processes ----------------------------------------------------------------------------


async def test_a_grandchild_holding_stderr_does_not_hold_the_turn(tmp_path: Path) -> None:
    agent = Watcher()
    async with open_runtime() as rt:
        await start(
            rt,
            tmp_path,
            child(["sleep", 60], stdout="null"),  # stderr inherited, for a minute
            ["replay", TEXT_TURN],
            ["exit", 0],
            agent=agent,
        )
        started = trio.current_time()
        response = await rt.ask("a", "hi")
        elapsed = trio.current_time() - started
    assert response.text == "Hello from the fake."
    assert elapsed < SLACK  # not the minute the grandchild holds stderr
    [pid] = agent.spawned()
    assert not running(pid)


@pytest.mark.parametrize("how", ["interrupt", "watchdog", "stop_agent"])
async def test_the_kill_ladder_leaves_no_process(tmp_path: Path, how: str) -> None:
    # The CLI ignores SIGINT and SIGTERM; its grandchild runs in a session of its own (as
    # Claude Code's Bash tool does) and ignores SIGTERM: only SIGKILL, found by the tree
    # walk, ends them. The autouse fixture checks that nothing of ours is left.
    agent = Watcher()
    options = {"watchdog": 0.5} if how == "watchdog" else {}
    async with open_runtime() as rt:
        await start(
            rt,
            tmp_path,
            IGNORE_INT,
            IGNORE_TERM,
            ["emit", INIT],
            child(IGNORE_TERM, ["hang"], setsid=True, stdout="null", stderr="null"),
            ["hang"],
            agent=agent,
            **options,
        )
        ref = await rt.tell("a", "hi")
        await wait_until(lambda: bool(agent.spawned()), 5)
        [grandchild] = agent.spawned()
        with trio.fail_after(10):
            if how == "interrupt":
                assert await rt.interrupt("a")
            if how == "stop_agent":
                await rt.stop_agent("a")
            else:
                outcome = await rt.wait(ref)
                assert isinstance(outcome, Failed) and isinstance(outcome.error, TurnFailed)
                expected = (
                    StopReason.INTERRUPTED if how == "interrupt" else StopReason.TOTAL_TIMEOUT
                )
                assert outcome.error.reason is expected
                assert outcome.error.exit_status == ExitStatus(None, signal.SIGKILL)
    assert not running(grandchild)


async def test_max_processes_bounds_the_cli_processes_at_once(tmp_path: Path) -> None:
    record = tmp_path / "record.json"
    async with open_runtime(max_processes=1) as rt:
        await start(
            rt, tmp_path, on_sigint_result(INIT["session_id"]), ["emit", INIT], ["hang"], name="a"
        )
        await start(rt, tmp_path, ["record", str(record)], ["replay", TEXT_TURN], name="b")
        ref = await rt.tell("a", "long")
        await wait_for_status(rt, "a", lambda s: s.session_id is not None, 5)
        answers: list[str] = []

        async def ask_b() -> None:
            answers.append((await rt.ask("b", "short")).text)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask_b)
            await wait_until(lambda: rt.statistics().turns_waiting == 1, 5)
            current = (await rt.status("b")).current
            assert current is not None and current.waiting_for_process
            assert rt.statistics().processes_in_use == 1
            assert not record.exists()  # b's CLI has not been started
            assert await rt.interrupt("a")
        outcome = await rt.wait(ref)
    assert isinstance(outcome, Failed)
    assert answers == ["Hello from the fake."]
    assert record.exists()


# --- secrets ------------------------------------------------------------------------------


async def test_inline_mcp_config_goes_by_a_0600_file_removed_after_the_turn(
    tmp_path: Path,
) -> None:
    secret = "mcp-secret-value-1234"
    config = {"mcpServers": {"x": {"command": "srv", "env": {"SERVICE_TOKEN": secret}}}}
    record = tmp_path / "record.json"
    async with open_runtime() as rt:
        await start(rt, tmp_path, ["record", str(record)], ["replay", TEXT_TURN], mcp_config=config)
        await rt.ask("a", "hi")
        seen = recorded(record)
    argv = seen["argv"]
    path = argv[argv.index("--mcp-config") + 1]
    assert secret not in " ".join(argv)
    facts = seen["files"][path]
    assert (facts["mode"], facts["dir_mode"]) == (0o600, 0o700)
    assert json.loads(facts["content"]) == config
    # The private directory is gone with its file.
    assert os.path.basename(os.path.dirname(path)) not in os.listdir(
        os.path.dirname(os.path.dirname(path))
    )


async def test_the_stderr_tail_and_message_of_a_failure_are_redacted(tmp_path: Path) -> None:
    leak = (
        "request failed: ANTHROPIC_API_KEY=sk-ant-api03-abcdefghijklmnop"
        " Authorization: Bearer xyz123\n"
    )
    async with open_runtime() as rt:
        await start(rt, tmp_path, ["emit", INIT], ["stderr", leak], ["exit", 3])
        error = await failure(rt)
    assert error.reason is StopReason.MALFORMED_OUTPUT
    for secret in ("sk-ant-api03", "abcdefghijklmnop", "xyz123"):
        assert secret not in error.stderr_tail
        assert secret not in error.message
        assert secret not in str(error)
    assert "ANTHROPIC_API_KEY=[REDACTED]" in error.stderr_tail
    assert "Authorization: [REDACTED]" in error.message
