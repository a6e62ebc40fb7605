"""Stopping the console while responses are starting, and clients that go away: the
console's owner sees no error that is not its own, and one client never ends the server
for the others."""

from __future__ import annotations

import trio
from _helpers import echo_backend
from console_helpers import port_of, token_of
from http_client import connect

import agentrt
from agentrt import MemoryStore, open_console

BOUND = 30
DEPARTURES = 40


class CancelWhenARequestIsHandled(trio.abc.Instrument):
    """Cancels ``scope`` the moment the server spawns the task that answers a request,
    before that task first runs: its response then starts inside a cancelled scope."""

    def __init__(self, scope: trio.CancelScope) -> None:
        self.scope = scope
        self.fired = False

    def task_spawned(self, task: trio.lowlevel.Task) -> None:
        if task.name.endswith("task_group._handle") and not self.fired:
            self.fired = True
            self.scope.cancel()


async def test_leaving_the_console_while_a_response_starts_raises_nothing() -> None:
    for path in ("/", "/events/fleet"):
        async with agentrt.open_runtime(store=MemoryStore()) as rt:
            with trio.fail_after(BOUND), trio.CancelScope() as scope:
                async with open_console(rt, token="") as console:
                    client = await connect(port_of(console))
                    instrument = CancelWhenARequestIsHandled(scope)
                    trio.lowlevel.add_instrument(instrument)
                    try:
                        await client.send(path, method="GET")
                        await trio.sleep_forever()
                    finally:
                        trio.lowlevel.remove_instrument(instrument)
            assert instrument.fired and scope.cancelled_caught, path
            # The response that had started went out whole (a stream: its head), rather
            # than half-way into h11 and not onto the connection.
            if path == "/":
                answer = await client.answer()
                assert (answer.status, answer.complete) == (200, True)
            else:
                assert (await client.head())[0] == 200


async def test_clients_that_go_away_mid_response_leave_the_others_served() -> None:
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        with trio.fail_after(BOUND):
            async with open_console(rt) as console:
                port = port_of(console)
                cookie = {"cookie": f"agentrt_console={token_of(console)}"}
                watcher = await connect(port, headers=cookie)
                await watcher.send("/events/fleet", method="GET")
                assert (await watcher.head())[0] == 200
                first = await watcher.stream.receive_some(65536)
                assert b'"agents": []' in first
                for round_ in range(DEPARTURES):
                    for path in ("/", "/events/fleet", "/events/agent?name=a"):
                        leaver = await connect(port, headers=cookie)
                        await leaver.send(path, method="GET")
                        if round_ % 2:  # some wait for the response to start, some not
                            await leaver.stream.receive_some(1)
                        await leaver.stream.aclose()
                await rt.start_agent(agentrt.Agent, name="a", backend=echo_backend())
                seen = b""
                while b'"name": "a"' not in seen:
                    seen += await watcher.stream.receive_some(65536)
                page = await (await connect(port, headers=cookie)).request("/", method="GET")
                assert page.status == 200
