"""`agentrt demo`: the README's first command, with the pinned claude and with the bundled
fake CLI; what it shows and what it checked."""

from __future__ import annotations

import json
import re
import signal
import subprocess
from pathlib import Path

import pytest
import trio
from http_client import connect

from ._run import agentrt, open_agentrt

# What the demo's report checks, in the story's order.
CHECKS = (
    "queued work done",
    "watchdog fired",
    "next turn after the watchdog resumed",
    "CLI killed mid-turn",
    "restarted",
    "resumed the same session",
    "remembered",
    "no process left behind",
)


def assert_story(agents: dict[str, dict[str, object]]) -> None:
    for name in ("w1", "w2"):
        assert agents[name]["stop_reasons"] == {"complete": 2}
        assert agents[name]["session_id"]
    assert agents["sleepy"]["stop_reasons"] == {"total_timeout": 1, "complete": 1}
    # Noted 42, killed mid-migration (the crash fails that request), recalled 42.
    assert agents["fragile"]["stop_reasons"] == {"complete": 2, "process_crashed": 1}
    assert agents["fragile"]["restarts"] == 1
    for name in ("w1", "w2", "sleepy"):
        assert agents[name]["restarts"] == 0


@pytest.mark.realcli
async def test_demo_with_the_pinned_claude(base_env: dict[str, str], claude_bin: Path) -> None:
    run = await agentrt("demo", "--quick", "--json", env=base_env)
    assert run.code == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["ok"] is True
    assert report["model"].startswith("agentrt's fake Anthropic API at http://127.0.0.1:")
    assert report["cli"].startswith("claude 2.1.332 (pinned, ")
    assert list(report["checks"].items()) == [(check, True) for check in CHECKS]
    assert_story({a["name"]: a for a in report["agents"]})
    assert report["seconds"] < 60


async def test_demo_with_the_fake_cli_keeps_its_store(
    base_env: dict[str, str], tmp_path: Path
) -> None:
    store = tmp_path / "demo.sqlite3"
    run = await agentrt("demo", "--quick", "--fake-cli", "--store", str(store), env=base_env)
    assert run.code == 0, run.stdout + run.stderr
    out = run.stdout
    assert "CLI:   bundled fake CLI (--fake-cli)" in out
    assert f"store: {store}\n" in out
    for line in (
        "queued 4 jobs in the mailboxes of w1, w2; at most 3 CLIs run at once",
        "sleepy: the watchdog fired (total_timeout)",
        "sleepy's next turn continued the same session",
        "chaos: SIGKILL to fragile's CLI (pid ",
        "fragile: post_turn raises (let it crash)",
        "Summary (",
        "  ✓ no process left behind",
    ):
        assert line in out
    assert "supervisor restarted fragile (restart 1): a new instance (incarnation " in out
    assert "fragile recalled '42'" in out and "(the same session, resumed)" in out
    assert "  ✓ restarted\n" in out and "  ✓ resumed the same session\n" in out
    stored = json.loads(
        (await agentrt("sessions", "--json", "--store", str(store), env=base_env)).stdout
    )
    agents = {r["name"]: r for r in stored}
    assert sorted(agents) == ["fragile", "sleepy", "w1", "w2"]
    assert agents["sleepy"]["turns"] == 2 and agents["sleepy"]["last_stop_reason"] == "complete"
    summary = out[out.index("Summary (") :]
    for name, record in agents.items():
        assert f"{name} " in summary and record["session_id"] in summary


async def test_demo_with_debug_shows_the_runtimes_log(base_env: dict[str, str]) -> None:
    run = await agentrt("--debug", "demo", "--quick", "--fake-cli", env=base_env)
    assert run.code == 0, run.stdout + run.stderr
    log = run.stderr
    assert "agentrt: DEBUG: agent 'sleepy': turn starts on claude, session (new)" in log
    assert "agent 'sleepy': turn ended, total_timeout (the turn ran longer than its watchdog" in log
    assert "agent 'fragile': turn ended, process_crashed" in log
    # The board prints line by line between the log records, not as a live view.
    assert "sleepy started again, with the default watchdog, on its session" in run.stdout


async def test_demo_console_shows_the_demos_agents_until_ctrl_c(
    base_env: dict[str, str],
) -> None:
    env = {**base_env, "BROWSER": "true"}  # the URL is opened with a command that does nothing
    args = ("demo", "--quick", "--fake-cli", "--console")
    with trio.fail_after(120):
        async with open_agentrt(*args, env=env, stderr=subprocess.PIPE) as process:
            assert process.stderr is not None
            err = b""
            while b"Ctrl+C closes the console" not in err:
                err += await process.stderr.receive_some(4096)
            url = re.search(rb"console: (http://\S+)", err)
            assert url is not None
            address, token = url.group(1).decode().split("/?token=")
            port = int(address.rsplit(":", 1)[1])
            client = await connect(port, headers={"cookie": f"agentrt_console={token}"})
            await client.send("/events/fleet", method="GET")
            assert (await client.head())[0] == 200
            body = b""
            while b"\n\n" not in body:
                body += await client.stream.receive_some(65536)
            for name in (b"w1", b"sleepy", b"fragile"):
                assert b'"name": "%s"' % name in body
            await client.stream.aclose()
            process.send_signal(signal.SIGINT)
            assert await process.wait() == 0
