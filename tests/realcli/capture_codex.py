"""Record the pinned codex's JSONL output for the translation tests (see CODEX.md).

    .venv/bin/python tests/realcli/capture_codex.py [NAME ...]

Runs each scenario (or only those named, keeping the others' fixtures) against the fake
OpenAI API and writes, under tests/fixtures/codex/<version>/, one ``<name>.jsonl`` (stdout
as codex printed it) per scenario plus ``manifest.json`` (argv, exit, stderr tail, usage
baseline). Paths and the port are replaced by placeholders.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import trio
from _codex import (
    ROOT,
    Place,
    codex_binary,
    codex_place,
    codex_version,
    decode,
    exit_status,
    find_marked,
    redact_paths,
)
from npm_clis import run_command

from agentrt.backends.codex import CodexBackend
from agentrt.testing import (
    OpenAIError,
    OpenAIItem,
    OpenAIMessage,
    OpenAIReply,
    OpenAIScript,
    OpenAIUsage,
    open_fake_openai,
)

PATCH = "*** Begin Patch\n*** Add File: hello.txt\n+hello from the patch\n*** End Patch\n"
TURN1 = OpenAIUsage(input_tokens=100, output_tokens=7, cached_tokens=30, reasoning_tokens=2)
# A usage limit's reset: an hour after the recording (its message names the local time).
USAGE_RESET = time.time() + 3600
TURN2 = OpenAIUsage(input_tokens=150, output_tokens=9, cached_tokens=80, reasoning_tokens=3)


async def run(
    place: Place, options: dict[str, Any], prompt: str, session_id: str | None = None
) -> tuple[list[str], bytes, int, str]:
    binary = codex_binary()
    assert binary is not None, "run `make codex-cli` first"
    command = CodexBackend().command(
        place.options(binary, **options), prompt, session_id=session_id
    )
    argv = [str(a) for a in command.argv]
    done = await run_command(command)
    return argv, done.stdout, done.returncode, done.stderr.decode(errors="replace")


async def interrupted(place: Place, prompt: str) -> tuple[list[str], bytes, int, str]:
    """A turn stopped by SIGINT to its process group while its command runs."""
    binary = codex_binary()
    assert binary is not None
    command = CodexBackend().command(place.options(binary), prompt, session_id=None)
    argv = [str(a) for a in command.argv]
    process = await trio.lowlevel.open_process(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(command.env),
        cwd=command.cwd,
        start_new_session=True,
    )
    assert process.stdin and process.stdout and process.stderr
    out, err = bytearray(), bytearray()

    async def drain(stream: trio.abc.ReceiveStream, into: bytearray) -> None:
        while chunk := await stream.receive_some():
            into += chunk

    async with trio.open_nursery() as nursery:
        nursery.start_soon(drain, process.stdout, out)
        nursery.start_soon(drain, process.stderr, err)
        await process.stdin.send_all(command.stdin)
        await process.stdin.aclose()
        with trio.fail_after(20):
            # Polling: nothing signals that codex has reported and started the command.
            while b"item.started" not in out or not find_marked(place.marker, "sleep"):  # noqa: ASYNC110
                await trio.sleep(0.05)
        os.killpg(process.pid, signal.SIGINT)
        await process.wait()
    return argv, bytes(out), process.returncode, err.decode(errors="replace")


Scenario = Callable[[Place], Awaitable[list[tuple[str, str, Any, dict[str, Any] | None]]]]


def scenarios() -> dict[str, tuple[OpenAIScript, Scenario]]:
    async def thread(place: Place) -> list[tuple[str, str, Any, dict[str, Any] | None]]:
        first = await run(place, {}, "Say hello")
        thread_id = decode(first[1])[0]["thread_id"]
        second = await run(place, {}, "And again", session_id=thread_id)
        baseline = {
            "input_tokens": TURN1.input_tokens - TURN1.cached_tokens,
            "output_tokens": TURN1.output_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": TURN1.cached_tokens,
        }
        return [
            ("thread_turn1", "first turn of a thread: one text reply", first, None),
            ("thread_turn2", "exec resume of that thread: running totals", second, baseline),
        ]

    def single(name: str, what: str, prompt: str, **options: Any) -> Scenario:
        async def go(place: Place) -> list[tuple[str, str, Any, dict[str, Any] | None]]:
            return [(name, what, await run(place, options, prompt), None)]

        return go

    async def lost(place: Place) -> list[tuple[str, str, Any, dict[str, Any] | None]]:
        result = await run(place, {}, "Hello?", session_id=str(uuid.uuid4()))
        return [("no_rollout", "exec resume of a thread id codex never saw", result, None)]

    async def sigint(place: Place) -> list[tuple[str, str, Any, dict[str, Any] | None]]:
        result = await interrupted(place, "Run the long command")
        return [("sigint", "SIGINT to the group while exec_command runs", result, None)]

    reasoning = OpenAIItem(
        {
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": "Thinking about the file"}],
            "content": None,
            "encrypted_content": None,
        }
    )
    patch = OpenAIItem(
        {
            "type": "custom_tool_call",
            "name": "apply_patch",
            "input": PATCH,
            "call_id": "call_patch1",
            "status": "completed",
        }
    )
    command = "printf 'hi\\n'; printf 'oops\\n' >&2; exit 3"
    key = "Incorrect API key provided: sk-fake***0000. You can find your API key at platform."
    return {
        "thread": (
            [
                OpenAIReply.text("Hello from turn one", usage=TURN1),
                OpenAIReply.text("And turn two", usage=TURN2),
            ],
            thread,
        ),
        "command": (
            [
                OpenAIReply.exec_command(command),
                OpenAIReply.text("The command failed with exit code 3."),
            ],
            single("command", "exec_command whose command exits 3", "Run it"),
        ),
        "patch": (
            [OpenAIReply((reasoning, patch)), OpenAIReply.text("Added hello.txt.")],
            single(
                "patch",
                "a reasoning summary, then apply_patch",
                "Add a file",
                sandbox="workspace-write",
            ),
        ),
        "unknown_model": (
            [OpenAIReply.text("ok")],
            single("unknown_model", "a model missing from codex's catalog", "Hi", model="nope-1"),
        ),
        "retry_notice": (
            [
                OpenAIReply((OpenAIMessage("cut short here"),), cut_after=3),
                OpenAIReply.text("Recovered."),
            ],
            single(
                "retry_notice",
                "a cut stream retried once (stream_max_retries=1), then success",
                "Hi",
                config={"model_providers.agentrt-fake.stream_max_retries": 1},
            ),
        ),
        "http_401": (
            [OpenAIError(401, key, code="invalid_api_key", type="invalid_request_error")],
            single("http_401", "HTTP 401 from the API", "Hi"),
        ),
        "http_429": (
            [OpenAIError(429, "Rate limit reached. Please try again in 20s.", retry_after=20)],
            single("http_429", "HTTP 429 from the API", "Hi"),
        ),
        "http_500": (
            [OpenAIError(500, "The server had an error", type="server_error")],
            single("http_500", "HTTP 500 from the API", "Hi"),
        ),
        "usage_limit": (
            [OpenAIError.usage_limit(USAGE_RESET)] * 6,
            single("usage_limit", "HTTP 429 usage_limit_reached with its reset", "Hi"),
        ),
        "expired_token": (
            [OpenAIError.expired_token()],
            single("expired_token", "HTTP 401 token_expired", "Hi"),
        ),
        "context_exhausted": (
            [OpenAIError.context_length_exceeded()],
            single("context_exhausted", "HTTP 400 context_length_exceeded", "Hi"),
        ),
        "cut_stream": (
            [OpenAIReply((OpenAIMessage("cut short here"),), cut_after=3)],
            single("cut_stream", "the SSE stream closed mid-body, no retries", "Hi"),
        ),
        "missing_key": (
            [OpenAIReply.text("never sent")],
            single(
                "missing_key",
                "the provider's env_key variable is not set",
                "Hi",
                config={"model_providers.agentrt-fake.env_key": "AGENTRT_UNSET_KEY"},
            ),
        ),
        "no_rollout": ([], lost),
        "sigint": ([OpenAIReply.exec_command("sleep 30", yield_time_ms=60000)], sigint),
    }


async def main() -> None:
    version = codex_version()
    out = ROOT / "tests" / "fixtures" / "codex" / version
    out.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, Any] = {"codex_version": version, "fixtures": {}}
    chosen = sys.argv[1:]
    if chosen:
        manifest = json.loads((out / "manifest.json").read_text())
    for name, (script, scenario) in scenarios().items():
        if chosen and name not in chosen:
            continue
        async with open_fake_openai(script) as api, codex_place(api) as place:
            results = await scenario(place)
            for name, what, (argv, stdout, returncode, stderr), baseline in results:
                clean = partial(redact_paths, place=place, api=api)
                # The fake's traffic holds no credential, and redact() would also take
                # the token counts ("input_tokens": 10 has a secret-looking key).
                (out / f"{name}.jsonl").write_text(clean(stdout.decode()))
                status = exit_status(returncode)
                manifest["fixtures"][name] = {
                    "description": what,
                    "argv": ["codex", *(clean(a) for a in argv[1:])],
                    "returncode": status.returncode,
                    "signal": status.signal,
                    "stderr": clean(stderr)[-1500:],
                    "usage_baseline": baseline,
                }
                print(f"{name}: exit {returncode}, {len(decode(stdout))} frames")
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    sys.exit(trio.run(main))
