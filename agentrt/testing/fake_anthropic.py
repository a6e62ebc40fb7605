"""Serve the fake Anthropic Messages API from the command line, for demos and manual tries.

    python -m agentrt.testing.fake_anthropic [--port 0] [--reply TEXT]

The first stdout line is ``ANTHROPIC_BASE_URL=http://127.0.0.1:PORT``; then one line per
request goes to stderr. Every model call gets TEXT, or by default an echo of its prompt.
Ctrl-C or SIGTERM stops it. In tests, use `agentrt.testing.open_fake_anthropic` instead.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
from collections.abc import Sequence

import trio

from ._fake_anthropic import AnthropicText, FakeAnthropic, RecordedRequest, open_fake_anthropic


def main(argv: Sequence[str] | None = None) -> None:
    """Parse ``argv`` and serve until interrupted."""
    parser = argparse.ArgumentParser(prog="python -m agentrt.testing.fake_anthropic")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--reply", help="answer every model call with this text")
    args = parser.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        trio.run(_serve, args.host, args.port, args.reply)


async def _serve(host: str, port: int, reply: str | None) -> None:
    def answer(request: RecordedRequest) -> AnthropicText:
        if reply is not None:
            return AnthropicText(reply)
        return AnthropicText(f"You said: {request.last_user_text()}")

    # Signals arrive as messages, not as KeyboardInterrupt raised in whatever task runs.
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with open_fake_anthropic(answer, host=host, port=port) as api:
            print(f"ANTHROPIC_BASE_URL={api.base_url}", flush=True)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_log_requests, api)
                async for _ in signals:
                    break
                nursery.cancel_scope.cancel()


async def _log_requests(api: FakeAnthropic) -> None:
    seen = 0
    while True:
        requests = await api.wait_requests(seen + 1)
        for request in requests[seen:]:
            stream = " stream" if request.stream else ""
            print(f"{request.method} {request.path}{stream}", file=sys.stderr, flush=True)
        seen = len(requests)


if __name__ == "__main__":
    main()
