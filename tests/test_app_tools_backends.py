"""How each backend points its CLI at the runtime's application-tools server: the URL and
the token reach the CLI, the token never on argv, and the tools are allowed to run."""

from __future__ import annotations

import json

import pytest
from _helpers import assert_implements

from agentrt.backend import AppToolsBackend, AppToolServer, SecretFile, bypass_proxy
from agentrt.backends.claude import ClaudeBackend
from agentrt.backends.codex import APP_TOOLS_TOKEN_VAR, CodexBackend

SERVER = AppToolServer("agentrt", "http://127.0.0.1:4321/mcp", "tok-0123456789abcdef")

pytestmark = pytest.mark.usefixtures("no_claude_cli")


def test_both_backends_serve_application_tools() -> None:
    assert_implements(AppToolsBackend, ClaudeBackend())
    assert_implements(AppToolsBackend, CodexBackend(environ={}))


def test_claude_gets_the_server_in_a_secret_mcp_config_and_allows_its_tools() -> None:
    backend = ClaudeBackend()
    options = backend.parse_options({"mcp_config": ["/etc/mcp.json"], "allowed_tools": ["Read"]})
    command = backend.command(backend.with_app_tools(options, SERVER), "hi", session_id=None)
    argv = command.argv
    assert all(SERVER.token not in str(a) for a in argv)
    assert argv[argv.index("--allowedTools") + 1] == "Read,mcp__agentrt"
    configs = [argv[i + 1] for i, a in enumerate(argv) if a == "--mcp-config"]
    assert configs[0] == "/etc/mcp.json"
    assert isinstance(configs[1], SecretFile)
    assert json.loads(configs[1].content) == {
        "mcpServers": {
            "agentrt": {
                "type": "http",
                "url": SERVER.url,
                "headers": {"Authorization": f"Bearer {SERVER.token}"},
            }
        }
    }
    assert SERVER.token not in repr(backend.with_app_tools(options, SERVER))


def test_claude_reaches_the_server_around_any_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    monkeypatch.setenv("NO_PROXY", "intranet.example")
    backend = ClaudeBackend()
    options = backend.parse_options({"env_policy": "isolated"})
    env = backend.command(backend.with_app_tools(options, SERVER), "hi", session_id=None).env
    assert env["HTTPS_PROXY"] == "http://proxy.example:3128"
    assert env["NO_PROXY"] == env["no_proxy"] == "intranet.example,127.0.0.1"


def test_bypass_proxy_keeps_the_hosts_already_bypassed() -> None:
    environ = {"no_proxy": "a.example, b.example", "NO_PROXY": "b.example,c.example"}
    assert bypass_proxy("127.0.0.1", {}, environ=environ) == {
        "NO_PROXY": "b.example,c.example,a.example,127.0.0.1",
        "no_proxy": "b.example,c.example,a.example,127.0.0.1",
    }
    # An explicit value replaces the inherited one of its name; a host already there stays once.
    assert bypass_proxy("127.0.0.1", {"NO_PROXY": "127.0.0.1"}, environ={})["no_proxy"] == (
        "127.0.0.1"
    )


def test_codex_gets_the_server_by_config_and_the_token_in_its_environment() -> None:
    backend = CodexBackend(environ={"PATH": "/bin"})
    options = backend.parse_options({"config": {"model_reasoning_effort": "low"}})
    served = backend.with_app_tools(options, SERVER)
    for session_id in (None, "3b241101-e2bb-4255-8caf-4136c566a962"):  # exec and exec resume
        command = backend.command(served, "hi", session_id=session_id)
        assert all(SERVER.token not in str(a) for a in command.argv)
        overrides = [command.argv[i + 1] for i, a in enumerate(command.argv) if a == "-c"]
        assert overrides == [
            "check_for_update_on_startup=false",
            'model_reasoning_effort="low"',
            f'mcp_servers.agentrt.url="{SERVER.url}"',
            f'mcp_servers.agentrt.bearer_token_env_var="{APP_TOOLS_TOKEN_VAR}"',
            'mcp_servers.agentrt.default_tools_approval_mode="approve"',
        ]
        assert command.env[APP_TOOLS_TOKEN_VAR] == SERVER.token
        assert command.env["NO_PROXY"] == command.env["no_proxy"] == "127.0.0.1"
    assert SERVER.token not in repr(served)
