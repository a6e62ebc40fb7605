"""Calls routed to the runtime that owns an agent, on a real PostgreSQL: the owner is a
program of its own (route_child.py, standing in for a host), the caller is this test's
runtime (a third party to the store and the owner)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pg_server
import psycopg
import pytest
import trio
from _helpers import echo_backend
from proc_helpers import Program, store_programs, wait_until

import agentrt
from agentrt import (
    AgentNotFound,
    AgentStatus,
    AgentStopped,
    Completed,
    PostgresStore,
    StopReason,
    TurnFailed,
)
from agentrt._routing import CHECK_EVERY, SWEEP_EVERY
from agentrt.testing import ScriptedBackend, reply

CHILD = Path(__file__).parent / "route_child.py"


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


@pytest.fixture
async def owner(postgres_dsn: str) -> AsyncIterator[Owner]:
    """Start route_child.py programs (owners of "x") on the test's database."""
    async with store_programs(CHILD, postgres_dsn) as start_program:

        async def start(node: str, lease_ttl: float = 60, *options_file: str) -> OwnerProgram:
            program = await start_program(node, str(lease_ttl), *options_file)
            line = await program.line()
            assert line.startswith("STARTED "), line
            return OwnerProgram(program, line.removeprefix("STARTED "))

        yield start


async def test_ask_tell_wait_poll_status_interrupt_and_stop_reach_the_owner(
    owner: Owner, postgres_dsn: str
) -> None:
    await owner("node-a")
    async with agentrt.open_runtime(store=PostgresStore(postgres_dsn), node="node-c") as rt:
        local = ScriptedBackend(default=lambda call: reply("local"))
        await rt.start_agent(agentrt.Agent, name="y", backend=local)
        with trio.fail_after(60):
            assert (await rt.ask("y", "hi")).text == "local"  # a local agent stays local
            answer = await rt.ask("x", "hello")
            assert answer.text == "node-a heard: hello" and answer.session_id == "sid-x"

            ref = await rt.atell("x", "later")
            settled = await rt.wait(ref)
            assert isinstance(settled, Completed)
            assert settled.response.text == "node-a heard: later"
            assert await rt.apoll("x", ref) == settled

            status = await rt.astatus("x")
            assert isinstance(status, AgentStatus)
            assert (status.name, status.state, status.turns) == ("x", "idle", 2)
            # The synchronous forms act on this runtime's agents only.
            with pytest.raises(AgentNotFound):
                rt.status("x")

            async with trio.open_nursery() as nursery:
                failed: list[BaseException] = []

                async def slow_ask() -> None:
                    try:
                        await rt.ask("x", "slow job")
                    except TurnFailed as exc:
                        failed.append(exc)

                nursery.start_soon(slow_ask)
                await wait_until_processing(rt)
                assert await rt.ainterrupt("x") is True
            assert [exc.reason for exc in failed] == [StopReason.INTERRUPTED]  # type: ignore[attr-defined]
            assert await rt.ainterrupt("x") is False

            await rt.stop_agent("x")
            with pytest.raises(AgentNotFound):
                await rt.ask("x", "anyone?")
            with pytest.raises(AgentNotFound):
                await rt.astatus("nobody")


async def wait_until_processing(rt: agentrt.Runtime) -> None:
    # Another program's agent: no event of ours to wait on.
    while (await rt.astatus("x")).state != "processing":  # noqa: ASYNC110
        await trio.sleep(0.05)


async def test_a_cancelled_routed_ask_stops_its_turn_on_the_owner(
    owner: Owner, postgres_dsn: str
) -> None:
    await owner("node-a")
    async with agentrt.open_runtime(store=PostgresStore(postgres_dsn), node="node-c") as rt:
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
            while (await rt.astatus("x")).state != "idle":  # noqa: ASYNC110
                await trio.sleep(0.05)
            assert (await rt.ask("x", "next")).text == "node-a heard: next"


@pytest.mark.parametrize("node", ["node-a", "node-b"])
async def test_the_owner_killed_while_a_routed_ask_waits_ends_it_with_a_clear_error(
    owner: Owner, postgres_dsn: str, node: str
) -> None:
    """On the owner's node its death is seen at once (its pid); from another node once its
    lease has expired. Either way the ask ends, bounded."""
    ttl = 3.0
    program = await owner("node-a", ttl)
    async with agentrt.open_runtime(store=PostgresStore(postgres_dsn), node=node) as rt:
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
        if node == "node-a":
            assert took < ttl * 0.8  # before the lease could have expired
        with pytest.raises(AgentNotFound):  # nobody owns it once the lease has expired
            await wait_for_no_owner(rt)


async def wait_for_no_owner(rt: agentrt.Runtime) -> None:
    with trio.fail_after(30):
        while True:
            with contextlib.suppress(AgentStopped):  # its owner died: not reachable
                await rt.astatus("x")
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


async def test_calls_to_a_local_agent_never_touch_the_routing_connection(
    postgres_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with agentrt.open_runtime(store=PostgresStore(postgres_dsn), node="node-c") as rt:
        await rt.start_agent(agentrt.Agent, name="y", backend=echo_backend())
        router = rt._router
        assert router is not None

        async def no_database(*args: object, **kwargs: object) -> None:
            raise AssertionError("a local call used the routing connection")

        monkeypatch.setattr(router._db, "_call", no_database)
        with trio.fail_after(30):
            assert (await rt.ask("y", "hi")).text == "echo hi"
            ref = await rt.atell("y", "later")
            assert isinstance(await rt.wait(ref), Completed)
            assert isinstance(await rt.apoll("y", ref), Completed)
            assert (await rt.astatus("y")).turns == 2
            assert await rt.ainterrupt("y") is False
            await rt.stop_agent("y")
