"""Claude backend options: every accepted shape and every refusal."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest

from agentrt import InvalidOptions
from agentrt.backends.claude import ClaudeBackend, ClaudeOptions

parse = ClaudeBackend().parse_options
UUID = "3b241101-e2bb-4255-8caf-4136c566a962"


pytestmark = pytest.mark.usefixtures("no_claude_cli")


def refused(raw: Any) -> InvalidOptions:
    with pytest.raises(InvalidOptions) as info:
        parse(raw)
    return info.value


def test_defaults() -> None:
    o = parse({})
    assert o == ClaudeOptions(binary="claude")
    assert (o.include_partial_messages, o.tools, o.setting_sources, o.hermetic) == (
        True,
        None,
        None,
        None,
    )
    assert o.effective_env_policy == "inherit"


def test_binary_defaults_to_claude_cli_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAUDE_CLI", "/opt/claude/bin/claude")
    assert parse({}).binary == "/opt/claude/bin/claude"
    assert parse({"binary": "/usr/local/bin/claude"}).binary == "/usr/local/bin/claude"


def test_none_means_unset() -> None:
    assert parse({"model": None, "include_partial_messages": None, "tools": None}) == parse({})


def test_accepted_shapes() -> None:
    o = parse(
        {
            "cwd": pathlib.Path("/srv/repo"),
            "add_dir": pathlib.Path("/srv/shared"),
            "tools": ["Read", "Grep"],
            "allowed_tools": ("Bash(git log:*)",),
            "setting_sources": "user, project",
            "hermetic": True,
            "json_schema": {"type": "object", "properties": {"n": {"type": "integer"}}},
            "mcp_config": ["/etc/mcp.json", {"mcpServers": {}}, '{"mcpServers": {"s": {}}}'],
            "settings": pathlib.Path("/etc/claude-settings.json"),
            "max_budget_usd": 2,
            "continue": True,
            "no_session_persistence": False,
            "extra_args": ["--debug"],
        }
    )
    assert o.cwd == "/srv/repo" and o.add_dir == ("/srv/shared",)
    assert o.tools == ("Read", "Grep") and o.allowed_tools == ("Bash(git log:*)",)
    assert o.setting_sources == ("user", "project") and o.hermetic == "full"
    assert o.json_schema == '{"type":"object","properties":{"n":{"type":"integer"}}}'
    assert o.mcp_config == ("/etc/mcp.json", {"mcpServers": {}}, {"mcpServers": {"s": {}}})
    assert o.settings == "/etc/claude-settings.json"
    assert o.max_budget_usd == 2.0 and o.continue_ is True and o.extra_args == ("--debug",)
    assert parse({"tools": []}).tools == ()
    assert parse({"setting_sources": ""}).setting_sources == ()
    assert parse({"hermetic": False}).hermetic is None
    assert parse({"hermetic": "project"}).hermetic == "project"
    assert parse({"json_schema": '{"type": "string"}'}).json_schema == '{"type":"string"}'
    assert parse({"session_id": UUID.upper()}).session_id == UUID


def test_unknown_key_names_it_and_suggests_the_closest() -> None:
    e = refused({"modle": "opus"})
    assert (e.key, e.value) == ("modle", "opus")
    assert "did you mean 'model'?" in str(e)
    e = refused({"permissions": "plan"})
    assert e.key == "permissions" and "'permission_mode'" in e.why
    e = refused({"continue_": True})
    assert e.key == "continue_" and "did you mean 'continue'?" in e.why


def test_unknown_key_without_a_near_match_lists_the_known_ones() -> None:
    e = refused({"xyzzy": 1})
    assert e.key == "xyzzy" and "known options:" in e.why and "permission_mode" in e.why


def test_unknown_keys_are_reported_before_bad_values() -> None:
    assert refused({"max_turns": 0, "verbose": True}).key == "verbose"


BAD_VALUES: list[tuple[str, Any, str]] = [
    ("binary", "", "expected a path"),
    ("binary", 5, "expected a path"),
    ("cwd", b"/srv", "expected a path"),
    ("cwd", "/srv/\0x", "NUL byte"),
    ("config_dir", [], "expected a path"),
    ("model", "", "expected a non-empty string"),
    ("model", 4, "expected a string, got int"),
    ("fallback_model", ["sonnet"], "expected a string, got list"),
    ("system_prompt", 1.5, "expected a string, got float"),
    ("system_prompt_file", 3, "expected a path"),
    ("append_system_prompt", {"a": 1}, "expected a string, got dict"),
    (
        "effort",
        "hgh",
        "expected one of 'low', 'medium', 'high', 'xhigh', 'max'; did you mean 'high'?",
    ),
    ("effort", 3, "expected one of 'low', 'medium', 'high', 'xhigh', 'max'"),
    ("max_turns", 0, "expected an integer >= 1"),
    ("max_turns", "5", "expected an integer >= 1"),
    ("max_turns", True, "expected an integer >= 1"),
    ("max_turns", 2.0, "expected an integer >= 1"),
    ("max_budget_usd", 0, "expected a finite number > 0"),
    ("max_budget_usd", float("inf"), "expected a finite number > 0"),
    ("max_budget_usd", "1.5", "expected a finite number > 0"),
    ("max_budget_usd", False, "expected a finite number > 0"),
    ("json_schema", "{not json", "expected a JSON schema object"),
    ("json_schema", "[1, 2]", "a JSON schema must be a JSON object"),
    ("json_schema", {"x": {1, 2}}, "a JSON schema must be JSON-serialisable"),
    ("agent", "", "expected a non-empty string"),
    ("tools", "Read,Grep", "expected a list of non-empty strings"),
    ("tools", ["Read", ""], "expected a list of non-empty strings"),
    ("allowed_tools", "Bash", "expected a list of non-empty strings"),
    ("disallowed_tools", [1], "expected a list of non-empty strings"),
    (
        "permission_mode",
        "accept_edits",
        "expected one of 'default', 'manual', 'acceptEdits', 'bypassPermissions', 'plan', "
        "'dontAsk', 'auto'; did you mean 'acceptEdits'?",
    ),
    ("dangerously_skip_permissions", "yes", "expected True or False, got str"),
    ("add_dir", ["/a", 2], "expected a path or a list of paths"),
    ("mcp_config", 7, "expected a path or an inline MCP config"),
    ("mcp_config", [["/a"]], "expected a path or an inline MCP config"),
    ("mcp_config", "{oops", "looks like inline JSON but does not parse"),
    ("settings", '{"a": [1, 2}', "looks like inline JSON but does not parse"),
    ("strict_mcp_config", 1, "expected True or False, got int"),
    ("settings", 1, "expected a path or inline settings"),
    ("setting_sources", ["user", "global"], "expected one of 'user', 'project', 'local'"),
    ("setting_sources", 3, "expected a list of 'user', 'project', 'local'"),
    ("hermetic", "yes", "expected one of 'full', 'project'"),
    ("hermetic", 1, "expected one of 'full', 'project'"),
    ("env", ["A=1"], "expected a mapping of variable names to string values"),
    ("env", {"": "x"}, "is not a valid environment variable name"),
    ("env", {"A=B": "x"}, "is not a valid environment variable name"),
    ("env", {3: "x"}, "is not a valid environment variable name"),
    ("env_policy", "strict", "expected one of 'inherit', 'profile', 'isolated'"),
    ("include_partial_messages", "false", "expected True or False, got str"),
    ("resume", "", "expected a non-empty session id string"),
    ("resume", "--dangerously-skip-permissions", "cannot start with '-'"),
    ("resume", "abc def", "whitespace or control characters"),
    ("resume", 42, "expected a non-empty session id string"),
    ("session_id", "not-a-uuid", "expected a UUID"),
    ("session_id", 5, "expected a UUID"),
    ("continue", "yes", "expected True or False, got str"),
    ("no_session_persistence", True, "refused: later turns resume the CLI session"),
    ("no_session_persistence", "no", "expected True or False, got str"),
    ("extra_args", "--debug", "expected a list of non-empty strings"),
    ("extra_args", ["--output-format", "json"], "--output-format is set by the backend"),
    ("extra_args", ["--resume=abc"], "--resume is set by the backend"),
    ("extra_args", ["-p"], "-p is set by the backend"),
    ("extra_args", ["--no-session-persistence"], "--no-session-persistence is set by the backend"),
]


@pytest.mark.parametrize(("key", "value", "why"), BAD_VALUES)
def test_bad_value_names_key_value_and_what_is_allowed(key: str, value: Any, why: str) -> None:
    e = refused({key: value})
    assert e.key == key
    assert why in e.why
    assert str(e).startswith(f"option {key!r}=")


def test_bad_value_error_carries_the_value() -> None:
    e = refused({"max_turns": -3})
    assert e.value == -3 and str(e) == "option 'max_turns'=-3: expected an integer >= 1"


def test_env_values_never_appear_in_the_error() -> None:
    secret = "sk-ant-api03-SECRETSECRETSECRET"
    e = refused({"env": {"ANTHROPIC_API_KEY": secret, "BAD": 1}})
    assert secret not in str(e) and secret not in repr(e.value)
    assert "BAD" in str(e)


def test_inline_configs_never_appear_in_the_error() -> None:
    secret = "Bearer sk-ant-api03-SECRETSECRETSECRET"
    for key in ("mcp_config", "settings"):
        e = refused({key: [{"headers": {"Authorization": secret}, "bad": object()}]})
        assert secret not in str(e)
        e = refused({key: '{"headers": {"Authorization": "' + secret + '"'})
        assert secret not in str(e)


def test_options_must_be_a_mapping() -> None:
    e = refused(["model", "opus"])
    assert e.key == "options" and "expected a mapping" in e.why


@pytest.mark.parametrize(
    ("raw", "key", "why"),
    [
        (
            {"system_prompt": "a", "system_prompt_file": "/p"},
            "system_prompt_file",
            "give system_prompt or it, not both",
        ),
        ({"resume": "abc", "session_id": UUID}, "session_id", "cannot be combined with 'resume'"),
        ({"resume": "abc", "continue": True}, "continue", "cannot be combined with 'resume'"),
        (
            {"session_id": UUID, "continue": True},
            "continue",
            "cannot be combined with 'session_id'",
        ),
        (
            {"config_dir": "/a", "env": {"CLAUDE_CONFIG_DIR": "/b"}},
            "config_dir",
            "differs from env['CLAUDE_CONFIG_DIR']='/b'",
        ),
    ],
)
def test_conflicting_options(raw: dict[str, Any], key: str, why: str) -> None:
    e = refused(raw)
    assert e.key == key and why in e.why


def test_config_dir_agreeing_with_env_is_fine() -> None:
    assert parse({"config_dir": "/a", "env": {"CLAUDE_CONFIG_DIR": "/a"}}).config_dir == "/a"


@pytest.mark.parametrize(
    ("raw", "policy"),
    [
        ({}, "inherit"),
        ({"config_dir": "/users/ada/.claude-work"}, "profile"),
        ({"env": {"CLAUDE_CONFIG_DIR": "/users/ada/.claude-work"}}, "profile"),
        ({"config_dir": "/users/ada/.claude-work", "env_policy": "inherit"}, "inherit"),
        ({"env_policy": "isolated"}, "isolated"),
    ],
)
def test_effective_env_policy(raw: dict[str, Any], policy: str) -> None:
    assert parse(raw).effective_env_policy == policy


def test_options_are_frozen_and_hashable() -> None:
    o = parse({"model": "opus", "env": {"A": "1"}, "mcp_config": [{"mcpServers": {}}]})
    with pytest.raises(AttributeError):
        o.model = "sonnet"  # type: ignore[misc]
    assert hash(o) == hash(
        parse({"model": "opus", "env": {"A": "1"}, "mcp_config": [{"mcpServers": {}}]})
    )


def test_repr_shows_no_secret() -> None:
    key = "sk-ant-api03-SECRETSECRETSECRET"
    o = parse(
        {
            "env": {"ANTHROPIC_API_KEY": key},
            "mcp_config": ["/etc/mcp.json", {"headers": {"x-api-key": key}}],
            "settings": {"env": {"K": key}},
        }
    )
    shown = repr(o)
    assert key not in shown
    assert "ANTHROPIC_API_KEY" in shown and "/etc/mcp.json" in shown
