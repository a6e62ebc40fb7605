"""Failover: agents' specs in the store, and runtimes opened with ``host_agents=True``
taking over the agents no live runtime owns; in this process (MemoryStore, MockClock) and
with programs of their own on SQLite and PostgreSQL, one of them SIGKILLed."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from _helpers import echo_backend, settle
from cli_programs import SID, FakeClaude
from hosted_agent import Hosted
from proc_helpers import Program, store_programs

import agentrt
from agentrt import InvalidOptions, LeaseOwner, MemoryStore, open_runtime


def claude_options(tmp_path: Path) -> dict[str, Any]:
    return {"binary": str(FakeClaude(tmp_path / "cli").binary), "cwd": str(tmp_path)}


# --- the stored spec ---


@pytest.mark.parametrize(
    ("agent", "backend", "extra", "why"),
    [
        (lambda: Hosted(), "claude", {}, "a factory cannot be stored"),
        (Hosted(), "claude", {}, "an Agent instance cannot be stored"),
        (Hosted, echo_backend(), {}, "a backend object cannot be stored"),
        (Hosted, "claude", {"model": object()}, "its options are not JSON"),
        (Hosted, "claude", {"env": {"TERM": "dumb"}}, "its env option may hold secrets"),
        (
            Hosted,
            "claude",
            {"append_system_prompt": "token sk-ant-api03-" + "a" * 40},
            "looks like a secret",
        ),
    ],
)
async def test_failover_true_refuses_a_spec_that_cannot_be_stored(
    tmp_path: Path, agent: Any, backend: Any, extra: dict[str, Any], why: str
) -> None:
    async with open_runtime(store=MemoryStore()) as rt:
        with pytest.raises(InvalidOptions) as refused:
            await rt.start_agent(
                agent, name="x", backend=backend, failover=True, **claude_options(tmp_path), **extra
            )
        assert refused.value.key == "failover" and why in str(refused.value)
        assert "agent 'x'" in str(refused.value)
        assert rt.agents() == ()


async def test_a_class_defined_in_a_function_cannot_be_stored(tmp_path: Path) -> None:
    class Local(agentrt.Agent):
        pass

    async with open_runtime(store=MemoryStore()) as rt:
        with pytest.raises(InvalidOptions, match="cannot be imported by another program"):
            await rt.start_agent(
                Local, name="x", backend="claude", failover=True, **claude_options(tmp_path)
            )
        # Without failover=True it starts, and nothing is stored for a host.
        await rt.start_agent(Local, name="x", backend="claude", **claude_options(tmp_path))
        assert await rt.store.specs() == ()


async def test_failover_must_be_a_bool_or_none() -> None:
    async with open_runtime(store=MemoryStore()) as rt:
        with pytest.raises(InvalidOptions) as refused:
            await rt.start_agent(Hosted, name="x", backend=echo_backend(), failover="yes")
        assert refused.value.key == "failover"
    with pytest.raises(InvalidOptions) as refused:
        async with open_runtime(store=MemoryStore(), host_agents=1):  # type: ignore[arg-type]
            pass
    assert refused.value.key == "host_agents"


async def test_the_spec_names_the_class_the_backend_and_the_options(tmp_path: Path) -> None:
    options = claude_options(tmp_path)
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(Hosted, name="x", backend="claude", watchdog=60.0, **options)
        await rt.start_agent(Hosted, name="off", backend="claude", failover=False, **options)
        ((name, spec),) = await rt.store.specs()
    assert name == "x"
    assert json.loads(spec) == {
        "agent": "hosted_agent:Hosted",
        "backend": "claude",
        "options": {"watchdog": 60.0, **options},
    }


# --- taking over, in this process ---


class Quits(agentrt.Agent):
    """Ends (normally) before its first turn."""

    def pre_turn(self, prompt: str) -> agentrt.Stop:
        return agentrt.Stop()


async def own_then_close(store: MemoryStore, names: list[str], tmp_path: Path) -> None:
    """A runtime that starts ``names`` and closes: their leases are given back, their
    specs stay (a closed runtime's agents are for hosts to take)."""
    async with open_runtime(store=store, node="node-a") as rt:
        for name in names:
            await rt.start_agent(Hosted, name=name, backend="claude", **claude_options(tmp_path))


async def test_a_host_takes_over_free_agents_in_start_order_within_max_processes(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    store = MemoryStore()
    await own_then_close(store, ["c", "a", "b"], tmp_path)
    async with open_runtime(
        store=store.handle(), node="node-b", host_agents=True, max_processes=2
    ) as host:
        await trio.sleep(5)
        assert host.agents() == ("c", "a")  # start order, not names' order
        await host.stop_agent("c")  # on purpose: not taken again, and b has room now
        await trio.sleep(5)
        assert host.agents() == ("a", "b")
        assert [name for name, _ in await host.store.specs()] == ["a", "b"]


async def test_an_agent_stopped_on_purpose_or_ended_for_good_is_not_taken_over(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    store = MemoryStore()
    async with open_runtime(store=store, node="node-a") as rt:
        await rt.start_agent(Hosted, name="kept", backend="claude", **claude_options(tmp_path))
        await rt.start_agent(Hosted, name="stopped", backend="claude", **claude_options(tmp_path))
        await rt.stop_agent("stopped")
        # A transient agent that ends normally is not restarted: it ends for good.
        await rt.start_agent(
            Quits, name="ended", backend="claude", restart="transient", **claude_options(tmp_path)
        )
        with pytest.raises(agentrt.AgentStopped):
            await rt.ask("ended", "hello")
        # Agents of a nested supervisor whose block is left are stopped for good too.
        async with rt.open_supervisor() as nested:
            await nested.start_agent(
                Hosted, name="nested", backend="claude", **claude_options(tmp_path)
            )
        await trio.sleep(1)
        assert [name for name, _ in await rt.store.specs()] == ["kept"]
        assert rt.agents() == ("kept",)
    async with open_runtime(store=store.handle(), node="node-b", host_agents=True) as host:
        await trio.sleep(5)
        assert host.agents() == ("kept",)


async def test_a_live_owners_agents_are_not_taken(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    store = MemoryStore()
    async with open_runtime(store=store, node="node-a") as owner:
        await owner.start_agent(Hosted, name="x", backend="claude", **claude_options(tmp_path))
        async with open_runtime(store=store.handle(), node="node-b", host_agents=True) as host:
            await trio.sleep(100)  # many lease periods: the owner renews
            await settle()
            assert host.agents() == () and owner.agents() == ("x",)


# A pid beyond the largest the kernel gives: no process has it.
NO_SUCH_PID = int(Path("/proc/sys/kernel/pid_max").read_text()) + 1


async def test_a_dead_runtime_of_the_hosts_own_node_is_replaced_at_once(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    """A lease held by a runtime of this node whose process has ended is taken without
    waiting for it to expire."""
    gone = LeaseOwner(node="node-a", pid=NO_SUCH_PID, start_time=1, runtime_id="gone:1")
    store = MemoryStore()
    await own_then_close(store, ["x"], tmp_path)
    async with store.handle() as dead:
        await dead.acquire_lease("x", gone, ttl=3600)
    async with open_runtime(store=store.handle(), node="node-a", host_agents=True) as host:
        await trio.sleep(2)
        assert host.agents() == ("x",)


# --- programs of their own, one SIGKILLed ---

CHILD = Path(__file__).parent / "host_child.py"


@pytest.fixture(params=["sqlite", "postgres"])
async def programs(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[Callable[..., Awaitable[Program]]]:
    """Start host_child.py programs on one store, each naming its own node: SQLite (many
    programs, one machine) or PostgreSQL (many hosts)."""
    store = (
        str(tmp_path / "sessions.sqlite3")
        if request.param == "sqlite"
        else request.getfixturevalue("postgres_dsn")
    )
    async with store_programs(CHILD, store) as start:
        yield start


async def test_a_killed_owners_agents_are_taken_over_by_hosts_and_their_sessions_go_on(
    programs: Callable[..., Awaitable[Program]], tmp_path: Path
) -> None:
    cli = FakeClaude(tmp_path / "cli")
    cli.answer()
    ttl = 3.0
    owner = await programs("node-a", str(ttl), "own", "4", cli.binary, str(tmp_path), "a1")
    assert await owner.line() == "READY"
    assert cli.resumed() is None  # a3's first turn: a new session
    bounded = await programs("node-b", str(ttl), "host", "2")
    await trio.sleep(ttl)  # several polls: the owner is alive, nothing is taken
    await owner.kill()
    killed = trio.current_time()
    # a1 was stopped on purpose; max_processes=2 leaves a3 for another host.
    took = [await bounded.line(), await bounded.line()]
    assert took == [f"TOOK a0 {SID}", f"TOOK a2 {SID}"]
    # The lease was renewed at most ttl / 5 before the kill, and lasts ttl from then.
    assert trio.current_time() - killed >= ttl * 0.8 - 0.1
    assert cli.resumed() == SID  # the host's turn continued the stored conversation
    unbounded = await programs("node-c", str(ttl), "host", "none")
    assert await unbounded.line() == f"TOOK a3 {SID}"
    with trio.move_on_after(ttl):  # nothing more for anyone: a1 stays stopped
        extra = await unbounded.line()
        pytest.fail(f"taken over: {extra}")
