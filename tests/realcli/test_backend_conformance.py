"""The backend conformance kit (`agentrt.testing.backend_conformance`) on the real pinned
CLIs, each against its fake model API: one `BackendHarness` per backend, each check a test.

A new backend's harness is one class here (how its fake answers `Say`, `Hang` and
`RunShell`, and the agent options that point the CLI at it) and one line in HARNESSES.
"""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from proc_helpers import kill_marked

from agentrt.testing import (
    AnthropicHang,
    AnthropicReply,
    AnthropicText,
    AnthropicToolUse,
    BackendHarness,
    FakeModel,
    FakeOpenAI,
    Hang,
    OpenAIHang,
    OpenAIReply,
    Say,
    Step,
    backend_conformance,
    open_fake_anthropic,
    open_fake_openai,
)

from . import _claude
from ._claude import Claude, claude_binary, claude_version
from ._codex import Place, codex_binary, codex_place

pytestmark = pytest.mark.realcli


class _ClaudeFake(FakeModel):
    def __init__(self, claude: Claude) -> None:
        self.claude = claude

    def options(self, **extra: Any) -> dict[str, Any]:
        return self.claude.agent_options(kill_grace=1.0, **extra)

    def history(self, call: int) -> list[str]:
        return self.claude.api.message_requests[call].texts("user")


class ClaudeHarness(BackendHarness):
    """claude against the fake Anthropic API, with the test's process marker."""

    backend = "claude"
    approval_command = "touch"

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def skipped(self) -> str | None:
        if not claude_binary().exists():
            return "the pinned claude is not installed: run `make claude-cli`"
        return None

    @asynccontextmanager
    async def open(self, script: Sequence[Step]) -> AsyncIterator[FakeModel]:
        replies: list[AnthropicReply] = []
        for step in script:
            if isinstance(step, Say):
                replies.append(AnthropicText(step.text))
            elif isinstance(step, Hang):
                replies.append(AnthropicHang())
            else:
                replies.append(AnthropicToolUse("Bash", {"command": step.command}))
                replies.append(AnthropicText("done"))
        with tempfile.TemporaryDirectory(prefix="agentrt-kit-") as root:
            home, project = Path(root, "home"), Path(root, "project")
            await trio.Path(home).mkdir()
            await trio.Path(project).mkdir()
            async with open_fake_anthropic() as api:
                api.add_replies(*replies)
                yield _ClaudeFake(
                    Claude(claude_binary(), claude_version(), api, home, project, self.marker)
                )
            await kill_marked(_claude.MARKER_VAR, self.marker)


class _CodexFake(FakeModel):
    def __init__(self, api: FakeOpenAI, place: Place, binary: Path) -> None:
        self.api, self.place, self.binary = api, place, binary

    def options(self, **extra: Any) -> dict[str, Any]:
        # Its shell tool runs without codex's sandbox (bubblewrap), as a tool tree.
        return {
            "kill_grace": 1.0,
            **self.place.raw_options(self.binary, sandbox="danger-full-access"),
            **extra,
        }

    def history(self, call: int) -> list[str]:
        return [
            part["text"]
            for item in self.api.model_calls[call].input_items()
            if item.get("type") == "message" and item.get("role") == "user"
            for part in item["content"]
            if part.get("type") == "input_text"
        ]


class CodexHarness(BackendHarness):
    """codex against the fake OpenAI API (its processes carry the place's marker)."""

    backend = "codex"
    approval_command = "touch"

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def skipped(self) -> str | None:
        return None if codex_binary() else "codex is not installed: run `make codex-cli`"

    def backend_options(self) -> dict[str, Any]:
        return {"sandbox": "danger-full-access"}

    @asynccontextmanager
    async def open(self, script: Sequence[Step]) -> AsyncIterator[FakeModel]:
        entries: list[OpenAIReply | OpenAIHang] = []
        for step in script:
            if isinstance(step, Say):
                entries.append(OpenAIReply.text(step.text))
            elif isinstance(step, Hang):
                entries.append(OpenAIHang())
            else:
                entries += [OpenAIReply.exec_command(step.command), OpenAIReply.text("done")]
        binary = codex_binary()
        assert binary is not None
        async with open_fake_openai(entries) as api, codex_place(api) as place:
            yield _CodexFake(api, place, binary)


HARNESSES: dict[str, Callable[[str], BackendHarness]] = {
    "claude": ClaudeHarness,
    "codex": CodexHarness,
}
CHECKS = [check.name for check in backend_conformance(ClaudeHarness(""))]


@pytest.mark.parametrize("name", CHECKS)
@pytest.mark.parametrize("backend", sorted(HARNESSES))
def test_the_real_cli_passes_the_check(backend: str, name: str) -> None:
    # Not a trio test: a skip raised inside trio's run loses its reason.
    marker = uuid.uuid4().hex
    harness = HARNESSES[backend](marker)
    (check,) = [c for c in backend_conformance(harness) if c.name == name]
    why = check.skipped()
    if why is not None:
        pytest.skip(why)
    try:
        trio.run(check.run)
    finally:
        left = trio.run(kill_marked, _claude.MARKER_VAR, marker)
    assert not left, f"processes left behind (now killed): {left}"


def test_both_harnesses_run_every_check() -> None:
    # claude declares live, approvals and hooks; codex live and approvals: nothing skips
    # where the binaries are installed.
    for backend, make in HARNESSES.items():
        harness = make("")
        if harness.skipped() is None:
            skips = {c.name: c.skipped() for c in backend_conformance(harness) if c.skipped()}
            assert skips == {}, (backend, skips)
