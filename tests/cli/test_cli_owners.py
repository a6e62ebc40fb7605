"""`agentrt status` and the owner columns of `agentrt sessions`: which runtime (node, pid)
owns each agent, from the store, on SQLite and on PostgreSQL (``--store DSN``)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from agentrt import (
    Agent,
    PostgresStore,
    SessionStore,
    SQLiteStore,
    StopReason,
    TurnFailed,
    open_runtime,
)
from agentrt.testing import Gate, ScriptedBackend, fake_cli_executable, reply

from ._run import agentrt


def echo() -> ScriptedBackend:
    return ScriptedBackend(default=lambda call: reply(f"echo {call.prompt}"))


@pytest.fixture(params=["sqlite", "postgres"])
def store_argument(request: pytest.FixtureRequest, base_env: dict[str, str]) -> str:
    if request.param == "sqlite":
        return base_env["AGENTRT_STORE"]
    dsn: str = request.getfixturevalue("postgres_dsn")
    return dsn


def opened(argument: str) -> SessionStore:
    return PostgresStore(argument) if "host=" in argument else SQLiteStore(argument)


async def test_status_shows_each_agents_owner_and_lease(
    base_env: dict[str, str], store_argument: str
) -> None:
    store = opened(store_argument)
    async with open_runtime(store=store, node="host-a") as rt:
        await rt.start_agent(Agent, name="busy", backend=echo())
        await rt.ask("busy", "hi")  # a row and a lease
        await rt.start_agent(Agent, name="gone", backend=echo())
        await rt.ask("gone", "hi")
        await rt.stop_agent("gone")  # its lease given back
        pid = rt._context.ownership.owner.pid

        run = await agentrt("status", "--store", store_argument, "--json", env=base_env)
        assert run.code == 0, run.stderr
        busy, gone = json.loads(run.stdout)
        assert busy["name"] == "busy" and busy["state"] == "owned"
        assert busy["owner"]["node"] == "host-a" and busy["owner"]["pid"] == pid
        assert busy["lease"]["held"] and 0 <= busy["lease"]["age"] < 10
        assert gone["name"] == "gone" and gone["state"] == "not owned" and gone["owner"] is None

        run = await agentrt("status", "--store", store_argument, env=base_env)
        assert run.code == 0, run.stderr
        lines = {line.split()[0]: line.split() for line in run.stdout.splitlines()[2:]}
        assert lines["busy"][1:3] == ["owned", f"host-a:{pid}"]
        assert lines["gone"][1:4] == ["not", "owned", "-"]

        run = await agentrt("sessions", "--store", store_argument, "--json", env=base_env)
        listed = {row["name"]: row for row in json.loads(run.stdout)}
        assert listed["busy"]["owner"]["pid"] == pid and listed["busy"]["turns"] == 1
    run = await agentrt("status", "--store", store_argument, "--json", env=base_env)
    assert [row["state"] for row in json.loads(run.stdout)] == ["not owned", "not owned"]


async def test_status_of_a_missing_store_says_so(base_env: dict[str, str], tmp_path: Path) -> None:
    run = await agentrt("status", "--store", str(tmp_path / "none.sqlite3"), env=base_env)
    assert run.code == 0 and "does not exist" in run.stdout


async def test_status_tells_a_warm_cli_idling_between_turns_from_one_in_a_turn(
    base_env: dict[str, str], store_argument: str, tmp_path: Path
) -> None:
    init = {"type": "system", "subtype": "init", "session_id": "s-1", "model": "fake"}
    live = {"session_id": "s-1", "turns": [[["answer"]], [["emit", init], ["hang"]]]}
    binary = fake_cli_executable(str(tmp_path), ["live", live], name="claude")
    options: dict[str, Any] = {"binary": binary, "keep_alive": 60, "kill_grace": 0.3}

    async def states() -> dict[str, str]:
        run = await agentrt("status", "--store", store_argument, "--json", env=base_env)
        assert run.code == 0, run.stderr
        return {row["name"]: row["state"] for row in json.loads(run.stdout)}

    # The command is another program reading the store, as from another host.
    async with open_runtime(store=opened(store_argument), node="host-a") as rt:
        await rt.start_agent(Agent, name="warm", backend="claude", **options)
        await rt.start_agent(Agent, name="cold", backend=echo())
        await rt.ask("warm", "one")
        await rt.ask("cold", "one")
        assert await states() == {"cold": "owned", "warm": "idle, CLI kept"}
        if "host=" in store_argument:
            # Another host's runtime asks the owner (routed through the database).
            async with open_runtime(store=opened(store_argument), node="host-b") as other:
                assert (await other.status("warm")).state == "idle_warm"
        run = await agentrt("status", "--store", store_argument, env=base_env)
        lines = {line.split()[0]: line for line in run.stdout.splitlines()[2:]}
        assert " idle, CLI kept " in lines["warm"] and " owned " in lines["cold"]
        run = await agentrt("sessions", "--store", store_argument, "--json", env=base_env)
        listed = {row["name"]: row for row in json.loads(run.stdout)}
        assert listed["warm"]["state"] == "idle, CLI kept" and listed["warm"]["live_idle"]
        run = await agentrt("sessions", "--store", store_argument, env=base_env)
        assert "idle, CLI kept" in run.stdout

        ref = await rt.tell("warm", "two")
        async with rt.stream(ref) as stream:
            await stream.__anext__()  # the second turn runs on the kept CLI
            assert (await states())["warm"] == "in a turn"
            assert await rt.interrupt("warm")
        await rt.wait(ref)
        assert (await states())["warm"] == "idle, CLI kept"


async def test_a_failed_spawn_leaves_no_agent_for_status_to_list(
    base_env: dict[str, str], store_argument: str, tmp_path: Path
) -> None:
    # The CLI is there when the agent starts (start_agent checks) and gone by its turn.
    binary = fake_cli_executable(str(tmp_path), ["answer"], name="claude")
    async with open_runtime(store=opened(store_argument), node="host-a") as rt:
        await rt.start_agent(Agent, name="never", backend="claude", binary=binary)
        os.unlink(binary)
        with pytest.raises(TurnFailed) as failed:
            await rt.ask("never", "hi")
        assert failed.value.reason is StopReason.SPAWN_FAILED
    async with opened(store_argument) as store:
        assert await store.list() == () and await store.leases() == ()
    run = await agentrt("status", "--store", store_argument, "--json", env=base_env)
    assert run.code == 0 and json.loads(run.stdout) == [], run.stderr
    run = await agentrt("status", "--store", store_argument, env=base_env)
    assert run.code == 0 and "No agents in" in run.stdout, run.stdout


async def test_status_shows_each_agents_stored_queue(
    base_env: dict[str, str], store_argument: str
) -> None:
    gate = Gate()
    held = ScriptedBackend([*reply("x", session_id="s")[:1], gate, *reply("x")[1:]])
    async with open_runtime(store=opened(store_argument)) as rt:
        await rt.start_agent(Agent, name="busy", backend=held)
        await rt.tell("busy", "first")
        await gate.wait_reached()
        await rt.tell("busy", "second", key="job-2")
        await rt.tell("busy", "third")
        run = await agentrt("status", "--store", store_argument, "--json", env=base_env)
        assert run.code == 0, run.stderr
        [busy] = json.loads(run.stdout)
        assert busy["queued"]["count"] == 2 and busy["queued"]["keys"] == ["job-2"]
        assert 0 <= busy["queued"]["oldest_age"] < 60
        run = await agentrt("status", "--store", store_argument, env=base_env)
        assert run.code == 0, run.stderr
        [line] = [line.split() for line in run.stdout.splitlines() if line.startswith("busy")]
        assert "QUEUED" in run.stdout and line[6] == "2"
        gate.release()
