"""The runtime's loopback MCP server, seen by the official ``mcp`` client: which agent's
tools a token reaches, tokens revoked when their instance ends, a new token and instance
after a restart, running calls cancelled with their agent, nothing left after the runtime,
and the errors of ``start_agent`` for tools that cannot be served."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import mcp_types
import pytest
import trio
import wsproto
import wsproto.events
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from trio_util import AsyncValue

from agentrt import Agent, InvalidOptions, MemoryStore, Runtime, open_runtime, tool
from agentrt.backend import AppToolServer
from agentrt.testing import Gate, ScriptedBackend, ScriptedOptions, fake_cli_executable

# Real sockets and a real HTTP server: bounds are generous, nothing waits on them.
BOUND = 30


class ToolsBackend(ScriptedBackend):
    """The scripted backend, also recording the servers it is given for app tools."""

    def __init__(self, *scripts: list[Any]) -> None:
        super().__init__(*scripts)
        self.servers: list[AppToolServer] = []
        self.count = AsyncValue(0)

    def with_app_tools(self, options: ScriptedOptions, server: AppToolServer) -> ScriptedOptions:
        self.servers.append(server)
        self.count.value = len(self.servers)
        return options


@tool
async def add(a: int, b: int = 2) -> int:
    """Add two numbers."""
    return a + b


@tool
async def echo(text: str) -> str:
    """Say it back."""
    return text


@tool
async def fail() -> str:
    """Always fails."""
    raise ValueError("no luck")


blocked = trio.Event()


@tool
async def block() -> str:
    """Waits until cancelled."""
    blocked.set()
    await trio.sleep_forever()
    raise AssertionError("not reached")


async def call_blocked_then(
    server: AppToolServer, end: Callable[[], Awaitable[object]]
) -> mcp_types.CallToolResult:
    """Call ``block`` and, once it runs, ``end()``; what the call was answered."""
    global blocked
    blocked = trio.Event()
    answers: list[mcp_types.CallToolResult] = []
    async with mcp_client(server) as client, trio.open_nursery() as nursery:

        async def call() -> None:
            answers.append(await client.call_tool("block", {}))

        nursery.start_soon(call)
        await blocked.wait()
        await end()
    (answer,) = answers
    return answer


class Keeper(Agent):
    instances: list[Keeper] = []

    def __init__(self) -> None:
        type(self).instances.append(self)
        self.seen: list[str] = []

    @tool
    async def keep(self, item: str) -> int:
        """Keep an item."""
        self.seen.append(item)
        return len(type(self).instances)

    app_tools = (keep, echo)

    def handle_event(self, event: Any) -> None:
        raise RuntimeError("crash on purpose")


class Other(Agent):
    pass


@asynccontextmanager
async def mcp_client(server: AppToolServer, token: str | None = None) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token or server.token}"}
    async with (
        httpx2.AsyncClient(headers=headers) as http,
        Client(streamable_http_client(server.url, http_client=http)) as client,
    ):
        yield client


async def status_with(server: AppToolServer, token: str) -> int:
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http:
        response = await http.post(server.url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    return response.status_code


def text(result: mcp_types.CallToolResult) -> str:
    (block,) = result.content
    assert isinstance(block, mcp_types.TextContent)
    return block.text


@asynccontextmanager
async def runtime() -> AsyncIterator[Runtime]:
    async with open_runtime(store=MemoryStore()) as rt:
        yield rt


async def test_an_agent_token_lists_and_calls_its_own_tools() -> None:
    backend = ToolsBackend()
    async with runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=backend, app_tools=[add, fail])
        await rt.start_agent(Agent, name="b", backend=backend, app_tools=[echo])
        a, b = backend.servers
        assert a.url == b.url and a.url.startswith("http://127.0.0.1:")
        assert a.name == "agentrt" and a.token != b.token
        assert a.token not in repr(a)
        with trio.fail_after(BOUND):
            async with mcp_client(a) as client:
                listed = await client.list_tools()
                assert [t.name for t in listed.tools] == ["add", "fail"]
                assert listed.tools[0].description == "Add two numbers."
                assert listed.tools[0].input_schema["required"] == ["a"]
                added = await client.call_tool("add", {"a": 40})
                assert (text(added), added.is_error) == ("42", False)
                failed = await client.call_tool("fail", {})
                assert failed.is_error and text(failed) == "fail raised ValueError: no luck"
                bad = await client.call_tool("add", {"a": "x"})
                assert bad.is_error and "argument `a`" in text(bad)
                other = await client.call_tool("echo", {"text": "hi"})
                assert other.is_error and text(other) == "no tool named 'echo'"
            async with mcp_client(b) as client:
                assert [t.name for t in (await client.list_tools()).tools] == ["echo"]


async def test_a_request_without_a_live_token_is_refused() -> None:
    backend = ToolsBackend()
    async with runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=backend, app_tools=[add])
        (server,) = backend.servers
        with trio.fail_after(BOUND):
            assert await status_with(server, "not-a-token") == 401
            async with httpx2.AsyncClient() as http:
                response = await http.post(server.url, json={})
            assert response.status_code == 401
            assert "unknown or revoked" in response.text


async def websocket_refusal(server: AppToolServer, token: str | None) -> tuple[int, bytes]:
    """Open a WebSocket to the server, with ``token`` (or none), as a real client would;
    the status and body of the refusal (the test fails if the upgrade is accepted)."""
    host, port = server.url.removeprefix("http://").split("/")[0].split(":")
    ws = wsproto.WSConnection(wsproto.ConnectionType.CLIENT)
    auth = [(b"authorization", f"Bearer {token}".encode())] if token is not None else []
    request = wsproto.events.Request(host=host, target="/mcp", extra_headers=auth)
    async with await trio.open_tcp_stream(host, int(port)) as stream:
        await stream.send_all(ws.send(request))
        status, body = 0, b""
        while chunk := await stream.receive_some(65536):
            ws.receive_data(chunk)
            for event in ws.events():
                assert not isinstance(event, wsproto.events.AcceptConnection), "upgrade accepted"
                if isinstance(event, wsproto.events.RejectConnection):
                    status = event.status_code
                elif isinstance(event, wsproto.events.RejectData):
                    body += event.data
                    if event.body_finished:
                        return status, body
    raise AssertionError("the server closed without answering the upgrade")


async def test_a_websocket_upgrade_is_refused_by_the_gate_itself() -> None:
    backend = ToolsBackend()
    async with runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=backend, app_tools=[add])
        (server,) = backend.servers
        with trio.fail_after(BOUND):
            unknown = b'{"error": "unknown or revoked agentrt tool token"}'
            assert await websocket_refusal(server, None) == (401, unknown)
            assert await websocket_refusal(server, "not-a-token") == (401, unknown)
            # A live token does not open a WebSocket either: the server serves HTTP only.
            served = b'{"error": "the agentrt tool server serves HTTP requests only"}'
            assert await websocket_refusal(server, server.token) == (400, served)


async def test_a_request_with_two_authorization_headers_is_refused_and_runs_no_tool() -> None:
    calls: list[str] = []

    @tool
    async def mine(item: str) -> str:
        """Alpha's own tool."""
        calls.append(item)
        return item

    backend = ToolsBackend()
    async with runtime() as rt:
        await rt.start_agent(Agent, name="alpha", backend=backend, app_tools=[mine])
        await rt.start_agent(Agent, name="beta", backend=backend, app_tools=[echo])
        alpha, beta = backend.servers
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
        call["params"] = {"name": "mine", "arguments": {"item": "x"}}

        async def post(*tokens: str) -> httpx2.Response:
            headers = [("Authorization", f"Bearer {t}") for t in tokens]
            headers.append(("Accept", "application/json, text/event-stream"))
            async with httpx2.AsyncClient() as http:
                return await http.post(alpha.url, json=call, headers=headers)

        with trio.fail_after(BOUND):
            for tokens in [(alpha.token, beta.token), (beta.token, alpha.token)]:
                response = await post(*tokens)
                assert response.status_code == 400
                assert response.json() == {"error": "more than one Authorization header"}
            assert calls == []
            # The same call with alpha's token alone runs alpha's tool.
            assert (await post(alpha.token)).status_code == 200
            assert calls == ["x"]


async def test_stopping_an_agent_revokes_its_token_and_cancels_its_running_calls() -> None:
    backend = ToolsBackend()
    async with runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=backend, app_tools=[block])
        (server,) = backend.servers
        with trio.fail_after(BOUND):
            answer = await call_blocked_then(server, lambda: rt.stop_agent("a"))
            assert await status_with(server, server.token) == 401
    assert answer.is_error and text(answer) == "block was cancelled: its agent stopped"


async def test_a_call_does_not_outlive_the_turn_that_made_it() -> None:
    gate = Gate()
    backend = ToolsBackend([gate])
    async with runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=backend, app_tools=[block])
        (server,) = backend.servers
        with trio.fail_after(BOUND):
            ref = await rt.tell("a", "go")
            await gate.wait_reached()

            async def interrupt() -> None:
                assert await rt.interrupt("a")
                await rt.wait(ref)

            answer = await call_blocked_then(server, interrupt)
            assert answer.is_error and text(answer) == "block was cancelled: its turn ended"
            # The agent and its token live on.
            assert await status_with(server, server.token) != 401


async def test_a_restarted_agent_gets_a_new_token_and_its_method_tools_the_new_instance() -> None:
    backend = ToolsBackend()
    Keeper.instances = []
    async with runtime() as rt:
        await rt.start_agent(Keeper, name="k", backend=backend, restart="permanent")
        with trio.fail_after(BOUND):
            async with mcp_client(backend.servers[0]) as client:
                assert text(await client.call_tool("keep", {"item": "one"})) == "1"
            await rt.notify("k", "crash")
            await backend.count.wait_value(lambda n: n == 2)
            first, second = backend.servers
            assert first.token != second.token
            assert await status_with(first, first.token) == 401
            async with mcp_client(second) as client:
                assert [t.name for t in (await client.list_tools()).tools] == ["keep", "echo"]
                assert text(await client.call_tool("keep", {"item": "two"})) == "2"
    assert [k.seen for k in Keeper.instances] == [["one"], ["two"]]


async def test_the_server_is_gone_when_the_runtime_closes() -> None:
    backend = ToolsBackend()
    async with runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=backend, app_tools=[add])
    (server,) = backend.servers
    port = int(server.url.rsplit(":", 1)[1].split("/")[0])
    with trio.fail_after(BOUND), pytest.raises(OSError):
        await trio.open_tcp_stream("127.0.0.1", port)


async def test_a_runtime_whose_agents_have_no_tools_serves_nothing() -> None:
    backend = ToolsBackend()
    async with runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=backend)
        assert backend.servers == []
        assert rt._context.tools._server is None


async def test_an_explicit_app_tools_replaces_the_class_attribute() -> None:
    backend = ToolsBackend()
    async with runtime() as rt:
        await rt.start_agent(Keeper, name="k", backend=backend, app_tools=[add])
        await rt.start_agent(Keeper, name="none", backend=backend, app_tools=[])
        (server,) = backend.servers
        with trio.fail_after(BOUND):
            async with mcp_client(server) as client:
                assert [t.name for t in (await client.list_tools()).tools] == ["add"]


async def test_tools_that_cannot_be_served_are_refused_at_start() -> None:
    async with runtime() as rt:
        with pytest.raises(InvalidOptions) as caught:
            await rt.start_agent(Agent, name="a", backend=ScriptedBackend(), app_tools=[add])
        assert caught.value.key == "app_tools"
        assert "the 'scripted' backend cannot serve application tools" in str(caught.value)
        with pytest.raises(InvalidOptions) as caught:
            await rt.start_agent(Other, name="b", backend=ToolsBackend(), app_tools=[Keeper.keep])
        assert "is a method tool, but not one of Other's methods" in str(caught.value)
        with pytest.raises(InvalidOptions) as caught:
            await rt.start_agent(Agent, name="c", backend=ToolsBackend(), app_tools=add)
        assert "must be a list of @agentrt.tool functions" in str(caught.value)
        assert rt.agents() == ()


async def test_a_bad_class_attribute_is_refused_naming_the_class() -> None:
    class Broken(Agent):
        app_tools = ("not a tool",)  # type: ignore[assignment]

    async with runtime() as rt:
        with pytest.raises(InvalidOptions) as caught:
            await rt.start_agent(Broken, name="a", backend=ToolsBackend())
    assert caught.value.key == "Broken.app_tools"


async def test_without_the_tools_extra_app_tools_say_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "hypercorn.trio", None)  # as if not installed
    async with runtime() as rt:
        with pytest.raises(InvalidOptions) as caught:
            await rt.start_agent(Agent, name="a", backend=ToolsBackend(), app_tools=[add])
        await rt.start_agent(Agent, name="b", backend=ToolsBackend())  # no tools: fine
    assert caught.value.key == "app_tools"
    assert "pip install 'agentrt[tools]'" in str(caught.value)


_IMPORTS_OFF_THE_LOOP = """
import sys, threading
on_loop_thread = {}

class Spy:
    def find_spec(self, name, path, target=None):
        if name in ("hypercorn.trio", "mcp.server.lowlevel", "mcp_types"):
            on_loop_thread[name] = threading.current_thread() is threading.main_thread()
        return None

sys.meta_path.insert(0, Spy())
import trio
from agentrt import Agent, MemoryStore, open_runtime, tool

@tool
async def add(a: int, b: int) -> int:
    "Add two numbers."
    return a + b

async def main():
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(Agent, name="a", backend="claude", app_tools=[add])

trio.run(main)
print(sorted(on_loop_thread.items()))
"""


def test_the_serving_stack_is_imported_off_the_event_loop(tmp_path: Path) -> None:
    # A fresh interpreter, where nothing of the stack is imported yet: its first import
    # takes seconds under load, which the loop (lease renewals) must not wait for.
    claude = fake_cli_executable(str(tmp_path), ["answer"], name="claude")  # never run
    done = subprocess.run(
        [sys.executable, "-c", _IMPORTS_OFF_THE_LOOP],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env={**os.environ, "CLAUDE_CLI": claude},
    )
    assert done.stdout.strip() == str(
        [("hypercorn.trio", False), ("mcp.server.lowlevel", False), ("mcp_types", False)]
    )
