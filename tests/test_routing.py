"""Calls routed to the runtime that owns an agent, on a real PostgreSQL (and the checks that
hold for any store, on a real SQLite file too): the owner is a program of its own
(route_child.py, standing in for a host), the caller is this test's runtime (a third party
to the store and the owner)."""

from __future__ import annotations

import contextlib
import hashlib
import pickle
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import attrs
import msgspec
import pg_server
import psycopg
import pytest
import trio
from _helpers import echo_backend
from hypothesis import given, settings
from hypothesis import strategies as st
from proc_helpers import Program, store_programs, wait_until
from psycopg import sql

import agentrt
from agentrt import (
    AgentBusy,
    AgentNotFound,
    AgentStatus,
    AgentStopped,
    Completed,
    Failed,
    Pending,
    PostgresStore,
    StopReason,
    TurnFailed,
    Withdrawn,
)
from agentrt.testing import Gate, ScriptedBackend, reply

CHILD = Path(__file__).parent / "route_child.py"
# What docs/deployment.md promises: a runtime looks for an answer every second without a
# notification, and for work (its own taken rows too) every 5 s.
CHECK_EVERY = 1.0
SWEEP_EVERY = 5.0


class OwnerProgram:
    """route_child.py running: a program owning "x"; ``runtime_id`` is its runtime's."""

    def __init__(self, program: Program, runtime_id: str) -> None:
        self.program = program
        self.runtime_id = runtime_id

    @property
    def pid(self) -> int:
        return self.program.pid

    async def kill(self) -> None:
        await self.program.kill()


Owner = Callable[..., Awaitable[OwnerProgram]]


@attrs.frozen
class Shared:
    """A store programs share: ``kind`` is "postgres" or "sqlite", ``where`` what
    route_child.py takes (a DSN or a file), ``open()`` a new handle on it."""

    kind: str
    where: str
    open: Callable[[], agentrt.SessionStore]


@pytest.fixture(params=["postgres", "sqlite"])
def shared(request: pytest.FixtureRequest, tmp_path: Path) -> Shared:
    """Each store that routes: a PostgreSQL database, and an SQLite file."""
    if request.param == "postgres":
        dsn: str = request.getfixturevalue("postgres_dsn")
        return Shared("postgres", dsn, lambda: PostgresStore(dsn))
    path = tmp_path / "shared.sqlite3"
    return Shared("sqlite", str(path), lambda: agentrt.SQLiteStore(path))


@pytest.fixture
async def owner(postgres_dsn: str) -> AsyncIterator[Owner]:
    """Start route_child.py programs (owners of "x") on the test's database."""
    async with store_programs(CHILD, postgres_dsn) as start_program:

        async def start(node: str, lease_ttl: float = 60, *options_file: str) -> OwnerProgram:
            return await start_owner(start_program, node, lease_ttl, *options_file)

        yield start


@pytest.fixture
async def any_owner(shared: Shared) -> AsyncIterator[Owner]:
    """Start route_child.py programs (owners of "x") on each store that routes."""
    async with store_programs(CHILD, shared.where) as start_program:

        async def start(node: str, lease_ttl: float = 60, *options_file: str) -> OwnerProgram:
            return await start_owner(start_program, node, lease_ttl, *options_file)

        yield start


async def start_owner(
    start_program: Callable[..., Awaitable[Program]],
    node: str,
    lease_ttl: float = 60,
    *options_file: str,
) -> OwnerProgram:
    program = await start_program(node, str(lease_ttl), *options_file)
    line = await program.line()
    assert line.startswith("STARTED "), line
    return OwnerProgram(program, line.removeprefix("STARTED "))


async def test_ask_tell_wait_poll_status_interrupt_and_stop_reach_the_owner(
    any_owner: Owner, shared: Shared
) -> None:
    await any_owner("node-a")
    async with agentrt.open_runtime(store=shared.open(), node="node-c") as rt:
        local = ScriptedBackend(default=lambda call: reply("local"))
        await rt.start_agent(agentrt.Agent, name="y", backend=local)
        with trio.fail_after(60):
            assert (await rt.ask("y", "hi")).text == "local"  # a local agent stays local
            answer = await rt.ask("x", "hello")
            assert answer.text == "node-a heard: hello" and answer.session_id == "sid-x"

            ref = await rt.tell("x", "later")
            settled = await rt.wait(ref)
            assert isinstance(settled, Completed)
            assert settled.response.text == "node-a heard: later"
            assert await rt.poll(ref) == settled

            status = await rt.status("x")
            assert isinstance(status, AgentStatus)
            assert (status.name, status.state, status.turns) == ("x", "idle", 2)

            async with trio.open_nursery() as nursery:
                failed: list[BaseException] = []

                async def slow_ask() -> None:
                    try:
                        await rt.ask("x", "slow job")
                    except TurnFailed as exc:
                        failed.append(exc)

                nursery.start_soon(slow_ask)
                await wait_until_processing(rt)
                assert await rt.interrupt("x") is True
            assert [exc.reason for exc in failed] == [StopReason.INTERRUPTED]  # type: ignore[attr-defined]
            assert await rt.interrupt("x") is False

            await rt.stop_agent("x")
            with pytest.raises(AgentNotFound):
                await rt.ask("x", "anyone?")
            with pytest.raises(AgentNotFound):
                await rt.status("nobody")


async def test_every_call_that_may_wait_reaches_the_owner_the_same_way(
    any_owner: Owner, shared: Shared
) -> None:
    """notify, halt, unhalt, withdraw, interrupt_request and reset_session, written as for a
    local agent, act on the owner's (its streams: test_routed_streams.py)."""
    program = await any_owner("node-a")
    async with agentrt.open_runtime(store=shared.open(), node="node-c") as rt:
        with trio.fail_after(60):
            await rt.notify("x", {"deploy": [1, "two", None, 2.5], "blob": b"\x00"})
            assert await program.program.line() == (
                "EVENT {'deploy': [1, 'two', None, 2.5], 'blob': b'\\x00'}"
            )
            with pytest.raises(TypeError, match=r"event\[1\] is a tuple"):
                await rt.notify("x", ["a list", ("of", "a tuple")])  # it would come back a list

            await rt.halt("x")
            assert (await rt.status("x")).state == "halted"
            queued = await rt.tell("x", "queued")
            withdrawn = await rt.tell("x", "withdrawn")
            assert await rt.withdraw(withdrawn)
            assert not await rt.withdraw(withdrawn)
            assert await rt.poll(withdrawn) == Withdrawn()
            assert await rt.poll(queued) == Pending()
            await rt.unhalt("x")
            settled = await rt.wait(queued)
            assert isinstance(settled, Completed)
            assert settled.response.text == "node-a heard: queued"

            assert (await rt.status("x")).session_id == "sid-x"
            await rt.reset_session("x")
            assert (await rt.status("x")).session_id is None

            slow = await rt.tell("x", "slow job")
            await wait_until_processing(rt)
            with pytest.raises(AgentBusy):  # the owner's own error, raised here
                await rt.reset_session("x")
            assert not await rt.interrupt_request(queued)  # not the request running
            assert await rt.interrupt_request(slow)
            failed = await rt.wait(slow)
            assert isinstance(failed, Failed) and isinstance(failed.error, TurnFailed)
            assert failed.error.reason is StopReason.INTERRUPTED


async def wait_until_processing(rt: agentrt.Runtime) -> None:
    # Another program's agent: no event of ours to wait on.
    while (await rt.status("x")).state != "processing":  # noqa: ASYNC110
        await trio.sleep(0.05)


async def test_a_cancelled_routed_ask_stops_its_turn_on_the_owner(
    any_owner: Owner, shared: Shared
) -> None:
    await any_owner("node-a")
    async with agentrt.open_runtime(store=shared.open(), node="node-c") as rt:
        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                scope = trio.CancelScope()

                async def slow_ask() -> None:
                    with scope:
                        await rt.ask("x", "slow job")

                nursery.start_soon(slow_ask)
                await wait_until_processing(rt)
                scope.cancel()
            assert scope.cancelled_caught
            while (await rt.status("x")).state != "idle":  # noqa: ASYNC110
                await trio.sleep(0.05)
            assert (await rt.ask("x", "next")).text == "node-a heard: next"


@pytest.mark.parametrize("node", ["node-a", "node-b"])
async def test_the_owner_killed_while_a_routed_ask_waits_ends_it_with_a_clear_error(
    any_owner: Owner, shared: Shared, node: str
) -> None:
    """On PostgreSQL, on the owner's node its death is seen at once (its pid); from another
    node once its lease has expired. On SQLite at once, as its socket closes. Either way
    the ask ends, bounded."""
    ttl = 3.0
    program = await any_owner("node-a", ttl)
    async with agentrt.open_runtime(store=shared.open(), node=node) as rt:
        async with trio.open_nursery() as nursery:
            errors: list[AgentStopped] = []

            async def slow_ask() -> None:
                with pytest.raises(AgentStopped) as caught:
                    await rt.ask("x", "slow job")
                errors.append(caught.value)

            nursery.start_soon(slow_ask)
            with trio.fail_after(60):
                await wait_until_processing(rt)
            killed = trio.current_time()
            await program.kill()  # SIGKILL, and reaped (a zombie's pid still counts as alive)
            with trio.fail_after(ttl + CHECK_EVERY + 30):  # generous: a loaded machine
                await wait_until(lambda: bool(errors), bound=ttl + CHECK_EVERY + 30)
        took = trio.current_time() - killed
        (error,) = errors
        assert "node 'node-a'" in str(error) and f"pid {program.pid}" in str(error)
        assert "routed ask" in str(error)
        if node == "node-a" or shared.kind == "sqlite":
            assert took < ttl * 0.8  # before the lease could have expired
        with pytest.raises(AgentNotFound):  # nobody owns it once the lease has expired
            await wait_for_no_owner(rt)


async def wait_for_no_owner(rt: agentrt.Runtime) -> None:
    with trio.fail_after(30):
        while True:
            with contextlib.suppress(AgentStopped):  # its owner died: not reachable
                await rt.status("x")
            await trio.sleep(0.2)


async def test_an_answer_whose_caller_died_is_pruned_by_its_owner(
    owner: Owner, postgres_dsn: str
) -> None:
    program = await owner("node-a")
    started = program.runtime_id
    rows = [("stale", 3600), ("fresh", 0)]
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        for ident, age in rows:
            conn.execute(
                "INSERT INTO agentrt.routed (id, target, caller, name, call, arguments, taken,"
                " answer, answered_at) VALUES (%s, %s, 'gone', 'x', 'status', '', true, 'a',"
                " clock_timestamp() - make_interval(secs => %s))",
                (ident, started, age),
            )

        def left() -> set[str]:
            return {row[0] for row in conn.execute("SELECT id FROM agentrt.routed")}

        await wait_until(lambda: left() == {"fresh"}, bound=SWEEP_EVERY + 30)


async def test_routed_asks_go_on_after_the_database_restarts(
    owner: Owner, postgres_dsn: str, postgres_server: pg_server.Server
) -> None:
    await owner("node-a")
    async with agentrt.open_runtime(store=PostgresStore(postgres_dsn), node="node-c") as rt:
        with trio.fail_after(60):
            assert (await rt.ask("x", "before")).text == "node-a heard: before"
        await trio.to_thread.run_sync(postgres_server.restart)
        # Both runtimes reconnect: listening, routing and the store's own connection.
        with trio.fail_after(60):
            while True:
                try:
                    answer = await rt.ask("x", "after")
                    break
                except agentrt.StoreError:  # a call on a connection the restart broke
                    await trio.sleep(0.2)
        assert answer.text == "node-a heard: after"


async def break_the_waiting_backend(
    dsn: str, lock: str, query: str, then: Callable[[], object]
) -> None:
    """Hold a ``lock`` (``FOR UPDATE``, ``FOR KEY SHARE``) on agent x's routed row, call
    ``then`` (what makes a runtime write that row), wait until a backend's statement starting
    with ``query`` waits for the lock, terminate that backend, let the row go."""
    with (
        psycopg.connect(dsn, autocommit=True) as monitor,
        psycopg.connect(dsn) as locker,
    ):
        locker.execute(f"SELECT id FROM agentrt.routed WHERE name = 'x' {lock}")
        then()

        def waiting() -> list[tuple[int]]:
            return monitor.execute(
                "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE %s",
                (query + "%",),
            ).fetchall()

        [(pid,)] = await wait_until(waiting, bound=60)
        monitor.execute("SELECT pg_terminate_backend(%s)", (pid,))
        locker.rollback()


async def test_an_answer_whose_connection_broke_under_its_write_is_sent_again(
    postgres_dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Issue 35's replay: the owner's routing connection breaks while it writes the answer
    # to a routed ask (its backend terminated while the write waits for a row lock the
    # test holds); the owner lives and keeps the lease. The caller gets the answer.
    gate = Gate()
    owned = ScriptedBackend([gate, *reply("answered", session_id="sid-x")])
    async with (
        agentrt.open_runtime(store=PostgresStore(postgres_dsn), node="node-a") as a,
        # The caller's reads of its answer wait for the test's lock as well: no timeout.
        agentrt.open_runtime(
            store=PostgresStore(postgres_dsn, statement_timeout=600), node="node-c"
        ) as c,
        trio.open_nursery() as nursery,
    ):
        await a.start_agent(agentrt.Agent, name="x", backend=owned)
        answers: list[agentrt.Response] = []

        async def ask() -> None:
            answers.append(await c.ask("x", "hello"))

        nursery.start_soon(ask)
        with trio.fail_after(60):
            await gate.wait_reached()
        await break_the_waiting_backend(
            postgres_dsn, "FOR UPDATE", "UPDATE routed SET answer", gate.release
        )
        with trio.fail_after(2 * CHECK_EVERY + 10):
            while not answers:  # noqa: ASYNC110 (the ask's own task)
                await trio.sleep(0.05)
        [answer] = answers
        assert (answer.text, answer.session_id) == ("answered", "sid-x")
        assert "could not be written" in caplog.text and "was lost" not in caplog.text
        assert a.agents() == ("x",)


async def test_a_claim_whose_rows_never_came_back_is_taken_again_and_run_once(
    postgres_dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Issue 35's second hanging ask: the owner's claim of a routed row commits, but its
    # connection breaks before the row comes back to it (its backend terminated while the
    # commit waits for a standby). The owner lives and keeps the lease; the row, marked
    # taken, is put back by its next sweep, and the call runs once.
    owned = ScriptedBackend(reply("answered", session_id="sid-x"))
    async with commits_wait_for_a_standby(postgres_dsn) as monitor:
        async with (
            agentrt.open_runtime(store=PostgresStore(postgres_dsn), node="node-a") as a,
            agentrt.open_runtime(store=PostgresStore(postgres_dsn), node="node-c") as c,
            trio.open_nursery() as nursery,
        ):
            await a.start_agent(agentrt.Agent, name="x", backend=owned)
            # The first claim of a row (and only it) waits for the standby.
            monitor.execute(
                "CREATE TABLE armed (); INSERT INTO armed DEFAULT VALUES;"
                " CREATE FUNCTION public.wait_for_standby() RETURNS trigger AS $$ BEGIN"
                " DELETE FROM public.armed; IF FOUND THEN"
                " PERFORM set_config('synchronous_commit', 'on', true); END IF;"
                " RETURN NEW; END $$ LANGUAGE plpgsql;"
                " CREATE TRIGGER wait_for_standby BEFORE UPDATE ON agentrt.routed FOR EACH ROW"
                " WHEN (NEW.taken AND NOT OLD.taken) EXECUTE FUNCTION public.wait_for_standby()"
            )
            answers: list[agentrt.Response] = []

            async def ask() -> None:
                answers.append(await c.ask("x", "hello"))

            nursery.start_soon(ask)
            await wait_until(lambda: terminate_waiting(monitor, "%SET taken = true%"), bound=60)
            with trio.fail_after(SWEEP_EVERY + 30):  # generous: a loaded machine
                while not answers:  # noqa: ASYNC110 (the ask's own task)
                    await trio.sleep(0.05)
        [answer] = answers
        assert (answer.text, answer.session_id) == ("answered", "sid-x")
        assert owned.prompts == ["hello"]
        assert "could not be taken" in caplog.text and "queued again" in caplog.text
        assert monitor.execute("SELECT count(*) FROM armed").fetchone() == (0,)


async def test_a_withdrawal_whose_connection_broke_is_made_again_and_stops_the_turn(
    postgres_dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    # The caller's connection breaks as it withdraws a cancelled routed ask that its owner
    # is running (its backend terminated while the withdrawal waits for a row lock the test
    # holds). The withdrawal is made again, and the owner's turn stops.
    gate = Gate()
    owned = ScriptedBackend([gate, *reply("never", session_id="sid-x")])
    async with (
        agentrt.open_runtime(store=PostgresStore(postgres_dsn), node="node-a") as a,
        agentrt.open_runtime(store=PostgresStore(postgres_dsn), node="node-c") as c,
        trio.open_nursery() as nursery,
    ):
        await a.start_agent(agentrt.Agent, name="x", backend=owned)
        scope = trio.CancelScope()
        withdrawn = trio.Event()

        async def ask() -> None:
            with scope:
                await c.ask("x", "hello")
            withdrawn.set()

        nursery.start_soon(ask)
        with trio.fail_after(60):
            await gate.wait_reached()
        await break_the_waiting_backend(
            postgres_dsn, "FOR UPDATE", "DELETE FROM routed WHERE id", scope.cancel
        )
        with trio.fail_after(60):
            await withdrawn.wait()
            while (await a.status("x")).state != "idle":  # noqa: ASYNC110
                await trio.sleep(0.05)
        assert "could not be withdrawn" not in caplog.text


async def test_an_answer_read_is_returned_though_its_delete_broke(
    postgres_dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    # The caller's connection breaks as it deletes the row of an answer it reads (its
    # backend terminated while the delete waits for a key-share lock the test holds, which
    # lets the owner write the answer). The caller returns the answer all the same.
    gate = Gate()
    owned = ScriptedBackend([gate, *reply("answered", session_id="sid-x")])
    async with (
        agentrt.open_runtime(store=PostgresStore(postgres_dsn), node="node-a") as a,
        agentrt.open_runtime(
            store=PostgresStore(postgres_dsn, statement_timeout=600), node="node-c"
        ) as c,
        trio.open_nursery() as nursery,
    ):
        await a.start_agent(agentrt.Agent, name="x", backend=owned)
        answers: list[agentrt.Response] = []

        async def ask() -> None:
            answers.append(await c.ask("x", "hello"))

        nursery.start_soon(ask)
        with trio.fail_after(60):
            await gate.wait_reached()
        await break_the_waiting_backend(
            postgres_dsn, "FOR KEY SHARE", "DELETE FROM routed WHERE id", gate.release
        )
        with trio.fail_after(60):
            while not answers:  # noqa: ASYNC110 (the ask's own task)
                await trio.sleep(0.05)
        [answer] = answers
        assert (answer.text, answer.session_id) == ("answered", "sid-x")
        assert "answer read could not be deleted" in caplog.text


def terminate_waiting(monitor: psycopg.Connection[Any], query: str) -> list[tuple[bool]]:
    """Terminate the test database's backends whose commit waits for a standby, running a
    statement like ``query``."""
    return monitor.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE wait_event = 'SyncRep'"
        " AND datname = current_database() AND query LIKE %s",
        (query,),
    ).fetchall()


@contextlib.asynccontextmanager
async def commits_wait_for_a_standby(dsn: str) -> AsyncIterator[psycopg.Connection[Any]]:
    """A commit made with ``synchronous_commit = on`` waits (wait event ``SyncRep``) for a
    standby that never comes, until its backend is terminated: then it stays committed but
    its client hears nothing more. Other sessions of the test's database commit locally.
    Yields a monitor; entered once a probe's commit was seen waiting (the server takes the
    setting up in a process of its own, a moment after the reload)."""

    def commit() -> bool:
        """True if a commit waited for the standby (and was terminated)."""
        options = "-c synchronous_commit=on"
        with psycopg.connect(dsn, autocommit=True, options=options) as conn:
            try:
                conn.execute("INSERT INTO probe DEFAULT VALUES")  # written: a commit to wait
            except psycopg.OperationalError:
                return True
            return False

    async def commit_waits(monitor: psycopg.Connection[Any]) -> bool:
        waited: list[bool] = []
        async with trio.open_nursery() as nursery:

            async def run() -> None:
                waited.append(await trio.to_thread.run_sync(commit))

            nursery.start_soon(run)
            await wait_until(lambda: waited or terminate_waiting(monitor, "INSERT INTO probe%"))
        return waited[0]

    with psycopg.connect(dsn, autocommit=True) as monitor:
        monitor.execute("SET synchronous_commit = local")
        monitor.execute("CREATE TABLE probe ()")
        database = sql.Identifier(monitor.info.dbname)
        locally = sql.SQL("ALTER DATABASE {} SET synchronous_commit = local")
        monitor.execute(locally.format(database))
        monitor.execute("ALTER SYSTEM SET synchronous_standby_names = 'nobody'")
        monitor.execute("SELECT pg_reload_conf()")
        try:
            with trio.fail_after(60):
                while not await commit_waits(monitor):
                    pass
            yield monitor
        finally:
            monitor.execute("ALTER SYSTEM RESET synchronous_standby_names")
            monitor.execute("SELECT pg_reload_conf()")


async def test_calls_to_a_local_agent_never_touch_the_routing_connection(
    postgres_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with agentrt.open_runtime(store=PostgresStore(postgres_dsn), node="node-c") as rt:
        await rt.start_agent(agentrt.Agent, name="y", backend=echo_backend())
        router = rt._router
        assert router is not None

        async def no_database(*args: object, **kwargs: object) -> None:
            raise AssertionError("a local call used the routing connection")

        monkeypatch.setattr(router._db._store, "_call", no_database)  # type: ignore[attr-defined]
        with trio.fail_after(30):
            assert (await rt.ask("y", "hi")).text == "echo hi"
            ref = await rt.tell("y", "later")
            assert isinstance(await rt.wait(ref), Completed)
            assert isinstance(await rt.poll(ref), Completed)
            assert (await rt.status("y")).turns == 2
            assert await rt.interrupt("y") is False
            assert await rt.interrupt_request(ref) is False
            assert await rt.withdraw(ref) is False
            await rt.notify("y", ("any", object()))  # a local event need not be data
            await rt.halt("y")
            await rt.unhalt("y")
            await rt.reset_session("y")
            await rt.stop_agent("y")


# --- rows written by anyone with access to the database ---
# A forger writes rows as the router does: into ``agentrt.routed``, addressed to the owner's
# runtime id, with a notification on its channel. Nothing in a row may act on the owner:
# it answers what it cannot decode with a RoutingError (a cancel: drops it) and serves on.


def channel_of(runtime_id: str) -> str:
    """The owner's notification channel, as any program can work it out."""
    return "agentrt_" + hashlib.blake2b(runtime_id.encode(), digest_size=8).hexdigest()


def forge(
    conn: psycopg.Connection[Any], target: str, call: str, row: bytes, name: str = "x"
) -> str:
    ident = secrets.token_hex(8)
    conn.execute(
        "INSERT INTO agentrt.routed (id, target, caller, name, call, arguments)"
        " VALUES (%s, %s, 'forger', %s, %s, %s)",
        (ident, target, name, call, row),
    )
    conn.execute("SELECT pg_notify(%s, '')", (channel_of(target),))
    return ident


async def answer_to(conn: psycopg.Connection[Any], ident: str) -> Any:
    """The owner's answer to a forged row, as plain data."""
    return msgspec.msgpack.decode(await answered(conn, ident))


async def answered(conn: psycopg.Connection[Any], ident: str) -> bytes:
    query = "SELECT answer FROM agentrt.routed WHERE id = %s AND answer IS NOT NULL"
    with trio.fail_after(60):
        while (row := conn.execute(query, (ident,)).fetchone()) is None:  # noqa: ASYNC110
            await trio.sleep(0.05)
    return bytes(row[0])


def refusal(answer: Any) -> str:
    """The message of the RoutingError an answer carries."""
    assert answer["protocol"] == 1
    assert answer["body"]["answer"] == "error"
    error = answer["body"]["error"]
    assert error["kind"] == "RoutingError", error
    return str(error["message"])


async def wait_until_deleted(conn: psycopg.Connection[Any], idents: list[str]) -> None:
    query = "SELECT count(*) FROM agentrt.routed WHERE id = ANY(%s)"
    with trio.fail_after(60):
        while conn.execute(query, (idents,)).fetchone() != (0,):  # noqa: ASYNC110
            await trio.sleep(0.05)


def pickled_call(module: str, name: str, *arguments: bytes) -> bytes:
    """A pickle calling ``module.name(*arguments)`` on load; each argument pickled alone."""
    tupled = {0: b")", 1: b"\x85", 2: b"\x86"}[len(arguments)]  # EMPTY_TUPLE, TUPLE1, TUPLE2
    return b"\x80\x02c" + f"{module}\n{name}\n".encode() + b"".join(arguments) + tupled + b"R."


def pickled(value: object) -> bytes:
    """``value``'s pickle without its header and STOP: an argument of `pickled_call`."""
    return pickle.dumps(value, protocol=2)[2:-1]


def alive(program: OwnerProgram) -> bool:
    return program.program.process.poll() is None


async def assert_serves_on(program: OwnerProgram, rt: agentrt.Runtime) -> None:
    with trio.fail_after(60):
        assert (await rt.ask("x", "still there?")).text == "node-a heard: still there?"
    assert alive(program)


async def test_a_cancel_row_that_does_not_decode_is_dropped_and_the_owner_serves_on(
    owner: Owner, postgres_dsn: str
) -> None:
    program = await owner("node-a")
    rows = [
        b"garbage",
        b"",
        pickled_call("os", "system", pickled("true")),  # a global no row may name
        msgspec.msgpack.encode({"protocol": 1, "body": {"call": "cancel", "call_id": 5}}),
    ]
    async with agentrt.open_runtime(store=PostgresStore(postgres_dsn), node="node-c") as rt:
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            idents = [forge(conn, program.runtime_id, "cancel", row) for row in rows]
            await wait_until_deleted(conn, idents)  # taken, and dropped
        await assert_serves_on(program, rt)


async def test_a_row_naming_a_module_imports_nothing_and_the_owner_serves_on(
    owner: Owner, postgres_dsn: str
) -> None:
    """Importing ``agentrt.__main__`` runs the command on the owner's argv, which exits."""
    program = await owner("node-a")
    named = pickled_call("agentrt.__main__", "main")
    body = {"protocol": 1, "body": {"call": "agentrt.__main__", "prompt": "hi"}}
    async with agentrt.open_runtime(store=PostgresStore(postgres_dsn), node="node-c") as rt:
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            cancel = forge(conn, program.runtime_id, "cancel", named)
            asked = forge(conn, program.runtime_id, "ask", named)
            column = forge(conn, program.runtime_id, "agentrt.__main__", named)
            tagged = forge(conn, program.runtime_id, "ask", msgspec.msgpack.encode(body))
            assert "pickle" in refusal(await answer_to(conn, asked))
            assert "pickle" in refusal(await answer_to(conn, column))
            assert "agentrt.__main__" in refusal(await answer_to(conn, tagged))
            await wait_until_deleted(conn, [cancel])
        await assert_serves_on(program, rt)


async def test_a_forged_row_constructs_no_class_and_writes_no_file(
    owner: Owner, postgres_dsn: str, tmp_path: Path
) -> None:
    """The demo's FakeClaude writes an executable script where it is told to when built."""
    program = await owner("node-a")
    target = tmp_path / "target"
    target.mkdir()
    fields = {"directory": str(target), "name": "forged", "tool_seconds": 0.0}
    built = pickled_call(
        "msgspec._utils",
        "rebuild",
        b"cagentrt._cli._demo_model\nFakeClaude\n",
        pickled(fields),
    )
    as_data = {"__class__": "agentrt._cli._demo_model.FakeClaude", **fields}
    rows = [
        ("ask", built),
        (
            "ask",
            msgspec.msgpack.encode({"protocol": 1, "body": {"call": "ask", "prompt": as_data}}),
        ),
        ("poll", msgspec.msgpack.encode({"protocol": 1, "body": {"call": "poll", "ref": as_data}})),
    ]
    async with agentrt.open_runtime(store=PostgresStore(postgres_dsn), node="node-c") as rt:
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            idents = [forge(conn, program.runtime_id, call, row) for call, row in rows]
            answers = [await answered(conn, ident) for ident in idents]
        assert list(target.iterdir()) == []
        for answer in answers:
            assert "routed" in refusal(msgspec.msgpack.decode(answer))
        await assert_serves_on(program, rt)


async def test_a_call_in_another_protocol_is_answered_with_an_error_naming_both(
    owner: Owner, postgres_dsn: str
) -> None:
    program = await owner("node-a")
    newer = msgspec.msgpack.encode({"protocol": 2, "body": {"call": "ask", "prompt": "hi"}})
    async with agentrt.open_runtime(store=PostgresStore(postgres_dsn), node="node-c") as rt:
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            message = refusal(await answer_to(conn, forge(conn, program.runtime_id, "ask", newer)))
        assert "written in routing protocol 2" in message
        assert "this runtime speaks routing protocol 1" in message
        await assert_serves_on(program, rt)


# Answers a forged owner writes, and what its caller must be told.
FORGED_ANSWERS = [
    (b"garbage", "not a routed row of any protocol"),
    (pickle.dumps(("ok", "x")), "it is a pickle"),
    (
        msgspec.msgpack.encode({"protocol": 2, "body": {"answer": "response"}}),
        "written in routing protocol 2, and this runtime speaks routing protocol 1",
    ),
    (
        msgspec.msgpack.encode(
            {
                "protocol": 1,
                "body": {
                    "answer": "error",
                    "error": {"kind": "FakeClaude", "message": "m", "fields": {"name": "x"}},
                },
            }
        ),
        "a kind this agentrt does not know, 'FakeClaude'",
    ),
    (
        msgspec.msgpack.encode({"protocol": 1, "body": {"answer": "bool", "result": True}}),
        "not an answer to a routed ask",
    ),
]


@pytest.mark.parametrize(("row", "why"), FORGED_ANSWERS, ids=range(len(FORGED_ANSWERS)))
async def test_an_answer_that_does_not_decode_raises_a_routing_error_for_its_caller(
    postgres_dsn: str, row: bytes, why: str
) -> None:
    """The owner is forged too: a lease of "ghost" held by a runtime that is only rows."""
    async with agentrt.open_runtime(store=PostgresStore(postgres_dsn), node="node-c") as rt:
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO agentrt.leases (name, epoch, node, pid, start_time, runtime_id,"
                " renewed_at, expires_at) VALUES ('ghost', 1, 'elsewhere', 1, 0, 'forged',"
                " now(), now() + interval '1 hour')"
            )
            async with trio.open_nursery() as nursery:
                errors: list[BaseException] = []

                async def ask() -> None:
                    try:
                        await rt.ask("ghost", "hi")
                    except BaseException as exc:
                        errors.append(exc)

                nursery.start_soon(ask)
                query = "SELECT id FROM agentrt.routed WHERE target = 'forged'"
                with trio.fail_after(60):
                    while (sent := conn.execute(query).fetchone()) is None:  # noqa: ASYNC110
                        await trio.sleep(0.05)
                conn.execute(
                    "UPDATE agentrt.routed SET answer = %s, answered_at = now() WHERE id = %s",
                    (row, sent[0]),
                )
                conn.execute("SELECT pg_notify(%s, %s)", (channel_of(rt.runtime_id), sent[0]))
    (error,) = errors
    assert isinstance(error, agentrt.RoutingError), repr(error)
    assert isinstance(error, agentrt.AgentRTError)
    assert (error.name, error.call) == ("ghost", "ask")
    assert why in str(error) and "its answer was refused" in str(error)


# Rows of arbitrary data, some in the shape of a call (the name column is an agent nobody
# owns, so that a row that is a valid call is answered AgentNotFound and acts on nothing).
_any_data = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63) | st.text() | st.binary(),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["call", "prompt", "ref", "call_id"]), inner, max_size=3)
    ),
    max_leaves=8,
)
_calls = st.sampled_from(["ask", "tell", "poll", "wait", "interrupt", "status", "stop_agent"])
_rows = st.tuples(
    _calls | st.just("cancel"),
    st.binary(max_size=40)
    | _any_data.map(msgspec.msgpack.encode)
    | st.builds(
        lambda protocol, body: msgspec.msgpack.encode({"protocol": protocol, "body": body}),
        st.sampled_from([1, 1, 2]),
        st.builds(
            lambda call, rest: {"call": call, **rest},
            _calls,
            st.dictionaries(st.sampled_from(["prompt", "ref", "call_id"]), _any_data, max_size=2),
        ),
    ),
)


@settings(max_examples=3, deadline=None)
@given(rows=st.lists(_rows, min_size=6, max_size=6))
async def test_arbitrary_rows_are_answered_or_dropped_and_the_owner_serves_on(
    postgres_server: pg_server.Server, rows: list[tuple[str, bytes]]
) -> None:
    """Each example on a database and an owner of its own (the examples of a hypothesis
    test share its fixtures, and an owner's lease of "x" outlives it)."""
    dsn = await trio.to_thread.run_sync(postgres_server.create_database)
    async with (
        store_programs(CHILD, dsn) as start_program,
        agentrt.open_runtime(store=PostgresStore(dsn), node="node-c") as rt,
    ):
        program = await start_owner(start_program, "node-a")
        with psycopg.connect(dsn, autocommit=True) as conn:
            target = program.runtime_id
            sent = [(call, forge(conn, target, call, row, "nobody")) for call, row in rows]
            for call, ident in sent:
                if call != "cancel":
                    answer = await answer_to(conn, ident)
                    assert answer["protocol"] == 1 and answer["body"]["answer"] == "error"
                    assert answer["body"]["error"]["kind"] in ("RoutingError", "AgentNotFound")
            await wait_until_deleted(conn, [ident for call, ident in sent if call == "cancel"])
        await assert_serves_on(program, rt)


async def test_a_refused_row_is_logged_redacted_and_cut_short(
    postgres_dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The owner is this test's runtime, so that its log is seen."""
    secret = "sk-" + "a1b2c3d4" * 4
    body = {"protocol": 1, "body": {"call": secret + "x" * 1000}}
    async with agentrt.open_runtime(store=PostgresStore(postgres_dsn), node="node-c") as rt:
        await rt.start_agent(agentrt.Agent, name="x", backend=echo_backend())
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            ident = forge(conn, rt.runtime_id, "status", msgspec.msgpack.encode(body))
            message = refusal(await answer_to(conn, ident))
        assert (await rt.status("x")).name == "x"
    (logged,) = [r.getMessage() for r in caplog.records if "was refused" in r.getMessage()]
    for text in (logged, message):
        assert secret not in text and "[REDACTED]" in text, text
        assert len(text) < 600
