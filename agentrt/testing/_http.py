"""A small HTTP/1.1 server on trio, shared by the loopback fake model APIs.

It speaks just enough HTTP for a CLI's HTTP client on 127.0.0.1: keep-alive, request bodies
by Content-Length or chunked, whole responses (HEAD answered without a body), chunked
server-sent-event streams, and the failures a fake needs to stage: a body cut short, a
stream cut mid-way, a reply that never comes.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from http import HTTPStatus
from typing import Any

import attrs
import msgspec
import trio

from .._redact import REDACTED, is_secret_name, redact

_MAX_HEAD = 64 * 1024
_MAX_BODY = 64 * 1024 * 1024
_READ_SIZE = 64 * 1024
_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder()
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


class _BadRequest(Exception):
    pass


@attrs.frozen
class HttpRequest:
    """One request as received: header names lower-cased, in arrival order."""

    method: str
    path: str  # the request target, query string included
    headers: tuple[tuple[str, str], ...]
    body: bytes = attrs.field(repr=False)

    def header(self, name: str) -> str | None:
        name = name.lower()
        return next((v for k, v in self.headers if k == name), None)

    def redacted_headers(self) -> dict[str, str]:
        """The headers as a fake may keep them: secret-named ones and cookies replaced,
        secrets in the others redacted."""
        return {
            k: REDACTED if is_secret_name(k) or k == "cookie" else redact(v)
            for k, v in self.headers
        }

    def json_body(self) -> Any:
        """The body decoded as JSON, or None when it is empty or not JSON."""
        try:
            return _decoder.decode(self.body) if self.body else None
        except msgspec.DecodeError:
            return None


class ResponseWriter:
    """Sends the one response to one request: whole, or as a chunked event stream; or cuts
    the connection, or holds it without answering."""

    def __init__(self, stream: trio.abc.Stream, *, head_only: bool = False) -> None:
        self._stream = stream
        self._head_only = head_only  # a HEAD request: headers as for GET, no body
        self.started = False
        self.finished = False
        self.closed = False

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
        cut: int | None = None,
    ) -> None:
        """A whole response. ``cut``: send only that many bytes of the body (the
        Content-Length still announces all of it); the response stays unfinished, so the
        connection is closed once the handler returns."""
        await self._head(
            status,
            [("content-type", content_type), ("content-length", str(len(body))), *headers],
        )
        if cut is not None:
            await self._stream.send_all(body[:cut])
            return
        if not self._head_only:
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
        """One server-sent event in a chunk of its own; ``data`` is encoded as JSON."""
        payload = b"event: " + event.encode() + b"\ndata: " + _encoder.encode(data) + b"\n\n"
        await self._stream.send_all(b"%x\r\n%s\r\n" % (len(payload), payload))

    async def send_data(self, data: bytes) -> None:
        """One server-sent event of ``data`` alone (no event name), in a chunk of its own."""
        payload = b"data: " + data + b"\n\n"
        await self._stream.send_all(b"%x\r\n%s\r\n" % (len(payload), payload))

    async def end_stream(self) -> None:
        await self._stream.send_all(b"0\r\n\r\n")
        self.finished = True

    async def abort(self) -> None:
        """Close the connection where it stands: a response cut mid-body (or never sent)."""
        self.closed = True
        await self._stream.aclose()

    async def hang(self) -> None:
        """Send nothing more; return once the client has closed the connection (or the server
        is closed). Whatever the client sends meanwhile is read and ignored."""
        try:
            while await self._stream.receive_some(_READ_SIZE):
                pass
        except trio.BrokenResourceError:
            pass
        await self.abort()


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
        method, path, version = request_line.split(" ", 2)
        if not _TOKEN.fullmatch(method) or not path or version not in ("HTTP/1.1", "HTTP/1.0"):
            raise ValueError(request_line)
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
        try:
            size = int(request.header("content-length") or 0)
        except ValueError as exc:
            raise _BadRequest(f"bad content-length: {request.header('content-length')!r}") from exc
        body = await _read_exactly(stream, buf, size)
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
        if len(buf) > _MAX_HEAD:
            raise _BadRequest("chunk size line too long")
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
        line = await _read_line(stream, buf)
        try:
            size = int(line.split(b";", 1)[0], 16)
        except ValueError as exc:
            raise _BadRequest(f"bad chunk size line: {line[:100]!r}") from exc
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
async def open_http_server(
    handler: Handler, *, host: str = "127.0.0.1", port: int = 0
) -> AsyncIterator[int]:
    """Serve ``handler`` on ``host`` and yield the port (a fresh one by default).

    Each request is handed to ``handler`` with a `ResponseWriter`; a handler that returns
    without answering gets a 500, a malformed request a 400; after a response left
    unfinished (a stream not ended, a body cut short) the connection is closed. A client
    that goes away mid-response is not an error. An exception raised by ``handler`` (a
    fake's script bug) cancels the server and the block using it, and is raised by this
    context manager as itself; an exception raised in the block also leaves it as itself,
    not in a group.

    Cancellation: leaving the block cancels every connection, including handlers that hang.
    """
    handler_error: Exception | None = None
    body_error: BaseException | None = None

    async def serve_connection(stream: trio.SocketStream) -> None:
        nonlocal handler_error
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
                    writer = ResponseWriter(stream, head_only=request.method == "HEAD")
                    try:
                        await handler(request, writer)
                    except (trio.BrokenResourceError, trio.ClosedResourceError):
                        raise
                    except Exception as exc:
                        # Cancel the block before this connection closes: whoever waits on
                        # it must see the cancellation, never a connection closed first.
                        if handler_error is None:
                            handler_error = exc
                        nursery.cancel_scope.cancel()
                        return
                    if writer.closed or (writer.started and not writer.finished):
                        return
                    if not writer.started:
                        await writer.send(
                            500, b"handler sent no response", content_type="text/plain"
                        )
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return  # the client hung up, or the handler cut the stream on purpose

    async with trio.open_nursery() as nursery:
        listeners = await trio.open_tcp_listeners(port, host=host)
        bound_port: int = listeners[0].socket.getsockname()[1]
        await nursery.start(trio.serve_listeners, serve_connection, listeners)
        try:
            yield bound_port
        except BaseException as exc:
            # Re-raised below, outside the nursery, so that it is not wrapped in a group.
            body_error = exc
        finally:
            nursery.cancel_scope.cancel()
    if handler_error is not None:
        raise handler_error
    if body_error is not None:
        raise body_error
