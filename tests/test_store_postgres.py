"""PostgresStore on a throwaway PostgreSQL (tests/pg_server.py): its schema and migrations,
its connection handling across a server restart, a runtime's turn across one. The
conformance suites (test_store.py, test_leases.py) run on it too."""

from __future__ import annotations

import attrs
import psycopg
import pytest
import schema_steps
import trio
import trio.testing
from pg_server import Server
from proc_helpers import wait_until
from schema_steps import POSTGRES_STEPS, POSTGRES_VERSION, back_to_postgres

from agentrt import Agent, PostgresStore, StoreError, Usage, open_runtime
from agentrt.store import (
    LeaseOwner,
    PendingApproval,
    StoredBudget,
    StoredCredential,
    StoredTurn,
    StoredWorkspace,
)
from agentrt.testing import Gate, ScriptedBackend, reply

_APPROVAL = PendingApproval(
    id="a-1",
    name="coder",
    tool_name="Bash",
    tool_use_id="toolu_1",
    input='{"command": "ls"}',
    reason="shell",
    runtime_id="r-1",
    request=1,
    requested_at=1000.0,
    expires_at=1e12,  # pending: a request past its bound is not listed
)
_WORKSPACE = StoredWorkspace(
    name="coder",
    repo="/srv/repo",
    path="/srv/wt/coder",
    branch="agentrt/coder",
    base=None,
    node="a",
)

_VERSION = "SELECT version FROM agentrt.schema_version"


async def test_a_new_database_gets_the_schema_in_its_own_namespace(postgres_dsn: str) -> None:
    async with PostgresStore(postgres_dsn), PostgresStore(postgres_dsn):
        pass  # two openers of a new database: migrated once
    with psycopg.connect(postgres_dsn) as conn:
        tables = {
            row[0]
            for row in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'agentrt'"
            )
        }
        assert tables == schema_steps.tables(POSTGRES_STEPS, POSTGRES_VERSION)
        assert conn.execute(_VERSION).fetchall() == [(POSTGRES_VERSION,)]


def _postgres_schema(dsn: str) -> dict[str, set[str]]:
    """Each table of the store's namespace in the database ``dsn``, with its columns and
    indexes."""
    with psycopg.connect(dsn) as conn:
        schema: dict[str, set[str]] = {}
        for table, column in conn.execute(
            "SELECT table_name, column_name FROM information_schema.columns"
            " WHERE table_schema = 'agentrt'"
        ):
            schema.setdefault(table, set()).add(column)
        for table, index in conn.execute(
            "SELECT tablename, indexname FROM pg_indexes WHERE schemaname = 'agentrt'"
        ):
            schema[table].add(f"index {index}")
        return schema


async def test_every_earlier_version_the_schema_steps_name_upgrades_to_a_new_databases_schema(
    postgres_dsn: str,
) -> None:
    # As on SQLite (test_store_sqlite.py): each version the upgrade tests go back to
    # (schema_steps.back_to_postgres) has what its steps made, and comes forward to what a
    # new database gets.
    async with PostgresStore(postgres_dsn):
        pass
    new = _postgres_schema(postgres_dsn)
    for version in range(1, POSTGRES_VERSION):
        back_to_postgres(postgres_dsn, version)
        assert set(_postgres_schema(postgres_dsn)) == schema_steps.tables(POSTGRES_STEPS, version)
        async with PostgresStore(postgres_dsn):
            pass
        assert _postgres_schema(postgres_dsn) == new, version


async def test_a_version_6_database_gains_the_workspaces_keeping_its_approvals(
    postgres_dsn: str,
) -> None:
    # Version 6 is the schema with the approvals table and no workspaces one.
    async with PostgresStore(postgres_dsn) as store:
        await store.put_approval(_APPROVAL)
    back_to_postgres(postgres_dsn, 6)
    async with PostgresStore(postgres_dsn) as store:
        assert list(await store.pending_approvals()) == [_APPROVAL]
        await store.save_workspace(_WORKSPACE)
        assert list(await store.workspaces()) == [_WORKSPACE]
    with psycopg.connect(postgres_dsn) as conn:
        assert conn.execute(_VERSION).fetchall() == [(POSTGRES_VERSION,)]


async def test_a_version_7_database_gains_the_turn_history_keeping_its_sessions(
    postgres_dsn: str,
) -> None:
    # Version 7 is the schema with the workspaces table and no turn history.
    async with PostgresStore(postgres_dsn) as store:
        await store.checkpoint_session("coder", backend="claude", session_id="s-1", cwd=None)
    back_to_postgres(postgres_dsn, 7)
    turn = StoredTurn(
        name="coder",
        node="a",
        started_at=1000.0,
        ended_at=1001.0,
        duration=1.0,
        outcome="complete",
        cost_usd=None,
        usage=Usage(output_tokens=4),
        prompt=None,
        answer=None,
    )
    async with PostgresStore(postgres_dsn) as store:
        await store.record_turn_with_history(turn, session_id=None, keep=10)
        assert list(await store.turn_history(None, limit=10)) == [turn]
        record = await store.load("coder")
        assert record is not None and (record.session_id, record.turns) == ("s-1", 1)
    with psycopg.connect(postgres_dsn) as conn:
        assert conn.execute(_VERSION).fetchall() == [(POSTGRES_VERSION,)]


async def test_a_version_8_database_gains_the_budgets_keeping_its_sessions(
    postgres_dsn: str,
) -> None:
    # Version 8 is the schema with the turn history and no budgets.
    async with PostgresStore(postgres_dsn) as store:
        await store.checkpoint_session("coder", backend="claude", session_id="s-1", cwd=None)
    back_to_postgres(postgres_dsn, 8)
    budget = StoredBudget(scope="supervisor", key="k", usd=None, tokens=12_000_000_000)
    async with PostgresStore(postgres_dsn) as store:
        await store.save_budgets("coder", (budget,))
        assert list(await store.budgets()) == [("coder", (budget,))]
        record = await store.load("coder")
        assert record is not None and record.session_id == "s-1"
    with psycopg.connect(postgres_dsn) as conn:
        assert conn.execute(_VERSION).fetchall() == [(POSTGRES_VERSION,)]


async def test_a_version_9_database_gains_the_durable_requests_keeping_its_sessions(
    postgres_dsn: str,
) -> None:
    # Version 9 is the schema with the budgets and no requests table.
    async with PostgresStore(postgres_dsn) as store:
        await store.checkpoint_session("coder", backend="claude", session_id="s-1", cwd=None)
    back_to_postgres(postgres_dsn, 9)
    async with PostgresStore(postgres_dsn) as store:
        accepted = await store.enqueue_request(
            "coder",
            id="r-1",
            prompt="hello",
            key="job-1",
            origin="tell",
            max_pending=10,
            max_pending_bytes=1000,
        )
        assert accepted == "r-1"
        assert [r.id for r in await store.queued_requests("coder")] == ["r-1"]
        record = await store.load("coder")
        assert record is not None and record.session_id == "s-1"
    with psycopg.connect(postgres_dsn) as conn:
        assert conn.execute(_VERSION).fetchall() == [(POSTGRES_VERSION,)]


async def test_a_version_10_database_gains_the_credentials_keeping_its_requests(
    postgres_dsn: str,
) -> None:
    # Version 10 is the schema with the durable requests and no credentials' holds.
    async with PostgresStore(postgres_dsn) as store:
        await store.checkpoint_session("coder", backend="claude", session_id="s-1", cwd=None)
        await store.enqueue_request(
            "coder",
            id="r-1",
            prompt="hello",
            key=None,
            origin="tell",
            max_pending=10,
            max_pending_bytes=1000,
        )
    back_to_postgres(postgres_dsn, 10)
    halted = StoredCredential(
        key="claude:/l", label="claude login file /l", halt_reason="expired", halted_since=5.0
    )
    async with PostgresStore(postgres_dsn) as store:
        assert list(await store.credentials()) == []
        await store.save_credential(halted)
        await store.use_credential("coder", "claude:/l")
        assert list(await store.credentials()) == [attrs.evolve(halted, agents=("coder",))]
        assert [r.id for r in await store.queued_requests("coder")] == ["r-1"]
    with psycopg.connect(postgres_dsn) as conn:
        assert conn.execute(_VERSION).fetchall() == [(POSTGRES_VERSION,)]


async def test_a_version_11_database_gains_the_schedules_keeping_its_requests(
    postgres_dsn: str,
) -> None:
    # Version 11 is the schema with the credentials' holds and no schedules table.
    async with PostgresStore(postgres_dsn) as store:
        await store.enqueue_request(
            "coder",
            id="r-1",
            prompt="hello",
            key=None,
            origin="tell",
            max_pending=10,
            max_pending_bytes=1000,
        )
    back_to_postgres(postgres_dsn, 11)
    async with open_runtime(store=PostgresStore(postgres_dsn)) as rt:
        made = await rt.schedule("coder", "nightly", every=86400)
        assert [s.id for s in await rt.schedules("coder")] == [made.id]
    async with PostgresStore(postgres_dsn) as store:
        assert [r.id for r in await store.queued_requests("coder")] == ["r-1"]
    with psycopg.connect(postgres_dsn) as conn:
        assert conn.execute(_VERSION).fetchall() == [(POSTGRES_VERSION,)]


async def test_a_newer_schema_is_refused_and_left_alone(postgres_dsn: str) -> None:
    async with PostgresStore(postgres_dsn):
        pass
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("UPDATE agentrt.schema_version SET version = 99")
    with pytest.raises(StoreError, match="schema version 99 is newer"):
        async with PostgresStore(postgres_dsn):
            pass
    with psycopg.connect(postgres_dsn) as conn:
        assert conn.execute("SELECT version FROM agentrt.schema_version").fetchall() == [(99,)]


async def test_an_unreachable_server_is_a_store_error_without_the_password(
    postgres_server: Server,
) -> None:
    dsn = f"host={postgres_server.root}/nowhere user=postgres password=hunter2secret"
    with pytest.raises(StoreError, match="cannot connect") as refused:
        async with PostgresStore(dsn, connect_timeout=1):
            pass
    assert "hunter2secret" not in str(refused.value)


async def restart(server: Server) -> None:
    await trio.to_thread.run_sync(server.restart)


async def test_a_server_restart_between_calls_is_not_seen(
    postgres_server: Server, postgres_dsn: str
) -> None:
    async with PostgresStore(postgres_dsn) as store:
        await store.checkpoint_session("x", backend="claude", session_id="s1", cwd="/w")
        await restart(postgres_server)
        await store.record_turn(
            "x", stop_reason="complete", cost_usd=0.5, usage=None, session_id=None
        )
        record = await store.load("x")
        assert record is not None and (record.turns, record.session_id) == (1, "s1")


async def test_a_call_the_server_ends_under_fails_clearly_and_the_next_reconnects(
    postgres_server: Server, postgres_dsn: str
) -> None:
    dbname = postgres_dsn.rsplit("dbname=", 1)[1]
    waiting = (
        "SELECT pid FROM pg_stat_activity WHERE application_name = 'agentrt' "
        "AND datname = %s AND wait_event_type = 'Lock'"
    )
    async with PostgresStore(postgres_dsn) as store:
        await store.checkpoint_session("x", backend="claude", session_id="s1", cwd="/w")
        with psycopg.connect(postgres_dsn) as admin:
            # The store's next read waits on this lock, its statement sent.
            admin.execute("LOCK TABLE agentrt.sessions IN ACCESS EXCLUSIVE MODE")
            failed: list[StoreError] = []

            async def load() -> None:
                try:
                    await store.load("x")
                except StoreError as exc:
                    failed.append(exc)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(load)
                pids = await wait_until(lambda: admin.execute(waiting, (dbname,)).fetchall())
                admin.execute("SELECT pg_terminate_backend(%s)", pids[0])
            admin.rollback()
        [error] = failed
        assert "the connection broke, so this call may or may not have been made" in str(error)
        record = await store.load("x")  # on a new connection
        assert record is not None and record.session_id == "s1"


async def test_a_turn_across_a_server_restart_keeps_everything(
    postgres_server: Server, postgres_dsn: str
) -> None:
    gate = Gate()
    backend = ScriptedBackend([*reply("first", session_id="s1")[:1], gate, *reply("first")[1:]])
    store = PostgresStore(postgres_dsn)
    async with open_runtime(store=store) as rt, trio.open_nursery() as nursery:
        await rt.start_agent(Agent, name="x", backend=backend)
        answers: list[str] = []

        async def ask() -> None:
            answers.append((await rt.ask("x", "one")).text)

        nursery.start_soon(ask)
        await gate.wait_reached()  # its session id is checkpointed
        await restart(postgres_server)
        gate.release()
    assert answers == ["first"]
    async with PostgresStore(postgres_dsn) as reader:
        record = await reader.load("x")
        assert record is not None
        assert (record.session_id, record.turns, record.last_stop_reason) == (
            "s1",
            1,
            "complete",
        )
        [lease] = await reader.leases()
        assert lease.owner is None  # given back as the runtime closed


async def test_a_lease_renewal_goes_before_the_calls_waiting_for_the_connection(
    postgres_dsn: str,
) -> None:
    """A runtime's agents queue their writes on its store's one connection; its lease
    renewal waits for the call in flight only, not for every call queued before it (a busy
    runtime on a loaded machine would otherwise pass half the lease's ttl there, and the
    fence would stop all its agents). Here the call in flight and those queued behind it
    read a table another connection has locked."""
    owner = LeaseOwner(node="n", pid=1, start_time=1, runtime_id="r")
    done: list[str] = []
    async with PostgresStore(postgres_dsn) as store:
        await store.acquire_lease("coder", owner, ttl=600)
        await store.checkpoint_session("coder", backend="claude", session_id="s-1", cwd=None)

        async def load(index: int) -> None:
            await store.load("coder")
            done.append(f"load {index}")

        async def renew() -> None:
            assert await store.renew_leases(ttl=600) == frozenset()
            done.append("renewal")

        with psycopg.connect(postgres_dsn) as locker:
            locker.execute("LOCK TABLE agentrt.sessions IN ACCESS EXCLUSIVE MODE")
            async with trio.open_nursery() as nursery:
                for index in range(4):
                    nursery.start_soon(load, index)
                    await trio.testing.wait_all_tasks_blocked()
                nursery.start_soon(renew)
                await trio.testing.wait_all_tasks_blocked()
                given_up = trio.CancelScope()  # a caller that stops waiting

                async def load_given_up() -> None:
                    with given_up:
                        await load(4)

                nursery.start_soon(load_given_up)
                await trio.testing.wait_all_tasks_blocked()
                given_up.cancel()
                await trio.testing.wait_all_tasks_blocked()
                locker.commit()  # the lock goes: the call in flight ends, then the rest
    assert done == ["load 0", "renewal", "load 1", "load 2", "load 3"]


async def test_a_version_12_database_gains_the_agents_holds_keeping_its_credentials(
    postgres_dsn: str,
) -> None:
    # Version 12 is the schema whose agent_credentials rows say nothing of the agents'
    # policies: a credential's halt and park hold every agent stored as using it.
    halted = StoredCredential(key="named:team", label="team", halt_reason="x", halted_since=1.0)
    async with PostgresStore(postgres_dsn) as store:
        await store.save_credential(halted)
        await store.use_credential("a", halted.key)
    back_to_postgres(postgres_dsn, 12)
    async with PostgresStore(postgres_dsn) as store:
        assert list(await store.credentials()) == [attrs.evolve(halted, agents=("a",))]
        await store.use_credential("b", halted.key, parks=False)
        [stored] = await store.credentials()
        assert (stored.agents, stored.ignore_halt, stored.ignore_park) == (("a", "b"), (), ("b",))
    with psycopg.connect(postgres_dsn) as conn:
        assert conn.execute(_VERSION).fetchall() == [(POSTGRES_VERSION,)]
