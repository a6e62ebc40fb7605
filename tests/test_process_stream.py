"""Tier 3: what a turn's process reads and writes (real child processes)."""

from __future__ import annotations

import json
import os
import signal
import stat
import sys
import tempfile
from pathlib import Path
from typing import Any

import attrs
import msgspec
import pytest
from proc_helpers import ENV, FAST, Frames, fake

from agentrt import StopReason
from agentrt.backend import Command, ExitStatus, SecretFile
from agentrt.lowlevel import BadLine, FrameBatch, ProcessFailure, open_cli_process
from agentrt.testing import fake_cli_argv, fake_cli_executable

MIB = 1024 * 1024


async def read_all(command: Command, limits: Any = FAST) -> tuple[list[Any], ExitStatus, str]:
    async with open_cli_process(command, limits) as proc:
        frames = [frame async for frame in Frames(proc)]
        status = await proc.wait()
    return frames, status, proc.stderr_tail


async def test_frames_are_decoded_in_order_and_blank_lines_skipped() -> None:
    frames, status, _ = await read_all(
        fake(
            ["emit", {"type": "system", "n": 1}],
            ["write", "\n   \n\r\n"],
            ["emit", [1, "two", None]],
            ["emit", "text"],
            ["exit", 0],
        )
    )
    assert frames == [{"type": "system", "n": 1}, [1, "two", None], "text"]
    assert status == ExitStatus(0)


async def test_batches_hold_the_frames_of_one_read_in_order() -> None:
    # One write of three lines (one blank, one not JSON) arrives as one read: one batch.
    command = fake(
        ["write", '{"n": 1}\n\nnot json\n{"n": 2}\n'],
        ["sleep", 0.2],
        ["emit", {"n": 3}],
        ["exit", 0],
    )
    async with open_cli_process(command, FAST) as proc:
        batches = [list(batch) async for batch in proc.batches()]
    assert [len(batch) for batch in batches] == [3, 1]
    first, bad, second = batches[0]
    assert (first, second) == ({"n": 1}, {"n": 2})
    assert isinstance(bad, BadLine)
    assert batches[1] == [{"n": 3}]


async def test_the_first_read_is_small_and_full_reads_double_up_to_256_kib() -> None:
    # A turn pauses on its first read (the session checkpoint on the CLI's first line)
    # holding that read's lines, so it is small; a fast stream soon gets big reads. Lines of
    # exactly 1 KiB, all in the pipe before the first read: each read ends on a line.
    line = '{"pad": "' + "x" * (1023 - 11) + '"}\n'
    assert len(line) == 1024
    command = fake(["repeat", 880, [["write", line]]], ["exit", 0])
    async with open_cli_process(command, FAST) as proc:
        await proc.wait()
        sizes = [len(list(batch)) async for batch in proc.batches()]
    assert sizes == [16, 32, 64, 128, 256, 256, 128]


async def test_invalid_utf8_and_invalid_json_are_bad_lines_not_failures() -> None:
    frames, status, _ = await read_all(
        fake(
            ["write_hex", "7b2261223a22ff227d0a"],  # {"a":"\xff"}
            ["write", "not json at all token=hunter2hunter2\n"],
            ["write", "x" * 10_000 + "\n"],
            ["emit", {"after": True}],
            ["exit", 0],
        )
    )
    assert status == ExitStatus(0)
    bad_utf8, bad_json, long_bad, good = frames
    assert isinstance(bad_utf8, BadLine)
    assert bad_utf8.size == 9
    assert "UTF-8" in bad_utf8.error
    assert isinstance(bad_json, BadLine)
    assert "hunter2" not in bad_json.text and "[REDACTED]" in bad_json.text
    assert isinstance(long_bad, BadLine)
    assert long_bad.size == 10_000 and len(long_bad.text) == 4096
    assert good == {"after": True}


DEEP = "[" * 10_000 + "]" * 10_000


async def test_json_nested_too_deep_is_a_bad_line_not_a_crash() -> None:
    frames, status, _ = await read_all(
        fake(["write", DEEP + "\n"], ["emit", {"after": True}], ["exit", 0])
    )
    assert status == ExitStatus(0)
    deep, good = frames
    assert isinstance(deep, BadLine)
    assert deep.size == len(DEEP) and "recursion" in deep.error
    assert good == {"after": True}


async def test_an_unterminated_last_line_still_counts() -> None:
    frames, _, _ = await read_all(fake(["emit", 1], ["write", '{"last": 2}'], ["exit", 0]))
    assert frames == [1, {"last": 2}]
    frames, _, _ = await read_all(fake(["emit", 1], ["write", '{"trunc'], ["exit", 0]))
    assert frames[0] == 1
    assert isinstance(frames[1], BadLine) and frames[1].text == '{"trunc'


async def test_a_10_mib_line_fails_a_8_mib_cap_naming_the_bytes() -> None:
    command = fake(["emit", "before"], ["big_line", 10 * MIB], ["emit", "after"], ["hang"])
    got: list[Any] = []
    async with open_cli_process(command, FAST) as proc:
        with pytest.raises(ProcessFailure) as info:
            async for frame in Frames(proc):
                got.append(frame)
        # The ladder ran before the failure surfaced: the process is gone.
        assert proc.exit_status is not None
    assert got == ["before"]
    assert info.value.reason is StopReason.OUTPUT_LINE_TOO_LONG
    assert "8,388,608" in info.value.message
    size = int(info.value.message.split("(")[1].split()[0].replace(",", ""))
    assert 8 * MIB < size <= 10 * MIB


async def test_a_10_mib_line_passes_a_larger_cap() -> None:
    limits = attrs.evolve(FAST, max_line_bytes=16 * MIB)
    frames, status, _ = await read_all(
        fake(["big_line", 10 * MIB], ["emit", "after"], ["exit", 0]), limits
    )
    assert status == ExitStatus(0)
    assert len(frames[0]) == 10 * MIB - 2 and frames[0] == "x" * (10 * MIB - 2)
    assert frames[1] == "after"


async def test_exit_code_and_death_by_signal_are_reported() -> None:
    _, status, _ = await read_all(fake(["emit", 1], ["exit", 7]))
    assert status == ExitStatus(7) and not status.crashed
    _, status, _ = await read_all(fake(["emit", 1], ["kill", "SIGKILL"]))
    assert status == ExitStatus(None, signal.SIGKILL) and status.crashed


async def test_argv_env_stdin_and_cwd_reach_the_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AMBIENT_SECRET_SHOULD_NOT_LEAK", "1")
    record = tmp_path / "record.json"
    prompt = "a prompt, then EOF\n" * 100_000  # ~2 MB: more than a pipe holds
    command = Command(
        argv=fake_cli_argv(["record", str(record)], ["emit", "done"], args=["-p", "--x"]),
        env={**ENV, "ONLY_THIS": "yes"},
        cwd=str(tmp_path),
        stdin=prompt.encode(),
    )
    async with open_cli_process(command, FAST) as proc:
        frames = [frame async for frame in Frames(proc)]
        marker = proc.marker
    assert frames == ["done"]
    seen = json.loads(record.read_text())
    assert seen["argv"] == ["-p", "--x"]
    assert seen["stdin"] == prompt
    assert seen["cwd"] == str(tmp_path)
    assert seen["env"]["ONLY_THIS"] == "yes"
    assert seen["env"]["AGENTRT_TURN"] == marker and marker.startswith(f"{os.getpid()}.")
    assert "AMBIENT_SECRET_SHOULD_NOT_LEAK" not in seen["env"]


async def test_a_fake_cli_executable_takes_any_argv(tmp_path: Path) -> None:
    record = tmp_path / "record.json"
    binary = fake_cli_executable(str(tmp_path), ["record", str(record)], name="claude")
    _, status, _ = await read_all(
        Command(argv=(binary, "-p", "--output-format", "stream-json"), env=ENV, stdin=b"hi")
    )
    assert status == ExitStatus(0)
    seen = json.loads(record.read_text())
    assert seen["argv"] == ["-p", "--output-format", "stream-json"]
    assert seen["stdin"] == "hi"


async def test_by_run_plays_one_program_per_run(tmp_path: Path) -> None:
    counter = str(tmp_path / "runs")
    programs = [[["emit", "first"]], [["emit", "second"], ["exit", 3]]]
    binary = fake_cli_executable(str(tmp_path), ["by_run", counter, programs])
    outcomes = [await read_all(Command(argv=(binary,), env=ENV)) for _ in range(3)]
    assert [(frames, status) for frames, status, _ in outcomes] == [
        (["first"], ExitStatus(0)),
        (["second"], ExitStatus(3)),
        (["second"], ExitStatus(3)),  # the last program again
    ]


@pytest.fixture
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Secret files land here instead of the system temp dir, so a leftover is visible."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


async def test_secret_files_are_0600_in_a_0700_dir_and_removed(private_tmp: Path) -> None:
    record = private_tmp / "record.json"
    secret = SecretFile("mcp.json", b'{"headers": {"Authorization": "Bearer abc"}}')
    other = SecretFile("settings.json", b"{}")
    command = Command(
        argv=(*fake_cli_argv(["record", str(record)], ["emit", "ok"]), "--mcp", secret, other),
        env=ENV,
    )
    frames, _, _ = await read_all(command)
    assert frames == ["ok"]
    seen = json.loads(record.read_text())
    secret_path, other_path = seen["argv"][1], seen["argv"][2]
    assert seen["argv"][0] == "--mcp" and os.path.basename(secret_path) == "mcp.json"
    facts = seen["files"][secret_path]
    assert facts["mode"] == 0o600 and facts["dir_mode"] == 0o700
    assert facts["content"] == secret.content.decode()
    assert seen["files"][other_path]["content"] == "{}"
    # The private directory was made under the temp dir and is gone with its files.
    assert os.path.dirname(os.path.dirname(secret_path)) == str(private_tmp)
    assert os.listdir(private_tmp) == ["record.json"]


async def test_an_env_file_is_written_0600_and_its_path_is_the_variable(
    private_tmp: Path,
) -> None:
    # A CLI told of its settings file only through an environment variable (Qwen Code).
    record = private_tmp / "record.json"
    settings = SecretFile("settings.json", b'{"privacy": {}}')
    command = Command(
        argv=fake_cli_argv(["record", str(record)], ["emit", "ok"]),
        env=ENV,
        env_files={"SETTINGS_PATH": settings},
    )
    frames, _, _ = await read_all(command)
    assert frames == ["ok"]
    path = json.loads(record.read_text())["env"]["SETTINGS_PATH"]
    assert os.path.basename(path) == "settings.json"
    assert os.path.dirname(os.path.dirname(path)) == str(private_tmp)
    # Written for the child, gone with the turn; the command's own env is not changed.
    assert os.listdir(private_tmp) == ["record.json"]
    assert "SETTINGS_PATH" not in command.env


async def test_secret_files_are_removed_after_a_failure_and_a_failed_spawn(
    private_tmp: Path,
) -> None:
    secret = SecretFile("s.json", b"{}")
    hang = Command(argv=(*fake_cli_argv(["hang"]), secret), env=ENV)
    with pytest.raises(ProcessFailure):
        async with open_cli_process(hang, attrs.evolve(FAST, startup=0.2)) as proc:
            async for _ in Frames(proc):
                pass
    assert os.listdir(private_tmp) == []
    missing = Command(argv=(str(private_tmp / "no-such-cli"), secret), env=ENV)
    with pytest.raises(ProcessFailure) as info:
        async with open_cli_process(missing, FAST):
            pass
    assert info.value.reason is StopReason.SPAWN_FAILED
    assert os.listdir(private_tmp) == []


async def test_spawn_failures_name_the_path(tmp_path: Path) -> None:
    missing = str(tmp_path / "no-such-cli")
    not_executable = tmp_path / "plain-file"
    not_executable.write_text("#!/bin/sh\n")
    cases = [
        (Command(argv=(missing,), env=ENV), missing, "No such file"),
        (Command(argv=(str(not_executable),), env=ENV), str(not_executable), "Permission"),
        (
            Command(argv=(sys.executable,), env=ENV, cwd=str(tmp_path / "gone")),
            str(tmp_path / "gone"),
            "No such file",
        ),
    ]
    for command, path, why in cases:
        with pytest.raises(ProcessFailure) as info:
            async with open_cli_process(command, FAST):
                pytest.fail("spawned")
        assert info.value.reason is StopReason.SPAWN_FAILED
        assert path in info.value.message and why in info.value.message
        assert isinstance(info.value.__cause__, OSError)
    assert stat.S_IMODE(not_executable.stat().st_mode) & 0o111 == 0


async def test_stderr_keeps_the_newest_bytes_redacted() -> None:
    _, _, tail = await read_all(
        fake(
            ["stderr", "old-" * 5000],
            ["stderr", "Authorization: Bearer eyJhbGciOi.eyJzdWIiOi.c2lnbmF0dXJl\n"],
            ["stderr", "the end"],
            ["exit", 1],
        )
    )
    assert tail.endswith("the end")
    assert "eyJ" not in tail and "[REDACTED]" in tail
    # 8192 bytes kept, minus what redaction shortened: the oldest 12 KB are gone.
    assert 8000 < len(tail) <= 8192 and "old-old-" in tail


async def test_frames_after_a_failure_raise_it_again() -> None:
    async with open_cli_process(fake(["hang"]), attrs.evolve(FAST, startup=0.1)) as proc:
        frames = Frames(proc)
        with pytest.raises(ProcessFailure) as first:
            await frames.__anext__()
        with pytest.raises(ProcessFailure) as again:
            await frames.__anext__()
        assert again.value is first.value


class _Delta(msgspec.Struct, tag_field="type", tag="delta"):
    text: str


def test_a_typed_decoder_falls_back_to_generic_frames_and_bad_lines() -> None:
    typed = msgspec.json.Decoder(_Delta)
    lines = [b'{"type": "delta", "text": "hi"}', b'{"type": "other", "n": 1}', b"not json"]
    frames = list(FrameBatch(lines, typed.decode))
    assert frames[0] == _Delta(text="hi")
    assert frames[1] == {"type": "other", "n": 1}
    assert isinstance(frames[2], BadLine) and frames[2].size == len(b"not json")
    # Without a typed decoder every line is a plain JSON value.
    assert list(FrameBatch(lines[:2])) == [{"type": "delta", "text": "hi"}, frames[1]]


def test_a_line_too_deep_for_the_typed_decoder_is_a_bad_line() -> None:
    typed = msgspec.json.Decoder(_Delta)
    deep = b'{"type": "delta", "text": "hi", "extra": ' + DEEP.encode() + b"}"
    bad, good = FrameBatch([deep, b'{"type": "delta", "text": "ok"}'], typed.decode)
    assert isinstance(bad, BadLine) and "recursion" in bad.error
    assert good == _Delta(text="ok")
