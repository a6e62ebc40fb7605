"""Just enough of an HTTP/1.1 client to see exactly what the loopback fake APIs send."""

from __future__ import annotations

import json
from typing import Any

import attrs
import trio


@attrs.frozen
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes
    complete: bool  # the body ended as framed (not cut by a closed connection)

    def json(self) -> Any:
        return json.loads(self.body)

    def events(self) -> list[tuple[str, Any]]:
        """The server-sent events of the body, as (event name, decoded data)."""
        out = []
        for block in self.body.decode().split("\n\n"):
            if block.strip():
                name, data = block.split("\n", 1)
                assert name.startswith("event: ") and data.startswith("data: "), block
                out.append((name.removeprefix("event: "), json.loads(data.removeprefix("data: "))))
        return out


class Client:
    """One keep-alive connection; ``path`` and ``headers`` are the defaults of its requests."""

    def __init__(
        self,
        stream: trio.SocketStream,
        *,
        path: str = "/",
        headers: dict[str, str] | None = None,
    ) -> None:
        self.stream = stream
        self.buf = bytearray()
        self.path = path
        self.headers = headers or {}

    async def _fill(self) -> bool:
        chunk = await self.stream.receive_some(65536)
        self.buf += chunk
        return bool(chunk)

    async def _line(self) -> bytes | None:
        while (end := self.buf.find(b"\r\n")) < 0:
            if not await self._fill():
                return None
        line = bytes(self.buf[:end])
        del self.buf[: end + 2]
        return line

    async def _exactly(self, size: int) -> bytes | None:
        while len(self.buf) < size:
            if not await self._fill():
                return None
        data = bytes(self.buf[:size])
        del self.buf[:size]
        return data

    async def send(
        self,
        path: str | None = None,
        body: Any = None,
        *,
        method: str = "POST",
        headers: dict[str, str] | None = None,
        chunked: bool = False,
    ) -> None:
        payload = b"" if body is None else json.dumps(body).encode()
        head = {"host": "127.0.0.1", **self.headers, **(headers or {})}
        if chunked:
            head["transfer-encoding"] = "chunked"
            payload = (
                b"%x\r\n%s\r\n0\r\n\r\n" % (len(payload), payload) if payload else b"0\r\n\r\n"
            )
        else:
            head["content-length"] = str(len(payload))
        lines = [f"{method} {path or self.path} HTTP/1.1", *(f"{k}: {v}" for k, v in head.items())]
        await self.stream.send_all(("\r\n".join(lines) + "\r\n\r\n").encode() + payload)

    async def request(
        self,
        path: str | None = None,
        body: Any = None,
        *,
        method: str = "POST",
        headers: dict[str, str] | None = None,
        chunked: bool = False,
    ) -> Answer:
        await self.send(path, body, method=method, headers=headers, chunked=chunked)
        return await self.answer(head_only=method == "HEAD")

    async def head(self) -> tuple[int, dict[str, str]]:
        """The status and headers of the next response."""
        status_line = await self._line()
        assert status_line is not None, "the connection closed before a response"
        headers = {}
        while line := await self._line():
            name, value = line.decode().split(":", 1)
            headers[name.lower()] = value.strip()
        return int(status_line.split()[1]), headers

    async def answer(self, *, head_only: bool = False) -> Answer:
        status, headers = await self.head()
        if head_only:
            return Answer(status, headers, b"", True)
        if headers.get("transfer-encoding") == "chunked":
            body = bytearray()
            while True:
                size_line = await self._line()
                if size_line is None:
                    return Answer(status, headers, bytes(body), False)
                size = int(size_line, 16)
                chunk = await self._exactly(size + 2)
                if chunk is None:
                    return Answer(status, headers, bytes(body), False)
                if size == 0:
                    return Answer(status, headers, bytes(body), True)
                body += chunk[:-2]
        size = int(headers["content-length"])
        data = await self._exactly(size)
        if data is None:  # cut short: keep what came
            return Answer(status, headers, bytes(self.buf), False)
        return Answer(status, headers, data, True)


async def connect(port: int, **defaults: Any) -> Client:
    """A connection to ``127.0.0.1:port``; ``defaults`` go to `Client`."""
    return Client(await trio.open_tcp_stream("127.0.0.1", port), **defaults)
