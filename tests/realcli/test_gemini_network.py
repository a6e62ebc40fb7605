"""What the pinned Gemini CLI connects to, watched with strace: under the backend's settings
(usage statistics and update checks off, a pinned model) a turn reaches the fake alone.
Without them the CLI looks up play.googleapis.com (its usage statistics) and makes a
routing call first (docs/gemini.md)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import attrs
import pytest

from agentrt.backends.gemini import GeminiBackend
from agentrt.testing import GeminiReply, open_fake_gemini

from ._gemini import gemini_binary, gemini_place, run_turn

BINARY = gemini_binary()
STRACE = shutil.which("strace")
pytestmark = [
    pytest.mark.realcli,
    pytest.mark.skipif(BINARY is None, reason="gemini is not installed: run `make gemini-cli`"),
    pytest.mark.skipif(STRACE is None, reason="strace is not installed"),
]
_INET = re.compile(r'connect\(\d+, \{sa_family=AF_INET6?, sin6?_port=htons\((\d+)\), .*?"([^"]+)"')


async def test_a_turn_connects_to_the_fake_alone(tmp_path: Path) -> None:
    assert BINARY is not None and STRACE is not None
    log = tmp_path / "connects"
    async with open_fake_gemini([GeminiReply.text("Hi")]) as api, gemini_place() as place:
        backend = GeminiBackend()
        command = backend.command(place.options(BINARY, api), "Hello", session_id=None)
        traced = (STRACE, "-f", "-qq", "-e", "trace=connect", "-o", str(log), *command.argv)
        turn = await run_turn(attrs.evolve(command, argv=traced))
    assert turn.terminal.kind == "result", turn.stderr
    peers = {(host, int(port)) for port, host in _INET.findall(log.read_text())}
    assert peers == {("127.0.0.1", api.port)}, f"the CLI also connected to {peers}"
    assert [r.path.split(":")[-1] for r in api.requests] == ["streamGenerateContent?alt=sse"]
