"""Serving the console: `open_console` runs it beside a runtime's agents, in the same trio
process (hypercorn's trio worker); `console_app` is the bare ASGI application for a program
that serves it itself."""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import attrs
import trio

from .._errors import InvalidOptions
from .._exceptiongroups import collapse_exception_groups
from ._app import ConsoleApp
from ._gate import Gate, check_token, new_token, parse_bind

if TYPE_CHECKING:
    from .._runtime import Runtime


@attrs.frozen(repr=False)
class Console:
    """A console being served: open ``url`` (it carries the token) in a browser."""

    url: str
    address: str  # http://HOST:PORT, without the token

    def __repr__(self) -> str:
        return f"<Console at {self.address}>"


def console_app(runtime: Runtime, *, token: str) -> Any:
    """The console of ``runtime`` as an ASGI application, for a program that serves it on a
    server of its own (mounted at a path, the ASGI ``root_path``, or at the root).

    Every request needs ``token``: once in the URL (``?token=...``), which moves it into an
    HttpOnly, SameSite=Strict cookie. ``token=""`` admits everyone; serve it so on loopback
    only."""
    if not isinstance(token, str):
        raise InvalidOptions("token", token, "must be a str")
    return ConsoleApp(runtime, Gate(token))


@asynccontextmanager
async def open_console(
    runtime: Runtime, *, bind: str = "127.0.0.1:0", token: str | None = None
) -> AsyncIterator[Console]:
    """Serve the console of ``runtime``'s agents (and of every agent in its store) at
    ``bind`` (``HOST:PORT``; port 0 picks a free one) until the block ends.

    ``token`` (default: a new random one) is needed by every request and live stream; the
    `Console`'s ``url`` carries it. ``token=""`` serves without one, on a loopback address
    only: `InvalidOptions` for any other. Needs hypercorn (the ``console`` extra).

    Cancellation: leaving the block (or cancelling it) stops the server and ends its open
    streams; an action a page started is cancelled with it (an ask's turn as a cancelled
    ask's is)."""
    if not isinstance(bind, str):
        raise InvalidOptions("bind", bind, "must be a str HOST:PORT")
    host, _port = parse_bind(bind)
    token = new_token() if token is None else token
    if not isinstance(token, str):
        raise InvalidOptions("token", token, "must be a str (or None for a random one)")
    check_token(token, host)
    try:
        from hypercorn.config import Config
        from hypercorn.trio import serve
    except ImportError as exc:
        raise InvalidOptions(
            "console", None, f"needs the 'console' extra: pip install 'agentrt[console]' ({exc})"
        ) from exc
    config = Config()
    config.bind = [bind]
    # No access log: the first request's URL carries the token.
    config.accesslog = None
    config.errorlog = logging.getLogger("agentrt.console")
    app = console_app(runtime, token=token)
    with collapse_exception_groups():
        async with trio.open_nursery() as nursery:
            binds = await nursery.start(functools.partial(serve, app, config, mode="asgi"))
            address = str(binds[0])
            url = f"{address}/?token={token}" if token else f"{address}/"
            try:
                yield Console(url=url, address=address)
            finally:
                nursery.cancel_scope.cancel()
