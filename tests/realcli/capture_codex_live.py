"""Record a session of the pinned ``codex app-server`` for the live protocol's tests (see
CODEX.md).

    PYTHONPATH=tests .venv/bin/python tests/realcli/capture_codex_live.py

Drives one app-server through `CodexBackend.live` against the fake OpenAI API: a reply, a
shell command, a reply interrupted while the model hangs, a 401, a reply; then closes its
stdin. Writes tests/fixtures/codex-app-server/<version>/session.jsonl: every line written
(``{"write": ...}``) and read (``{"read": ...}``), in order, with the directories and the
port replaced by placeholders.
"""

from __future__ import annotations

import json
import os

import trio
from _codex import (
    ROOT,
    LiveCodex,
    Place,
    call_usage,
    codex_binary,
    codex_place,
    codex_version,
    live_codex,
    redact_paths,
)
from proc_helpers import wait_until

from agentrt.backend import SessionTotals
from agentrt.backends.codex import CodexBackend
from agentrt.testing import FakeOpenAI, OpenAIError, OpenAIHang, OpenAIReply, open_fake_openai

PROMPTS = ("Say one", "Run echo", "Hang", "Fail", "Say five")


async def main() -> None:
    binary = codex_binary()
    assert binary is not None, "run `make codex-cli` first"
    script = [
        OpenAIReply.text("One", usage=call_usage(0)),
        OpenAIReply.exec_command("echo from-the-tool", usage=call_usage(1)),
        OpenAIReply.text("Echoed", usage=call_usage(2)),
        OpenAIHang(),
        OpenAIError(401, "Incorrect API key provided"),
        OpenAIReply.text("Five", usage=call_usage(3)),
    ]
    async with open_fake_openai(script) as api, codex_place(api) as place:
        protocol = CodexBackend().live(place.options(binary), session_id=None)
        assert protocol is not None
        async with live_codex(protocol) as live:
            totals = SessionTotals()
            for prompt in PROMPTS:
                async with trio.open_nursery() as nursery:
                    if prompt == "Hang":
                        nursery.start_soon(interrupt_when_asked, live, api, 4)
                    events = await live.turn(prompt, baseline=totals)
                terminal = events[-1]
                totals = totals.add(getattr(terminal, "usage", None), None)
                print(f"{prompt!r}: {terminal.kind} {getattr(terminal, 'reason', '')}")
            assert await live.close() == 0
        text = "\n".join(json.dumps(entry, sort_keys=True) for entry in live.transcript)
        text = redact_paths(unresolved(text, place), place, api)
    out = ROOT / "tests" / "fixtures" / "codex-app-server" / codex_version()
    out.mkdir(parents=True, exist_ok=True)
    (out / "session.jsonl").write_text(text + "\n")
    print(f"wrote {out / 'session.jsonl'}: {len(live.transcript)} lines")


def unresolved(text: str, place: Place) -> str:
    """``text`` with the place's folders as given: codex reports some of them resolved
    (.cache may be a symlink)."""
    for folder in (place.cwd, place.codex_home, place.home):
        text = text.replace(os.path.realpath(folder), str(folder))
    return text


async def interrupt_when_asked(live: LiveCodex, api: FakeOpenAI, calls: int) -> None:
    await wait_until(lambda: len(api.model_calls) == calls, 30)
    await live.interrupt()


if __name__ == "__main__":
    trio.run(main)
