"""The gemini backend's options, argv, environment and settings file (pure: no process)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

import agentrt
from agentrt.backend import Capabilities, ConfigFile, InvalidOptions
from agentrt.backends.gemini import GeminiBackend

ENV = {"PATH": "/usr/bin", "HOME": "/users/u", "GEMINI_API_KEY": "AIza-ambient"}
backend = GeminiBackend(environ=ENV)


def command(
    session_id: str | None = None, prompt: str = "Hello", **raw: object
) -> agentrt.backend.Command:
    return backend.command(backend.parse_options(raw), prompt, session_id=session_id)


def test_a_first_turn_reads_its_prompt_from_stdin_in_default_approval_mode() -> None:
    c = command(prompt="What is here?")
    assert c.argv == (
        "gemini",
        "-p",
        "",
        "--output-format",
        "stream-json",
        "--approval-mode",
        "default",
    )
    assert c.stdin == b"What is here?" and c.interrupt_signal is signal.SIGINT
    # The relaunch off (its parent ignores SIGINT and SIGTERM), the folder trusted.
    assert c.env["GEMINI_CLI_NO_RELAUNCH"] == "true"
    assert c.env["GEMINI_CLI_TRUST_WORKSPACE"] == "true"
    assert c.config_files == ()  # the user's own home: its settings are the user's


def test_later_turns_resume_and_flags_follow_the_options() -> None:
    sid = "431b9e81-ea14-4d1f-a2b0-3c253f2603b4"
    c = command(
        sid,
        model="gemini-2.5-pro",
        approval_mode="yolo",
        include_directories=["/a", "/b"],
        extra_args=["--debug"],
    )
    assert c.argv[5:] == (
        "--approval-mode",
        "yolo",
        "--resume",
        sid,
        "--model",
        "gemini-2.5-pro",
        "--include-directories",
        "/a,/b",
        "--debug",
    )


def test_a_session_id_that_is_not_a_uuid_is_refused() -> None:
    # "latest" or "3" would resume another session, picked from the CLI's list.
    for bad in ("latest", "3"):
        with pytest.raises(InvalidOptions, match="UUID"):
            command(bad)


def test_the_api_key_goes_by_environment_never_argv() -> None:
    c = command(env={"GEMINI_API_KEY": "AIza-secret-key"}, env_policy="isolated")
    assert c.env["GEMINI_API_KEY"] == "AIza-secret-key"
    assert not any("AIza" in str(arg) for arg in c.argv)
    assert "AIza" not in repr(backend.parse_options({"env": {"GEMINI_API_KEY": "AIza-x"}}))


def test_a_named_home_gets_the_backends_settings_file(tmp_path: Path) -> None:
    home = str(tmp_path / "gh")
    c = command(gemini_home=home, max_attempts=1, settings={"ui": {"theme": "x"}})
    (settings,) = c.config_files
    assert settings.path == os.path.join(home, ".gemini", "settings.json")
    assert json.loads(settings.content) == {
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "privacy": {"usageStatisticsEnabled": False},
        "general": {
            "enableAutoUpdate": False,
            "enableAutoUpdateNotification": False,
            "maxAttempts": 1,
        },
        "ui": {"theme": "x"},
    }
    assert c.env["GEMINI_CLI_HOME"] == home
    # A named home is a profile, as for the other backends' config directories.
    assert backend.parse_options({"gemini_home": home}).effective_env_policy == "profile"


@pytest.mark.parametrize(
    ("raw", "key", "why"),
    [
        ({"approval_mode": "auto"}, "approval_mode", "one of"),
        ({"max_attempts": 11}, "max_attempts", "1 to 10"),
        ({"settings": {"a": 1}}, "settings", "gemini_home"),
        ({"gemini_home": "relative"}, "gemini_home", "absolute"),
        ({"extra_args": ["--yolo"]}, "extra_args", "set by the backend"),
        ({"extra_args": ["--resume=latest"]}, "extra_args", "set by the backend"),
        ({"model": "-x"}, "model", "cannot start"),
        ({"modle": "x"}, "modle", "did you mean 'model'"),
    ],
)
def test_bad_options_are_refused_naming_key_and_why(
    raw: dict[str, object], key: str, why: str
) -> None:
    with pytest.raises(InvalidOptions) as caught:
        backend.parse_options(raw)
    assert caught.value.key == key and why in str(caught.value)


def test_settings_values_never_show_in_errors_or_reprs() -> None:
    options = backend.parse_options({"gemini_home": "/h", "settings": {"token": "s3cret"}})
    assert "s3cret" not in repr(options)


def test_no_live_process_so_keep_alive_and_approvals_are_refused() -> None:
    caps = backend.capabilities(backend.parse_options({}))
    assert caps == Capabilities(not_live=caps.not_live) and not caps.live
    assert caps.not_live is not None and "--acp" in caps.not_live


def test_a_config_file_path_must_be_absolute() -> None:
    with pytest.raises(ValueError, match="absolute"):
        ConfigFile("settings.json", b"{}")


def test_the_version_command() -> None:
    assert backend.version_command(backend.parse_options({})).argv == ("gemini", "--version")


class Approver(agentrt.Agent):
    def approve_tool(self, request: agentrt.ToolRequest) -> agentrt.Allow:
        return agentrt.Allow()


@pytest.mark.parametrize(
    ("agent", "options", "key"),
    [
        (agentrt.Agent, {"keep_alive": 60.0}, "keep_alive"),
        (Approver, {}, "approve_tool"),
    ],
)
async def test_start_agent_refuses_keep_alive_and_approvals_naming_why(
    agent: type[agentrt.Agent], options: dict[str, object], key: str
) -> None:
    async with agentrt.open_runtime(store=agentrt.MemoryStore()) as rt:
        with pytest.raises(InvalidOptions) as caught:
            await rt.start_agent(agent, name="g", backend="gemini", **options)
        assert rt.statistics().agents == 0
    assert caught.value.key == key and "gemini --acp" in str(caught.value)
