"""The loopback fake of the Gemini generate-content API, spoken to over raw HTTP/1.1."""

from __future__ import annotations

import json
from typing import Any

import trio
from http_client import Answer, Client, connect

from agentrt.testing import (
    FAKE_GEMINI_KEY,
    FakeGemini,
    GeminiError,
    GeminiFunctionCall,
    GeminiHang,
    GeminiReply,
    GeminiRequest,
    GeminiText,
    GeminiUsage,
    open_fake_gemini,
)

STREAM = "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
HISTORY = {
    "contents": [
        {"role": "user", "parts": [{"text": "Run ls"}]},
        {"role": "model", "parts": [{"functionCall": {"name": "ls", "args": {}}}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "ls", "response": {"o": "a"}}}]},
    ]
}


async def client(port: int) -> Client:
    return await connect(port, path=STREAM, headers={"x-goog-api-key": FAKE_GEMINI_KEY})


def chunks(answer: Answer) -> list[Any]:
    """The ``data:`` payloads of an SSE body of unnamed events."""
    blocks = [b for b in answer.body.decode().split("\n\n") if b.strip()]
    assert all(b.startswith("data: ") for b in blocks), blocks
    return [json.loads(b.removeprefix("data: ")) for b in blocks]


async def test_a_text_streams_one_chunk_per_word_with_usage_on_the_last() -> None:
    usage = GeminiUsage(prompt_tokens=12, output_tokens=3, cached_tokens=4, thoughts_tokens=1)
    async with open_fake_gemini([GeminiReply.text("Hello there friend", usage=usage)]) as api:
        answer = await (await client(api.port)).request(body=HISTORY)
    assert answer.status == 200 and answer.complete
    sent = chunks(answer)
    parts = [c["candidates"][0]["content"]["parts"] for c in sent]
    assert parts == [[{"text": "Hello "}], [{"text": "there "}], [{"text": "friend"}]]
    assert {c["modelVersion"] for c in sent} == {"gemini-2.5-flash"}
    assert [c["candidates"][0].get("finishReason") for c in sent] == [None, None, "STOP"]
    assert sent[-1]["usageMetadata"] == {
        "promptTokenCount": 12,
        "candidatesTokenCount": 3,
        "cachedContentTokenCount": 4,
        "thoughtsTokenCount": 1,
        "totalTokenCount": 16,
    }
    assert "usageMetadata" not in sent[0]


async def test_requests_are_recorded_with_their_history_and_the_key_redacted() -> None:
    async with open_fake_gemini([GeminiReply.shell("ls -la")]) as api:
        answer = await (await client(api.port)).request(body=HISTORY)
    (call,) = [c["candidates"][0]["content"]["parts"] for c in chunks(answer)]
    assert call == [{"functionCall": {"name": "run_shell_command", "args": {"command": "ls -la"}}}]
    (recorded,) = api.model_calls
    assert isinstance(recorded, GeminiRequest) and recorded.stream
    assert recorded.model == "gemini-2.5-flash" and recorded.headers["x-goog-api-key"] != (
        FAKE_GEMINI_KEY
    )
    assert recorded.texts() == ["Run ls"] and recorded.texts("model") == []
    assert recorded.function_responses() == [{"name": "ls", "response": {"o": "a"}}]


async def test_a_whole_call_gets_one_json_body() -> None:
    reply = GeminiReply((GeminiText("a b"), GeminiFunctionCall("glob", {"pattern": "*"})))
    async with open_fake_gemini([reply]) as api:
        path = "/v1beta/models/gemini-2.5-flash-lite:generateContent"
        answer = await (await client(api.port)).request(path, body=HISTORY)
    assert answer.status == 200 and not api.model_calls[0].stream
    (candidate,) = answer.json()["candidates"]
    assert candidate["content"]["parts"] == [
        {"text": "a "},
        {"text": "b"},
        {"functionCall": {"name": "glob", "args": {"pattern": "*"}}},
    ]
    assert candidate["finishReason"] == "STOP"
    assert answer.json()["modelVersion"] == "gemini-2.5-flash-lite"


async def test_errors_carry_googles_body_and_the_status_name() -> None:
    script = [GeminiError(401, "API key not valid."), GeminiError(503, retry_after=2)]
    async with open_fake_gemini(script) as api:
        c = await client(api.port)
        first, second = await c.request(body={}), await c.request(body={})
        exhausted = await c.request(body={})
    assert first.status == 401 and first.json() == {
        "error": {"code": 401, "message": "API key not valid.", "status": "UNAUTHENTICATED"}
    }
    assert second.json()["error"]["status"] == "UNAVAILABLE"
    assert second.headers["retry-after"] == "2"
    assert exhausted.status == 500 and "script exhausted" in exhausted.json()["error"]["message"]
    assert api.remaining == 0


async def test_other_paths_are_404_and_recorded() -> None:
    async with open_fake_gemini([]) as api:
        answer = await (await client(api.port)).request("/v1beta/models", method="GET")
    assert answer.status == 404 and answer.json()["error"]["status"] == "NOT_FOUND"
    assert [r.path for r in api.requests] == ["/v1beta/models"] and api.model_calls == []


async def test_a_cut_stream_closes_after_n_chunks() -> None:
    async with open_fake_gemini([GeminiReply((GeminiText("a b c d"),), cut_after=2)]) as api:
        answer = await (await client(api.port)).request(body={})
    assert answer.status == 200 and not answer.complete
    assert len(chunks(answer)) == 2


async def test_a_hang_answers_nothing_until_the_fake_closes() -> None:
    with trio.fail_after(5):
        async with open_fake_gemini([GeminiHang()]) as api:
            c = await client(api.port)
            await c.send(body={})
            with trio.move_on_after(0.2) as waited:
                await c._fill()
        assert waited.cancelled_caught
        while await c._fill():  # leaving the block closed the connection
            pass
    assert c.buf == b""


def test_the_env_points_gemini_cli_at_the_fake_only() -> None:
    api = FakeGemini([])
    api.port = 4321
    assert api.gemini_env() == {
        "GOOGLE_GEMINI_BASE_URL": "http://127.0.0.1:4321",
        "GEMINI_API_KEY": FAKE_GEMINI_KEY,
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
    }
