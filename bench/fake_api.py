"""The fake Messages API of the real-claude scenario, in a process of its own.

``python -m bench.fake_api HOME`` serves `agentrt.testing.open_fake_anthropic` on a loopback
port, answering every model call at once with ``ok: <the last user text>``, prints one JSON
line (the environment that points a claude CLI with HOME at it) and serves until its stdin
closes. Its own process, so the server's CPU is neither the runtime's nor the CLI's.
"""

from __future__ import annotations

import json
import os
import sys

import trio

from agentrt.testing import AnthropicText, RecordedRequest, open_fake_anthropic


def answer(request: RecordedRequest) -> AnthropicText:
    return AnthropicText(f"ok: {request.last_user_text()}")


async def serve(home: str) -> None:
    async with open_fake_anthropic(answer) as api:
        sys.stdout.write(json.dumps(api.claude_env(home)) + "\n")
        sys.stdout.flush()
        stdin = trio.lowlevel.FdStream(os.dup(sys.stdin.fileno()))
        while await stdin.receive_some():
            pass


if __name__ == "__main__":
    trio.run(serve, sys.argv[1])
