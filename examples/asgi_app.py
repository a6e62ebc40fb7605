"""A Starlette web service that asks an agent: agentrt in an asyncio application.

    .venv/bin/python examples/asgi_app.py [DIRECTORY] [PORT]
    .venv/bin/python -m agentrt.testing.fake_anthropic -- python examples/asgi_app.py .

Serves ``GET /ask?prompt=...`` on 127.0.0.1 (PORT, default any free one; the first line
printed says which) with uvicorn. The runtime opens and closes with the application (its
lifespan); each request's ``ask`` runs on the server's asyncio loop, and a client that
disconnects mid-turn cancels it: the turn stops (stop reason ``cancelled``, the session
kept) and its processes are gone before the handler returns. Ctrl-C stops the server,
then the runtime, which kills every turn still running.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import sys
from collections.abc import AsyncIterator, Awaitable
from typing import Any, TypeVar

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

import agentrt
import agentrt.asyncio

T = TypeVar("T")


class Helper(agentrt.Agent):
    # Callbacks run in the agent's trio task (in the runtime's thread): plain work such
    # as this print is fine; to reach the loop, use loop.call_soon_threadsafe.
    def handle_error(self, ref: agentrt.Ref, error: agentrt.TurnFailed) -> None:
        print(f"turn failed: {error.reason}", flush=True)


async def unless_disconnected(request: Request, work: Awaitable[T]) -> T | None:
    """``await work``, cancelled if the client goes away first (then None)."""

    async def disconnected() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass

    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(disconnected())
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
        if not task.done():
            task.cancel()  # agentrt stops the turn; awaiting it waits until it has
            with contextlib.suppress(asyncio.CancelledError):
                await task
    return None if task.cancelled() else task.result()


async def ask(request: Request) -> Response:
    rt: agentrt.asyncio.Runtime = request.app.state.rt
    prompt = request.query_params.get("prompt", "")
    if not prompt.strip():
        return JSONResponse({"error": "give a prompt: /ask?prompt=..."}, status_code=400)
    try:
        response = await unless_disconnected(request, rt.ask("helper", prompt))
    except agentrt.TurnFailed as error:
        return JSONResponse({"error": str(error), "reason": error.reason}, status_code=502)
    if response is None:
        return Response(status_code=499)  # nobody is listening
    return JSONResponse({"text": response.text, "session": response.session_id})


def app(cwd: str, **options: Any) -> Starlette:
    """The service; ``options`` go to the agent's ``start_agent`` (``allowed_tools=...``)."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with agentrt.asyncio.open_runtime(store=agentrt.SQLiteStore()) as rt:
            await rt.start_agent(Helper, name="helper", backend="claude", cwd=cwd, **options)
            app.state.rt = rt
            yield

    return Starlette(routes=[Route("/ask", ask)], lifespan=lifespan)


def main(cwd: str = ".", port: int = 0, **options: Any) -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", port))
    sock.listen()  # connections wait in the backlog until the application has started
    print(f"serving on http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
    server = uvicorn.Server(uvicorn.Config(app(cwd, **options), log_level="warning"))
    # uvicorn shuts down gracefully on Ctrl-C, then raises it again: the end we asked for.
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(server.serve(sockets=[sock]))


if __name__ == "__main__":
    main(*sys.argv[1:2], *map(int, sys.argv[2:3]))
