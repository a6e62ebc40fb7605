"""A loopback fake of the Gemini API's generate-content calls: streamed
(``POST /v1beta/models/<model>:streamGenerateContent?alt=sse``), the one Gemini CLI makes
for each model turn, and whole (``:generateContent``), which it makes to compress a long
history or to route an unpinned model.

It answers from a script: text replies, function calls (Gemini CLI's shell tool is
``run_shell_command`` with ``{"command": ...}``), HTTP errors with Google's error body,
streams cut mid-body and streams that hang. Every request is recorded with its credentials
redacted, so a test sees the history the CLI sent.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from http import HTTPStatus
from typing import Any

import attrs
import msgspec

from ._http import HttpRequest, ResponseWriter, open_http_server

__all__ = [
    "FAKE_GEMINI_KEY",
    "FakeGemini",
    "GeminiError",
    "GeminiFunctionCall",
    "GeminiHang",
    "GeminiReply",
    "GeminiRequest",
    "GeminiScript",
    "GeminiText",
    "GeminiUsage",
    "open_fake_gemini",
]

# The dummy API key a CLI sends the fake (as ``x-goog-api-key``); the fake takes any.
FAKE_GEMINI_KEY = "fake-gemini-key-0000000000000000"


@attrs.frozen
class GeminiText:
    """A text part, streamed as one chunk per word."""

    text: str


@attrs.frozen
class GeminiFunctionCall:
    """A function call part (the model asks the CLI to run a tool)."""

    name: str
    args: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class GeminiUsage:
    """The ``usageMetadata`` of the last chunk."""

    prompt_tokens: int = 10
    output_tokens: int = 5
    cached_tokens: int = 0
    thoughts_tokens: int = 0


@attrs.frozen
class GeminiReply:
    """One streamed answer. ``cut_after`` / ``hang_after``: after that many SSE events the
    connection is closed mid-body / the server goes silent until the client leaves.
    ``model``: the ``modelVersion`` reported (None: the model the request named)."""

    parts: tuple[GeminiText | GeminiFunctionCall, ...]
    usage: GeminiUsage = GeminiUsage()
    finish_reason: str = "STOP"
    model: str | None = None
    cut_after: int | None = None
    hang_after: int | None = None

    @classmethod
    def text(cls, message: str, *, usage: GeminiUsage = GeminiUsage()) -> GeminiReply:
        """A reply that is one text."""
        return cls((GeminiText(message),), usage=usage)

    @classmethod
    def call(
        cls, name: str, args: Mapping[str, Any], *, usage: GeminiUsage = GeminiUsage()
    ) -> GeminiReply:
        """A reply that is one call of the CLI's tool ``name``."""
        return cls((GeminiFunctionCall(name, args),), usage=usage)

    @classmethod
    def shell(cls, command: str, *, usage: GeminiUsage = GeminiUsage()) -> GeminiReply:
        """A call of Gemini CLI's shell tool, ``run_shell_command`` (offered only in an
        approval mode that lets it run headless: ``yolo``)."""
        return cls.call("run_shell_command", {"command": command}, usage=usage)


@attrs.frozen
class GeminiError:
    """An HTTP error with Google's error body ``{"error": {"code", "message", "status"}}``.
    ``status_name`` defaults to the name Google gives the HTTP status (401
    ``UNAUTHENTICATED``, 429 ``RESOURCE_EXHAUSTED``, 503 ``UNAVAILABLE``, ...)."""

    status: int
    message: str = "fake failure"
    status_name: str | None = None
    retry_after: float | None = None

    @classmethod
    def usage_limit(cls, retry_in: float = 3600) -> GeminiError:
        """429 ``RESOURCE_EXHAUSTED``: the project's quota is spent for ``retry_in`` seconds,
        worded as the real API words it (a delay that long is not retried by the CLI)."""
        return cls(
            429,
            "You exceeded your current quota, please check your plan and billing details. "
            "Quota exceeded for metric: generativelanguage.googleapis.com/"
            f"generate_content_free_tier_requests, limit: 250. Please retry in {retry_in:g}s.",
        )

    @classmethod
    def context_exceeded(cls, tokens: int = 1_200_000, limit: int = 1_048_576) -> GeminiError:
        """400 ``INVALID_ARGUMENT``: the request's ``tokens`` exceed the model's ``limit``."""
        return cls(
            400,
            f"The input token count ({tokens}) exceeds the maximum number of tokens allowed "
            f"({limit}).",
        )


@attrs.frozen
class GeminiHang:
    """Accept the request and never answer it."""


@attrs.frozen
class GeminiRequest:
    """A request as the fake saw it; secret-named headers (``x-goog-api-key``) are
    ``[REDACTED]``."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: Any
    size: int

    @property
    def stream(self) -> bool:
        """A streamed call (``:streamGenerateContent``), not a whole one."""
        found = _MODEL_CALL.match(self.path)
        return found is not None and found.group(2) == "streamGenerateContent"

    @property
    def model(self) -> str:
        """The model the path names (``/v1beta/models/<model>:...``), or ""."""
        found = _MODEL_CALL.match(self.path)
        return found.group(1) if found else ""

    def contents(self) -> list[Any]:
        """The ``contents`` list of a model call: the history the CLI sends."""
        items = self.body.get("contents") if isinstance(self.body, dict) else None
        return items if isinstance(items, list) else []

    def texts(self, role: str | None = None) -> list[str]:
        """Every text part of the history, in order; only ``role``'s if given."""
        return [
            str(part["text"])
            for content in self.contents()
            if isinstance(content, dict) and role in (None, content.get("role"))
            for part in _parts(content)
            if "text" in part
        ]

    def function_responses(self) -> list[Mapping[str, Any]]:
        """Every ``functionResponse`` part of the history (the tools' results), in order."""
        return [
            part["functionResponse"]
            for content in self.contents()
            for part in _parts(content)
            if isinstance(part.get("functionResponse"), dict)
        ]


def _parts(content: Any) -> list[Mapping[str, Any]]:
    parts = content.get("parts") if isinstance(content, dict) else None
    return [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []


_Entry = GeminiReply | GeminiError | GeminiHang
GeminiScript = Sequence[_Entry] | Callable[[GeminiRequest], _Entry]

_MODEL_CALL = re.compile(
    r"/v1beta/models/([^/:?]+):(streamGenerateContent|generateContent)(?:\?|$)"
)
_WORD = re.compile(r"\S+\s*|\s+")
_encode = msgspec.json.Encoder().encode
# Google's names for the HTTP statuses of its errors (google.rpc.Code).
_STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


class FakeGemini:
    """The running fake: where it listens and what it was asked."""

    def __init__(self, script: GeminiScript) -> None:
        self._script = script
        self._next = 0
        self.port = 0
        self.requests: list[GeminiRequest] = []

    @property
    def base_url(self) -> str:
        """What ``GOOGLE_GEMINI_BASE_URL`` must be: ``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def model_calls(self) -> list[GeminiRequest]:
        """The recorded generate-content calls (streamed or whole), in order."""
        return [r for r in self.requests if _is_model_call(r)]

    @property
    def remaining(self) -> int:
        """Scripted entries not yet used (0 for a callable script)."""
        return len(self._script) - self._next if isinstance(self._script, Sequence) else 0

    def gemini_env(self) -> dict[str, str]:
        """The variables that point Gemini CLI at this fake: its base URL, a dummy API key,
        and loopback outside any proxy. Headless Gemini CLI also needs its settings to
        select the ``gemini-api-key`` auth type: a base URL alone selects a gateway auth,
        which it refuses (exit 41); the gemini backend's settings file selects it."""
        return {
            "GOOGLE_GEMINI_BASE_URL": self.base_url,
            "GEMINI_API_KEY": FAKE_GEMINI_KEY,
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
        }

    def _record(self, request: HttpRequest) -> GeminiRequest:
        headers, body = request.redacted_headers(), request.json_body()
        recorded = GeminiRequest(request.method, request.path, headers, body, len(request.body))
        self.requests.append(recorded)
        return recorded

    def _entry(self, recorded: GeminiRequest) -> _Entry:
        if not isinstance(self._script, Sequence):
            return self._script(recorded)
        if self._next >= len(self._script):
            return GeminiError(500, "fake Gemini: script exhausted")
        entry = self._script[self._next]
        self._next += 1
        return entry

    async def _handle(self, request: HttpRequest, writer: ResponseWriter) -> None:
        recorded = self._record(request)
        if not _is_model_call(recorded):
            error = GeminiError(404, f"fake Gemini has no {request.method} {request.path}")
            await writer.send_json(404, _error_body(error))
            return
        entry = self._entry(recorded)
        if isinstance(entry, GeminiHang):
            await writer.hang()
        elif isinstance(entry, GeminiError):
            headers = (
                [] if entry.retry_after is None else [("retry-after", f"{entry.retry_after:g}")]
            )
            await writer.send_json(entry.status, _error_body(entry), headers=headers)
        elif recorded.stream:
            await _stream(entry, entry.model or recorded.model, writer)
        else:
            await writer.send_json(200, _whole(entry, entry.model or recorded.model))


async def _stream(reply: GeminiReply, model: str, writer: ResponseWriter) -> None:
    chunks = _chunks(reply, model)
    await writer.start_stream()
    for sent, chunk in enumerate(chunks):
        if sent == reply.cut_after:
            await writer.abort()
            return
        if sent == reply.hang_after:
            await writer.hang()
            return
        await writer.send_data(_encode(chunk))
    await writer.end_stream()


def _chunks(reply: GeminiReply, model: str) -> list[dict[str, Any]]:
    """One chunk per word of each text and one per function call; the last chunk carries
    the finish reason and the usage, as the real API's does."""
    parts: list[dict[str, Any]] = []
    for part in reply.parts:
        if isinstance(part, GeminiText):
            parts += [{"text": word} for word in _WORD.findall(part.text)]
        else:
            parts.append({"functionCall": {"name": part.name, "args": dict(part.args)}})
    candidates: list[dict[str, Any]] = [
        {"content": {"parts": [part], "role": "model"}, "index": 0}
        for part in parts or [{"text": ""}]
    ]
    candidates[-1]["finishReason"] = reply.finish_reason
    chunks: list[dict[str, Any]] = [
        {"candidates": [candidate], "modelVersion": model} for candidate in candidates
    ]
    u = reply.usage
    chunks[-1]["usageMetadata"] = {
        "promptTokenCount": u.prompt_tokens,
        "candidatesTokenCount": u.output_tokens,
        "cachedContentTokenCount": u.cached_tokens,
        "thoughtsTokenCount": u.thoughts_tokens,
        "totalTokenCount": u.prompt_tokens + u.output_tokens + u.thoughts_tokens,
    }
    return chunks


def _whole(reply: GeminiReply, model: str) -> dict[str, Any]:
    """The answer of a whole call: the stream's chunks as one candidate."""
    chunks = _chunks(reply, model)
    parts = [part for chunk in chunks for part in chunk["candidates"][0]["content"]["parts"]]
    last = chunks[-1]
    candidate = {**last["candidates"][0], "content": {"parts": parts, "role": "model"}}
    return {**last, "candidates": [candidate]}


def _is_model_call(request: GeminiRequest) -> bool:
    return request.method == "POST" and _MODEL_CALL.match(request.path) is not None


def _error_body(error: GeminiError) -> dict[str, Any]:
    try:
        fallback = HTTPStatus(error.status).name
    except ValueError:
        fallback = "UNKNOWN"
    name = error.status_name or _STATUS_NAMES.get(error.status, fallback)
    return {"error": {"code": error.status, "message": error.message, "status": name}}


@asynccontextmanager
async def open_fake_gemini(script: GeminiScript) -> AsyncIterator[FakeGemini]:
    """Serve a scripted fake Gemini API on a fresh loopback port.

    ``script`` is a sequence of entries used one per model call (``POST
    /v1beta/models/<model>:streamGenerateContent`` or ``:generateContent``; a reply to a
    whole call comes as one JSON body), or a function from the
    `GeminiRequest` to an entry. Past the end of a sequence the fake answers 500 "script
    exhausted". Other paths get 404 and are recorded too (a CLI that calls something else
    shows up in ``requests``).

    Cancellation: leaving the block closes every connection, including hanging ones.
    """
    api = FakeGemini(script)
    async with open_http_server(api._handle) as port:
        api.port = port
        yield api
