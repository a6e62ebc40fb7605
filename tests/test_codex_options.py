"""Codex options: every key and value is checked up front."""

from __future__ import annotations

import logging
import math
import tomllib
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentrt import InvalidOptions
from agentrt.backends.codex import CodexBackend
from agentrt.backends.codex._options import toml_value

parse = CodexBackend().parse_options


def refused(raw: dict[str, Any]) -> InvalidOptions:
    with pytest.raises(InvalidOptions) as info:
        parse(raw)
    return info.value


def test_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CODEX_CLI", raising=False)
    o = parse({})
    assert o.binary == "codex" and o.sandbox is None and o.config == {} and o.images == ()
    assert o.effective_env_policy == "inherit"
    monkeypatch.setenv("CODEX_CLI", "/opt/codex/bin/codex")
    assert parse({}).binary == "/opt/codex/bin/codex"
    assert parse({"binary": "/usr/bin/codex", "model": None}).binary == "/usr/bin/codex"


def test_unknown_key_names_it_and_suggests_the_closest() -> None:
    error = refused({"modle": "gpt-5.5"})
    assert error.key == "modle" and error.value == "gpt-5.5"
    assert "did you mean 'model'?" in str(error)
    error = refused({"working_directory_please": "/x"})
    assert "known options:" in error.why and "sandbox" in error.why


@pytest.mark.parametrize(
    ("raw", "key", "why"),
    [
        (
            {"sandbox": "read-ony"},
            "sandbox",
            "'read-only', 'workspace-write', 'danger-full-access'",
        ),
        ({"sandbox": "read-ony"}, "sandbox", "did you mean 'read-only'?"),
        ({"approval": "untrusted"}, "approval", "'never', 'approve-for-me', 'bypass'"),
        ({"env_policy": "clean"}, "env_policy", "'inherit', 'profile', 'isolated'"),
        ({"model": "-x"}, "model", "cannot start with '-'"),
        ({"model": ""}, "model", "non-empty"),
        ({"profile": 3}, "profile", "expected a string"),
        ({"cwd": ""}, "cwd", "path"),
        ({"images": ["/srv/a,b.png"]}, "images", "comma"),
        ({"images": [""]}, "images", "path"),
        ({"config": {"a": None}}, "config", "no TOML form"),
        ({"config": {"a=b": 1}}, "config", "no '='"),
        ({"config": {"-a": 1}}, "config", "leading '-'"),
        ({"config": ["a=1"]}, "config", "mapping"),
        ({"config": {"a": 2**63}}, "config", "64-bit"),
        ({"config": {"a": {"": 1}}}, "config", "table key"),
        ({"config": {"a": "\ud800"}}, "config", "surrogates"),
        ({"extra_args": ["--json"]}, "extra_args", "set by the backend"),
        ({"extra_args": ["resume"]}, "extra_args", "set by the backend"),
        ({"extra_args": "--oss"}, "extra_args", "list of non-empty strings"),
        ({"full_auto": True}, "full_auto", "no --full-auto; use sandbox='workspace-write'"),
        ({"full_auto": "yes"}, "full_auto", "True or False"),
        ({"output_schema": 5}, "output_schema", "schema"),
        ({"output_schema": {"x": {1, 2}}}, "output_schema", "JSON-serialisable"),
    ],
)
def test_bad_value_names_key_value_and_what_is_allowed(
    raw: dict[str, Any], key: str, why: str
) -> None:
    error = refused(raw)
    assert error.key == key and why in error.why
    assert error.value == raw[key]


def test_env_values_are_never_shown() -> None:
    error = refused({"env": {"TOKEN": "s3cret-value", "N": 1}})
    assert error.value == {"TOKEN": "[REDACTED]", "N": "[REDACTED]"}
    assert "s3cret" not in str(error)
    options = parse({"env": {"TOKEN": "s3cret-value"}})
    assert "s3cret" not in repr(options)


def test_combinations() -> None:
    error = refused({"approval": "bypass", "sandbox": "read-only"})
    assert error.key == "approval" and "read-only" in error.why
    assert parse({"approval": "bypass", "sandbox": "danger-full-access"}).approval == "bypass"
    error = refused({"codex_home": "/h", "env": {"CODEX_HOME": "/other"}})
    assert error.key == "codex_home"
    assert parse({"full_auto": False}).full_auto is False


def test_codex_home_makes_profile_the_default_env_policy() -> None:
    assert parse({"codex_home": "/h"}).effective_env_policy == "profile"
    assert parse({"env": {"CODEX_HOME": "/h"}}).effective_env_policy == "profile"
    assert parse({"codex_home": "/h", "env_policy": "inherit"}).effective_env_policy == "inherit"


def test_secret_looking_config_keys_warn_with_names_only(caplog: pytest.LogCaptureFixture) -> None:
    config = {
        "mcp_servers.svc": {"url": "http://x", "bearer_token": "abc123", "env": {"API_KEY": "k"}},
        "model_providers.p.env_key": "MY_KEY",
        "mcp_servers.other.bearer_token_env_var": "OTHER_TOKEN",
        "model": "gpt-5.5",
    }
    with caplog.at_level(logging.WARNING, logger="agentrt.backends.codex"):
        options = parse({"config": config})
    (record,) = caplog.records
    message = record.getMessage()
    assert "mcp_servers.svc.bearer_token" in message and "mcp_servers.svc.env.API_KEY" in message
    assert "p.env_key" not in message and "other.bearer_token_env_var" not in message
    assert "abc123" not in message and "*_env_var" in message and "env=" in message
    shown = repr(options)
    assert "abc123" not in shown and "OTHER_TOKEN" in shown and "MY_KEY" in shown


def test_no_warning_without_secret_keys(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        parse(
            {"config": {"mcp_servers.s.bearer_token_env_var": "T", "model_reasoning_effort": "low"}}
        )
    assert caplog.records == []


def test_output_schema_path_or_object() -> None:
    assert parse({"output_schema": "/s.json"}).output_schema == "/s.json"
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    assert parse({"output_schema": schema}).output_schema == schema


def test_not_a_mapping() -> None:
    with pytest.raises(InvalidOptions):
        parse(["model"])  # type: ignore[arg-type]


# TOML values as codex reads them: `-c key=value` parses value as TOML.
_scalars = (
    st.text()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False)
    | st.booleans()
)
_keys = st.text(min_size=1)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_keys, inner, max_size=4),
    max_leaves=12,
)


@given(_values)
def test_toml_value_round_trips(value: Any) -> None:
    assert tomllib.loads(f"x = {toml_value(value)}")["x"] == value


def test_toml_value_special_floats_and_escapes() -> None:
    assert tomllib.loads(f"x = {toml_value(math.inf)}")["x"] == math.inf
    assert math.isnan(tomllib.loads(f"x = {toml_value(math.nan)}")["x"])
    assert toml_value("a\x7fb") == '"a\\u007fb"'
    assert toml_value({"plain_key": 1, "needs quoting": [True]}) == (
        '{plain_key = 1, "needs quoting" = [true]}'
    )
