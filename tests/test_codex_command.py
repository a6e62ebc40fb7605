"""The argv, environment and stdin of codex turns, pinned (checked against codex 0.171.0)."""

from __future__ import annotations

import json
import signal
from typing import Any

import pytest
from _helpers import assert_implements

from agentrt import InvalidOptions
from agentrt.backend import Backend, SecretFile, Translator
from agentrt.backends.codex import CodexBackend

THREAD = "01a22817-5691-7943-9a6f-828a15a863bf"
FIRST = ("codex", "exec", "--json", "--skip-git-repo-check")
RESUME = (*FIRST, "resume", THREAD)
ENVIRON = {
    "PATH": "/usr/bin",
    "HOME": "/users/u",
    "LANG": "C.UTF-8",
    "OPENAI_API_KEY": "sk-ambient",
    "CODEX_API_KEY": "ambient",
    "EDITOR": "vi",
}
backend = CodexBackend(environ=ENVIRON)


UPDATE_CHECK_OFF = ("-c", "check_for_update_on_startup=false")


def argv(raw: dict[str, Any], session_id: str | None = None) -> tuple[object, ...]:
    """The argv, without the update check's override (present once, before the options'
    own ``config``: test_the_update_check_is_off_unless_auto_update says so)."""
    options = backend.parse_options({"binary": "codex", **raw})
    full = backend.command(options, "the prompt", session_id=session_id).argv
    at = next(i for i in range(len(full) - 1) if full[i : i + 2] == UPDATE_CHECK_OFF)
    return full[:at] + full[at + 2 :]


def test_the_update_check_is_off_unless_auto_update() -> None:
    def full(**raw: Any) -> tuple[object, ...]:
        options = backend.parse_options({"binary": "codex", **raw})
        return backend.command(options, "p", session_id=None).argv

    assert full()[-3:] == (*UPDATE_CHECK_OFF, "-")
    assert "check_for_update_on_startup=false" not in full(auto_update=True)
    # The options' own config wins: codex takes the last -c of a key.
    mine = full(config={"check_for_update_on_startup": True})
    assert mine[-3:] == ("-c", "check_for_update_on_startup=true", "-")
    assert "check_for_update_on_startup=false" not in mine
    with pytest.raises(InvalidOptions, match="auto_update"):
        backend.parse_options({"auto_update": "yes"})


@pytest.mark.parametrize(
    ("raw", "session_id", "expected"),
    [
        ({}, None, (*FIRST, "-")),
        ({}, THREAD, (*RESUME, "-")),
        ({"model": "gpt-5.5"}, None, (*FIRST, "--model", "gpt-5.5", "-")),
        ({"model": "gpt-5.5"}, THREAD, (*RESUME, "--model", "gpt-5.5", "-")),
        ({"sandbox": "workspace-write"}, None, (*FIRST, "--sandbox", "workspace-write", "-")),
        # exec resume has no --sandbox and forgets the first turn's: the config key carries it.
        (
            {"sandbox": "workspace-write"},
            THREAD,
            (*RESUME, "-c", 'sandbox_mode="workspace-write"', "-"),
        ),
        ({"approval": "never"}, None, (*FIRST, "-")),
        ({"approval": "approve-for-me"}, None, (*FIRST, "--approve-for-me", "-")),
        (
            {"approval": "bypass"},
            THREAD,
            (*RESUME, "--dangerously-bypass-approvals-and-sandbox", "-"),
        ),
        ({"profile": "fast"}, None, (*FIRST, "--profile", "fast", "-")),
        (
            {"images": ["/i/a.png", "/i/b c.png"]},
            THREAD,
            (*RESUME, "--image=/i/a.png", "--image=/i/b c.png", "-"),
        ),
        ({"output_schema": "/s.json"}, None, (*FIRST, "--output-schema", "/s.json", "-")),
        (
            {"config": {"model_reasoning_effort": "low", "features.plugins": False}},
            THREAD,
            (*RESUME, "-c", 'model_reasoning_effort="low"', "-c", "features.plugins=false", "-"),
        ),
        (
            {"config": {"mcp_servers.docs": {"command": "npx", "args": ["-y", "docs"]}}},
            None,
            (*FIRST, "-c", 'mcp_servers.docs={command = "npx", args = ["-y", "docs"]}', "-"),
        ),
        ({"extra_args": ["--strict-config"]}, None, (*FIRST, "--strict-config", "-")),
        (
            {
                "model": "gpt-5.5",
                "sandbox": "danger-full-access",
                "approval": "bypass",
                "profile": "work",
                "images": ["/i/a.png"],
                "output_schema": "/s.json",
                "config": {"analytics.enabled": False},
                "extra_args": ["--ignore-rules"],
            },
            None,
            (
                *FIRST,
                "--model",
                "gpt-5.5",
                "--sandbox",
                "danger-full-access",
                "--dangerously-bypass-approvals-and-sandbox",
                "--profile",
                "work",
                "--image=/i/a.png",
                "--output-schema",
                "/s.json",
                "-c",
                "analytics.enabled=false",
                "--ignore-rules",
                "-",
            ),
        ),
        (
            {
                "model": "gpt-5.5",
                "sandbox": "read-only",
                "images": ["/i/a.png"],
                "output_schema": "/s.json",
                "config": {"analytics.enabled": False},
            },
            THREAD,
            (
                *RESUME,
                "--model",
                "gpt-5.5",
                "-c",
                'sandbox_mode="read-only"',
                "--image=/i/a.png",
                "--output-schema",
                "/s.json",
                "-c",
                "analytics.enabled=false",
                "-",
            ),
        ),
    ],
)
def test_argv(raw: dict[str, Any], session_id: str | None, expected: tuple[str, ...]) -> None:
    assert argv(raw, session_id) == expected


def test_prompt_goes_on_stdin_and_sigint_interrupts() -> None:
    options = backend.parse_options({"cwd": "/work", "binary": "/opt/codex"})
    command = backend.command(options, "héllo\nworld", session_id=None)
    assert command.argv[0] == "/opt/codex" and command.argv[-1] == "-"
    assert command.stdin == "héllo\nworld".encode()
    assert command.cwd == "/work"
    assert command.interrupt_signal is signal.SIGINT
    assert command.files == ()


def test_inline_output_schema_goes_by_file() -> None:
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}}
    options = backend.parse_options({"output_schema": schema})
    command = backend.command(options, "p", session_id=THREAD)
    (file,) = command.files
    assert isinstance(file, SecretFile)
    assert command.argv[command.argv.index(file) - 1] == "--output-schema"
    assert json.loads(file.content) == schema


@pytest.mark.parametrize(
    ("raw", "key"),
    [({"profile": "work"}, "profile"), ({"approval": "approve-for-me"}, "approval")],
)
def test_options_exec_resume_cannot_take_are_refused_for_a_resumed_session(
    raw: dict[str, Any], key: str
) -> None:
    argv(raw)  # fine on a first turn
    with pytest.raises(InvalidOptions) as info:
        argv(raw, THREAD)
    assert info.value.key == key and "exec resume has no" in info.value.why


@pytest.mark.parametrize("session_id", ["my-thread", "", "--last", THREAD[:-1]])
def test_a_session_id_that_is_not_a_uuid_is_refused(session_id: str) -> None:
    # codex would take it as a thread NAME and silently start a new thread.
    with pytest.raises(InvalidOptions) as info:
        argv({}, session_id)
    assert info.value.key == "session_id" and "UUID" in info.value.why


def env(raw: dict[str, Any]) -> dict[str, str]:
    return dict(backend.command(backend.parse_options(raw), "p", session_id=None).env)


def test_env_inherit_is_the_default_and_explicit_env_goes_last() -> None:
    assert env({}) == ENVIRON
    assert env({"env": {"OPENAI_API_KEY": "sk-mine", "X": "1"}}) == {
        **ENVIRON,
        "OPENAI_API_KEY": "sk-mine",
        "X": "1",
    }


def test_codex_home_sets_the_variable_and_leaves_ambient_keys_out() -> None:
    got = env({"codex_home": "/h"})
    assert got["CODEX_HOME"] == "/h"
    assert "OPENAI_API_KEY" not in got and "CODEX_API_KEY" not in got
    assert got["EDITOR"] == "vi"
    assert env({"codex_home": "/h", "env_policy": "inherit"})["OPENAI_API_KEY"] == "sk-ambient"


def test_env_isolated_keeps_only_the_basics() -> None:
    got = env({"env_policy": "isolated", "env": {"KEY_VAR": "v"}})
    assert got == {"PATH": "/usr/bin", "HOME": "/users/u", "LANG": "C.UTF-8", "KEY_VAR": "v"}


def test_version_command() -> None:
    options = backend.parse_options({"binary": "/opt/codex", "codex_home": "/h"})
    command = backend.version_command(options)
    assert command.argv == ("/opt/codex", "--version")
    assert command.env["CODEX_HOME"] == "/h" and command.stdin == b""


def test_codex_backend_implements_the_protocol() -> None:
    assert_implements(Backend, backend)
    assert_implements(Translator, backend.translator(backend.parse_options({})))


def test_backend_is_found_by_name() -> None:
    from importlib.metadata import entry_points

    (entry,) = [e for e in entry_points(group="agentrt.backends") if e.name == "codex"]
    assert entry.load() is CodexBackend and CodexBackend.name == "codex"
