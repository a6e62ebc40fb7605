"""A small HTTP/1.1 server on trio, shared by the loopback fake model APIs.

It speaks just enough HTTP for a CLI's HTTP client on 127.0.0.1: keep-alive, request bodies
by Content-Length or chunked, whole responses, and chunked server-sent-event streams that a
test can end cleanly, cut mid-body or leave hanging.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from http import HTTPStatus
from typing import Any

import attrs
import msgspec
import trio

_MAX_HEAD = 64 * 1024
_MAX_BODY = 64 * 1024 * 1024
_READ_SIZE = 64 * 1024
_encoder = msgspec.json.Encoder()


class _BadRequest(Exception):
    pass


@attrs.frozen
class HttpRequest:
    """One request as received: header names lower-cased, in arrival order."""

    method: str
    path: str
    headers: tuple[tuple[str, str], ...]
    body: bytes = attrs.field(repr=False)

    def header(self, name: str) -> str | None:
        name = name.lower()
        return next((v for k, v in self.headers if k == name), None)


class ResponseWriter:
    """Sends the one response to one request: whole, or as a chunked event stream."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self._stream = stream
        self.started = False
        self.finished = False

    async def _head(self, status: int, headers: Sequence[tuple[str, str]]) -> None:
        assert not self.started, "one response per request"
        self.started = True
        try:
            reason = HTTPStatus(status).phrase
        except ValueError:  # 529 and other codes the stdlib does not name
            reason = ""
        lines = [f"HTTP/1.1 {status} {reason}", *(f"{k}: {v}" for k, v in headers)]
        await self._stream.send_all(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))

    async def send(
        self,
        status: int,
        body: bytes,
        *,
        content_type: str = "application/json",
        headers: Sequence[tuple[str, str]] = (),
    ) -> None:
        await self._head(
            status,
            [("content-type", content_type), ("content-length", str(len(body))), *headers],
        )
        await self._stream.send_all(body)
        self.finished = True

    async def send_json(
        self, status: int, value: Any, *, headers: Sequence[tuple[str, str]] = ()
    ) -> None:
        await self.send(status, _encoder.encode(value), headers=headers)

    async def start_stream(
        self,
        status: int = 200,
        *,
        content_type: str = "text/event-stream",
        headers: Sequence[tuple[str, str]] = (),
    ) -> None:
        await self._head(
            status,
            [
                ("content-type", content_type),
                ("cache-control", "no-cache"),
                ("transfer-encoding", "chunked"),
                *headers,
            ],
        )

    async def send_event(self, event: str, data: Any) -> None:
        """One server-sent event; ``data`` is encoded as JSON."""
        payload = b"event: " + event.encode() + b"\ndata: " + _encoder.encode(data) + b"\n\n"
        await self._stream.send_all(b"%x\r\n%s\r\n" % (len(payload), payload))

    async def end_stream(self) -> None:
        await self._stream.send_all(b"0\r\n\r\n")
        self.finished = True

    async def abort(self) -> None:
        """Close the connection where it stands: a response cut mid-body."""
        await self._stream.aclose()


async def _read_request(stream: trio.abc.Stream, buf: bytearray) -> HttpRequest | None:
    while (end := buf.find(b"\r\n\r\n")) < 0:
        if len(buf) > _MAX_HEAD:
            raise _BadRequest("request head too large")
        chunk = await stream.receive_some(_READ_SIZE)
        if not chunk:
            if buf:
                raise _BadRequest("connection closed inside a request head")
            return None
        buf += chunk
    head = bytes(buf[:end]).decode("latin-1")
    del buf[: end + 4]
    request_line, *header_lines = head.split("\r\n")
    try:
        method, path, _version = request_line.split(" ", 2)
        headers = tuple(
            (name.strip().lower(), value.strip())
            for name, value in (line.split(":", 1) for line in header_lines)
        )
    except ValueError as exc:
        raise _BadRequest(f"malformed request head: {head[:200]!r}") from exc
    request = HttpRequest(method, path, headers, b"")
    if (request.header("transfer-encoding") or "").lower() == "chunked":
        body = await _read_chunked(stream, buf)
    else:
        body = await _read_exactly(stream, buf, int(request.header("content-length") or 0))
    return attrs.evolve(request, body=body)


async def _read_exactly(stream: trio.abc.Stream, buf: bytearray, size: int) -> bytes:
    if size > _MAX_BODY:
        raise _BadRequest(f"request body of {size} bytes is over {_MAX_BODY}")
    while len(buf) < size:
        chunk = await stream.receive_some(_READ_SIZE)
        if not chunk:
            raise _BadRequest("connection closed inside a request body")
        buf += chunk
    data = bytes(buf[:size])
    del buf[:size]
    return data


async def _read_line(stream: trio.abc.Stream, buf: bytearray) -> bytes:
    while (end := buf.find(b"\r\n")) < 0:
        chunk = await stream.receive_some(_READ_SIZE)
        if not chunk:
            raise _BadRequest("connection closed inside a chunked body")
        buf += chunk
    line = bytes(buf[:end])
    del buf[: end + 2]
    return line


async def _read_chunked(stream: trio.abc.Stream, buf: bytearray) -> bytes:
    body = bytearray()
    while True:
        size = int((await _read_line(stream, buf)).split(b";", 1)[0], 16)
        if size == 0:
            while await _read_line(stream, buf):  # trailers, up to the empty line
                pass
            return bytes(body)
        body += await _read_exactly(stream, buf, size + 2)
        del body[-2:]
        if len(body) > _MAX_BODY:
            raise _BadRequest(f"request body is over {_MAX_BODY} bytes")


Handler = Callable[[HttpRequest, ResponseWriter], Awaitable[None]]


@asynccontextmanager
async def open_http_server(handler: Handler, *, host: str = "127.0.0.1") -> AsyncIterator[int]:
    """Serve ``handler`` on a fresh loopback port; yields the port.

    Each request is handed to ``handler`` with a `ResponseWriter`; a handler that returns
    without answering gets a 500. A client that goes away mid-response is not an error.

    Cancellation: leaving the block cancels every connection, including handlers that hang.
    """

    async def serve_connection(stream: trio.SocketStream) -> None:
        buf = bytearray()
        try:
            async with stream:
                while True:
                    try:
                        request = await _read_request(stream, buf)
                    except _BadRequest as exc:
                        await ResponseWriter(stream).send(
                            400, str(exc).encode(), content_type="text/plain"
                        )
                        return
                    if request is None:
                        return
                    writer = ResponseWriter(stream)
                    await handler(request, writer)
                    if not writer.started:
                        await writer.send(
                            500, b"handler sent no response", content_type="text/plain"
                        )
                    if not writer.finished:
                        return
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return  # the client hung up, or the handler cut the stream on purpose

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(
            functools.partial(trio.serve_tcp, serve_connection, 0, host=host)
        )
        try:
            yield listeners[0].socket.getsockname()[1]
        finally:
            nursery.cancel_scope.cancel()
