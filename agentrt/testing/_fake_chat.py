"""The fake OpenAI API's replies on the chat-completions wire (``POST .../chat/completions``
with ``stream: true``): one ``chat.completion.chunk`` per word of text, one per tool call
(its whole arguments at once), a last chunk with the finish reason and the usage, then the
``[DONE]`` sentinel, as the OpenAI-compatible servers users run locally stream them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

_encode = msgspec.json.encode


def is_chat_call(path: str) -> bool:
    """Whether a request path is a chat-completions call."""
    return path.split("?", 1)[0].endswith("/chat/completions")


def chat_chunks(
    completion_id: str,
    model: str,
    words: Sequence[str],
    calls: Sequence[tuple[str, str, str]],
    usage: tuple[int, int, int],
) -> list[bytes]:
    """The data lines of one streamed completion: ``words`` of assistant text, then the tool
    ``calls`` (id, name, JSON arguments); ``usage`` is (input, cached input, output)."""

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        head = {"id": completion_id, "object": "chat.completion.chunk", "model": model}
        return _encode({**head, "choices": [choice], **extra})

    chunks = [chunk({"role": "assistant", "content": ""})]
    chunks += [chunk({"content": word}) for word in words]
    for index, (call_id, name, arguments) in enumerate(calls):
        function = {"name": name, "arguments": arguments}
        call = {"index": index, "id": call_id, "type": "function", "function": function}
        chunks.append(chunk({"tool_calls": [call]}))
    prompt, cached, completion = usage
    counts = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
    }
    chunks.append(chunk({}, "tool_calls" if calls else "stop", usage=counts))
    return [*chunks, b"[DONE]"]
