"""Fake ``claude`` programs (agentrt.testing.fake_cli) for the durable-session and chaos tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentrt.testing import fake_cli_executable

SID = "0b7e4a8e-1111-4222-8333-123456789abc"


def init_frame(session_id: str = SID) -> dict[str, Any]:
    return {"type": "system", "subtype": "init", "session_id": session_id, "model": "fake-model"}


def result_frame(text: str, session_id: str = SID) -> dict[str, Any]:
    return {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "result": text,
        "session_id": session_id,
        "num_turns": 1,
        "total_cost_usd": 0.01,
    }


# A turn that reports its session, starts a tool in a new session (as Claude's Bash tool
# does; it carries the turn's env marker) and never ends. It prints nothing after the
# session: once its runtime is SIGKILLed, a write would kill it by SIGPIPE.
HANG: list[Any] = [
    ["emit", init_frame()],
    [
        "spawn",
        {
            "steps": [["hang"]],
            "setsid": True,
            "stdout": "null",
            "stderr": "null",
            "announce": False,
        },
    ],
    ["hang"],
]


def answer(record: Path, text: str = "ok") -> list[Any]:
    """A turn that records its argv, reports the session and answers ``text``."""
    return [["record", str(record)], ["emit", init_frame()], ["emit", result_frame(text)]]


class FakeClaude:
    """One fake ``claude`` binary in its own directory; its program can be swapped between
    turns (each run reads it afresh)."""

    def __init__(self, directory: Path, program: list[Any] = HANG) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.record = directory / "record.json"
        self.binary = self.run(program)

    def run(self, program: list[Any]) -> str:
        return fake_cli_executable(str(self.directory), *program, name="claude")

    def hang(self) -> None:
        self.run(HANG)

    def answer(self, text: str = "ok") -> None:
        self.run(answer(self.record, text))

    def argv(self) -> list[str]:
        """The arguments of the last turn that ran `answer`."""
        argv: list[str] = json.loads(self.record.read_text())["argv"]
        return argv

    def resumed(self) -> str | None:
        argv = self.argv()
        return argv[argv.index("--resume") + 1] if "--resume" in argv else None
