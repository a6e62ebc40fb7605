"""Portable sessions with the pinned real ``claude`` against the fake API: two "hosts" (two
HOMEs, each with its own directory of CLI homes) on one store. The transcript travels in the
store, so each host resumes the conversation the other one continued; with the store down
as a turn ends or starts (PostgreSQL stopped, SQLite's write lock held), an answered turn
stays in the conversation or its Response says it may not, and no turn resumes a stale copy."""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import trio
from pg_server import Server

from agentrt import (
    Agent,
    Event,
    PostgresStore,
    Ref,
    Response,
    ResultEvent,
    SessionStore,
    SQLiteStore,
    StopReason,
    TurnFailed,
    open_runtime,
)
from agentrt.testing import AnthropicText

from ._claude import Claude, project_folder_name

pytestmark = pytest.mark.realcli

TURN_BOUND = 60


def host_options(claude: Claude, host: Path, **extra: Any) -> dict[str, Any]:
    """The agent's options on one host: its own HOME (the user's login and settings would
    be there) and its CLI homes under it."""
    (host / "tmp").mkdir(parents=True, exist_ok=True)
    env = {"HOME": str(host), "TMPDIR": str(host / "tmp")}
    return claude.agent_options(env=env, portable=True, cli_homes=str(host / "cli-homes"), **extra)


async def turn_on(
    store: SessionStore, claude: Claude, host: Path, prompt: str, **extra: Any
) -> str:
    async with open_runtime(store=store, node=host.name) as rt:
        options = host_options(claude, host, **extra)
        await rt.start_agent(Agent, name="coder", backend="claude", **options)
        with trio.fail_after(TURN_BOUND):
            response = await rt.ask("coder", prompt)
    assert response.session_id is not None
    return response.session_id


def transcripts(host: Path) -> list[Path]:
    return sorted(host.glob("cli-homes/*/projects/*/*.jsonl"))


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_the_conversation_moves_between_hosts(
    claude: Claude, tmp_path: Path, kind: str, request: pytest.FixtureRequest
) -> None:
    """Turn 1 on host A; turn 2 on host B, whose home is empty: it resumes turn 1's session
    (the fake sees turn 1). Turn 3 back on A, whose copy lacks turn 2 (stale): A's copy is
    replaced by the stored one, and the fake sees turns 1 and 2."""
    if kind == "postgres":
        dsn = request.getfixturevalue("postgres_dsn")

        def store() -> SessionStore:
            return PostgresStore(dsn)
    else:

        def store() -> SessionStore:
            return SQLiteStore(tmp_path / "sessions.sqlite3")

    claude.api.set_script(
        [AnthropicText("First answer."), AnthropicText("Second answer."), AnthropicText("Third.")]
    )
    host_a, host_b = tmp_path / "host-a", tmp_path / "host-b"

    one = await turn_on(store(), claude, host_a, "first prompt")
    [a_copy] = transcripts(host_a)
    assert a_copy.name == f"{one}.jsonl"
    assert a_copy.parent.name == project_folder_name(claude.project)
    after_one = a_copy.read_bytes()
    assert transcripts(host_b) == []
    # Host B's user has a global config (as the CLI writes it); the agent's home links to it.
    config = (host_a / "cli-homes").glob("*/.claude.json")
    host_b.mkdir()
    (host_b / ".claude.json").write_bytes(next(config).read_bytes())

    two = await turn_on(store(), claude, host_b, "second prompt")
    assert two == one
    [b_copy] = transcripts(host_b)
    assert (
        b_copy.relative_to(host_b / "cli-homes").parts[1:]
        == a_copy.relative_to(host_a / "cli-homes").parts[1:]
    )
    assert b_copy.read_bytes().startswith(after_one)
    assert a_copy.read_bytes() == after_one  # host A never saw turn 2
    [linked] = (host_b / "cli-homes").glob("*/.claude.json")
    # The CLI writes its config through the link: the login stays the user's, not a copy.
    assert linked.is_symlink() and linked.resolve() == (host_b / ".claude.json").resolve()

    three = await turn_on(store(), claude, host_a, "third prompt")
    assert three == one

    first, second, third = claude.api.message_requests
    assert all(r.headers["x-claude-code-session-id"] == one for r in (first, second, third))
    assert "First answer." in second.texts() and "second prompt" in second.texts()
    texts = third.texts()
    positions = [texts.index(t) for t in ("first prompt", "Second answer.", "third prompt")]
    assert positions == sorted(positions)
    # Each agent's home is its own: nothing in the HOME's own ~/.claude.
    assert not list(host_a.glob(".claude/projects/*/*.jsonl"))
    assert not list(claude.home.glob(".claude/projects/*/*.jsonl"))


async def test_a_warm_cli_s_turns_travel_too(claude: Claude, tmp_path: Path) -> None:
    """Two turns on one warm CLI (keep_alive) on host A, the third on host B: B's fresh CLI
    resumes with both earlier turns."""
    claude.api.set_script([AnthropicText("One."), AnthropicText("Two."), AnthropicText("Three.")])
    store = SQLiteStore(tmp_path / "sessions.sqlite3")
    host_a, host_b = tmp_path / "host-a", tmp_path / "host-b"
    async with open_runtime(store=store, node="host-a") as rt:
        options = host_options(claude, host_a, keep_alive=60)
        await rt.start_agent(Agent, name="coder", backend="claude", **options)
        with trio.fail_after(TURN_BOUND):
            one = await rt.ask("coder", "first prompt")
            two = await rt.ask("coder", "second prompt")
    assert one.session_id == two.session_id is not None
    three = await turn_on(store, claude, host_b, "third prompt")
    assert three == one.session_id
    texts = claude.api.message_requests[2].texts()
    positions = [texts.index(t) for t in ("One.", "second prompt", "Two.", "third prompt")]
    assert positions == sorted(positions)


# --- the store down as a turn ends or starts -----------------------------------------------

Fault = Callable[[], Awaitable[None]]


class Faulty(Agent):
    """Runs the test's faults at points of its turns: ``before`` the next turns and
    ``after`` them (the outcome made, not yet returned), one each; ``at_result`` once, as a
    turn's result comes (the CLI has written the turn to its transcript, the runtime has
    not stored it yet)."""

    def __init__(
        self,
        *,
        before: tuple[Fault, ...] = (),
        at_result: Fault | None = None,
        after: tuple[Fault, ...] = (),
    ) -> None:
        self.before, self.at_result, self.after = list(before), at_result, list(after)

    async def pre_turn(self, prompt: str) -> None:
        if self.before:
            await self.before.pop(0)()

    async def post_turn(self, ref: Ref, outcome: Response | TurnFailed) -> None:
        if self.after:
            await self.after.pop(0)()

    async def handle_stream_event(self, event: Event) -> None:
        if isinstance(event, ResultEvent) and self.at_result is not None:
            fault, self.at_result = self.at_result, None
            await fault()


class Outage:
    """The store down and back: PostgreSQL's server stopped and started, or SQLite's write
    lock held by another connection (its reads go on, its writes fail after busy_timeout)."""

    def __init__(self, kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
        self.server: Server | None = None
        self.path = tmp_path / "sessions.sqlite3"
        self.lock: sqlite3.Connection | None = None
        self.is_up = trio.Event()
        if kind == "postgres":
            self.dsn = request.getfixturevalue("postgres_dsn")
            self.server = request.getfixturevalue("postgres_server")

    def store(self) -> SessionStore:
        if self.server is not None:
            return PostgresStore(self.dsn)
        return SQLiteStore(self.path, busy_timeout=0.2)

    async def down(self) -> None:
        self.is_up = trio.Event()
        if self.server is not None:
            await trio.to_thread.run_sync(self.server.stop)
        else:
            self.lock = sqlite3.connect(self.path, isolation_level=None)
            self.lock.execute("BEGIN IMMEDIATE")

    async def up(self) -> None:
        if self.server is not None:
            await trio.to_thread.run_sync(self.server.start)
        elif self.lock is not None:
            self.lock.execute("ROLLBACK")
            self.lock.close()
            self.lock = None
        self.is_up.set()

    async def back(self) -> None:
        """Wait until the store is up again."""
        await self.is_up.wait()

    def down_until_waited_for(self, nursery: trio.Nursery) -> Fault:
        """A fault: the store down now, and up again (in ``nursery``) once the runtime has
        logged that a transcript waits for it (or gave up on it at once), however long the
        turn takes to get there."""
        waiting = trio.Event()
        said = ("waits for the store", "was not stored", "could not be restored")

        class Waits(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                if any(f"transcript {words}" in record.getMessage() for words in said):
                    waiting.set()

        async def up_once_waited_for() -> None:
            handler = Waits()
            agentrt_logger.addHandler(handler)
            try:
                await waiting.wait()
            finally:
                agentrt_logger.removeHandler(handler)
            await self.up()

        async def fault() -> None:
            await self.down()
            nursery.start_soon(up_once_waited_for)

        return fault


agentrt_logger = logging.getLogger("agentrt")


# Leases outlast every outage here: no agent is fenced, the transcript is what is tested.
LEASE_TTL = 60


async def turns_on(
    store: SessionStore,
    claude: Claude,
    host: Path,
    prompts: list[str],
    agent: Callable[[], Agent] = Agent,
    **extra: Any,
) -> list[Any]:
    """``prompts`` asked in turn of one agent on ``host``: each Response, or TurnFailed."""
    outcomes: list[Any] = []
    options = host_options(claude, host, **extra)
    async with open_runtime(store=store, node=host.name, lease_ttl=LEASE_TTL) as rt:
        await rt.start_agent(agent, name="coder", backend="claude", **options)
        for prompt in prompts:
            with trio.fail_after(TURN_BOUND):
                try:
                    outcomes.append(await rt.ask("coder", prompt))
                except TurnFailed as exc:
                    outcomes.append(exc)
    return outcomes


def share_config(host_a: Path, host_b: Path) -> None:
    """Host B's user has the global config the CLI wrote on host A (as in the test above)."""
    host_b.mkdir(exist_ok=True)
    config = next((host_a / "cli-homes").glob("*/.claude.json"))
    (host_b / ".claude.json").write_bytes(config.read_bytes())


def in_order(texts: list[str], *wanted: str) -> bool:
    """Whether ``texts`` (a model call's conversation) holds each of ``wanted``, in order."""
    if not all(text in texts for text in wanted):
        return False
    positions = [texts.index(text) for text in wanted]
    return positions == sorted(positions)


async def assert_whole_lines(store: SessionStore) -> None:
    """Every line of the stored transcript is a JSON object: nothing spliced."""
    async with store:
        stored = await store.load_transcript("coder")
    assert stored is not None and stored.data.endswith(b"\n")
    for line in stored.data.splitlines():
        assert isinstance(json.loads(line), dict), line[:200]


def answers(count: int) -> list[AnthropicText]:
    return [AnthropicText(f"Answer {n}.") for n in range(1, count + 1)]


async def test_a_turn_answered_as_the_database_goes_down_is_stored_before_its_answer(
    claude: Claude, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """The issue's replay, the database back within ``transcript_wait``: host A answers turn
    3 only once its transcript is stored, so host B's turn 4 sees turns 1-3 and A's turn 5,
    the agent taken back, sees 1-4."""
    outage = Outage("postgres", tmp_path, request)
    claude.api.set_script(answers(5))
    host_a, host_b = tmp_path / "host-a", tmp_path / "host-b"
    await turns_on(outage.store(), claude, host_a, ["prompt 1", "prompt 2"])
    async with trio.open_nursery() as nursery:
        [third] = await turns_on(
            outage.store(),
            claude,
            host_a,
            ["prompt 3"],
            # Closed only with the database up: its lease given back for B.
            lambda: Faulty(at_result=outage.down_until_waited_for(nursery), after=(outage.back,)),
            transcript_wait=TURN_BOUND,
        )
    assert third.text == "Answer 3." and third.transcript_stored is True
    share_config(host_a, host_b)
    await turns_on(outage.store(), claude, host_b, ["prompt 4"])
    await turns_on(outage.store(), claude, host_a, ["prompt 5"])

    fourth, fifth = claude.api.message_requests[3:]
    assert in_order(fourth.texts(), "prompt 2", "Answer 2.", "prompt 3", "Answer 3.", "prompt 4")
    assert in_order(fifth.texts(), "prompt 3", "Answer 3.", "prompt 4", "Answer 4.", "prompt 5")
    await assert_whole_lines(outage.store())


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_a_turn_the_store_could_not_take_says_so_and_its_copy_is_never_resumed(
    claude: Claude, tmp_path: Path, kind: str, request: pytest.FixtureRequest
) -> None:
    """The store down past ``transcript_wait`` as host A's turn 3 ends: its Response says
    the transcript is not stored. Host B's turn 4 runs on turns 1-2; back on A, whose copy
    holds its turn 3 (longer than B's turn 4), the store's conversation is resumed, not
    A's: turn 5 sees 1, 2 and 4, and the stored transcript has no broken line."""
    outage = Outage(kind, tmp_path, request)
    claude.api.set_script(answers(5))
    host_a, host_b = tmp_path / "host-a", tmp_path / "host-b"
    long_prompt = "prompt 3 " + "x" * 4000  # A's copy ends up longer than the store's

    await turns_on(outage.store(), claude, host_a, ["prompt 1", "prompt 2"])
    [third] = await turns_on(
        outage.store(),
        claude,
        host_a,
        [long_prompt],
        lambda: Faulty(at_result=outage.down, after=(outage.up,)),
        transcript_wait=1,
    )
    assert third.text == "Answer 3." and third.transcript_stored is False
    share_config(host_a, host_b)
    await turns_on(outage.store(), claude, host_b, ["prompt 4"])
    await turns_on(outage.store(), claude, host_a, ["prompt 5"])

    fourth, fifth = claude.api.message_requests[3:]
    assert long_prompt not in fourth.texts() and long_prompt not in fifth.texts()
    assert in_order(fifth.texts(), "prompt 2", "Answer 2.", "prompt 4", "Answer 4.", "prompt 5")
    await assert_whole_lines(outage.store())


async def test_a_turn_whose_transcript_cannot_be_restored_does_not_start(
    claude: Claude, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Host B, whose home holds no copy, takes the agent over with the database down past
    ``transcript_wait``: its turn fails ``store_failed`` (retryable) without running the CLI
    (not ``session_lost``, and no fresh session though on_session_lost="fresh"); asked
    again with the database back, it resumes the stored conversation."""
    outage = Outage("postgres", tmp_path, request)
    claude.api.set_script(answers(2))
    host_a, host_b = tmp_path / "host-a", tmp_path / "host-b"
    [first] = await turns_on(outage.store(), claude, host_a, ["prompt 1"])
    share_config(host_a, host_b)
    failed, second = await turns_on(
        outage.store(),
        claude,
        host_b,
        ["prompt 2", "prompt 2, again"],
        # Back once the failed turn has ended: a request is stored before it is accepted,
        # so the next ask needs the database up.
        lambda: Faulty(before=(outage.down,), after=(outage.up,)),
        transcript_wait=1,
        on_session_lost="fresh",
    )
    assert isinstance(failed, TurnFailed) and failed.reason is StopReason.STORE_FAILED
    assert failed.detail["retryable"] is True
    assert f"session {first.session_id}'s transcript could not be restored" in failed.message
    assert second.text == "Answer 2." and second.session_id == first.session_id
    [_, asked] = claude.api.message_requests  # the failed turn never reached the model
    assert in_order(asked.texts(), "prompt 1", "Answer 1.", "prompt 2, again")
    assert "prompt 2" not in asked.texts()


async def test_a_turn_waits_for_the_database_to_restore_its_transcript(
    claude: Claude, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """The database down as host B's first turn starts, back once the turn waits for it
    (within ``transcript_wait``): the turn resumes the stored conversation."""
    outage = Outage("postgres", tmp_path, request)
    claude.api.set_script(answers(2))
    host_a, host_b = tmp_path / "host-a", tmp_path / "host-b"
    [first] = await turns_on(outage.store(), claude, host_a, ["prompt 1"])
    share_config(host_a, host_b)
    async with trio.open_nursery() as nursery:
        [second] = await turns_on(
            outage.store(),
            claude,
            host_b,
            ["prompt 2"],
            lambda: Faulty(before=(outage.down_until_waited_for(nursery),)),
            transcript_wait=TURN_BOUND,
        )
    assert second.text == "Answer 2." and second.session_id == first.session_id
    assert second.transcript_stored is True
    assert in_order(claude.api.message_requests[1].texts(), "prompt 1", "Answer 1.", "prompt 2")
