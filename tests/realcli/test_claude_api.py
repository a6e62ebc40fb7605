"""The pinned real ``claude`` binary driven through agentrt's public API, against the fake API.

Everything here goes through ``open_runtime`` / ``start_agent(backend="claude")`` / ``ask``
/ ``interrupt`` / ``stop_agent``: the backend builds the argv, the process driver runs it,
the translator reads it. Each agent gets the env of `Claude.agent_options` (the fake's URL
and a dummy key in its environment, never on argv) and the test's process marker, so the
``process_marker`` fixture finds every process a test leaves behind, including the Bash
tool's, which the CLI starts in a session of its own.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from proc_helpers import ProcInfo, fence_guards, marked, wait_until

from agentrt import (
    Agent,
    AgentAlreadyStarted,
    AgentStopped,
    MemoryStore,
    PostgresStore,
    Response,
    Runtime,
    SessionStore,
    SQLiteStore,
    StopReason,
    TextEvent,
    TextRetractedEvent,
    TurnFailed,
    Usage,
    open_runtime,
)
from agentrt.testing import (
    AnthropicCutStream,
    AnthropicError,
    AnthropicHang,
    AnthropicReply,
    AnthropicText,
    AnthropicToolUse,
    RecordedRequest,
)

from ._claude import MARKER_VAR, Claude, Lines, wait_for_process

pytestmark = pytest.mark.realcli

LONG_COMMAND = "echo start; sleep 300; echo end"
# Generous: the CLI starts in about half a second, but CI machines are shared.
TURN_BOUND = 60
# A program killed in its second turn and the third turn after it: three turns, a program's
# start and a lease's end (98 s once in a loaded 2-core machine, against one turn's bound).
KILLED_PROGRAM_BOUND = 3 * TURN_BOUND
CHILD_PROGRAM = Path(__file__).with_name("claude_child.py")


@asynccontextmanager
async def runtime(store: SessionStore | None = None) -> AsyncIterator[Runtime]:
    """A runtime with a store of the test's own (never the user's default one)."""
    async with open_runtime(store=store or MemoryStore()) as rt:
        yield rt


def long_bash() -> AnthropicToolUse:
    return AnthropicToolUse("Bash", {"command": LONG_COMMAND, "description": "Run it"})


async def ask_failure(rt: Runtime, prompt: str = "go", name: str = "coder") -> TurnFailed:
    with pytest.raises(TurnFailed) as caught:
        await rt.ask(name, prompt)
    return caught.value


# --- 1. two asks on one agent --------------------------------------------------------------


async def test_two_asks_continue_one_session(claude: Claude) -> None:
    """Turn 2 resumes turn 1's session: same id, the fake sees turn 1 in turn 2's request."""
    claude.api.set_script(
        [
            AnthropicText("First answer.", input_tokens=11, output_tokens=7),
            AnthropicText("Second answer.", input_tokens=23, output_tokens=9),
        ]
    )
    async with runtime() as rt:
        await rt.start_agent(Agent, name="coder", backend="claude", **claude.agent_options())
        with trio.fail_after(TURN_BOUND):
            one = await rt.ask("coder", "first prompt")
            two = await rt.ask("coder", "second prompt")

    assert (one.text, one.final_message) == ("First answer.", "First answer.")
    assert (two.text, two.final_message) == ("Second answer.", "Second answer.")
    assert one.stop_reason is two.stop_reason is StopReason.COMPLETE
    assert one.session_id is not None and two.session_id == one.session_id
    assert one.usage == Usage(input_tokens=11, output_tokens=7)
    assert two.usage == Usage(input_tokens=23, output_tokens=9)
    assert one.cost_usd is not None and one.cost_usd > 0
    assert one.model == two.model == "claude-opus-5-5"  # the CLI's default, echoed by the fake

    first, second = claude.api.message_requests
    assert first.headers["x-claude-code-session-id"] == one.session_id
    assert second.headers["x-claude-code-session-id"] == one.session_id
    assert first.last_user_text() == "first prompt"
    # The resumed request carries the whole conversation, in order.
    texts = second.texts()
    positions = [texts.index(t) for t in ("first prompt", "First answer.", "second prompt")]
    assert positions == sorted(positions)
    assert claude.transcript(one.session_id).exists()
    # The key reached the CLI through the environment only.
    assert all(r.headers["x-api-key"] == "[REDACTED]" for r in claude.api.requests)


async def test_each_response_costs_its_own_turn_across_program_runs(
    claude: Claude, tmp_path: Path
) -> None:
    """The CLI's total_cost_usd is the session's running total across --resume; every
    Response reports its own turn's cost, also in a new runtime resuming from the store."""
    claude.api.set_script([AnthropicText("same", input_tokens=10, output_tokens=5)] * 3)
    path = tmp_path / "sessions.sqlite3"
    costs = []
    for _ in range(3):  # three programs, one turn each, on one stored session
        async with runtime(SQLiteStore(path)) as rt:
            await rt.start_agent(Agent, name="coder", backend="claude", **claude.agent_options())
            with trio.fail_after(TURN_BOUND):
                costs.append((await rt.ask("coder", "same question")).cost_usd)
    assert costs[0] is not None and costs[0] > 0
    assert costs[1] == pytest.approx(costs[0]) and costs[2] == pytest.approx(costs[0])
    async with SQLiteStore(path) as store:
        record = await store.load("coder")
    assert record is not None and record.turns == 3
    assert record.cost_usd == pytest.approx(3 * costs[0])


# --- 2 and 3. restarts (need the supervision issue) --------------------------------------


class CrashOnNotify(Agent):
    """Crashes (an exception escaping a decision callback) when notified."""

    starts = 0

    def init_agent(self, **options: Any) -> dict[str, Any]:
        type(self).starts += 1
        return options

    def handle_event(self, event: Any) -> None:
        raise RuntimeError(f"crash on purpose: {event}")


async def test_a_restarted_agent_resumes_the_conversation(claude: Claude) -> None:
    """A permanent agent crashes after turn 1; its next ask, taken by the restarted
    instance, resumes the same session and the fake sees turn 1's messages."""
    claude.api.set_script([AnthropicText("Before the crash."), AnthropicText("After it.")])
    CrashOnNotify.starts = 0
    async with runtime() as rt:
        handle = await rt.start_agent(
            CrashOnNotify,
            name="coder",
            backend="claude",
            restart="permanent",
            **claude.agent_options(),
        )
        with trio.fail_after(TURN_BOUND):
            one = await rt.ask("coder", "first prompt")
            await rt.notify("coder", "boom")  # applied before the next request: a crash
            two = await rt.ask("coder", "second prompt")
        restarted = rt.whereis("coder")

    assert CrashOnNotify.starts == 2
    assert restarted is not None and restarted.incarnation != handle.incarnation
    assert two.text == "After it."
    assert two.session_id == one.session_id is not None
    assert "Before the crash." in claude.api.message_requests[1].texts()


async def _killed_in_turn_two(
    claude: Claude, options: dict[str, Any], args: list[str], *, guard: bool = True
) -> tuple[bytes, ProcInfo]:
    """Run claude_child.py ARGS until turn 2's Bash tool runs, then SIGKILL it (with
    ``guard=False`` its fence guard first, as a kill of its whole session would); its
    output and the tool's process."""
    child = await trio.lowlevel.open_process(
        [sys.executable, str(CHILD_PROGRAM), *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        assert child.stdin is not None and child.stdout is not None
        await child.stdin.send_all(json.dumps(options).encode())
        await child.stdin.aclose()
        sleeper = await _wait_for_sleeper(claude)
        if not guard:
            for pid in fence_guards(child.pid):
                os.kill(pid, signal.SIGKILL)
        child.kill()
        await child.wait()
        return await child.stdout.receive_some(65536), sleeper
    finally:
        if child.returncode is None:
            child.kill()
        with trio.CancelScope(shield=True):
            await child.wait()
            assert child.stdout is not None
            await child.stdout.aclose()


async def test_a_new_program_resumes_after_a_sigkill(claude: Claude, tmp_path: Path) -> None:
    """A program runs turn 1 and is SIGKILLed (its fence guard first, as a kill of its whole
    session would) while turn 2 runs a Bash tool; a new runtime on the same store kills what
    the dead one left and resumes its session."""
    store = tmp_path / "sessions.sqlite3"
    claude.api.set_script([AnthropicText("First answer."), long_bash(), AnthropicText("Back.")])
    options = claude.agent_options(allowed_tools=["Bash"], kill_grace=1.0)
    with trio.fail_after(KILLED_PROGRAM_BOUND):
        output, sleeper = await _killed_in_turn_two(claude, options, [str(store)], guard=False)
        assert b"ANSWER First answer." in output
        # The dead program's turn runs on without it: the CLI and its tool, at least.
        orphans = {p.pid for p in marked(MARKER_VAR, claude.marker)}
        assert sleeper.pid in orphans and len(orphans) >= 3

        async with runtime(store=SQLiteStore(store)) as rt:
            # Opening the store killed the turn its dead runtime left running.
            assert marked(MARKER_VAR, claude.marker) == []
            await rt.start_agent(Agent, name="coder", backend="claude", **options)
            three = await rt.ask("coder", "third prompt")

    first, second, third = claude.api.message_requests
    session_id = first.headers["x-claude-code-session-id"]
    assert three.text == "Back." and three.session_id == session_id
    assert second.headers["x-claude-code-session-id"] == session_id
    assert third.headers["x-claude-code-session-id"] == session_id
    texts = third.texts()
    assert "First answer." in texts and "second prompt" in texts and "third prompt" in texts


async def test_another_node_continues_the_conversation_after_the_owners_lease(
    claude: Claude, postgres_dsn: str
) -> None:
    """Two hosts on one PostgreSQL (two programs naming different nodes; one CLI home, as a
    shared home would be): node-a runs turn 1 and is SIGKILLed while turn 2 runs a Bash
    tool. Its fence guard kills that turn; node-b can take the agent only once node-a's
    lease has expired, and its turn resumes the same session, the fake seeing turn 1."""
    ttl = 5.0  # room for the kill ladder of kill_grace=0.5 in half of it
    claude.api.set_script([AnthropicText("First answer."), long_bash(), AnthropicText("Back.")])
    options = claude.agent_options(allowed_tools=["Bash"], kill_grace=0.5)
    with trio.fail_after(KILLED_PROGRAM_BOUND):
        output, _ = await _killed_in_turn_two(claude, options, [postgres_dsn, "node-a", str(ttl)])
        killed = trio.current_time()
        assert b"ANSWER First answer." in output
        await wait_until(lambda: marked(MARKER_VAR, claude.marker) == [], bound=5)

        async with open_runtime(store=PostgresStore(postgres_dsn), node="node-b") as rt:
            while True:
                try:
                    await rt.start_agent(Agent, name="coder", backend="claude", **options)
                    break
                except AgentAlreadyStarted as exc:
                    assert "node 'node-a'" in str(exc)
                    await trio.sleep(0.1)
            assert trio.current_time() - killed >= ttl * 0.8 - 0.1
            three = await rt.ask("coder", "third prompt")

    first, _, third = claude.api.message_requests
    session_id = first.headers["x-claude-code-session-id"]
    assert three.text == "Back." and three.session_id == session_id
    assert third.headers["x-claude-code-session-id"] == session_id
    texts = third.texts()
    assert "First answer." in texts and "second prompt" in texts and "third prompt" in texts


# --- 4. tool trees ---------------------------------------------------------------------


async def _wait_for_sleeper(claude: Claude) -> ProcInfo:
    sleeper = await wait_for_process(claude.marker, lambda p: p.cmdline == "sleep 300")
    # The tool runs in a session of its own, outside the CLI's: only a descendant-tree kill
    # finds it.
    sessions = {p.sid for p in marked(MARKER_VAR, claude.marker)}
    assert sleeper.sid == sleeper.pgid and len(sessions) == 2
    return sleeper


@pytest.mark.parametrize("how", ["interrupt", "watchdog", "stop_agent"])
async def test_tool_tree_ends_with_the_turn(claude: Claude, how: str) -> None:
    """The fake asks for Bash `echo start; sleep 300; echo end`; interrupt, the watchdog and
    stop_agent each end the turn with no process of it left, the setsid'd tool included."""
    claude.api.set_script([long_bash(), AnthropicText("never reached")])
    # From the turn's start: the CLI's start, a model call and the tool's start come first
    # (seconds on a loaded machine).
    watchdog = 12.0 if how == "watchdog" else 600.0
    seen: list[ProcInfo] = []
    async with runtime() as rt:
        await rt.start_agent(
            Agent,
            name="coder",
            backend="claude",
            watchdog=watchdog,
            kill_grace=1.0,
            **claude.agent_options(allowed_tools=["Bash"]),
        )
        with trio.fail_after(TURN_BOUND):
            async with trio.open_nursery() as nursery:

                async def end_it() -> None:
                    seen.append(await _wait_for_sleeper(claude))
                    seen.extend(marked(MARKER_VAR, claude.marker))
                    if how == "interrupt":
                        assert await rt.interrupt("coder")
                    elif how == "stop_agent":
                        await rt.stop_agent("coder")

                nursery.start_soon(end_it)
                started = trio.current_time()
                if how == "stop_agent":
                    with pytest.raises(AgentStopped):
                        await rt.ask("coder", "run it")
                else:
                    failure = await ask_failure(rt, "run it")
                    expected = {
                        "interrupt": StopReason.INTERRUPTED,
                        "watchdog": StopReason.TOTAL_TIMEOUT,
                    }[how]
                    assert failure.reason is expected, failure
                    assert failure.session_id is not None
                    if how == "watchdog":
                        assert watchdog <= trio.current_time() - started < watchdog + 3
                # The turn is over: nothing it started may still run, not even for a moment.
                left = marked(MARKER_VAR, claude.marker)
                assert left == [], left
                nursery.cancel_scope.cancel()  # if the tool never came, end_it still waits
    assert seen, "the Bash tool never ran"
    # The CLI and the tool's shell, at least; all gone.
    assert len({p.pid for p in seen}) >= 3


# --- 5. failures ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "reason", "status"),
    [
        (AnthropicError.authentication(), StopReason.AUTHENTICATION_FAILED, 401),
        (AnthropicError.rate_limit(), StopReason.RATE_LIMITED, 429),
        (AnthropicError.overloaded(), StopReason.OVERLOADED, 529),
    ],
    ids=["401", "429", "529"],
)
async def test_http_errors_end_the_turn_typed(
    claude: Claude, reply: AnthropicReply, reason: StopReason, status: int
) -> None:
    """With the CLI's retries off (CLAUDE_CODE_MAX_RETRIES=0): one request, a typed reason."""
    claude.api.set_script([reply])
    agent = Lines()
    async with runtime() as rt:
        await rt.start_agent(agent, name="coder", backend="claude", **claude.agent_options())
        with trio.fail_after(TURN_BOUND):
            failure = await ask_failure(rt)
            ended = trio.current_time()
    assert failure.reason is reason
    assert failure.detail is not None and failure.detail["status"] == status
    assert failure.detail["retryable"] is (reason is not StopReason.AUTHENTICATION_FAILED)
    assert failure.session_id is not None
    assert len(claude.api.message_requests) == 1
    # From the CLI's first line: its start (seconds on a loaded machine) is not a retry.
    assert ended - agent.first_event < 10


async def test_a_usage_limit_ends_the_turn_with_its_reset(claude: Claude) -> None:
    """A subscription login whose window is spent: usage_limit, not retryable, its reset
    time in TurnFailed.detail; not the transient rate_limited of a plain 429."""
    resets_at = int(time.time()) + 3600
    claude.api.set_script([AnthropicError.usage_limit(resets_at)])
    async with runtime() as rt:
        options = claude.agent_options(env=claude.oauth_login())
        await rt.start_agent(Agent, name="coder", backend="claude", **options)
        with trio.fail_after(TURN_BOUND):
            failure = await ask_failure(rt)
    assert failure.reason is StopReason.USAGE_LIMIT, failure
    assert failure.detail == {"status": 429, "retryable": False, "resets_at": resets_at}
    assert "You've hit your 5-hour limit" in failure.message


async def test_a_prompt_too_long_ends_the_turn_context_exhausted(claude: Claude) -> None:
    claude.api.set_script([AnthropicError.prompt_too_long()])
    async with runtime() as rt:
        # The stop reason itself: no recovery (tests/realcli/test_claude_fleet.py has it).
        options = claude.agent_options(on_context_exhausted="fail")
        await rt.start_agent(Agent, name="coder", backend="claude", **options)
        with trio.fail_after(TURN_BOUND):
            failure = await ask_failure(rt)
    assert failure.reason is StopReason.CONTEXT_EXHAUSTED, failure
    assert failure.detail == {"status": 400, "retryable": False}
    assert failure.session_id is not None


async def test_a_login_that_expires_between_turns_is_credential_expired(claude: Claude) -> None:
    """Turn 1 is answered; the token then expires: turn 2 (the same session, resumed) ends
    credential_expired, not authentication_failed, and at the CLI's first 401 (it would
    retry the login otherwise)."""
    claude.api.set_script([AnthropicText("Hello."), *[AnthropicError.expired_token()] * 3])
    async with runtime() as rt:
        options = claude.agent_options(env=claude.oauth_login())
        await rt.start_agent(Agent, name="coder", backend="claude", **options)
        with trio.fail_after(TURN_BOUND):
            first = await rt.ask("coder", "hi")
            failure = await ask_failure(rt)
    assert first.stop_reason is StopReason.COMPLETE
    assert failure.reason is StopReason.CREDENTIAL_EXPIRED, failure
    assert failure.detail == {"status": 401, "retryable": False}
    assert failure.session_id == first.session_id


def always(reply: AnthropicReply) -> Callable[[RecordedRequest], AnthropicReply]:
    return lambda request: reply


async def test_401_fails_fast_with_the_cli_retries_on(claude: Claude) -> None:
    """CLAUDE_CODE_MAX_RETRIES unset: the CLI would retry a bad key for minutes; the turn
    ends as authentication_failed at its first api_retry frame."""
    claude.api.set_script(always(AnthropicError.authentication()))
    agent = Lines()
    async with runtime() as rt:
        await rt.start_agent(
            agent,
            name="coder",
            backend="claude",
            watchdog=30,  # only bounds this test while the mark above holds
            **claude.agent_options(env={"CLAUDE_CODE_MAX_RETRIES": None}),
        )
        failure = await ask_failure(rt)
        ended = trio.current_time()
    assert failure.reason is StopReason.AUTHENTICATION_FAILED, failure
    # The CLI's own retries would take minutes (and ask the API again and again): "fast" is
    # the request count, and a loose bound from the CLI's first line (not from the ask: a
    # start of node on a loaded machine takes seconds).
    assert len(claude.api.message_requests) <= 2
    assert ended - agent.first_event < 20


async def cut_once(claude: Claude) -> Response:
    # The fake lingers after the cut, so the CLI surely streams the partial text first.
    cut = AnthropicCutStream("Partial ans", linger=0.3)
    claude.api.set_script([cut, AnthropicText("Whole answer.")])
    async with runtime() as rt:
        await rt.start_agent(
            Agent,
            name="coder",
            backend="claude",
            **claude.agent_options(),
        )
        with trio.fail_after(TURN_BOUND):
            return await rt.ask("coder", "go")


async def test_stream_cut_once_is_retried_without_streaming(claude: Claude) -> None:
    """The CLI asks again with stream: false after a cut stream; the turn completes."""
    response = await cut_once(claude)
    assert response.stop_reason is StopReason.COMPLETE
    assert response.final_message == "Whole answer."
    assert [r.stream for r in claude.api.message_requests] == [True, False]
    # The cut attempt's text was streamed live before the CLI abandoned it.
    streamed = [e.text for e in response.events if isinstance(e, TextEvent)]
    assert "".join(streamed).startswith("Partial ans")


async def test_an_abandoned_attempt_is_not_part_of_the_answer(claude: Claude) -> None:
    """Response.text is the answer, without the text of the attempt the CLI abandoned;
    the events show the streamed text and its retraction."""
    response = await cut_once(claude)
    assert response.text == "Whole answer."
    (retracted,) = [e for e in response.events if isinstance(e, TextRetractedEvent)]
    assert retracted.text.startswith("Partial ans")


async def test_stream_cut_twice_fails_within_the_idle_bound(claude: Claude) -> None:
    """The stream and its non-streaming retry both cut: the CLI gives up at once."""
    claude.api.set_script([AnthropicCutStream(), AnthropicCutStream()])
    agent = Lines()
    async with runtime() as rt:
        await rt.start_agent(
            agent, name="coder", backend="claude", idle=5, **claude.agent_options()
        )
        with trio.fail_after(TURN_BOUND):
            failure = await ask_failure(rt)
            ended = trio.current_time()
    # The CLI's own error, not the idle bound's; and from its first line (its start, seconds
    # on a loaded machine, is not the CLI giving up) within that bound.
    assert failure.reason is StopReason.CLI_ERROR, failure
    assert "Connection to the API was lost" in failure.message
    assert failure.session_id is not None
    assert ended - agent.first_event < 5
    assert [r.stream for r in claude.api.message_requests] == [True, False]


@pytest.mark.parametrize(
    ("hang", "bounds", "reason"),
    [
        (AnthropicHang(), {"idle": 2.0}, StopReason.IDLE_TIMEOUT),
        (AnthropicHang(mid_stream=True), {"idle": 2.0}, StopReason.IDLE_TIMEOUT),
        # The watchdog counts from the turn's start, the CLI's own start included (seconds
        # on a loaded machine): long enough that its session id has come before it fires.
        (AnthropicHang(), {"watchdog": 8.0}, StopReason.TOTAL_TIMEOUT),
    ],
    ids=["silent-idle", "mid-stream-idle", "silent-watchdog"],
)
async def test_a_reply_that_never_comes_ends_at_the_bound(
    claude: Claude, hang: AnthropicHang, bounds: dict[str, float], reason: StopReason
) -> None:
    """Well before the CLI's own timeouts (10 s here, minutes by default), the agent's
    bound ends the turn, and the session id checkpointed before it survives."""
    claude.api.set_script([hang])
    agent = Lines()
    async with runtime() as rt:
        await rt.start_agent(
            agent,
            name="coder",
            backend="claude",
            kill_grace=1.0,
            **bounds,
            **claude.agent_options(),
        )
        started = trio.current_time()
        with trio.fail_after(TURN_BOUND):
            failure = await ask_failure(rt)
            ended = trio.current_time()
    assert failure.reason is reason, failure
    bound = next(iter(bounds.values()))
    # Each bound measured from what it counts from: the watchdog from the ask, idle from the
    # CLI's last line, which came after the ask (however slowly the CLI started) and no
    # later than its event was delivered. The margin is the kill ladder (kill_grace 1 s).
    counted_from = agent.last_event if "idle" in bounds else started
    assert bound <= ended - started
    assert ended - counted_from < bound + 4
    assert failure.session_id is not None
    assert len(claude.api.message_requests) == 1


async def test_the_clis_own_request_timeout_is_its_stop_reason(claude: Claude) -> None:
    """No reply within API_TIMEOUT_MS: from 2.1.337 the CLI says so in ``api_error`` and the
    turn ends ``request_timeout``; 2.1.332 says it in words only, a ``cli_error``."""
    claude.api.set_script([AnthropicHang()])
    async with runtime() as rt:
        options = claude.agent_options(env={"API_TIMEOUT_MS": "2000"})
        await rt.start_agent(Agent, name="coder", backend="claude", **options)
        with trio.fail_after(TURN_BOUND):
            failure = await ask_failure(rt)
    says_why = tuple(int(p) for p in claude.version.split(".")) >= (2, 1, 337)
    expected = StopReason.REQUEST_TIMEOUT if says_why else StopReason.CLI_ERROR
    assert failure.reason is expected, failure
    assert failure.message.startswith("Request timed out")
    assert failure.session_id is not None


# --- 7. a lost session ------------------------------------------------------------------


async def test_resume_of_a_deleted_transcript_is_session_lost(claude: Claude) -> None:
    """Turn 2 resumes a session whose transcript file is gone: session_lost, no API call."""
    claude.api.set_script([AnthropicText("First answer."), AnthropicText("never sent")])
    async with runtime() as rt:
        await rt.start_agent(Agent, name="coder", backend="claude", **claude.agent_options())
        with trio.fail_after(TURN_BOUND):
            one = await rt.ask("coder", "first prompt")
            assert one.session_id is not None
            claude.transcript(one.session_id).unlink()
            failure = await ask_failure(rt, "second prompt")
    assert failure.reason is StopReason.SESSION_LOST, failure
    assert failure.session_id == one.session_id
    assert "No conversation found" in failure.message
    assert len(claude.api.message_requests) == 1
