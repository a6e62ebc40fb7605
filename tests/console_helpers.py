"""Talking to a console over HTTP: its token and CSRF token, and its server-sent events
read one at a time."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import trio
from http_client import Answer, Client, connect

import agentrt


def port_of(console: agentrt.Console) -> int:
    return int(console.address.rsplit(":", 1)[1])


def token_of(console: agentrt.Console) -> str:
    return console.url.split("token=", 1)[1]


async def signed_in(console: agentrt.Console) -> tuple[Client, str]:
    """A connection carrying the console's cookie, and the CSRF token of its pages."""
    client = await connect(
        port_of(console), headers={"cookie": f"agentrt_console={token_of(console)}"}
    )
    page = await client.request("/", method="GET")
    match = re.search(rb'name="agentrt-csrf" content="([0-9a-f]+)"', page.body)
    assert match, page
    return client, match.group(1).decode()


async def act(console: agentrt.Console, **request: Any) -> Answer:
    client, csrf = await signed_in(console)
    return await client.request("/action", request, headers={"x-agentrt-csrf": csrf})


class Events:
    """An open event stream: `until` reads events until one satisfies a predicate."""

    def __init__(self, client: Client) -> None:
        self._client = client
        self._text = ""
        self.seen: list[tuple[str, Any]] = []

    async def next(self) -> tuple[str, Any]:
        while "\n\n" not in self._text:
            size_line = await self._client._line()
            assert size_line is not None, "the stream ended"
            chunk = await self._client._exactly(int(size_line, 16) + 2)
            assert chunk is not None, "the stream ended"
            self._text += chunk[:-2].decode()
        block, self._text = self._text.split("\n\n", 1)
        if block.startswith(":"):  # a keepalive
            return await self.next()
        name, data = block.split("\n", 1)
        event = (name.removeprefix("event: "), json.loads(data.removeprefix("data: ")))
        self.seen.append(event)
        return event

    async def until(self, wanted: Callable[[str, Any], bool]) -> tuple[str, Any]:
        while True:
            name, data = await self.next()
            if wanted(name, data):
                return name, data


@asynccontextmanager
async def events(console: agentrt.Console, path: str) -> AsyncIterator[Events]:
    client, _ = await signed_in(console)
    await client.send(path, method="GET")
    status, headers = await client.head()
    assert (status, headers["content-type"]) == (200, "text/event-stream"), (status, headers)
    try:
        yield Events(client)
    finally:
        with trio.move_on_after(5, shield=True):
            await client.stream.aclose()
