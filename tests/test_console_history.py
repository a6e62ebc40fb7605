"""The console's turn history over HTTP, on a real server on loopback and a real SQLite
file: an agent's finished turns newest first a page at a time, the chart points of an
agent and of the fleet, the agents' budgets, redaction of what the history shows, and
the history's bound per agent."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import trio
from _helpers import echo_backend
from console_helpers import events, signed_in
from test_store_conformance import ToyStore

import agentrt
from agentrt import SQLiteStore, open_console, open_runtime
from agentrt.store import LeaseOwner

BOUND = 30
PAGE = 20  # turns the history shows a page at a time
SECRET = "sk-ant-api03-" + "x" * 40


async def get_json(console: agentrt.Console, path: str) -> tuple[int, Any]:
    client, _ = await signed_in(console)
    answer = await client.request(path, method="GET")
    return answer.status, answer.json()


async def test_an_agents_history_is_paged_newest_first_with_its_charts(tmp_path: Path) -> None:
    async with agentrt.open_runtime(store=SQLiteStore(tmp_path / "s.sqlite3")) as rt:
        await rt.start_agent(agentrt.Agent, name="a", backend=echo_backend())
        await rt.start_agent(agentrt.Agent, name="b", backend=echo_backend())
        for n in range(PAGE + 2):
            await rt.ask("a", f"prompt {n}")
        await rt.ask("b", "only one")
        async with open_console(rt) as console:
            status, first = await get_json(console, "/history?name=a")
            assert status == 200 and first["why"] is None
            assert [t["prompt"] for t in first["turns"][:2]] == [
                f"prompt {PAGE + 1}",
                f"prompt {PAGE}",
            ]
            assert len(first["turns"]) == PAGE and first["more"]
            newest = first["turns"][0]
            assert (newest["answer"], newest["outcome"], newest["node"]) == (
                f"echo prompt {PAGE + 1}",
                "complete",
                rt.node,
            )
            assert newest["ended_at"] >= newest["started_at"] and newest["duration"] >= 0
            _, rest = await get_json(console, f"/history?name=a&offset={PAGE}")
            assert [t["prompt"] for t in rest["turns"]] == ["prompt 1", "prompt 0"]
            assert not rest["more"]
            # The chart: every kept turn, oldest first, [ended_at, cost, duration, outcome].
            assert len(first["chart"]) == PAGE + 2
            assert [p[3] for p in first["chart"]] == ["complete"] * (PAGE + 2)
            assert first["chart"] == sorted(first["chart"], key=lambda p: p[0])
            _, fleet = await get_json(console, "/history")
            assert fleet["turns"] is None and len(fleet["chart"]) == PAGE + 3
            status, bad = await get_json(console, "/history?name=a&offset=-1")
            assert status == 400 and "offset must be a count" in bad["message"]


async def test_a_secret_in_a_prompt_or_an_answer_never_reaches_the_history(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.sqlite3"
    async with agentrt.open_runtime(store=SQLiteStore(path)) as rt:
        await rt.start_agent(agentrt.Agent, name="a", backend=echo_backend())
        await rt.ask("a", f"use the key {SECRET} please")
        async with open_console(rt) as console:
            client, _ = await signed_in(console)
            answer = await client.request("/history?name=a", method="GET")
            assert SECRET.encode() not in answer.body
            [turn] = answer.json()["turns"]
            assert turn["prompt"] == "use the key [REDACTED] please"
            assert turn["answer"] == "echo use the key [REDACTED] please"
    assert SECRET.encode() not in path.read_bytes()  # nor the store's file


async def test_the_history_keeps_the_newest_turns_an_agent_asks_for(tmp_path: Path) -> None:
    async with agentrt.open_runtime(store=SQLiteStore(tmp_path / "s.sqlite3")) as rt:
        await rt.start_agent(agentrt.Agent, name="a", backend=echo_backend(), turn_history=3)
        await rt.start_agent(agentrt.Agent, name="none", backend=echo_backend(), turn_history=0)
        for n in range(5):
            await rt.ask("a", f"prompt {n}")
            await rt.ask("none", f"prompt {n}")
        async with open_console(rt) as console:
            _, data = await get_json(console, "/history?name=a")
            assert [t["prompt"] for t in data["turns"]] == ["prompt 4", "prompt 3", "prompt 2"]
            _, data = await get_json(console, "/history?name=none")
            assert data["turns"] == [] and data["chart"] == []
        record = await rt.store.load("a")
        assert record is not None and record.turns == 5  # the totals count every turn


async def test_the_fleet_shows_what_is_left_of_each_agents_budget(tmp_path: Path) -> None:
    async with agentrt.open_runtime(store=SQLiteStore(tmp_path / "s.sqlite3")) as rt:
        await rt.start_agent(agentrt.Agent, name="capped", backend=echo_backend(), budget_usd=2.0)
        await rt.start_agent(agentrt.Agent, name="free", backend=echo_backend())
        async with open_console(rt) as console, events(console, "/events/fleet") as fleet:
            with trio.fail_after(BOUND):
                _, data = await fleet.next()
            rows = {row["name"]: row for row in data["agents"]}
            assert rows["capped"]["budget_left_usd"] == 2.0
            assert rows["free"]["budget_left_usd"] is None
            async with events(console, "/events/agent?name=capped") as agent:
                with trio.fail_after(BOUND):
                    _, data = await agent.until(lambda name, d: name == "agent")
            assert data["status"]["budget_left_usd"] == 2.0
            assert data["status"]["spent_usd"] == 0.0


async def test_a_store_without_a_history_says_so() -> None:
    async with open_runtime(store=ToyStore()) as rt, open_console(rt) as console:
        assert rt.store_capabilities.turn_history is None
        status, data = await get_json(console, "/history?name=a")
    why = "the store keeps no turn history"
    assert (status, data) == (200, {"why": why, "turns": None, "chart": None})


async def test_a_request_whose_owner_died_is_in_the_history_with_its_session(
    tmp_path: Path,
) -> None:
    # An owner that claimed a request and died mid-turn: its lease expired (timed on a
    # clock two hours behind), its session and the running request left in the store.
    path = tmp_path / "s.sqlite3"
    dead = LeaseOwner(node="gone", pid=1, start_time=0, runtime_id="gone")
    async with SQLiteStore(path, lease_clock=lambda: time.monotonic() - 7200) as store:
        await store.acquire_lease("a", dead, ttl=60.0)
        await store.checkpoint_session("a", backend="scripted", session_id="s-1", cwd=None)
        await store.enqueue_request(
            "a",
            id="7",
            prompt="lost work",
            key="job-7",
            origin="tell",
            max_pending=10,
            max_pending_bytes=10_000,
        )
        assert await store.claim_request("a") is not None
    async with open_runtime(store=SQLiteStore(path)) as rt:
        await rt.start_agent(agentrt.Agent, name="a", backend=echo_backend())
        assert isinstance(await rt.poll(agentrt.Ref("a", 7)), agentrt.Failed)
        async with open_console(rt) as console:
            _, data = await get_json(console, "/history?name=a")
    [died] = data["turns"]
    assert (died["outcome"], died["node"]) == ("owner_died", rt.node)
    assert died["answer"].startswith("owner died mid-turn (session s-1)")
