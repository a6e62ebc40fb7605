"""The few pieces of plain ASGI the console needs: answers, a request body read with a
bound, and a server-sent event stream that ends when the browser goes away."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import trio

Scope = dict[str, Any]
Receive = Callable[[], Any]
Send = Callable[[dict[str, Any]], Any]

# What every answer carries: nothing from elsewhere runs or loads in the pages, no page
# frames them, no URL (whose first one carried the token) is sent on as a referrer.
SECURITY_HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        b"connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
    (b"x-frame-options", b"DENY"),
]
MAX_BODY = 1 << 20


class BadBody(Exception):
    """A request body that is too large, or never came whole."""


async def answer(
    send: Send,
    status: int,
    body: bytes,
    content_type: bytes = b"text/plain; charset=utf-8",
    headers: list[tuple[bytes, bytes]] | None = None,
) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", content_type),
                (b"content-length", b"%d" % len(body)),
                *SECURITY_HEADERS,
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def answer_json(send: Send, status: int, data: Any) -> None:
    await answer(send, status, json.dumps(data).encode(), b"application/json")


async def read_body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise BadBody("the client went away while sending it")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY:
            raise BadBody(f"more than {MAX_BODY} bytes")
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


class EventSink:
    """One open server-sent event stream."""

    def __init__(self, send: Send) -> None:
        self._send = send

    async def event(self, name: str, data: Any) -> None:
        frame = f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
        await self._send({"type": "http.response.body", "body": frame, "more_body": True})

    async def keepalive(self) -> None:
        await self._send(
            {"type": "http.response.body", "body": b": keepalive\n\n", "more_body": True}
        )


@asynccontextmanager
async def event_stream(receive: Receive, send: Send) -> AsyncIterator[EventSink]:
    """Start an event stream; the block is cancelled when the browser disconnects."""
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [
                (b"content-type", b"text/event-stream"),
                (b"x-accel-buffering", b"no"),
                *SECURITY_HEADERS,
            ],
        }
    )

    async with trio.open_nursery() as nursery:

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            nursery.cancel_scope.cancel()

        nursery.start_soon(watch)
        try:
            yield EventSink(send)
        finally:
            nursery.cancel_scope.cancel()
