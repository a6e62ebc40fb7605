import logging
import os

import pytest

from agentrt import _env
from agentrt._env import AMBIENT_AUTH_VARS, child_env, default_env_policy

AMBIENT = {
    "PATH": "/usr/bin:/bin",
    "HOME": "/users/ada",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "LC_TIME": "en_GB.UTF-8",
    "HTTPS_PROXY": "http://proxy:3128",
    "no_proxy": "localhost",
    "SSL_CERT_FILE": "/etc/ssl/cert.pem",
    "NODE_EXTRA_CA_CERTS": "/etc/ssl/extra.pem",
    "ANTHROPIC_API_KEY": "sk-ant-ambient-000000000000",
    "CLAUDE_CODE_OAUTH_TOKEN": "oauth-ambient",
    "OPENAI_API_KEY": "sk-openai-ambient-0000000000",
    "CLAUDECODE": "1",
    "EDITOR": "vim",
    "GITHUB_TOKEN": "ghp_keptbecauseitisnotamodelcredential",
}


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_env, "_warned", set())


def test_inherit_is_verbatim_plus_explicit() -> None:
    env = child_env("inherit", {"EDITOR": "nano", "EXTRA": "1"}, environ=AMBIENT)
    assert env == {**AMBIENT, "EDITOR": "nano", "EXTRA": "1"}


def test_profile_drops_ambient_credentials_and_session_markers() -> None:
    env = child_env("profile", environ=AMBIENT)
    assert not AMBIENT_AUTH_VARS & env.keys()
    assert "CLAUDECODE" not in env
    # Everything else, including unrelated tokens the agent's tools may need, is kept.
    assert env["GITHUB_TOKEN"] == AMBIENT["GITHUB_TOKEN"]
    assert env["EDITOR"] == "vim" and env["PATH"] == AMBIENT["PATH"]


def test_profile_explicit_env_wins_over_the_strip() -> None:
    env = child_env("profile", {"ANTHROPIC_API_KEY": "sk-ant-tenant-1111111111"}, environ=AMBIENT)
    assert env["ANTHROPIC_API_KEY"] == "sk-ant-tenant-1111111111"
    assert "CLAUDE_CODE_OAUTH_TOKEN" not in env


def test_isolated_keeps_only_path_home_locale_proxies_tls() -> None:
    env = child_env("isolated", {"CLAUDE_CONFIG_DIR": "/cfg"}, environ=AMBIENT)
    assert env == {
        "PATH": "/usr/bin:/bin",
        "HOME": "/users/ada",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "LC_TIME": "en_GB.UTF-8",
        "HTTPS_PROXY": "http://proxy:3128",
        "no_proxy": "localhost",
        "SSL_CERT_FILE": "/etc/ssl/cert.pem",
        "NODE_EXTRA_CA_CERTS": "/etc/ssl/extra.pem",
        "CLAUDE_CONFIG_DIR": "/cfg",
    }


def test_profile_warns_once_with_names_never_values(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="agentrt.env"):
        child_env("profile", environ=AMBIENT)
        child_env("profile", environ=AMBIENT)
    assert len(caplog.records) == 1
    message = caplog.records[0].getMessage()
    for name in ("ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN", "OPENAI_API_KEY", "CLAUDECODE"):
        assert name in message
    for value in AMBIENT.values():
        if value not in ("1",):
            assert value not in message


def test_profile_does_not_warn_about_a_name_the_caller_replaced(
    caplog: pytest.LogCaptureFixture,
) -> None:
    environ = {"PATH": "/bin", "ANTHROPIC_API_KEY": "sk-ant-ambient-000000000000"}
    with caplog.at_level(logging.WARNING, logger="agentrt.env"):
        child_env("profile", {"ANTHROPIC_API_KEY": "sk-ant-tenant-1111111111"}, environ=environ)
        child_env("profile", environ={"PATH": "/bin"})
    assert caplog.records == []


def test_a_different_set_of_stripped_names_warns_again(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="agentrt.env"):
        child_env("profile", environ={"ANTHROPIC_API_KEY": "x"})
        child_env("profile", environ={"OPENAI_API_KEY": "y"})
    assert [
        ("ANTHROPIC_API_KEY" in r.getMessage(), "OPENAI_API_KEY" in r.getMessage())
        for r in caplog.records
    ] == [(True, False), (False, True)]


def test_defaults_to_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTRT_ENV_PROBE", "here")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-probe-0000000000")
    assert child_env("inherit")["AGENTRT_ENV_PROBE"] == "here"
    profile = child_env("profile")
    assert profile["AGENTRT_ENV_PROBE"] == "here" and "ANTHROPIC_API_KEY" not in profile


def test_each_child_sees_os_environ_as_it_is_then(monkeypatch: pytest.MonkeyPatch) -> None:
    # The copy of os.environ is kept between spawns and made again when it changed: a value
    # set, changed or removed after one spawn reaches the next, and a child's own dict is
    # its own (a caller that adds to it changes no other child's).
    monkeypatch.delenv("AGENTRT_ENV_PROBE", raising=False)
    first = child_env("inherit")
    assert "AGENTRT_ENV_PROBE" not in first
    first["AGENTRT_ENV_PROBE"] = "added by a caller"
    assert "AGENTRT_ENV_PROBE" not in child_env("inherit")
    monkeypatch.setenv("AGENTRT_ENV_PROBE", "caf\u00e9 \udcff")  # not UTF-8 in the process
    assert child_env("inherit")["AGENTRT_ENV_PROBE"] == "caf\u00e9 \udcff"
    monkeypatch.setenv("AGENTRT_ENV_PROBE", "changed")
    assert child_env("profile")["AGENTRT_ENV_PROBE"] == "changed"
    monkeypatch.delenv("AGENTRT_ENV_PROBE")
    assert child_env("inherit") == dict(os.environ)


def test_unknown_policy_is_refused() -> None:
    with pytest.raises(ValueError, match="'open'"):
        child_env("open", environ={})  # type: ignore[arg-type]


def test_default_policy_is_profile_only_with_a_config_dir() -> None:
    assert default_env_policy(config_dir=None) == "inherit"
    assert default_env_policy(config_dir="") == "inherit"
    assert default_env_policy(config_dir="/users/ada/.claude-work") == "profile"
