"""The argv, environment and stdin of a Claude Code turn, pinned per option combination."""

from __future__ import annotations

import json
import signal
from typing import Any

import pytest
from _helpers import assert_implements
from claude_frames import MODEL, SID, frames, translate

from agentrt import InvalidOptions, SessionEvent
from agentrt.backend import Backend, Command, SecretFile, Translator
from agentrt.backends.claude import SYSTEM_PROMPT_ARGV_LIMIT, ClaudeBackend

backend = ClaudeBackend()
BASE = ("claude", "-p", "--output-format", "stream-json", "--verbose")
PARTIAL = (*BASE, "--include-partial-messages")
UUID = "3b241101-e2bb-4255-8caf-4136c566a962"


pytestmark = pytest.mark.usefixtures("no_claude_cli")


def command(raw: dict[str, Any], session_id: str | None = None, prompt: str = "hi") -> Command:
    return backend.command(backend.parse_options(raw), prompt, session_id=session_id)


ARGV: list[tuple[str, dict[str, Any], str | None, tuple[str, ...]]] = [
    ("defaults", {}, None, PARTIAL),
    ("partial messages off", {"include_partial_messages": False}, None, BASE),
    ("resume the checkpointed id", {}, SID, (*PARTIAL, "--resume", SID)),
    ("resume option on the first turn", {"resume": "abc-1"}, None, (*PARTIAL, "--resume", "abc-1")),
    (
        "the checkpointed id wins over the option",
        {"resume": "abc-1"},
        SID,
        (*PARTIAL, "--resume", SID),
    ),
    ("session_id on the first turn", {"session_id": UUID}, None, (*PARTIAL, "--session-id", UUID)),
    ("session_id dropped once resuming", {"session_id": UUID}, SID, (*PARTIAL, "--resume", SID)),
    ("continue on the first turn", {"continue": True}, None, (*PARTIAL, "--continue")),
    ("continue dropped once resuming", {"continue": True}, SID, (*PARTIAL, "--resume", SID)),
    (
        "binary and models",
        {"binary": "/opt/claude", "model": "opus", "fallback_model": "sonnet"},
        None,
        ("/opt/claude", *PARTIAL[1:], "--model", "opus", "--fallback-model", "sonnet"),
    ),
    (
        "prompts",
        {"system_prompt": "Be terse.", "append_system_prompt": "Cite files."},
        None,
        (*PARTIAL, "--system-prompt", "Be terse.", "--append-system-prompt", "Cite files."),
    ),
    (
        "system prompt file",
        {"system_prompt_file": "/etc/prompt.md"},
        None,
        (*PARTIAL, "--system-prompt-file", "/etc/prompt.md"),
    ),
    (
        "limits",
        {"effort": "high", "max_turns": 8, "max_budget_usd": 0.75},
        None,
        (*PARTIAL, "--effort", "high", "--max-turns", "8", "--max-budget-usd", "0.75"),
    ),
    (
        "structured output and agent",
        {"json_schema": {"type": "object"}, "agent": "reviewer"},
        None,
        (*PARTIAL, "--json-schema", '{"type":"object"}', "--agent", "reviewer"),
    ),
    (
        "tools",
        {
            "tools": ["Read", "Grep"],
            "allowed_tools": ["Read", "Bash(git log:*)"],
            "disallowed_tools": ["WebFetch"],
        },
        None,
        (
            *PARTIAL,
            "--tools",
            "Read,Grep",
            "--allowedTools",
            "Read,Bash(git log:*)",
            "--disallowedTools",
            "WebFetch",
        ),
    ),
    ("no built-in tools", {"tools": []}, None, (*PARTIAL, "--tools", "")),
    (
        "permissions",
        {"permission_mode": "acceptEdits", "dangerously_skip_permissions": True},
        None,
        (*PARTIAL, "--permission-mode", "acceptEdits", "--dangerously-skip-permissions"),
    ),
    (
        "directories",
        {"add_dir": ["/srv/a", "/srv/b"]},
        None,
        (*PARTIAL, "--add-dir", "/srv/a", "--add-dir", "/srv/b"),
    ),
    (
        "mcp config paths",
        {"mcp_config": ["/etc/mcp-a.json", "/etc/mcp-b.json"], "strict_mcp_config": True},
        None,
        (
            *PARTIAL,
            "--mcp-config",
            "/etc/mcp-a.json",
            "--mcp-config",
            "/etc/mcp-b.json",
            "--strict-mcp-config",
        ),
    ),
    (
        "settings path and sources",
        {"settings": "/etc/s.json", "setting_sources": ["user", "local"]},
        None,
        (*PARTIAL, "--settings", "/etc/s.json", "--setting-sources", "user,local"),
    ),
    ("no setting sources", {"setting_sources": []}, None, (*PARTIAL, "--setting-sources", "")),
    (
        "hermetic full",
        {"hermetic": True},
        None,
        (
            *PARTIAL,
            "--strict-mcp-config",
            "--setting-sources",
            "",
            "--exclude-dynamic-system-prompt-sections",
        ),
    ),
    (
        "hermetic project",
        {"hermetic": "project"},
        None,
        (
            *PARTIAL,
            "--strict-mcp-config",
            "--setting-sources",
            "user",
            "--exclude-dynamic-system-prompt-sections",
        ),
    ),
    (
        "hermetic with explicit sources",
        {"hermetic": "full", "setting_sources": "project"},
        None,
        (
            *PARTIAL,
            "--strict-mcp-config",
            "--setting-sources",
            "project",
            "--exclude-dynamic-system-prompt-sections",
        ),
    ),
    (
        "extra args last",
        {"model": "opus", "extra_args": ["--debug", "api"]},
        SID,
        (*PARTIAL, "--resume", SID, "--model", "opus", "--debug", "api"),
    ),
]


@pytest.mark.parametrize(
    ("raw", "session_id", "argv"), [a[1:] for a in ARGV], ids=[a[0] for a in ARGV]
)
def test_argv(raw: dict[str, Any], session_id: str | None, argv: tuple[str, ...]) -> None:
    cmd = command(raw, session_id)
    assert cmd.argv == argv
    assert cmd.files == ()


def test_prompt_goes_on_stdin_never_argv() -> None:
    prompt = "Refactor foo() — keep the API ✓"
    cmd = command({}, prompt=prompt)
    assert cmd.stdin == prompt.encode()
    assert not any(prompt in a for a in cmd.argv if isinstance(a, str))


def test_interrupt_with_sigint_and_run_in_cwd() -> None:
    cmd = command({"cwd": "/srv/repo"})
    assert cmd.interrupt_signal is signal.SIGINT
    assert cmd.cwd == "/srv/repo"
    assert command({}).cwd is None


def test_inline_mcp_config_is_a_secret_file_never_argv() -> None:
    token = "Bearer sk-ant-api03-SECRETSECRETSECRET"
    server = {
        "mcpServers": {
            "s": {
                "type": "http",
                "url": "http://127.0.0.1:9/mcp",
                "headers": {"Authorization": token},
            }
        }
    }
    cmd = command({"mcp_config": ["/etc/mcp.json", server, json.dumps(server)]})
    first, second = cmd.files
    assert cmd.argv == (
        *PARTIAL,
        "--mcp-config",
        "/etc/mcp.json",
        "--mcp-config",
        first,
        "--mcp-config",
        second,
    )
    assert (first.name, second.name) == ("mcp-config-1.json", "mcp-config-2.json")
    assert json.loads(first.content) == server == json.loads(second.content)
    assert token not in repr(cmd)
    assert not any(token in a for a in cmd.argv if isinstance(a, str))


def test_inline_settings_is_a_secret_file() -> None:
    settings = {"env": {"GITHUB_TOKEN": "ghp_SECRETSECRETSECRETSECRET"}}
    cmd = command({"settings": settings})
    (secret,) = cmd.files
    assert cmd.argv == (*PARTIAL, "--settings", secret)
    assert secret == SecretFile(
        "settings.json", b'{"env":{"GITHUB_TOKEN":"ghp_SECRETSECRETSECRETSECRET"}}'
    )


def test_system_prompt_over_32_kib_goes_by_file() -> None:
    at_limit = "x" * SYSTEM_PROMPT_ARGV_LIMIT
    assert command({"system_prompt": at_limit}).argv == (*PARTIAL, "--system-prompt", at_limit)
    big = "é" * (SYSTEM_PROMPT_ARGV_LIMIT // 2 + 1)  # over the limit in bytes, not in characters
    cmd = command({"system_prompt": big, "append_system_prompt": big})
    prompt_file, append_file = cmd.files
    assert cmd.argv == (
        *PARTIAL,
        "--system-prompt-file",
        prompt_file,
        "--append-system-prompt-file",
        append_file,
    )
    assert prompt_file == SecretFile("system-prompt.txt", big.encode())
    assert append_file.name == "append-system-prompt.txt"


@pytest.mark.parametrize("bad", ["", "-rf", "a b", "x\ny"])
def test_a_checkpointed_id_that_would_be_read_as_a_flag_is_refused(bad: str) -> None:
    with pytest.raises(InvalidOptions) as info:
        command({}, bad)
    assert info.value.key == "session_id"


def test_env_inherit_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-ambient-00000000")
    monkeypatch.setenv("AGENTRT_PROBE", "1")
    env = command({"env": {"EXTRA": "2"}}).env
    assert env["ANTHROPIC_API_KEY"] == "sk-ant-ambient-00000000"
    assert (env["AGENTRT_PROBE"], env["EXTRA"]) == ("1", "2")


def test_config_dir_sets_the_env_and_strips_ambient_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-ambient-00000000")
    monkeypatch.setenv("AGENTRT_PROBE", "1")
    env = command({"config_dir": "/users/ada/.claude-work"}).env
    assert env["CLAUDE_CONFIG_DIR"] == "/users/ada/.claude-work"
    assert "ANTHROPIC_API_KEY" not in env and env["AGENTRT_PROBE"] == "1"
    tenant = command({"config_dir": "/c", "env": {"ANTHROPIC_API_KEY": "sk-ant-tenant-1111"}}).env
    assert tenant["ANTHROPIC_API_KEY"] == "sk-ant-tenant-1111"
    kept = command({"config_dir": "/c", "env_policy": "inherit"}).env
    assert kept["ANTHROPIC_API_KEY"] == "sk-ant-ambient-00000000"


def test_isolated_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTRT_PROBE", "1")
    env = command(
        {"env_policy": "isolated", "env": {"ANTHROPIC_BASE_URL": "http://127.0.0.1:1"}}
    ).env
    assert "AGENTRT_PROBE" not in env
    assert env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:1"
    assert set(env) <= {
        "PATH",
        "HOME",
        "LANG",
        "LANGUAGE",
        "ANTHROPIC_BASE_URL",
        "DISABLE_AUTOUPDATER",
    } | {k for k in env if k.startswith("LC_") or "PROXY" in k.upper() or "CERT" in k or "CA_" in k}


def test_auto_update_is_off_unless_asked_for_and_env_wins() -> None:
    assert command({}).env["DISABLE_AUTOUPDATER"] == "1"
    assert "DISABLE_AUTOUPDATER" not in command({"auto_update": True}).env
    assert command({"env": {"DISABLE_AUTOUPDATER": "0"}}).env["DISABLE_AUTOUPDATER"] == "0"
    live = backend.live(backend.parse_options({}), session_id=None).command
    assert live.env["DISABLE_AUTOUPDATER"] == "1"
    with pytest.raises(InvalidOptions, match="auto_update"):
        backend.parse_options({"auto_update": 1})


def test_version_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-ambient-00000000")
    options = backend.parse_options({"binary": "/opt/claude", "cwd": "/srv", "config_dir": "/c"})
    cmd = backend.version_command(options)
    assert cmd.argv == ("/opt/claude", "--version")
    assert cmd.cwd == "/srv" and cmd.stdin == b"" and cmd.interrupt_signal is None
    assert cmd.env["CLAUDE_CONFIG_DIR"] == "/c" and "ANTHROPIC_API_KEY" not in cmd.env


def test_claude_backend_implements_the_protocol() -> None:
    assert_implements(Backend, backend)
    assert_implements(Translator, backend.translator(backend.parse_options({})))
    assert backend.name == "claude"


def test_registered_under_the_entry_point_name() -> None:
    from importlib.metadata import entry_points

    (entry,) = [e for e in entry_points(group="agentrt.backends") if e.name == "claude"]
    assert entry.load() is ClaudeBackend


def test_backend_gives_a_fresh_translator_per_turn() -> None:
    backend = ClaudeBackend()
    options = backend.parse_options({})
    first, second = backend.translator(options), backend.translator(options)
    assert first is not second
    translate(frames("text_partial.jsonl"), first)
    assert second.feed(frames("text_partial.jsonl")[0])[0] == SessionEvent(
        session_id=SID, model=MODEL
    )
