"""``agentrt console``: served over the store until Ctrl+C, its URL (with the token) on
stdout; the stored agents on its fleet stream; the live turn and the actions of an agent
another program runs on the same SQLite file; a bind beyond loopback without a token is
refused saying why."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
from pathlib import Path
from typing import Any, cast

import attrs
import trio
from console_helpers import act, events
from http_client import connect

from agentrt import Agent, Console, SQLiteStore, TextEvent, open_runtime
from agentrt.testing import ScriptedBackend, Sleep, reply

from ._run import agentrt, open_agentrt

ROUNDS = 10
CONNECTIONS = 8
ANSWERED_BEFORE_CTRL_C = 50


async def test_console_serves_the_store_until_ctrl_c(
    base_env: dict[str, str], tmp_path: Path
) -> None:
    store = tmp_path / "s.sqlite3"
    async with open_runtime(store=SQLiteStore(store)) as rt:
        await rt.start_agent(
            Agent, name="coder", backend=ScriptedBackend(default=lambda c: reply("ok"))
        )
        await rt.ask("coder", "hi")
    args = ("console", "--store", str(store), "--bind", "127.0.0.1:0", "--json")
    with trio.fail_after(60):
        async with open_agentrt(*args, env=base_env, stdout=subprocess.PIPE) as process:
            assert process.stdout is not None
            line = b""
            while not line.endswith(b"}\n"):  # one JSON object, printed on its lines
                line += await process.stdout.receive_some(1)
            shown = json.loads(line)
            token = shown["url"].split("token=", 1)[1]
            port = int(shown["address"].rsplit(":", 1)[1])
            client = await connect(port, headers={"cookie": f"agentrt_console={token}"})
            await client.send("/events/fleet", method="GET")
            status, _ = await client.head()
            assert status == 200
            body = b""
            while b'"name": "coder"' not in body:  # a keepalive may come first
                chunk = await client.stream.receive_some(65536)
                assert chunk, f"the fleet stream ended after {body!r}"
                body += chunk
            assert b'"name": "coder"' in body and b'"state": "stopped"' in body
            await client.stream.aclose()
            anonymous = await (await connect(port)).request("/", method="GET")
            assert anonymous.status == 401
            process.send_signal(signal.SIGINT)
            assert await process.wait() == 130


@attrs.frozen
class Served:
    """What the console helpers use of a `Console`: of one another program serves."""

    address: str
    url: str


async def printed_json(process: trio.Process) -> Any:
    assert process.stdout is not None
    line = b""
    while not line.endswith(b"}\n"):  # one JSON object, printed on its lines
        line += await process.stdout.receive_some(1)
    return json.loads(line)


async def test_the_console_follows_and_interrupts_another_programs_turn_over_sqlite(
    base_env: dict[str, str], tmp_path: Path
) -> None:
    """The console page's first example: ``agentrt console --store FILE`` in a program of
    its own shows the live turn of an agent this test's program runs on the file, and its
    actions reach it."""
    store = tmp_path / "s.sqlite3"
    # Text for as long as it runs: the page follows from its first read, whenever that is.
    steps = [TextEvent(text="working"), Sleep(0.5)] * 7200
    backend = ScriptedBackend(default=lambda call: [*steps, *reply("done")])
    args = ("console", "--store", str(store), "--bind", "127.0.0.1:0", "--json")
    async with open_runtime(store=SQLiteStore(store)) as rt:
        await rt.start_agent(Agent, name="x", backend=backend)
        with trio.fail_after(60):
            async with open_agentrt(*args, env=base_env, stdout=subprocess.PIPE) as process:
                shown = await printed_json(process)
                console = cast(Console, Served(shown["address"], shown["url"]))
                async with events(console, "/events/agent?name=x") as live:
                    _, agent = await live.until(lambda kind, data: kind == "agent")
                    # Reached through the routing: its status, not "not running here".
                    assert agent["unreachable"] is None and not agent["local"], agent
                    assert agent["status"]["state"] == "idle", agent
                    told = await act(console, name="x", action="tell", prompt="go")
                    assert told.status == 200, told
                    _, text = await live.until(lambda kind, data: data.get("kind") == "text")
                    assert text["text"] == "working"
                    assert (await rt.status("x")).state == "processing"  # live: it runs on
                    interrupted = await act(console, name="x", action="interrupt")
                    assert interrupted.status == 200, interrupted
                    assert interrupted.json() == {"ok": True, "interrupted": True}
                    _, ended = await live.until(lambda kind, data: data.get("kind") == "error")
                    assert ended["reason"] == "interrupted", ended
                assert (await rt.status("x")).state == "idle"
                process.send_signal(signal.SIGINT)
                assert await process.wait() == 130


async def test_a_bind_beyond_loopback_without_a_token_is_refused(
    base_env: dict[str, str], tmp_path: Path
) -> None:
    store = str(tmp_path / "s.sqlite3")
    run = await agentrt(
        "console", "--store", store, "--bind", "0.0.0.0:0", "--no-token", env=base_env
    )
    assert run.code == 1
    assert "beyond loopback" in run.stderr and "needs a token" in run.stderr
    run = await agentrt("console", "--store", store, "--bind", "nowhere", env=base_env)
    assert run.code == 1 and "must be HOST:PORT" in run.stderr


async def test_ctrl_c_while_requests_are_answered_ends_with_130_alone(
    base_env: dict[str, str], tmp_path: Path
) -> None:
    # Ctrl+C lands while the server is busy starting responses on many connections: the
    # command still says only "interrupted", whatever it was doing when the signal came.
    store = str(tmp_path / "s.sqlite3")
    args = ("console", "--store", store, "--bind", "127.0.0.1:0", "--no-token", "--json")
    for _ in range(ROUNDS):
        with trio.fail_after(60):
            async with open_agentrt(
                *args, env=base_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
            ) as process:
                assert process.stdout is not None and process.stderr is not None
                line = b""
                while not line.endswith(b"}\n"):
                    line += await process.stdout.receive_some(1)
                port = int(json.loads(line)["address"].rsplit(":", 1)[1])
                busy = _Busy(port)
                async with trio.open_nursery() as nursery:
                    for _ in range(CONNECTIONS):
                        nursery.start_soon(busy.hammer)
                    await busy.answering.wait()
                    process.send_signal(signal.SIGINT)
                    code = await process.wait()
                    nursery.cancel_scope.cancel()
                errors = (await process.stderr.receive_some(65536)).decode()
                assert (code, errors) == (130, "interrupted\n"), errors


class _Busy:
    """Connections asking for the fleet page again and again, until the server goes."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.answered = 0
        self.answering = trio.Event()  # set once the server is well under way

    async def hammer(self) -> None:
        # The server going away mid-request ends this connection, however it shows.
        with contextlib.suppress(OSError, trio.BrokenResourceError, AssertionError):
            client = await connect(self.port)
            while True:
                await client.request("/", method="GET")
                self.answered += 1
                if self.answered >= ANSWERED_BEFORE_CTRL_C:
                    self.answering.set()
