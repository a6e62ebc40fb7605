"""The operator console over HTTP, on a real server on loopback: the token and its cookie,
the CSRF check, the live fleet and agent streams, actions through the public API with
their typed errors, redaction, and nothing of a prompt in the logs."""

from __future__ import annotations

import datetime
import logging
import time
from pathlib import Path

import pytest
import trio
from _helpers import echo_backend
from console_helpers import act, events, port_of, signed_in, token_of
from http_client import connect
from proc_helpers import store_programs
from test_routing import CHILD as ROUTE_CHILD
from test_routing import start_owner

import agentrt
from agentrt import (
    InvalidOptions,
    MemoryStore,
    ResultEvent,
    SQLiteStore,
    StopReason,
    TextEvent,
    TurnFailed,
    open_console,
)
from agentrt.testing import Fail, Gate, ScriptedBackend, reply

BOUND = 30
SECRET = "sk-ant-api03-" + "x" * 40


def gated(gate: Gate, first: str, rest: str) -> ScriptedBackend:
    return ScriptedBackend(default=lambda prompt: [TextEvent(text=first), gate, *reply(rest)])


async def test_every_path_needs_the_token() -> None:
    async with open_runtime_with_agent() as (rt, _), open_console(rt) as console:
        port = port_of(console)
        for path in (
            "/",
            "/agent?name=a",
            "/events/fleet",
            "/events/agent?name=a",
            "/static/console.js",
            "/transcript?name=a",
            "/nowhere",
        ):
            for headers in (
                {},
                {"cookie": "agentrt_console=wrong"},
                {"cookie": f"agentrt_console={token_of(console)[:-1]}"},
            ):
                client = await connect(port, headers=headers)
                answer = await client.request(path, method="GET")
                assert (answer.status, answer.body) == (401, b""), (path, headers)
                answer = await client.request(path + "?token=wrong", method="GET")
                assert (answer.status, answer.body) == (401, b""), (path, headers)
        client = await connect(port)
        answer = await client.request("/action", {"name": "a", "action": "halt"})
        assert (answer.status, answer.body) == (401, b"")
        assert (await rt.status("a")).state == "idle"


async def test_first_visit_moves_the_token_into_a_strict_cookie() -> None:
    async with open_runtime_with_agent() as (rt, _), open_console(rt) as console:
        assert console.url.startswith("http://127.0.0.1:")
        assert token_of(console) not in repr(console)
        client = await connect(port_of(console))
        answer = await client.request(f"/agent?token={token_of(console)}", method="GET")
        assert answer.status == 303
        assert answer.headers["location"] == "/agent"  # the token leaves the address bar
        cookie = answer.headers["set-cookie"]
        assert cookie == f"agentrt_console={token_of(console)}; Path=/; HttpOnly; SameSite=Strict"
        page = await (await signed_in(console))[0].request("/", method="GET")
        assert page.status == 200
        assert "script-src 'self'" in page.headers["content-security-policy"]
        assert token_of(console).encode() not in page.body


async def test_actions_need_the_csrf_token_and_the_same_origin() -> None:
    async with open_runtime_with_agent() as (rt, _), open_console(rt) as console:
        client, csrf = await signed_in(console)
        halt = {"name": "a", "action": "halt"}
        for headers in (
            {},
            {"x-agentrt-csrf": "0" * 64},
            {"x-agentrt-csrf": csrf, "origin": "http://evil.example"},
        ):
            answer = await client.request("/action", halt, headers=headers)
            assert answer.status == 403, headers
        assert (await rt.status("a")).state == "idle"
        answer = await client.request("/action", halt, headers={"x-agentrt-csrf": csrf})
        assert answer.json() == {"ok": True}
        assert (await rt.status("a")).state == "halted"


async def test_actions_go_through_the_public_api_with_typed_errors() -> None:
    async with open_runtime_with_agent() as (rt, _), open_console(rt) as console:
        answer = await act(console, name="a", action="ask", prompt="hello")
        assert answer.json()["text"] == "echo hello"
        assert answer.json()["stop_reason"] == "complete"
        answer = await act(console, name="nobody", action="interrupt")
        assert answer.status == 409
        assert answer.json()["error"] == "AgentNotFound"
        answer = await act(console, name="a", action="ask", prompt="  ")
        assert (answer.status, answer.json()["error"]) == (409, "ValueError")
        answer = await act(console, name="a", action="explode")
        assert answer.status == 400
        assert "one of ask, tell, interrupt" in answer.json()["message"]
        assert (await act(console, name="a", action="interrupt")).json() == {
            "ok": True,
            "interrupted": False,
        }
        await act(console, name="a", action="reset_session")
        assert (await act(console, name="a", action="stop")).json() == {"ok": True}
        assert rt.agents() == ()


async def test_fleet_lists_the_store_and_the_runtime_live(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.sqlite3")
    async with agentrt.open_runtime(store=store) as rt:
        await rt.start_agent(agentrt.Agent, name="gone", backend=echo_backend())
        await rt.ask("gone", "hi")
        await rt.stop_agent("gone")
        gate = Gate()
        await rt.start_agent(agentrt.Agent, name="busy", backend=gated(gate, "a", "b"))
        async with open_console(rt) as console, events(console, "/events/fleet") as fleet:
            _, data = await fleet.next()
            rows = {row["name"]: row for row in data["agents"]}
            assert rows["gone"]["state"] == "stopped"
            assert rows["gone"]["turns"] == 1
            assert rows["gone"]["last_outcome"] == "complete"
            assert rows["busy"]["state"] == "idle"
            assert rows["busy"]["node"] == rt.node
            ref = await rt.tell("busy", "go")
            with trio.fail_after(BOUND):
                await fleet.until(lambda _, d: _row(d, "busy")["state"] == "in a turn")
                gate.release()
                await rt.wait(ref)
                _, data = await fleet.until(lambda _, d: _row(d, "busy")["turns"] == 1)
            assert _row(data, "busy")["state"] == "idle"


async def test_the_agent_page_shows_every_budget_and_the_one_that_binds(tmp_path: Path) -> None:
    # A runtime's and a supervisor's budgets, which only the running program held before.
    def costly(prompt: str) -> list[object]:
        return [TextEvent(text="ok"), ResultEvent(text="ok", session_id="s1", cost_usd=0.25)]

    backend = ScriptedBackend(default=costly)
    store = SQLiteStore(tmp_path / "s.sqlite3")
    async with agentrt.open_runtime(store=store, budget_usd=0.9) as rt:
        await rt.start_agent(agentrt.Agent, name="other", backend=backend)
        async with rt.open_supervisor(budget_usd=0.8) as team:
            await team.start_agent(agentrt.Agent, name="coder", backend=backend, budget_usd=0.5)
            await rt.ask("coder", "hi")
            for _ in range(2):
                await rt.ask("other", "hi")
            async with (
                open_console(rt) as console,
                events(console, "/events/agent?name=coder") as s,
            ):
                _, data = await s.until(lambda name, d: name == "agent")
    shown = [(b["scope"], b["spent_usd"], b["left_usd"], b["binding"]) for b in data["budgets"]]
    assert shown == [
        ("agent 'coder'", 0.25, 0.25, False),
        ("supervisor", 0.25, 0.55, False),
        ("runtime", 0.75, 0.15, True),  # what the other agent spent too
    ]


async def test_a_request_s_ref_reaches_the_page_exact(tmp_path: Path) -> None:
    """A stored request's id has 62 bits, a page's numbers are exact to 53: every ref the
    page is sent is the id in decimal, as the queue's already were."""
    gate = Gate()
    backend = gated(gate, "working ", "done")
    async with agentrt.open_runtime(store=SQLiteStore(tmp_path / "s.sqlite3")) as rt:
        await rt.start_agent(agentrt.Agent, name="a", backend=backend)
        async with open_console(rt) as console, events(console, "/events/agent?name=a") as s:
            await s.until(lambda name, d: name == "agent")
            told = (await act(console, name="a", action="tell", prompt="p")).json()["ref"]
            with trio.fail_after(BOUND):
                _, turn = await s.until(lambda name, d: name == "turn")
                _, agent = await s.until(
                    lambda name, d: name == "agent" and (d["status"] or {}).get("current")
                )
                gate.release()
                _, result = await s.until(lambda name, d: d.get("kind") == "result")
            current = (await rt.status("a")).current
    assert current is None
    ref = int(told)
    assert ref > 2**53  # where a JSON number would have been rounded
    current_ref = agent["status"]["current"]["ref"]
    assert (told, turn["ref"], current_ref, result["ref"]) == (str(ref),) * 4


async def test_a_running_turn_streams_to_the_agent_page_redacted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    gate = Gate()
    backend = gated(gate, f"key {SECRET} ", "done")
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(agentrt.Agent, name="a", backend=backend)
        async with open_console(rt) as console, events(console, "/events/agent?name=a") as s:
            await s.until(lambda name, d: name == "agent")
            ask = await act(console, name="a", action="tell", prompt="secret prompt words")
            ref = ask.json()["ref"]
            with trio.fail_after(BOUND):
                await s.until(lambda name, d: name == "turn" and d["ref"] == ref)
                gate.release()
                _, result = await s.until(lambda name, d: d.get("kind") == "result")
            texts = [d["text"] for name, d in s.seen if d.get("kind") == "text"]
            assert texts == ["done"] or texts[-1] == "done"
            assert result["text"] == "done"
            shown = str(s.seen)
            assert SECRET not in shown
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "secret prompt words" not in logged


async def test_secrets_in_events_are_redacted_on_the_page() -> None:
    gate = Gate()
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        backend = ScriptedBackend(
            default=lambda p: [gate, TextEvent(text=f"the key is {SECRET}"), *reply("ok")]
        )
        await rt.start_agent(agentrt.Agent, name="a", backend=backend)
        async with open_console(rt) as console, events(console, "/events/agent?name=a") as s:
            ref = await rt.tell("a", "go")
            with trio.fail_after(BOUND):
                await s.until(lambda name, d: name == "turn")
                gate.release()
                _, text = await s.until(lambda name, d: d.get("kind") == "text")
            assert text["text"] == "the key is [REDACTED]"
            await rt.wait(ref)


@pytest.mark.parametrize(
    ("bind", "token", "match"),
    [
        ("0.0.0.0:0", "", "beyond loopback.*needs a token"),
        ("example.com:0", "", "beyond loopback"),
        ("127.0.0.1", None, "must be HOST:PORT"),
        ("127.0.0.1:99999", None, "must be HOST:PORT"),
    ],
)
async def test_bad_binds_are_refused(bind: str, token: str | None, match: str) -> None:
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        with pytest.raises(InvalidOptions, match=match):
            async with open_console(rt, bind=bind, token=token):
                pass  # pragma: no cover


async def test_loopback_without_a_token_serves_everyone() -> None:
    async with open_runtime_with_agent() as (rt, _), open_console(rt, token="") as console:
        assert "token" not in console.url
        answer = await (await connect(port_of(console))).request("/", method="GET")
        assert answer.status == 200


def _row(data: dict[str, object], name: str) -> dict[str, object]:
    rows = data["agents"]
    assert isinstance(rows, list)
    return next(row for row in rows if row["name"] == name)


def open_runtime_with_agent():  # type: ignore[no-untyped-def]
    from contextlib import asynccontextmanager

    @asynccontextmanager
    async def opened():  # type: ignore[no-untyped-def]
        async with agentrt.open_runtime(store=MemoryStore()) as rt:
            await rt.start_agent(agentrt.Agent, name="a", backend=echo_backend())
            yield rt, "a"

    return opened()


async def test_the_agent_page_lists_the_queue_and_a_person_withdraws_from_it(
    tmp_path: Path,
) -> None:
    gate = Gate()
    backend = gated(gate, "a", "b")
    async with agentrt.open_runtime(store=SQLiteStore(tmp_path / "s.sqlite3")) as rt:
        await rt.start_agent(agentrt.Agent, name="a", backend=backend)
        running = await rt.tell("a", "first")
        await gate.wait_reached()
        kept = await rt.tell("a", "second " + "y" * 500, key="job-2")
        dropped = await rt.tell("a", f"third, key {SECRET}")
        async with (
            open_console(rt) as console,
            events(console, "/events/agent?name=a") as page,
            events(console, "/events/fleet") as fleet,
        ):
            with trio.fail_after(BOUND):
                _, data = await page.until(lambda n, d: n == "agent")
                _, rows = await fleet.until(lambda n, d: _row(d, "a")["queued"] == 2)
            assert data["queue"]["why"] is None
            listed = data["queue"]["requests"]
            assert [(q["ref"], q["key"]) for q in listed] == [
                (str(kept.id), "job-2"),
                (str(dropped.id), None),
            ]
            assert listed[0]["prompt"] == "second " + "y" * 193 + "..."  # a preview
            assert listed[1]["prompt"].startswith("third, key ") and SECRET not in str(listed)
            assert data["status"]["queued_keys"] == ["job-2"]
            assert _row(rows, "a")["oldest_queued"] >= 0
            # The page sends the ref in decimal (62 bits); an int is taken too.
            answer = await act(console, name="a", action="withdraw", ref=str(dropped.id))
            assert answer.json() == {"ok": True, "withdrawn": True}
            assert isinstance(await rt.poll(dropped), agentrt.Withdrawn)
            with trio.fail_after(BOUND):
                _, data = await page.until(
                    lambda n, d: n == "agent" and len(d["queue"]["requests"]) == 1
                )
            assert data["queue"]["requests"][0]["ref"] == str(kept.id)
            again = await act(console, name="a", action="withdraw", ref=dropped.id)
            assert again.json() == {"ok": True, "withdrawn": False}  # no longer queued
            bad = await act(console, name="a", action="withdraw", ref="1e3")
            assert (bad.status, bad.json()["error"]) == (409, "ValueError")
            gate.release()
            for ref in (running, kept):
                assert isinstance(await rt.wait(ref), agentrt.Completed)
    assert backend.prompts == ["first", "second " + "y" * 500]  # the withdrawn one never ran


async def test_on_a_store_that_keeps_no_requests_the_queue_is_only_counted() -> None:
    async with (
        open_runtime_with_agent() as (rt, _),
        open_console(rt) as console,
        events(console, "/events/agent?name=a") as page,
    ):
        _, data = await page.until(lambda n, d: n == "agent")
    assert data["queue"] == {
        "why": "the store keeps no requests: the count and keys are this runtime's",
        "requests": None,
    }
    assert data["status"]["queued"] == 0


async def test_the_fleet_says_why_the_runtime_holds_an_agent() -> None:
    resets_at = time.time() + 3600
    limited = ScriptedBackend([Fail(StopReason.USAGE_LIMIT, "limit", resets_at=resets_at)])
    expired = ScriptedBackend([Fail(StopReason.CREDENTIAL_EXPIRED, "OAuth token has expired")])
    async with agentrt.open_runtime() as rt:
        await rt.start_agent(agentrt.Agent, name="parked", backend=limited)
        await rt.start_agent(agentrt.Agent, name="halted", backend=expired)
        for name in ("parked", "halted"):
            with pytest.raises(TurnFailed):
                await rt.ask(name, "x")
        async with open_console(rt) as console, events(console, "/events/fleet") as fleet:
            with trio.fail_after(BOUND):
                _, data = await fleet.next()
    until = datetime.datetime.fromtimestamp(resets_at, datetime.UTC)
    assert _row(data, "parked")["state"] == f"parked until {until:%H:%M} UTC, usage limit"
    assert _row(data, "halted")["state"] == "halted, login expired"


async def test_the_fleet_says_why_the_store_holds_an_agent_of_a_program_gone(
    tmp_path: Path,
) -> None:
    """A dead program's agents: the console reads why their credential holds them from the
    store, as `agentrt status` does."""
    resets_at = time.time() + 3600
    limited = ScriptedBackend([Fail(StopReason.USAGE_LIMIT, "limit", resets_at=resets_at)])
    expired = ScriptedBackend([Fail(StopReason.CREDENTIAL_EXPIRED, "OAuth token has expired")])
    path = tmp_path / "s.sqlite3"
    async with agentrt.open_runtime(store=agentrt.SQLiteStore(path)) as gone:
        await gone.start_agent(agentrt.Agent, name="parked", backend=limited, credential="t")
        await gone.start_agent(agentrt.Agent, name="halted", backend=expired, credential="l")
        for name in ("parked", "halted"):
            with pytest.raises(TurnFailed):
                await gone.ask(name, "x")
    async with (
        agentrt.open_runtime(store=agentrt.SQLiteStore(path)) as rt,
        open_console(rt) as console,
        events(console, "/events/fleet") as fleet,
    ):
        with trio.fail_after(BOUND):
            _, data = await fleet.next()
    until = datetime.datetime.fromtimestamp(resets_at, datetime.UTC)
    assert _row(data, "parked")["state"] == f"parked until {until:%H:%M} UTC, usage limit"
    assert _row(data, "halted")["state"] == "halted, login expired"


async def test_an_owner_killed_mid_turn_is_not_shown_in_a_turn(tmp_path: Path) -> None:
    """Another program (route_child.py) runs agent "x" on the SQLite file and is SIGKILLed
    mid-turn: its lease is held until it expires, but the fleet and the agent page say its
    owner ended, not that a turn runs (nor that it is idle)."""
    path = tmp_path / "shared.sqlite3"
    async with store_programs(ROUTE_CHILD, str(path)) as start_program:
        program = await start_owner(start_program, "node-a")
        async with agentrt.open_runtime(store=SQLiteStore(path), node="desk") as rt:
            await rt.tell("x", "slow job")
            async with (
                open_console(rt) as console,
                events(console, "/events/fleet") as fleet,
                events(console, "/events/agent?name=x") as page,
            ):
                with trio.fail_after(BOUND):
                    await fleet.until(lambda _, d: _row(d, "x")["state"] == "in a turn")
                    await program.kill()
                    _, rows = await fleet.until(lambda _, d: _row(d, "x")["state"] != "in a turn")
                    _, data = await page.until(lambda n, d: n == "agent" and d["status"] is None)
                assert _row(rows, "x")["state"] == "owner ended"
                assert data["stored_state"] == "owner ended"
                assert f"pid {program.pid}" in data["unreachable"]
