"""`agentrt doctor`: what it finds, what it says to fix, its exit code, and no secrets."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import trio

from agentrt.backends.claude import ClaudeBackend
from agentrt.backends.codex import CodexBackend
from agentrt.lowlevel import ProcessTracker
from agentrt.testing import AnthropicText, FakeAnthropic

from ._run import agentrt

REALCLI = Path(__file__).parents[1] / "realcli"
SECRET = "sk-ant-doctor-0123456789abcdef"


def test_backends_were_written_for_the_pinned_versions() -> None:
    # Bumping a pin means re-checking the backend against that CLI, and saying so here.
    claude, codex = ClaudeBackend().info(), CodexBackend().info()
    assert (REALCLI / "CLAUDE_VERSION").read_text().strip() == claude.written_for
    assert (REALCLI / "CODEX_VERSION").read_text().strip() == codex.written_for


def lines_of(text: str) -> dict[str, str]:
    """`[ ok] area name  detail` lines by "area name"."""
    found = {}
    for line in text.splitlines():
        if line.startswith("[") and "]" in line:
            status, rest = line[1:].split("]", 1)
            label, _, detail = rest.strip().partition("  ")
            found[label.strip()] = f"{status.strip()} {detail.strip()}"
    return found


@pytest.mark.realcli
async def test_claude_with_an_api_key(base_env: dict[str, str], claude_bin: Path) -> None:
    env = {**base_env, "CLAUDE_CLI": str(claude_bin), "ANTHROPIC_API_KEY": SECRET}
    run = await agentrt("doctor", "--backend", "claude", env=env)
    assert run.code == 0, run.stdout
    assert SECRET not in run.stdout + run.stderr
    found = lines_of(run.stdout)
    assert found["claude binary"] == f"ok {claude_bin}"
    assert found["claude version"] == "ok 2.1.332 (the version agentrt was written for)"
    assert (
        found["claude auth (inherit)"]
        == "ok ANTHROPIC_API_KEY (API key, billed to the API account)"
    )
    assert found["claude auth (profile)"].startswith(
        "WARN agents with env_policy='profile' cannot authenticate: this policy drops "
        "ANTHROPIC_API_KEY"
    )
    assert "fix: run `claude`, then /login" in run.stdout
    assert "; or give the agent its credential with env={...}" in run.stdout
    assert found["claude supports"] == (
        "ok per turn yes, warm yes, approvals yes, hooks yes, app tools yes, portable sessions yes"
    )
    assert found["store file"] == f"ok {base_env['AGENTRT_STORE']} (created on first use)"
    assert found["system limits"].startswith("ok ulimit -u")
    assert run.stdout.rstrip().endswith("healthy")


@pytest.mark.realcli
async def test_a_login_file_serves_every_policy(base_env: dict[str, str], claude_bin: Path) -> None:
    login = Path(base_env["HOME"]) / ".claude" / ".credentials.json"
    login.parent.mkdir()
    login.write_text("{}")
    env = {**base_env, "CLAUDE_CLI": str(claude_bin), "CLAUDE_CODE_OAUTH_TOKEN": SECRET}
    run = await agentrt("doctor", "--backend", "claude", "--json", env=env)
    assert run.code == 0 and SECRET not in run.stdout
    report = json.loads(run.stdout)
    assert report["healthy"] is True
    auth = {c["name"]: c for c in report["checks"] if c["name"].startswith("auth")}
    assert auth["auth (inherit)"]["detail"] == (
        "CLAUDE_CODE_OAUTH_TOKEN (headless subscription token); also login file "
        "~/.claude/.credentials.json"
    )
    for policy in ("profile", "isolated"):
        assert auth[f"auth ({policy})"]["status"] == "ok"
        assert auth[f"auth ({policy})"]["detail"].startswith(
            "login file ~/.claude/.credentials.json"
        )
        assert "CLAUDE_CODE_OAUTH_TOKEN not passed" in auth[f"auth ({policy})"]["detail"]


async def test_missing_binary_is_unhealthy_with_its_fix(base_env: dict[str, str]) -> None:
    env = {**base_env, "CLAUDE_CLI": "/nonexistent/claude"}
    run = await agentrt("doctor", "--backend", "claude", env=env)
    assert run.code == 1
    assert lines_of(run.stdout)["claude binary"] == "FAIL '/nonexistent/claude' not found on PATH"
    assert (
        "fix: install Claude Code (npm install -g @anthropic-ai/claude-code) or set CLAUDE_CLI"
        in run.stdout
    )
    assert run.stdout.rstrip().endswith("NOT healthy: fix the problems above")


def path_without_claude(env: dict[str, str]) -> str:
    """``env``'s PATH without the folders that hold a ``claude``: a fresh clone's."""
    folders = env.get("PATH", "").split(os.pathsep)
    return os.pathsep.join(f for f in folders if f and not os.path.exists(f"{f}/claude"))


@pytest.mark.realcli
async def test_the_pinned_claude_off_path_is_named_with_how_to_use_it(
    base_env: dict[str, str], claude_bin: Path
) -> None:
    # After `make demo`: the pinned claude is under .cache/, nothing is on PATH.
    env = {**base_env, "PATH": path_without_claude(base_env)}
    run = await agentrt("doctor", "--backend", "claude", env=env)
    assert run.code == 1
    assert lines_of(run.stdout)["claude binary"] == (
        "FAIL 'claude' not found on PATH; found claude 2.1.332 (pinned, "
        ".cache/claude-2.1.332/node_modules/.bin/claude), which `make claude-cli` installed"
    )
    assert f"fix: set CLAUDE_CLI={claude_bin} for agents to use the pinned claude" in run.stdout
    assert "npm install" not in run.stdout
    run = await agentrt("doctor", env=env)
    assert lines_of(run.stdout)["agentrt backends"] == "FAIL no supported CLI is installed"
    assert "npm install -g @anthropic-ai" not in run.stdout
    # Pointed at it, agents run it: the binary is found and its version checked.
    run = await agentrt("doctor", "--backend", "claude", env={**env, "CLAUDE_CLI": str(claude_bin)})
    assert lines_of(run.stdout)["claude binary"] == f"ok {claude_bin}"
    assert lines_of(run.stdout)["claude version"].startswith("ok 2.1.332")


@pytest.mark.realcli
async def test_without_backend_one_usable_cli_is_enough(
    base_env: dict[str, str], claude_bin: Path
) -> None:
    env = {**base_env, "CLAUDE_CLI": str(claude_bin), "ANTHROPIC_API_KEY": SECRET}
    env["CODEX_CLI"] = "/nonexistent/codex"
    run = await agentrt("doctor", env=env)
    assert run.code == 0, run.stdout
    assert lines_of(run.stdout)["codex binary"].startswith("-- '/nonexistent/codex' not found")
    env["CLAUDE_CLI"] = "/nonexistent/claude"
    run = await agentrt("doctor", env=env)
    assert run.code == 1
    assert lines_of(run.stdout)["agentrt backends"] == "FAIL no supported CLI is installed"


@pytest.mark.realcli
async def test_codex_version_and_login(base_env: dict[str, str]) -> None:
    codex = Path(__file__).parents[2] / ".cache/npm/codex-0.171.0/node_modules/.bin/codex"
    if not codex.exists():
        pytest.skip("the pinned codex is not installed (`make codex-cli`)")
    codex_home = Path(base_env["HOME"]) / "codex-home"
    codex_home.mkdir()
    env = {**base_env, "CODEX_CLI": str(codex), "CODEX_HOME": str(codex_home)}
    run = await agentrt("doctor", "--backend", "codex", env=env)
    assert run.code == 1
    found = lines_of(run.stdout)
    assert found["codex version"] == "ok 0.171.0 (the version agentrt was written for)"
    assert found["codex auth"] == "FAIL no credential under any env policy"
    (codex_home / "auth.json").write_text("{}")
    run = await agentrt("doctor", "--backend", "codex", env=env)
    assert run.code == 0, run.stdout
    found = lines_of(run.stdout)
    assert (
        found["codex auth (inherit)"]
        == "ok login file ~/codex-home/auth.json (from the CLI's login)"
    )
    # isolated passes no CODEX_HOME: codex then looks in ~/.codex.
    assert found["codex auth (isolated)"].startswith("WARN agents with env_policy='isolated'")


async def test_an_unusable_store_is_reported(base_env: dict[str, str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.sqlite3"
    bad.write_text("not a database")
    env = {**base_env, "CLAUDE_CLI": "/nonexistent", "CODEX_CLI": "/nonexistent"}
    run = await agentrt("doctor", "--store", str(bad), "--json", env=env)
    assert run.code == 1
    [store] = [c for c in json.loads(run.stdout)["checks"] if c["area"] == "store"]
    assert store["status"] == "fail" and str(bad) in store["detail"]
    assert store["fix"] == "move the file aside, or use --store"


@pytest.mark.realcli
async def test_smoke_runs_one_real_turn(claude_env: dict[str, str], api: FakeAnthropic) -> None:
    api.set_script([AnthropicText("pong")])
    run = await agentrt("doctor", "--backend", "claude", "--smoke", env=claude_env)
    assert run.code == 0, run.stdout + run.stderr
    assert lines_of(run.stdout)["claude smoke turn"].startswith("ok answered 'pong' (")
    [call] = api.message_requests
    assert call.last_user_text() == "Reply with the single word: pong"
    assert call.body["tools"] == []  # the smoke turn offers the model no tools
    api.set_script([])  # the script is exhausted: the fake answers 500
    run = await agentrt("doctor", "--backend", "claude", "--smoke", env=claude_env)
    assert run.code == 1
    assert lines_of(run.stdout)["claude smoke turn"].startswith(
        "FAIL agent 'claude': the turn failed"
    )


async def test_it_says_which_process_isolation_is_in_force(base_env: dict[str, str]) -> None:
    env = {**base_env, "CLAUDE_CLI": "/nonexistent/claude"}
    run = await agentrt("doctor", "--backend", "claude", env={**env, "AGENTRT_CGROUP": "off"})
    assert lines_of(run.stdout)["system process isolation"] == "ok /proc walk (AGENTRT_CGROUP=off)"
    # What a runtime's tracker finds here is what doctor, started here, says: the same cgroup
    # (each makes its own below it), or the /proc walk for the same reason.
    async with trio.open_nursery() as nursery:
        tracker = ProcessTracker()
        await nursery.start(tracker.run)
        here = tracker.isolation
        nursery.cancel_scope.cancel()
    run = await agentrt("doctor", "--backend", "claude", env=env)
    shown = lines_of(run.stdout)["system process isolation"]
    if here.startswith("cgroup v2 at "):
        parent = here.rsplit("/", 1)[0]
        assert shown.startswith(f"ok {parent}/agentrt-")
    else:
        assert shown.startswith("ok /proc walk (")


async def test_it_says_whether_telemetry_is_active(base_env: dict[str, str]) -> None:
    env = {**base_env, "CLAUDE_CLI": "/nonexistent/claude"}
    env = {k: v for k, v in env.items() if not k.startswith("OTEL_")}
    run = await agentrt("doctor", "--backend", "claude", env=env)
    assert (
        lines_of(run.stdout)["telemetry opentelemetry"].startswith("-- opentelemetry-api 1.")
        and "no SDK tracer or meter provider is configured" in run.stdout
    )
    # What opentelemetry-instrument does: the SDK's providers, named in the environment.
    sdk = {
        **env,
        "OTEL_PYTHON_TRACER_PROVIDER": "sdk_tracer_provider",
        "OTEL_PYTHON_METER_PROVIDER": "sdk_meter_provider",
    }
    run = await agentrt("doctor", "--backend", "claude", "--json", env=sdk)
    [check] = [c for c in json.loads(run.stdout)["checks"] if c["area"] == "telemetry"]
    assert check["status"] == "ok"
    assert check["detail"].startswith("active (opentelemetry-api 1.")
    assert "traces: opentelemetry.sdk.trace.TracerProvider" in check["detail"]
    assert "metrics: opentelemetry.sdk.metrics" in check["detail"]


async def test_without_the_otel_extra_telemetry_is_skipped_with_its_fix(
    base_env: dict[str, str], tmp_path: Path
) -> None:
    # A package first on the path that cannot be imported: the extra as if not installed.
    (tmp_path / "opentelemetry").mkdir()
    (tmp_path / "opentelemetry" / "__init__.py").write_text("raise ImportError('not here')\n")
    env = {**base_env, "CLAUDE_CLI": "/nonexistent/claude", "PYTHONPATH": str(tmp_path)}
    run = await agentrt("doctor", "--backend", "claude", "--json", env=env)
    [check] = [c for c in json.loads(run.stdout)["checks"] if c["area"] == "telemetry"]
    assert (check["status"], check["detail"]) == (
        "skip",
        "opentelemetry-api is not installed: no spans or metrics",
    )
    assert check["fix"] is not None and "agentrt[otel]" in check["fix"]


async def test_the_store_is_checked_as_ask_would_open_it(
    base_env: dict[str, str], tmp_path: Path
) -> None:
    env = {**base_env, "CLAUDE_CLI": "/nonexistent", "CODEX_CLI": "/nonexistent"}

    async def store_check(path: str) -> dict[str, str]:
        run = await agentrt("doctor", "--store", path, "--json", env=env)
        [check] = [c for c in json.loads(run.stdout)["checks"] if c["area"] == "store"]
        return dict(check)

    # /proc is a directory the kernel lets nobody create files in, root included.
    check = await store_check("/proc/sessions.sqlite3")
    assert check["status"] == "fail"
    assert check["detail"].startswith("/proc/sessions.sqlite3 cannot be created: cannot open")
    missing = tmp_path / "no" / "sessions.sqlite3"
    check = await store_check(str(missing))
    assert check["status"] == "fail"
    assert check["detail"].startswith(f"session store {missing}: its directory")
    assert not missing.parent.exists()
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    check = await store_check(str(fresh / "sessions.sqlite3"))
    assert check["status"] == "ok" and check["detail"].endswith("(created on first use)")
    assert list(fresh.iterdir()) == []  # the scratch file it tried is gone
