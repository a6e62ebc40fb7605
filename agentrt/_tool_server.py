"""The loopback MCP server that offers application tools to the CLIs.

One server per runtime, started on the first agent that has tools and stopped with the
runtime. It is the official ``mcp`` package's streamable-HTTP transport (stateless, JSON
answers) served by hypercorn's trio worker in the runtime's own trio loop, so a tool runs
as any other task of the runtime and a method tool sees its agent instance. Each agent
instance gets a bearer token of its own: the server answers only requests that carry a
live token, with that instance's tools, and a token is revoked when its instance ends.
The CLI gets the token in a 0600 file (Claude's ``--mcp-config``) or in its environment
(codex's ``bearer_token_env_var``), never on argv.
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
import secrets
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import trio

from ._errors import InvalidOptions
from ._logs import log_error
from ._tools import Tool, ToolResult
from .backend import AppToolServer

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext
    from mcp_types import CallToolRequestParams, CallToolResult, ListToolsResult
    from starlette.types import Receive, Scope, Send

logger = logging.getLogger("agentrt")

# The MCP server's name: Claude Code calls its tools ``mcp__agentrt__<tool>``, codex puts
# them in the namespace ``mcp__agentrt``.
SERVER_NAME = "agentrt"
_PATH = "/mcp"


@attrs.define(eq=False)
class ToolBinding:
    """One agent instance's tools on the server, reachable with ``endpoint.token``.
    ``close`` revokes the token and cancels the calls still running."""

    agent_name: str
    agent: object
    tools: Mapping[str, Tool]
    endpoint: AppToolServer
    _server: ToolServer
    _calls: set[trio.CancelScope] = attrs.field(factory=set)
    _cancelled_because: str = ""

    def close(self) -> None:
        self._server._bindings.pop(self.endpoint.token, None)
        self.cancel_calls("its agent stopped")

    def cancel_calls(self, why: str) -> None:
        """End the calls still running (they are answered with an error saying ``why``):
        a call outlives neither the turn that made it nor its agent."""
        self._cancelled_because = why
        for scope in self._calls:
            scope.cancel()

    async def call(self, name: str, arguments: Mapping[str, Any] | None) -> ToolResult:
        if self._server._bindings.get(self.endpoint.token) is not self:
            # Revoked after the gate admitted the request: its agent stopped meanwhile.
            return ToolResult("this agent's tools are gone (it stopped)", is_error=True)
        tool = self.tools.get(name)
        if tool is None:
            return ToolResult(f"no tool named {name!r}", is_error=True)
        with trio.CancelScope() as scope:
            self._calls.add(scope)
            try:
                result = await tool.call(self.agent, arguments)
            finally:
                self._calls.discard(scope)
        if scope.cancelled_caught:
            return ToolResult(f"{name} was cancelled: {self._cancelled_because}", is_error=True)
        if result.error is not None:
            log_error(
                f"agent {self.agent_name!r}: tool {name!r} raised; the model gets an error result",
                result.error,
            )
        return result


@attrs.define(eq=False)
class ToolServer:
    """The running server: its ``url`` and the bindings of the agents it serves."""

    url: str = ""
    _bindings: dict[str, ToolBinding] = attrs.field(factory=dict)

    def bind(self, agent_name: str, agent: object, tools: Sequence[Tool]) -> ToolBinding:
        """Serve ``tools`` to ``agent_name``'s CLI, called on ``agent`` (method tools), under
        a new token; `InvalidOptions` for a method tool of a class ``agent`` is not of."""
        for t in tools:
            if t.method and inspect.getattr_static(type(agent), t.function.__name__, None) is not t:
                raise InvalidOptions(
                    "app_tools",
                    t.name,
                    f"is a method tool, but not one of {type(agent).__name__}'s methods",
                )
        endpoint = AppToolServer(SERVER_NAME, self.url, secrets.token_urlsafe(32))
        binding = ToolBinding(agent_name, agent, {t.name: t for t in tools}, endpoint, self)
        self._bindings[endpoint.token] = binding
        return binding

    def _caller(self, scope: Scope) -> ToolBinding | _Refusal:
        """Whose request this is, from its one ``Authorization: Bearer`` header: the only
        place that reads it, so the gate and the tools cannot disagree on the caller."""
        values = [v for k, v in scope["headers"] if k.lower() == b"authorization"]
        if len(values) > 1:
            return _Refusal(400, "more than one Authorization header")
        scheme, _, token = (values[0] if values else b"").decode("latin-1").partition(" ")
        binding = self._bindings.get(token) if scheme.lower() == "bearer" else None
        return binding or _Refusal(401, "unknown or revoked agentrt tool token")

    def asgi_app(self) -> Any:
        """The ASGI application: the mcp package's transport behind the token check."""
        import mcp_types as types
        from mcp.server.lowlevel import Server

        def caller(ctx: ServerRequestContext[Any, Any]) -> ToolBinding | None:
            # What the gate decided for this request (None off HTTP, which the gate refuses).
            return ctx.request.scope.get(_CALLER) if ctx.request else None

        async def list_tools(
            ctx: ServerRequestContext[Any, Any], params: object
        ) -> ListToolsResult:
            binding = caller(ctx)
            tools = binding.tools.values() if binding else ()
            listed = [
                types.Tool(name=t.name, description=t.description, input_schema=t.input_schema)
                for t in tools
            ]
            return types.ListToolsResult(tools=listed)

        async def call_tool(
            ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams
        ) -> CallToolResult:
            binding = caller(ctx)
            if binding is None:
                result = ToolResult("this agent's tools are gone (it stopped)", is_error=True)
            else:
                result = await binding.call(params.name, params.arguments)
            content: list[types.ContentBlock] = [types.TextContent(text=result.text)]
            return types.CallToolResult(content=content, is_error=result.is_error)

        server = Server(SERVER_NAME, on_list_tools=list_tools, on_call_tool=call_tool)
        mcp_app = server.streamable_http_app(
            streamable_http_path=_PATH, stateless_http=True, json_response=True
        )

        async def gate(scope: Scope, receive: Receive, send: Send) -> None:
            # Every connection is authenticated here, whatever routes the mcp app has; only
            # the server's own lifespan events pass unasked.
            if scope["type"] == "lifespan":
                await mcp_app(scope, receive, send)
                return
            if scope["type"] not in ("http", "websocket"):
                return  # any other kind of connection is ended unserved
            decided = self._caller(scope)
            if isinstance(decided, ToolBinding) and scope["type"] == "websocket":
                decided = _Refusal(400, "the agentrt tool server serves HTTP requests only")
            if isinstance(decided, _Refusal):
                await decided.send(scope, send)
                return
            scope[_CALLER] = decided
            await mcp_app(scope, receive, send)

        return gate


# The scope key under which the gate hands the tools the caller it admitted.
_CALLER = "agentrt.tool_binding"


@attrs.frozen
class _Refusal:
    status: int
    reason: str

    async def send(self, scope: Scope, send: Send) -> None:
        """Answer with ``status`` and the reason: a plain HTTP response, or for a WebSocket
        upgrade the same response in place of the handshake (hypercorn offers the ASGI
        WebSocket Denial Response extension)."""
        prefix = "http" if scope["type"] == "http" else "websocket.http"
        body = json.dumps({"error": self.reason}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
        await send({"type": f"{prefix}.response.start", "status": self.status, "headers": headers})
        await send({"type": f"{prefix}.response.body", "body": body})


def _import_serving_stack() -> None:
    # In a worker thread, not the event loop's: the first import of the server and the mcp
    # package takes seconds on a loaded machine, longer than lease renewals can wait.
    import hypercorn.config
    import hypercorn.trio  # noqa: F401
    import mcp.server.lowlevel  # noqa: F401
    import mcp_types  # noqa: F401


@attrs.define(eq=False)
class ToolHost:
    """Starts the runtime's `ToolServer` in ``nursery`` when it is first needed, so a runtime
    whose agents have no tools imports and serves nothing."""

    nursery: trio.Nursery
    _server: ToolServer | None = None
    _lock: trio.Lock = attrs.field(factory=trio.Lock)

    async def server(self) -> ToolServer:
        async with self._lock:
            if self._server is None:
                self._server = await self._start()
            return self._server

    async def _start(self) -> ToolServer:
        try:
            await trio.to_thread.run_sync(_import_serving_stack)
            from hypercorn.config import Config
            from hypercorn.trio import serve
        except ImportError as exc:
            raise InvalidOptions(
                "app_tools", None, f"needs the 'tools' extra: pip install 'agentrt[tools]' ({exc})"
            ) from exc
        server = ToolServer()
        config = Config()
        config.bind = ["127.0.0.1:0"]  # loopback only, an ephemeral port
        config.errorlog = logging.getLogger("agentrt.tools")
        app = server.asgi_app()
        binds = await self.nursery.start(functools.partial(serve, app, config, mode="asgi"))
        server.url = f"{binds[0]}{_PATH}"
        logger.debug("application tools served at %s", server.url)
        return server
