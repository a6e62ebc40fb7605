"""A loopback fake of the Anthropic Messages API, scripted per test, on trio.

The real ``claude`` binary runs as a subprocess and talks HTTP/1.1 to this server; the
server lives in the test's own trio loop, so a test scripts replies, starts the CLI and
asserts on the recorded requests without threads.
"""

from __future__ import annotations

import itertools
import re
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, Literal, TypeAlias

import attrs
import msgspec
import trio
from trio_util import AsyncValue

from .._redact import redact_mapping
from ._http import HttpRequest, ResponseWriter, open_http_server

_SSE_TYPE = "text/event-stream; charset=utf-8"


@attrs.frozen
class AnthropicText:
    """An assistant message holding one text block (``stop_reason`` ``end_turn``)."""

    text: str
    input_tokens: int = 10
    output_tokens: int = 5
    model: str | None = None  # None: echo the request's model


@attrs.frozen
class AnthropicToolUse:
    """An assistant message asking for one tool call (``stop_reason`` ``tool_use``), optionally
    after a text block; the CLI runs the tool and sends the result in its next request."""

    name: str
    input: Mapping[str, Any]
    text: str | None = None
    id: str | None = None  # None: a fresh "toolu_fake_<n>"
    input_tokens: int = 10
    output_tokens: int = 5
    model: str | None = None

    @classmethod
    def tool_search(cls, *names: str) -> AnthropicToolUse:
        """A call of Claude Code's ToolSearch that loads the deferred tools ``names``: the
        CLI (measured with 2.1.332) offers MCP tools only by name in a system text, so a
        model loads their schemas this way before it calls them."""
        return cls("ToolSearch", {"query": f"select:{','.join(names)}", "max_results": 5})

    @classmethod
    def mcp(cls, server: str, tool: str, input: Mapping[str, Any]) -> AnthropicToolUse:
        """A call of MCP server ``server``'s tool ``tool`` (``mcp__<server>__<tool>``)."""
        return cls(f"mcp__{server}__{tool}", input)


@attrs.frozen
class AnthropicError:
    """An error status with the API's error body; see the constructors for the usual ones."""

    status: int
    error_type: str
    message: str
    headers: Mapping[str, str] = attrs.field(factory=dict)

    @classmethod
    def authentication(cls) -> AnthropicError:
        """401 ``authentication_error``, as for a wrong API key."""
        return cls(401, "authentication_error", "invalid x-api-key")

    @classmethod
    def rate_limit(cls, retry_after: int = 1) -> AnthropicError:
        """429 ``rate_limit_error`` with a ``retry-after`` header (seconds)."""
        return cls(
            429,
            "rate_limit_error",
            "Number of request tokens has exceeded your per-minute rate limit",
            {"retry-after": str(retry_after)},
        )

    @classmethod
    def usage_limit(cls, resets_at: float, window: str = "five_hour") -> AnthropicError:
        """429 for a subscription whose usage ``window`` (``five_hour``, ``seven_day``, ...)
        is spent until ``resets_at`` (epoch seconds), with the API's unified rate-limit
        headers (which a CLI logged in with OAuth reads: `FakeAnthropic.claude_env` with
        ``login="oauth"``) and ``retry-after`` the seconds until the reset."""
        reset = str(int(resets_at))
        return cls(
            429,
            "rate_limit_error",
            "This request would exceed your account's rate limit. Please try again later.",
            {
                "anthropic-ratelimit-unified-status": "rejected",
                "anthropic-ratelimit-unified-reset": reset,
                "anthropic-ratelimit-unified-representative-claim": window,
                "retry-after": str(max(int(resets_at - time.time()), 0)),
            },
        )

    @classmethod
    def expired_token(cls) -> AnthropicError:
        """401 ``authentication_error`` for an OAuth access token past its expiry."""
        return cls(
            401,
            "authentication_error",
            "OAuth token has expired. Please obtain a new token or refresh your existing token.",
        )

    @classmethod
    def prompt_too_long(cls, tokens: int = 210_000, limit: int = 200_000) -> AnthropicError:
        """400 ``invalid_request_error``: the request's ``tokens`` exceed the model's
        context window of ``limit``."""
        return cls(
            400,
            "invalid_request_error",
            f"prompt is too long: {tokens} tokens > {limit} maximum",
        )

    @classmethod
    def overloaded(cls) -> AnthropicError:
        """529 ``overloaded_error``."""
        return cls(529, "overloaded_error", "Overloaded")

    @classmethod
    def server(cls) -> AnthropicError:
        """500 ``api_error``."""
        return cls(500, "api_error", "Internal server error")


@attrs.frozen
class AnthropicStreamError:
    """A stream that starts well (status 200) and then carries an ``error`` event, as the real
    API does when it overloads mid-answer. To a non-streaming request: that status and body."""

    error_type: str = "overloaded_error"
    message: str = "Overloaded"
    status: int = 529


@attrs.frozen
class AnthropicCutStream:
    """The connection closes mid-reply: after the text deltas of ``text`` when streaming (no
    content_block_stop, no message_stop), after half of the JSON body otherwise. ``linger``:
    seconds between the last bytes and the close; with 0 the client may see the close before
    it has handled what came just ahead of it."""

    text: str = "Partial ans"
    linger: float = 0.0


@attrs.frozen
class AnthropicHang:
    """No reply ever comes: the server holds the connection until the client closes it.
    ``mid_stream``: first send the status, ``message_start`` and a ``ping``, then go silent
    (what a stream idle timeout guards against) instead of staying silent from the start."""

    mid_stream: bool = False


@attrs.frozen
class AnthropicHeld:
    """``reply``, sent once the test sets ``release``: the model call stays in flight until
    then (what a test needs to act while the model is thinking, at no time of its own)."""

    reply: AnthropicText | AnthropicToolUse
    release: trio.Event = attrs.field(eq=False)


AnthropicReply: TypeAlias = (
    AnthropicText
    | AnthropicToolUse
    | AnthropicError
    | AnthropicStreamError
    | AnthropicCutStream
    | AnthropicHang
    | AnthropicHeld
)


@attrs.frozen
class RecordedRequest:
    """One request as the server received it; credential headers are redacted."""

    method: str
    path: str  # with the query string, e.g. "/v1/messages?beta=true"
    headers: Mapping[str, str]  # names lower-cased
    body: Any  # the decoded JSON body; the raw text if it was not JSON; None if empty

    @property
    def is_message(self) -> bool:
        """A model call (``POST /v1/messages``), the kind of request a script answers."""
        return self.method == "POST" and self.path.split("?", 1)[0] == "/v1/messages"

    @property
    def stream(self) -> bool:
        """The request asked for a streamed (SSE) answer."""
        return isinstance(self.body, dict) and self.body.get("stream") is True

    @property
    def messages(self) -> list[Any]:
        """The body's ``messages`` array (empty if there is none)."""
        messages = self.body.get("messages") if isinstance(self.body, dict) else None
        return messages if isinstance(messages, list) else []

    def texts(self, role: str | None = None) -> list[str]:
        """Every text in the conversation this request carries, in order: text blocks, string
        contents and the text of tool results; only the messages of ``role`` if given."""
        out: list[str] = []
        for message in self.messages:
            if isinstance(message, dict) and role in (None, message.get("role")):
                _collect_texts(message.get("content"), out)
        return out

    def last_user_text(self) -> str:
        """The last text of the last user message: usually the prompt of this turn."""
        for message in reversed(self.messages):
            if isinstance(message, dict) and message.get("role") == "user":
                texts: list[str] = []
                _collect_texts(message.get("content"), texts)
                if texts:
                    return texts[-1]
        return ""

    def tool_results(self) -> list[Mapping[str, Any]]:
        """The ``tool_result`` blocks of the last message (what the CLI sends after a tool ran)."""
        if not self.messages or not isinstance(self.messages[-1], dict):
            return []
        content = self.messages[-1].get("content")
        if not isinstance(content, list):
            return []
        return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]


def _collect_texts(content: Any, out: list[str]) -> None:
    if isinstance(content, str):
        out.append(content)
    elif isinstance(content, list):
        for block in content:
            if isinstance(block, dict) and block.get("type") == "text":
                out.append(str(block.get("text", "")))
            elif isinstance(block, dict) and block.get("type") == "tool_result":
                _collect_texts(block.get("content"), out)


# A script is either the replies to successive model calls, in order, or a function that
# picks the reply for each model call from the request.
AnthropicScript: TypeAlias = Iterable[AnthropicReply] | Callable[[RecordedRequest], AnthropicReply]


@attrs.define(eq=False)
class FakeAnthropic:
    """A running fake API; build it with `open_fake_anthropic`. ``base_url`` is what the
    client needs (``http://127.0.0.1:PORT``); ``requests`` lists every request received."""

    base_url: str
    requests: list[RecordedRequest] = attrs.field(factory=list)
    _queue: deque[AnthropicReply] = attrs.field(factory=deque)
    _picker: Callable[[RecordedRequest], AnthropicReply] | None = None
    _count: AsyncValue[int] = attrs.field(factory=lambda: AsyncValue(0))
    _ids: Iterator[int] = attrs.field(factory=lambda: itertools.count(1))

    @property
    def message_requests(self) -> list[RecordedRequest]:
        """The model calls (``POST /v1/messages``) received so far."""
        return [r for r in self.requests if r.is_message]

    def set_script(self, script: AnthropicScript) -> None:
        """Replace the replies still to come."""
        self._queue.clear()
        self._picker = None
        if callable(script):
            self._picker = script
        else:
            self._queue.extend(script)

    def add_replies(self, *replies: AnthropicReply) -> None:
        """Append replies to a sequence script (e.g. between two turns of one test)."""
        if self._picker is not None:
            raise TypeError("this fake answers with a function; use set_script to replace it")
        self._queue.extend(replies)

    async def wait_requests(self, count: int = 1) -> list[RecordedRequest]:
        """Wait until at least ``count`` requests of any kind were received; return them all.

        Cancellation: a plain wait, safe to cancel (e.g. under ``trio.fail_after``).
        """
        await self._count.wait_value(lambda n: n >= count)
        return list(self.requests)

    def claude_env(
        self,
        home: str,
        *,
        api_timeout_ms: int = 10_000,
        stream_idle_timeout_ms: int = 10_000,
        login: Literal["api_key", "oauth"] = "api_key",
    ) -> dict[str, str]:
        """Environment for the real ``claude`` CLI to talk to this fake and nothing else.

        ``home`` must be a fresh directory (the CLI keeps settings and transcripts there). The
        CLI's own retries are off and its timeouts short, so a failing reply costs seconds.
        The loopback addresses bypass any proxy the environment names (the CLI honours
        HTTP(S)_PROXY even for 127.0.0.1). ``login``: a dummy API key, or a dummy OAuth
        token (``CLAUDE_CODE_OAUTH_TOKEN``, a subscription login: only then does the CLI
        read a usage limit's unified rate-limit headers).
        """
        credential = (
            {"CLAUDE_CODE_OAUTH_TOKEN": "sk-ant-oat01-fake-0000000000000000"}
            if login == "oauth"
            else {"ANTHROPIC_API_KEY": "sk-ant-fake-00000000000000000000"}
        )
        return {
            "HOME": home,
            "ANTHROPIC_BASE_URL": self.base_url,
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
            **credential,
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "CLAUDE_CODE_MAX_RETRIES": "0",
            "API_TIMEOUT_MS": str(api_timeout_ms),
            "CLAUDE_BYTE_STREAM_IDLE_TIMEOUT_MS": str(stream_idle_timeout_ms),
        }

    def _record(self, request: RecordedRequest) -> None:
        self.requests.append(request)
        self._count.value = len(self.requests)

    def _next_reply(self, request: RecordedRequest) -> AnthropicReply:
        if self._picker is not None:
            return self._picker(request)
        if self._queue:
            return self._queue.popleft()
        used = len(self.message_requests) - 1
        message = f"fake Anthropic API: script exhausted after {used} replies"
        return AnthropicError(500, "api_error", message)

    def _next_id(self) -> int:
        return next(self._ids)

    def _record_http(self, request: HttpRequest) -> RecordedRequest:
        body: Any = None
        if request.body:
            try:
                body = msgspec.json.decode(request.body)
            except msgspec.DecodeError:
                body = request.body.decode("utf-8", errors="replace")
        recorded = RecordedRequest(
            method=request.method,
            path=request.path,
            headers=redact_mapping(dict(request.headers)),
            body=body,
        )
        self._record(recorded)
        return recorded

    async def _handle(self, http_request: HttpRequest, writer: ResponseWriter) -> None:
        request = self._record_http(http_request)
        n = self._next_id()
        request_id = f"req_fake_{n}"
        id_header = [("request-id", request_id)]
        route = request.path.split("?", 1)[0]
        if request.method == "POST" and route == "/v1/messages/count_tokens":
            estimate = max(1, len(msgspec.json.encode(request.body)) // 4)
            await writer.send_json(200, {"input_tokens": estimate}, headers=id_header)
            return
        if not request.is_message:
            body = _error_body("not_found_error", f"no route {request.path}", request_id)
            await writer.send_json(404, body, headers=id_header)
            return
        reply = self._next_reply(request)
        if isinstance(reply, AnthropicHeld):
            await reply.release.wait()
            reply = reply.reply
        body_model = request.body.get("model") if isinstance(request.body, dict) else None
        model = body_model if isinstance(body_model, str) else "claude-fake"
        match reply:
            case AnthropicText() | AnthropicToolUse():
                message = _message(reply, f"msg_fake_{n}", reply.model or model, n)
                if request.stream:
                    await _send_sse(writer, _stream_events(message), id_header)
                else:
                    await writer.send_json(200, message, headers=id_header)
            case AnthropicError():
                body = _error_body(reply.error_type, reply.message, request_id)
                headers = [*id_header, *reply.headers.items()]
                await writer.send_json(reply.status, body, headers=headers)
            case AnthropicStreamError():
                body = _error_body(reply.error_type, reply.message, request_id)
                if not request.stream:
                    await writer.send_json(reply.status, body, headers=id_header)
                    return
                start = _message(AnthropicText(""), f"msg_fake_{n}", model, n)
                events = [*itertools.islice(_stream_events(start), 2), ("error", body)]
                await _send_sse(writer, events, id_header)
            case AnthropicCutStream():
                message = _message(AnthropicText(reply.text), f"msg_fake_{n}", model, n)
                if request.stream:
                    until_cut = itertools.takewhile(
                        lambda event: event[0] != "content_block_stop", _stream_events(message)
                    )
                    await _send_sse(writer, until_cut, id_header, finish=False)
                else:
                    data = msgspec.json.encode(message)
                    await writer.send(200, data, headers=id_header, cut=len(data) // 2)
                # The response is unfinished: the server closes the connection after this.
                await trio.sleep(reply.linger)
            case AnthropicHang():
                if reply.mid_stream and request.stream:
                    message = _message(AnthropicText(""), f"msg_fake_{n}", model, n)
                    first = itertools.islice(_stream_events(message), 2)
                    await _send_sse(writer, first, id_header, finish=False)
                await writer.hang()


@asynccontextmanager
async def open_fake_anthropic(
    script: AnthropicScript = (), *, host: str = "127.0.0.1", port: int = 0
) -> AsyncIterator[FakeAnthropic]:
    """Serve a fake Anthropic Messages API on ``host`` (an ephemeral port by default).

    Model calls are answered from ``script``: a sequence of replies taken in order (one per
    model call, the CLI's non-streaming retry included), or a function of the request. When a
    sequence runs out, the fake answers 500 "script exhausted". ``count_tokens`` gets an
    estimate; any other path a 404. Every request is recorded in ``api.requests``. An
    exception raised by a script function cancels the block and is raised by this context
    manager as itself.

    Cancellation: leaving the block cancels the server and every open connection, including
    connections held by `AnthropicHang` replies.
    """
    api = FakeAnthropic(base_url="")
    api.set_script(script)
    async with open_http_server(api._handle, host=host, port=port) as bound_port:
        api.base_url = f"http://{host}:{bound_port}"
        yield api


async def _send_sse(
    writer: ResponseWriter,
    events: Iterable[tuple[str, Any]],
    headers: Sequence[tuple[str, str]],
    *,
    finish: bool = True,
) -> None:
    # Chunked, one chunk per event, as the API does.
    await writer.start_stream(content_type=_SSE_TYPE, headers=headers)
    for name, data in events:
        await writer.send_event(name, data)
    if finish:
        await writer.end_stream()


def _error_body(error_type: str, message: str, request_id: str) -> dict[str, Any]:
    return {
        "type": "error",
        "error": {"type": error_type, "message": message},
        "request_id": request_id,
    }


def _message(
    reply: AnthropicText | AnthropicToolUse, message_id: str, model: str, n: int
) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if isinstance(reply, AnthropicText):
        content.append({"type": "text", "text": reply.text})
        stop_reason = "end_turn"
    else:
        if reply.text is not None:
            content.append({"type": "text", "text": reply.text})
        tool_id = reply.id or f"toolu_fake_{n}"
        tool = {"type": "tool_use", "id": tool_id, "name": reply.name, "input": reply.input}
        content.append(tool)
        stop_reason = "tool_use"
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {
            "input_tokens": reply.input_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": reply.output_tokens,
        },
    }


_TEXT_PIECES = re.compile(r"\s*\S+\s*|\s+")


def _stream_events(message: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    """The SSE events that stream ``message``: message_start, ping, a start/delta.../stop
    triple per content block, message_delta (stop reason, output usage), message_stop.

    Made one by one as they are sent: a long text's thousands of deltas built at once held
    the loop, and every task of the program under test beside it, for a second under load."""
    usage = message["usage"]
    start = {
        **message,
        "content": [],
        "stop_reason": None,
        "usage": {**usage, "output_tokens": 1},
    }
    yield ("message_start", {"type": "message_start", "message": start})
    yield ("ping", {"type": "ping"})
    for index, block in enumerate(message["content"]):
        deltas: Iterator[dict[str, Any]]
        if block["type"] == "text":
            empty: dict[str, Any] = {"type": "text", "text": ""}
            pieces = _TEXT_PIECES.finditer(block["text"])
            deltas = ({"type": "text_delta", "text": piece[0]} for piece in pieces)
        else:
            empty = {**block, "input": {}}
            encoded = msgspec.json.encode(block["input"]).decode()
            cut = len(encoded) // 2
            parts = ["", encoded[:cut], encoded[cut:]]
            deltas = ({"type": "input_json_delta", "partial_json": p} for p in parts)
        started = {"type": "content_block_start", "index": index, "content_block": empty}
        yield ("content_block_start", started)
        for delta in deltas:
            yield (
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": delta},
            )
        yield ("content_block_stop", {"type": "content_block_stop", "index": index})
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": usage["output_tokens"]},
        },
    )
    yield ("message_stop", {"type": "message_stop"})
