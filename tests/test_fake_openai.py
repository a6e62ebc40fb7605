"""The loopback fake of the OpenAI Responses API, spoken to over raw HTTP/1.1."""

from __future__ import annotations

import json
import tomllib

import pytest
import trio
from http_client import Client, connect

from agentrt.testing import (
    OpenAIError,
    OpenAIFunctionCall,
    OpenAIHang,
    OpenAIItem,
    OpenAIMessage,
    OpenAIReply,
    OpenAIRequest,
    OpenAIUsage,
    open_fake_openai,
)


async def client(port: int) -> Client:
    return await connect(
        port, path="/v1/responses", headers={"authorization": "Bearer sk-test-1234567890abcdef"}
    )


async def test_text_reply_streams_the_responses_event_sequence() -> None:
    usage = OpenAIUsage(input_tokens=12, output_tokens=3, cached_tokens=4, reasoning_tokens=1)
    async with open_fake_openai([OpenAIReply.text("Hello there friend", usage=usage)]) as api:
        answer = await (await client(api.port)).request(body={"model": "gpt-5.5", "input": []})
    assert answer.status == 200 and answer.complete
    assert answer.headers["content-type"] == "text/event-stream"
    events = answer.events()
    assert [name for name, _ in events] == [
        "response.created",
        "response.output_item.added",
        *["response.output_text.delta"] * 3,
        "response.output_item.done",
        "response.completed",
    ]
    assert all(data["type"] == name for name, data in events)
    assert [data["sequence_number"] for _, data in events] == list(range(len(events)))
    assert (
        "".join(d["delta"] for n, d in events if n.endswith("text.delta")) == "Hello there friend"
    )
    done = events[-2][1]["item"]
    assert done["type"] == "message" and done["role"] == "assistant"
    assert done["content"] == [
        {"type": "output_text", "text": "Hello there friend", "annotations": []}
    ]
    response = events[-1][1]["response"]
    assert response["model"] == "gpt-5.5" and response["output"] == [done]
    assert response["usage"] == {
        "input_tokens": 12,
        "input_tokens_details": {"cached_tokens": 4},
        "output_tokens": 3,
        "output_tokens_details": {"reasoning_tokens": 1},
        "total_tokens": 15,
    }


async def test_function_call_streams_its_arguments() -> None:
    reply = OpenAIReply.exec_command("ls -la", workdir="/srv/app")
    async with open_fake_openai([reply]) as api:
        events = (await (await client(api.port)).request(body={"input": []})).events()
    names = [name for name, _ in events]
    assert names[1:-1] == [
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.output_item.done",
    ]
    added, delta, done = (data for _, data in events[1:-1])
    assert added["item"]["arguments"] == "" and added["item"]["status"] == "in_progress"
    assert json.loads(delta["delta"]) == {"cmd": "ls -la", "workdir": "/srv/app"}
    item = done["item"]
    assert item["type"] == "function_call" and item["name"] == "exec_command"
    assert item["call_id"] == added["item"]["call_id"] and item["status"] == "completed"
    assert json.loads(item["arguments"]) == {"cmd": "ls -la", "workdir": "/srv/app"}


async def test_several_output_items_and_verbatim_items() -> None:
    reasoning = {"type": "reasoning", "summary": [{"type": "summary_text", "text": "hmm"}]}
    reply = OpenAIReply(
        (
            OpenAIItem(reasoning),
            OpenAIMessage("one"),
            OpenAIFunctionCall("apply", '{"raw": true}', call_id="call_7"),
        )
    )
    async with open_fake_openai([reply]) as api:
        events = (await (await client(api.port)).request(body={})).events()
    done = [d["item"] for n, d in events if n == "response.output_item.done"]
    assert [d["output_index"] for n, d in events if n == "response.output_item.done"] == [0, 1, 2]
    assert done[0]["summary"] == reasoning["summary"] and done[0]["type"] == "reasoning"
    assert done[2]["call_id"] == "call_7" and done[2]["arguments"] == '{"raw": true}'
    assert len({item["id"] for item in done}) == 3


async def test_http_error_has_an_openai_error_body_and_retry_after() -> None:
    failure = OpenAIError(429, "slow down", code="rate_limit_exceeded", retry_after=20)
    async with open_fake_openai([failure]) as api:
        answer = await (await client(api.port)).request(body={})
    assert answer.status == 429 and answer.headers["retry-after"] == "20"
    assert json.loads(answer.body)["error"] == {
        "message": "slow down",
        "type": None,
        "param": None,
        "code": "rate_limit_exceeded",
    }


async def test_http_error_with_a_status_the_stdlib_does_not_name() -> None:
    async with open_fake_openai([OpenAIError(529, "overloaded", type="overloaded_error")]) as api:
        answer = await (await client(api.port)).request(body={})
    assert answer.status == 529 and "retry-after" not in answer.headers
    assert json.loads(answer.body)["error"]["type"] == "overloaded_error"


async def test_cut_stream_closes_the_connection_after_n_events() -> None:
    async with open_fake_openai([OpenAIReply((OpenAIMessage("a b c d"),), cut_after=3)]) as api:
        answer = await (await client(api.port)).request(body={})
    assert answer.status == 200 and not answer.complete
    assert [name for name, _ in answer.events()] == [
        "response.created",
        "response.output_item.added",
        "response.output_text.delta",
    ]


async def test_hang_after_events_sends_nothing_more_until_the_fake_closes() -> None:
    reply = OpenAIReply((OpenAIMessage("a b"),), hang_after=1)
    with trio.fail_after(5):
        async with open_fake_openai([reply]) as api:
            c = await client(api.port)
            await c.stream.send_all(b"POST /v1/responses HTTP/1.1\r\ncontent-length: 0\r\n\r\n")
            while b"response.created" not in c.buf:
                assert await c._fill()
            # Whatever the wait, the fake sends nothing more: it hangs by design.
            with trio.move_on_after(0.2):
                await c._fill()
                pytest.fail("the fake sent more after hang_after")
        # Leaving the block cancelled the hanging handler and closed the connection.
        while await c._fill():
            pass
    assert c.buf.count(b"event: ") == 1


async def test_hang_never_answers_and_closing_the_fake_ends_it() -> None:
    with trio.fail_after(5):
        async with open_fake_openai([OpenAIHang()]) as api:
            c = await client(api.port)
            await c.stream.send_all(b"POST /v1/responses HTTP/1.1\r\ncontent-length: 2\r\n\r\n{}")
            with trio.move_on_after(0.2):
                await c._fill()
                pytest.fail("the fake answered a hang")
            assert len(api.model_calls) == 1
        assert not await c._fill()


async def test_requests_are_recorded_with_credentials_redacted() -> None:
    body = {"model": "gpt-5.5", "input": [{"type": "function_call_output", "output": "hi\n"}]}
    async with open_fake_openai([OpenAIReply.text("ok")]) as api:
        await (await client(api.port)).request(
            body=body, headers={"x-api-key": "abc123secret", "x-codex-beta": "on"}
        )
    (recorded,) = api.requests
    assert recorded.method == "POST" and recorded.path == "/v1/responses"
    assert recorded.headers["authorization"] == "[REDACTED]"
    assert recorded.headers["x-api-key"] == "[REDACTED]"
    assert recorded.headers["x-codex-beta"] == "on"
    assert recorded.body == body and recorded.size == len(json.dumps(body))
    assert recorded.input_items() == body["input"]
    assert recorded.function_outputs() == ["hi\n"]
    assert "sk-test" not in repr(api.requests)


async def test_keep_alive_and_chunked_request_bodies() -> None:
    async with open_fake_openai([OpenAIReply.text("one"), OpenAIReply.text("two")]) as api:
        c = await client(api.port)
        first = await c.request(body={"n": 1}, chunked=True)
        second = await c.request(body={"n": 2})
    texts = [
        a.events()[-1][1]["response"]["output"][0]["content"][0]["text"] for a in (first, second)
    ]
    assert texts == ["one", "two"]
    assert [r.body for r in api.model_calls] == [{"n": 1}, {"n": 2}]


async def test_callable_script_sees_the_request() -> None:
    def answer(request: OpenAIRequest) -> OpenAIReply:
        return OpenAIReply.text(f"{len(request.input_items())} items")

    async with open_fake_openai(answer) as api:
        c = await client(api.port)
        await c.request(body={"input": [1, 2, 3]})
        events = (await c.request(body={"input": []})).events()
    assert events[-2][1]["item"]["content"][0]["text"] == "0 items"
    assert api.remaining == 0


async def test_exhausted_script_answers_500_and_other_paths_404() -> None:
    async with open_fake_openai([OpenAIReply.text("only")]) as api:
        c = await client(api.port)
        await c.request(body={})
        assert api.remaining == 0
        exhausted = await c.request(body={})
        missing = await c.request("/v1/models", method="GET")
    assert exhausted.status == 500 and b"script exhausted" in exhausted.body
    assert missing.status == 404
    assert [r.path for r in api.requests] == ["/v1/responses"] * 2 + ["/v1/models"]
    assert len(api.model_calls) == 2


async def test_malformed_request_gets_400() -> None:
    async with open_fake_openai([]) as api:
        c = await client(api.port)
        await c.stream.send_all(b"NONSENSE\r\n\r\n")
        answer = await c.answer()
    assert answer.status == 400 and api.requests == []


async def test_codex_config_points_at_the_fake_and_nowhere_else() -> None:
    async with open_fake_openai([]) as api:
        config = tomllib.loads(api.codex_config_toml(model="gpt-5.5", idle_timeout_ms=1500))
    provider = config["model_providers"][config["model_provider"]]
    assert provider["base_url"] == f"http://127.0.0.1:{api.port}/v1"
    assert provider["wire_api"] == "responses" and provider["env_key"] == "AGENTRT_FAKE_OPENAI_KEY"
    assert provider["request_max_retries"] == provider["stream_max_retries"] == 0
    assert provider["stream_idle_timeout_ms"] == 1500 and config["model"] == "gpt-5.5"
    assert config["features"]["plugins"] is False and config["analytics"]["enabled"] is False
    assert config["check_for_update_on_startup"] is False


async def test_chat_completions_stream_text_a_tool_call_usage_then_done() -> None:
    # The wire OpenAI-compatible local servers speak (Qwen Code's auth_type "openai").
    usage = OpenAIUsage(input_tokens=12, output_tokens=3, cached_tokens=4)
    reply = OpenAIReply(
        (OpenAIMessage("Hi there"), OpenAIFunctionCall("read", {"path": "a"}, call_id="c1")),
        usage=usage,
    )
    async with open_fake_openai([reply]) as api:
        chat = await connect(api.port, path="/v1/chat/completions")
        answer = await chat.request(body={"model": "local", "messages": [], "stream": True})
        assert [call.path for call in api.model_calls] == ["/v1/chat/completions"]
    assert answer.status == 200 and answer.complete
    blocks = [b.removeprefix("data: ") for b in answer.body.decode().split("\n\n") if b.strip()]
    assert blocks[-1] == "[DONE]"
    chunks = [json.loads(b) for b in blocks[:-1]]
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    assert {c["model"] for c in chunks} == {"local"}
    deltas = [c["choices"][0]["delta"] for c in chunks]
    assert "".join(d.get("content", "") for d in deltas) == "Hi there"
    [calls] = [d["tool_calls"] for d in deltas if "tool_calls" in d]
    assert calls == [
        {
            "index": 0,
            "id": "c1",
            "type": "function",
            "function": {"name": "read", "arguments": '{"path":"a"}'},
        }
    ]
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
    assert chunks[-1]["usage"] == {
        "prompt_tokens": 12,
        "completion_tokens": 3,
        "total_tokens": 15,
        "prompt_tokens_details": {"cached_tokens": 4},
    }
