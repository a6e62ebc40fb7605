"""The fake model API of the real-CLI scenario, in a process of its own.

``python -m bench.fake_api HOME [CLI]`` serves `agentrt.testing.open_fake_anthropic` (CLI
``claude``, the default) or `agentrt.testing.open_fake_gemini` (``gemini``) on a loopback
port, answering every model call at once with ``ok: <the last user text>``, prints one JSON
line (the environment that points that CLI with HOME at it) and serves until its stdin
closes. Its own process, so the server's CPU is neither the runtime's nor the CLI's.
"""

from __future__ import annotations

import json
import os
import sys
from contextlib import AbstractAsyncContextManager
from typing import Any

import trio

from agentrt.testing import (
    AnthropicText,
    GeminiReply,
    GeminiRequest,
    RecordedRequest,
    open_fake_anthropic,
    open_fake_gemini,
)


def answer(request: RecordedRequest) -> AnthropicText:
    return AnthropicText(f"ok: {request.last_user_text()}")


def answer_gemini(request: GeminiRequest) -> GeminiReply:
    return GeminiReply.text(f"ok: {request.texts('user')[-1]}")


def _fake(cli: str, home: str) -> tuple[AbstractAsyncContextManager[Any], Any]:
    if cli == "gemini":
        return open_fake_gemini(answer_gemini), lambda api: {**api.gemini_env(), "HOME": home}
    return open_fake_anthropic(answer), lambda api: api.claude_env(home)


async def serve(home: str, cli: str = "claude") -> None:
    fake, env = _fake(cli, home)
    async with fake as api:
        sys.stdout.write(json.dumps(env(api)) + "\n")
        sys.stdout.flush()
        stdin = trio.lowlevel.FdStream(os.dup(sys.stdin.fileno()))
        while await stdin.receive_some():
            pass


if __name__ == "__main__":
    trio.run(serve, *sys.argv[1:3])
