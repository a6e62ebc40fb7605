"""The CLI's own version on every turn: as the CLI reports it (Claude Code's init), or as
its ``version_command`` prints it (a backend that declares ``version_probe``), on the
Response, the AgentStatus and the turn's span; and ``cli_versions``, which refuses a turn
whose CLI reports another version as soon as it says so."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import trio
from cli_programs import FakeClaude, init_frame, result_frame
from otel_helpers import recording

import agentrt
from agentrt import Agent, CliVersionMismatch, InvalidOptions, MemoryStore, StopReason, open_runtime
from agentrt._versions import accepts, probed_version
from agentrt.backends.codex import CodexBackend

FAST = {"kill_grace": 0.3}


def versioned_init(version: str | None) -> dict[str, Any]:
    frame = init_frame()
    if version is not None:
        frame["claude_code_version"] = version
    return frame


def program(version: str | None, *, then: list[Any] | None = None) -> list[Any]:
    """Init (with ``version``), then ``then`` (default: a text and a result)."""
    text = {"type": "assistant", "message": {"content": [{"type": "text", "text": "hi"}]}}
    rest = then if then is not None else [["emit", text], ["emit", result_frame("hi")]]
    return [["emit", versioned_init(version)], *rest]


@pytest.mark.parametrize(
    "value", ["", "two", ">=2.1,<<3", 2.1, ["<3"]], ids=["empty", "word", "bad", "float", "list"]
)
async def test_cli_versions_must_be_version_specifiers(value: object) -> None:
    async with open_runtime(store=MemoryStore()) as rt:
        with pytest.raises(InvalidOptions) as refused:
            await rt.start_agent(Agent, name="x", backend="claude", cli_versions=value)
    assert refused.value.key == "cli_versions"
    assert ">=2.1,<3" in str(refused.value)


def test_accepts_follows_pep_440_and_refuses_what_it_cannot_read() -> None:
    accepted = ">=2.1,<3"
    assert accepts(accepted, "2.1.332") and accepts(accepted, "2.9")
    assert not accepts(accepted, "3.0.0") and not accepts(accepted, "2.0.9")
    assert not accepts(accepted, None) and not accepts(accepted, "not-a-version")
    # A pre-release is accepted only where the specifiers name one.
    assert not accepts(accepted, "2.5.0rc1")
    assert accepts(">=2.5.0rc1", "2.5.0rc1")


async def test_the_reported_version_is_on_the_response_the_status_and_the_span(
    tmp_path: Path,
) -> None:
    cli = FakeClaude(tmp_path / "cli", program("2.1.5"))
    with recording() as otel:
        async with open_runtime(store=MemoryStore()) as rt:
            await rt.start_agent(
                Agent, name="coder", backend="claude", binary=cli.binary,
                cli_versions=">=2.1,<3", **FAST,
            )  # fmt: skip
            assert (await rt.status("coder")).cli_version is None
            response = await rt.ask("coder", "hello")
            assert (await rt.status("coder")).cli_version == "2.1.5"
    assert response.cli_version == "2.1.5" and response.text == "hi"
    [span] = otel.named("invoke_agent")
    assert dict(span.attributes or {})["agentrt.cli.version"] == "2.1.5"


async def test_a_version_outside_the_range_ends_the_turn_at_the_init(tmp_path: Path) -> None:
    # After its init the CLI would work for a minute: the turn ends at the init instead.
    cli = FakeClaude(tmp_path / "cli", program("3.0.0", then=[["sleep", 60]]))
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(
            Agent, name="coder", backend="claude", binary=cli.binary,
            cli_versions=">=2.1,<3", **FAST,
        )  # fmt: skip
        with trio.fail_after(20), pytest.raises(CliVersionMismatch) as refused:
            await rt.ask("coder", "hello")
        assert (await rt.status("coder")).cli_version == "3.0.0"
    error = refused.value
    assert (error.expected, error.reported) == (">=2.1,<3", "3.0.0")
    assert error.reason is StopReason.CLI_VERSION_MISMATCH
    assert isinstance(error, agentrt.TurnFailed)
    assert error.session_id is not None  # the init's session is kept
    assert "3.0.0" in str(error) and ">=2.1,<3" in str(error)


async def test_a_cli_that_reports_no_version_is_refused_at_its_first_content(
    tmp_path: Path,
) -> None:
    cli = FakeClaude(tmp_path / "cli", program(None))
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(
            Agent, name="coder", backend="claude", binary=cli.binary, cli_versions=">=2", **FAST
        )
        with trio.fail_after(20), pytest.raises(CliVersionMismatch) as refused:
            await rt.ask("coder", "hello")
        # Without cli_versions the same CLI answers, with no version to report.
        await rt.start_agent(Agent, name="free", backend="claude", binary=cli.binary, **FAST)
        free = await rt.ask("free", "hello")
    assert refused.value.reported is None and "reported no version" in str(refused.value)
    assert (free.text, free.cli_version) == ("hi", None)


def fake_codex(path: Path, version: str) -> Path:
    """An executable that prints codex's version line and counts its runs."""
    path.write_text(
        f'#!/bin/sh\necho run >> "{path}.runs"\necho "codex-cli {version}"\n', encoding="utf-8"
    )
    path.chmod(0o755)
    return path


def runs(path: Path) -> int:
    counted = Path(f"{path}.runs")
    return len(counted.read_text().splitlines()) if counted.exists() else 0


async def test_the_probe_asks_each_executable_once_and_again_once_it_changed(
    tmp_path: Path,
) -> None:
    backend = CodexBackend()
    binary = fake_codex(tmp_path / "codex", "0.171.0")
    options = backend.parse_options({"binary": str(binary)})
    assert await probed_version(backend, options) == "0.171.0"
    assert await probed_version(backend, options) == "0.171.0"
    assert runs(binary) == 1
    # Updated in place: another file (size and mtime), asked again.
    fake_codex(binary, "0.172.10")
    stat = binary.stat()
    os.utime(binary, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert await probed_version(backend, options) == "0.172.10"
    assert runs(binary) == 2


async def test_a_probing_backend_is_refused_before_its_cli_is_started(tmp_path: Path) -> None:
    # codex exec prints no version: the runtime asks `codex --version`, once, and refuses
    # the turn before spawning `codex exec` (which this fake would record as a second run).
    binary = fake_codex(tmp_path / "codex", "0.100.0")
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(
            Agent, name="coder", backend="codex", binary=str(binary),
            cli_versions=">=0.171", **FAST,
        )  # fmt: skip
        with trio.fail_after(20), pytest.raises(CliVersionMismatch) as refused:
            await rt.ask("coder", "hello")
    assert (refused.value.expected, refused.value.reported) == (">=0.171", "0.100.0")
    assert runs(binary) == 1
