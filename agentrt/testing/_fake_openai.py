"""A loopback fake of the OpenAI Responses API (``POST /v1/responses``, streamed as SSE),
and of streamed chat completions (``POST /v1/chat/completions``, what OpenAI-compatible
local servers offer; `_fake_chat` renders the same replies on that wire).

It answers from a script: text replies, function calls (the Codex shell tool is
``exec_command`` with ``{"cmd": ...}``), HTTP errors, streams cut mid-body and streams that
hang. Every request is recorded with its credentials redacted.
"""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import attrs
import msgspec
import trio

from ._fake_chat import chat_chunks, is_chat_call
from ._http import HttpRequest, ResponseWriter, open_http_server

__all__ = [
    "FAKE_OPENAI_KEY_VAR",
    "FakeOpenAI",
    "OpenAIError",
    "OpenAIFunctionCall",
    "OpenAIHang",
    "OpenAIItem",
    "OpenAIMessage",
    "OpenAIReply",
    "OpenAIRequest",
    "OpenAIScript",
    "OpenAIUsage",
    "open_fake_openai",
]


@attrs.frozen
class OpenAIMessage:
    """An assistant message, streamed as one ``output_text.delta`` per word."""

    text: str


@attrs.frozen
class OpenAIFunctionCall:
    """A tool call. ``arguments`` is JSON-encoded unless it is already a string.
    ``namespace``: the tool's namespace, as codex offers MCP tools (``mcp__<server>``, the
    tool's own name as ``name``)."""

    name: str
    arguments: Any = attrs.field(factory=dict)
    call_id: str | None = None
    namespace: str | None = None


@attrs.frozen
class OpenAIItem:
    """Any other output item, streamed verbatim (a ``reasoning`` item, a ``custom_tool_call``
    such as codex's ``apply_patch``, ...)."""

    payload: Mapping[str, Any]


@attrs.frozen
class OpenAIUsage:
    """The ``usage`` of ``response.completed``."""

    input_tokens: int = 10
    output_tokens: int = 5
    cached_tokens: int = 0
    reasoning_tokens: int = 0


@attrs.frozen
class OpenAIReply:
    """One streamed response. ``cut_after`` / ``hang_after``: after that many SSE events the
    connection is closed mid-body / the server goes silent until the client leaves."""

    output: tuple[OpenAIMessage | OpenAIFunctionCall | OpenAIItem, ...]
    usage: OpenAIUsage = OpenAIUsage()
    cut_after: int | None = None
    hang_after: int | None = None

    @classmethod
    def text(cls, message: str, *, usage: OpenAIUsage = OpenAIUsage()) -> OpenAIReply:
        """A reply that is one assistant message."""
        return cls((OpenAIMessage(message),), usage=usage)

    @classmethod
    def exec_command(
        cls, cmd: str, *, usage: OpenAIUsage = OpenAIUsage(), **extra: Any
    ) -> OpenAIReply:
        """A call of codex's shell tool: ``exec_command`` with ``{"cmd": cmd, **extra}``."""
        return cls((OpenAIFunctionCall("exec_command", {"cmd": cmd, **extra}),), usage=usage)

    @classmethod
    def tool_search(cls, query: str, *, usage: OpenAIUsage = OpenAIUsage()) -> OpenAIReply:
        """A call of codex's ``tool_search`` (run by codex itself): codex 0.171.0 defers MCP
        tools behind it, so a model calls it before the MCP tool it finds."""
        payload = {
            "type": "tool_search_call",
            "call_id": f"tool_search_{query}",
            "execution": "client",
            "status": "completed",
            "arguments": {"query": query},
        }
        return cls((OpenAIItem(payload),), usage=usage)

    @classmethod
    def mcp_call(
        cls, server: str, tool: str, arguments: Any, *, usage: OpenAIUsage = OpenAIUsage()
    ) -> OpenAIReply:
        """A call of MCP server ``server``'s tool ``tool``, as codex names it (the tool in
        the namespace ``mcp__<server>``, found with `tool_search` first)."""
        call = OpenAIFunctionCall(tool, arguments, namespace=f"mcp__{server}")
        return cls((call,), usage=usage)


@attrs.frozen
class OpenAIError:
    """An HTTP error with an OpenAI-shaped JSON error body. ``resets_at`` (epoch seconds):
    the body also says when a usage limit resets (``resets_at``, ``resets_in_seconds``), as
    the ChatGPT backend does; see the constructors for the usual errors."""

    status: int
    message: str = "fake failure"
    code: str | None = None
    type: str | None = None
    retry_after: float | None = None
    resets_at: float | None = None

    @classmethod
    def usage_limit(cls, resets_at: float) -> OpenAIError:
        """429 ``usage_limit_reached``: the plan's usage is spent until ``resets_at``."""
        return cls(
            429,
            "The usage limit has been reached",
            type="usage_limit_reached",
            resets_at=resets_at,
        )

    @classmethod
    def context_length_exceeded(cls) -> OpenAIError:
        """400 ``context_length_exceeded``: the input does not fit the model's window."""
        return cls(
            400,
            "Your input exceeds the context window of this model. Please adjust your input "
            "and try again.",
            code="context_length_exceeded",
            type="invalid_request_error",
        )

    @classmethod
    def expired_token(cls) -> OpenAIError:
        """401 ``token_expired``: an OAuth access token past its expiry."""
        return cls(
            401,
            "Provided authentication token is expired. Please try signing in again.",
            code="token_expired",
            type="invalid_request_error",
        )


@attrs.frozen
class OpenAIHang:
    """Accept the request and never answer it."""


@attrs.frozen
class OpenAIRequest:
    """A request as the fake saw it; secret-named headers are ``[REDACTED]``."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: Any
    size: int

    def input_items(self) -> list[Any]:
        """The Responses ``input`` list of a model call (the history codex resends)."""
        items = self.body.get("input") if isinstance(self.body, dict) else None
        return items if isinstance(items, list) else []

    def function_outputs(self) -> list[str]:
        """The ``output`` of every ``function_call_output`` item in the input."""
        return [
            str(item.get("output"))
            for item in self.input_items()
            if isinstance(item, dict) and item.get("type") == "function_call_output"
        ]


_Entry = OpenAIReply | OpenAIError | OpenAIHang
OpenAIScript = Sequence[_Entry] | Callable[[OpenAIRequest], _Entry]

# The variable codex_config_toml() tells codex to read the API key from.
FAKE_OPENAI_KEY_VAR = "AGENTRT_FAKE_OPENAI_KEY"
_WORD = re.compile(r"\S+\s*|\s+")


class FakeOpenAI:
    """The running fake: where it listens and what it was asked."""

    def __init__(self, script: OpenAIScript) -> None:
        self._script = script
        self._next = 0
        self._ids = itertools.count(1)
        self.port = 0
        self.requests: list[OpenAIRequest] = []

    @property
    def base_url(self) -> str:
        """The provider ``base_url``: ``http://127.0.0.1:PORT/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def model_calls(self) -> list[OpenAIRequest]:
        """The recorded model calls (``POST .../responses`` or ``.../chat/completions``), in
        order."""
        return [r for r in self.requests if _is_model_call(r)]

    @property
    def remaining(self) -> int:
        """Scripted entries not yet used (0 for a callable script)."""
        return len(self._script) - self._next if isinstance(self._script, Sequence) else 0

    def _record(self, request: HttpRequest) -> OpenAIRequest:
        headers, body = request.redacted_headers(), request.json_body()
        recorded = OpenAIRequest(request.method, request.path, headers, body, len(request.body))
        self.requests.append(recorded)
        return recorded

    def _entry(self, recorded: OpenAIRequest) -> _Entry:
        if not isinstance(self._script, Sequence):
            return self._script(recorded)
        if self._next >= len(self._script):
            return OpenAIError(500, "fake OpenAI: script exhausted", type="server_error")
        entry = self._script[self._next]
        self._next += 1
        return entry

    async def _handle(self, request: HttpRequest, writer: ResponseWriter) -> None:
        recorded = self._record(request)
        if not _is_model_call(recorded):
            await writer.send_json(404, _error_body(f"fake OpenAI has no {request.path}", None))
            return
        entry = self._entry(recorded)
        if isinstance(entry, OpenAIHang):
            await trio.sleep_forever()
        elif isinstance(entry, OpenAIError):
            headers = (
                [] if entry.retry_after is None else [("retry-after", f"{entry.retry_after:g}")]
            )
            body = _error_body(entry.message, entry.code, entry.type)
            if entry.resets_at is not None:
                body["error"]["resets_at"] = int(entry.resets_at)
                body["error"]["resets_in_seconds"] = max(int(entry.resets_at - time.time()), 0)
            await writer.send_json(entry.status, body, headers=headers)
        else:
            model = recorded.body.get("model", "") if isinstance(recorded.body, dict) else ""
            if is_chat_call(recorded.path):
                await self._stream_chat(entry, str(model), writer)
            else:
                await self._stream(entry, str(model), writer)

    async def _stream_chat(self, reply: OpenAIReply, model: str, writer: ResponseWriter) -> None:
        if any(isinstance(p, OpenAIItem) for p in reply.output):
            message = "fake OpenAI: chat completions have no such output item"
            await writer.send_json(500, _error_body(message, None, "server_error"))
            return
        words = [
            w for p in reply.output if isinstance(p, OpenAIMessage) for w in _WORD.findall(p.text)
        ]
        calls = [
            (p.call_id or f"call_fake{next(self._ids)}", p.name, _arguments(p.arguments))
            for p in reply.output
            if isinstance(p, OpenAIFunctionCall)
        ]
        u = reply.usage
        chunks = chat_chunks(
            f"chatcmpl-fake{next(self._ids)}",
            model,
            words,
            calls,
            (u.input_tokens, u.cached_tokens, u.output_tokens),
        )
        await writer.start_stream()
        for sent, chunk in enumerate(chunks):
            if sent == reply.cut_after:
                await writer.abort()
                return
            if sent == reply.hang_after:
                await trio.sleep_forever()
            await writer.send_data(chunk)
        await writer.end_stream()

    async def _stream(self, reply: OpenAIReply, model: str, writer: ResponseWriter) -> None:
        events = self._events(reply, model)
        await writer.start_stream()
        for sent, (name, data) in enumerate(events):
            if sent == reply.cut_after:
                await writer.abort()
                return
            if sent == reply.hang_after:
                await trio.sleep_forever()
            await writer.send_event(name, {"type": name, "sequence_number": sent, **data})
        await writer.end_stream()

    def _events(self, reply: OpenAIReply, model: str) -> list[tuple[str, dict[str, Any]]]:
        response = {"id": f"resp_fake{next(self._ids)}", "object": "response", "model": model}
        events: list[tuple[str, dict[str, Any]]] = [
            ("response.created", {"response": {**response, "status": "in_progress"}})
        ]
        done_items = []
        for index, part in enumerate(reply.output):
            item_id = f"item_fake{next(self._ids)}"
            started, deltas, done = self._item(part, item_id)
            where: dict[str, Any] = {"output_index": index, "item_id": item_id}
            done_items.append(done)
            events.append(("response.output_item.added", {"output_index": index, "item": started}))
            events += [(name, {**where, **data}) for name, data in deltas]
            events.append(("response.output_item.done", {"output_index": index, "item": done}))
        u = reply.usage
        usage: dict[str, Any] = {
            "input_tokens": u.input_tokens,
            "input_tokens_details": {"cached_tokens": u.cached_tokens},
            "output_tokens": u.output_tokens,
            "output_tokens_details": {"reasoning_tokens": u.reasoning_tokens},
            "total_tokens": u.input_tokens + u.output_tokens,
        }
        completed = {**response, "status": "completed", "output": done_items, "usage": usage}
        events.append(("response.completed", {"response": completed}))
        return events

    def _item(
        self, part: OpenAIMessage | OpenAIFunctionCall | OpenAIItem, item_id: str
    ) -> tuple[dict[str, Any], list[tuple[str, dict[str, Any]]], dict[str, Any]]:
        """The ``output_item.added`` item, the deltas between, the ``output_item.done`` item."""
        if isinstance(part, OpenAIItem):
            item = {"id": item_id, **part.payload}
            return item, [], item
        head: dict[str, Any] = {"id": item_id, "status": "in_progress"}
        if isinstance(part, OpenAIMessage):
            started = {**head, "type": "message", "role": "assistant", "content": []}
            content = [{"type": "output_text", "text": part.text, "annotations": []}]
            deltas = [
                ("response.output_text.delta", {"content_index": 0, "delta": word})
                for word in _WORD.findall(part.text)
            ]
            return started, deltas, {**started, "status": "completed", "content": content}
        arguments = _arguments(part.arguments)
        call_id = part.call_id or f"call_fake{next(self._ids)}"
        started = {**head, "type": "function_call", "name": part.name, "call_id": call_id}
        if part.namespace is not None:
            started["namespace"] = part.namespace
        deltas = [("response.function_call_arguments.delta", {"delta": arguments})]
        done = {**started, "status": "completed", "arguments": arguments}
        return {**started, "arguments": ""}, deltas, done

    def codex_config_toml(
        self,
        *,
        model: str = "gpt-5.5",
        env_key: str = FAKE_OPENAI_KEY_VAR,
        idle_timeout_ms: int = 10_000,
    ) -> str:
        """A ``$CODEX_HOME/config.toml`` that points codex at this fake and nowhere else.

        The provider gets no retries (a scripted failure is seen at once) and a stream idle
        timeout; ``model`` must be one codex's bundled catalog knows (else codex warns that
        it falls back to default metadata). Plugins and analytics are off and the update
        check too: with them on, codex 0.171.0 also connects to github.com, chatgpt.com and
        ab.chatgpt.com. ``env_key`` names the variable codex reads the API key from.
        """
        return (
            f'model = "{model}"\n'
            'model_provider = "agentrt-fake"\n'
            "check_for_update_on_startup = false\n\n"
            "[features]\nplugins = false\n\n"
            "[analytics]\nenabled = false\n\n"
            "[model_providers.agentrt-fake]\n"
            'name = "agentrt fake OpenAI"\n'
            f'base_url = "{self.base_url}"\n'
            'wire_api = "responses"\n'
            f'env_key = "{env_key}"\n'
            "request_max_retries = 0\n"
            "stream_max_retries = 0\n"
            f"stream_idle_timeout_ms = {idle_timeout_ms}\n"
        )


def _is_model_call(request: OpenAIRequest) -> bool:
    path = request.path.split("?", 1)[0]
    return request.method == "POST" and (path.endswith("/responses") or is_chat_call(path))


def _arguments(arguments: Any) -> str:
    return arguments if isinstance(arguments, str) else msgspec.json.encode(arguments).decode()


def _error_body(message: str, code: str | None, type_: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


@asynccontextmanager
async def open_fake_openai(script: OpenAIScript) -> AsyncIterator[FakeOpenAI]:
    """Serve a scripted fake OpenAI Responses API on a fresh loopback port.

    ``script`` is a sequence of entries used one per model call (``POST .../responses``),
    or a function from the `OpenAIRequest` to an entry. Past the end of a sequence the
    fake answers 500 "script exhausted". Other paths get 404 and are recorded too.

    Cancellation: leaving the block closes every connection, including hanging ones.
    """
    api = FakeOpenAI(script)
    async with open_http_server(api._handle) as port:
        api.port = port
        yield api
