"""A credential's park and halt kept in the store (issue 39), across programs: a program
meets a usage limit and an expired login and ends; `agentrt status` and `agentrt doctor`
then show why its agents are held, and the next program on the file runs the request the
first one accepted only after the reset; `agentrt unhalt` lets the agents of a program that
holds them go on. Real programs (subprocesses) on a real store."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from typing import Any

import pytest
import trio

from agentrt import Agent, PostgresStore, SQLiteStore, StopReason, TurnFailed, open_runtime
from agentrt.testing import Fail, ScriptedBackend, reply

from ._run import agentrt

HOUR = 3600.0
RESET = 10.0  # seconds from the first program's being ready to the reset, in real time
BOUND = 60.0  # a loaded machine's bound on each program; never reached when all is well

_IMPORTS = """
import json, sys, time
import trio
from agentrt import Agent, PostgresStore, SQLiteStore, StopReason, TurnFailed, open_runtime
from agentrt.testing import Fail, ScriptedBackend, reply

where = sys.argv[1]
store = PostgresStore(where) if "host=" in where else SQLiteStore(where)

# When the usage limit resets, as the test says once the program is ready: its start
# (imports, the store) takes what load makes it take, and the reset counts from after.
async def reset_time():
    print("ready", flush=True)
    return float(await trio.to_thread.run_sync(sys.stdin.readline))
"""

# Meets the usage limit of credential "team" (agent "a") and the expiry of login "login"
# (agent "h"), accepts a keyed request for "a", and ends.
FIRST = (
    _IMPORTS
    + """
async def main():
    expired = ScriptedBackend([Fail(StopReason.CREDENTIAL_EXPIRED, "OAuth token has expired")])
    async with open_runtime(store=store) as rt:
        resets_at = await reset_time()
        limited = ScriptedBackend(
            [Fail(StopReason.USAGE_LIMIT, "You've hit your limit", resets_at=resets_at)]
        )
        await rt.start_agent(Agent, name="a", backend=limited, credential="team")
        await rt.start_agent(Agent, name="h", backend=expired, credential="login")
        for name in ("a", "h"):
            try:
                await rt.ask(name, "first")
            except TurnFailed as exc:
                print(name, exc.reason.value)
        await rt.tell("a", "later", key="job-1")

trio.run(main)
"""
)

# Runs agent "a" on credential "team", whose turns meet the limit until the reset, and
# waits for the keyed request the first program accepted.
SECOND = (
    _IMPORTS
    + """
async def main():
    resets_at = await reset_time()

    def turn(call):
        if time.time() < resets_at:
            return [Fail(StopReason.USAGE_LIMIT, "You've hit your limit", resets_at=resets_at)]
        return reply(call.prompt.upper())

    backend = ScriptedBackend(default=turn)
    async with open_runtime(store=store) as rt:
        await rt.start_agent(Agent, name="a", backend=backend, credential="team")
        result = await rt.wait(await rt.request("a", "job-1"))
        text = result.response.text
        print(json.dumps({"text": text, "at": time.time(), "prompts": backend.prompts}))

trio.run(main)
"""
)


async def program(
    source: str, env: dict[str, str], where: str, resets: Callable[[], float]
) -> tuple[str, float]:
    """Run ``source`` as a program of its own on the store ``where``, telling it once it is
    ready the reset time ``resets`` gives then; its output after that, and that time."""
    process = await trio.lowlevel.open_process(
        [sys.executable, "-c", textwrap.dedent(source), where],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdin and process.stdout and process.stderr
    output, errors = bytearray(), bytearray()

    async def gather(stream: trio.abc.ReceiveStream, into: bytearray) -> None:
        async for chunk in stream:
            into.extend(chunk)

    try:
        with trio.fail_after(BOUND):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(gather, process.stderr, errors)
                while b"ready\n" not in output:
                    chunk = await process.stdout.receive_some()
                    assert chunk, errors.decode()
                    output.extend(chunk)
                resets_at = resets()
                await process.stdin.send_all(f"{resets_at!r}\n".encode())
                await gather(process.stdout, output)
            code = await process.wait()
    finally:
        if process.returncode is None:
            process.kill()
            with trio.CancelScope(shield=True):
                await process.wait()
    assert code == 0, errors.decode()
    return output.decode().split("ready\n", 1)[1], resets_at


@pytest.fixture(params=["sqlite", "postgres"])
def store_argument(request: pytest.FixtureRequest, base_env: dict[str, str]) -> str:
    if request.param == "sqlite":
        return base_env["AGENTRT_STORE"]
    dsn: str = request.getfixturevalue("postgres_dsn")
    return dsn


async def test_status_shows_the_agents_of_a_dead_program_parked_and_halted(
    base_env: dict[str, str], store_argument: str
) -> None:
    said, resets_at = await program(FIRST, base_env, store_argument, lambda: time.time() + HOUR)
    assert said.split() == ["a", "usage_limit", "h", "credential_expired"]
    run = await agentrt("status", "--store", store_argument, "--json", env=base_env)
    assert run.code == 0, run.stderr
    rows: dict[str, dict[str, Any]] = {row["name"]: row for row in json.loads(run.stdout)}
    a, h = rows["a"], rows["h"]
    assert (a["state"], a["credential"], a["parked_until"]) == ("parked", "team", resets_at)
    assert a["park_reason"] == "usage limit met by agent 'a'" and a["halt_reason"] is None
    assert a["queued"]["keys"] == ["job-1"]
    assert (h["state"], h["credential"], h["parked_until"]) == ("halted", "login", None)
    assert h["halt_reason"].startswith("credential_expired: login: renew the login")
    run = await agentrt("status", "--store", store_argument, env=base_env)
    assert run.code == 0, run.stderr
    lines = {line.split()[0]: line for line in run.stdout.splitlines()[2:] if line.strip()}
    assert lines["a"].split()[1] == "parked" and "usage limit met by agent 'a'" in lines["a"]
    assert lines["h"].split()[1] == "halted" and "credential_expired: login" in lines["h"]


async def test_doctor_reports_a_parked_credential_and_a_halted_login_with_the_fix(
    base_env: dict[str, str],
) -> None:
    where = base_env["AGENTRT_STORE"]
    await program(FIRST, base_env, where, lambda: time.time() + HOUR)
    run = await agentrt("doctor", "--backend", "claude", "--json", env=base_env)
    checks = {c["name"]: c for c in json.loads(run.stdout)["checks"] if c["area"] == "store"}
    team, login = checks["credential team"], checks["credential login"]
    assert team["status"] == "warn" and "parked until" in team["detail"]
    assert "'a'" in team["detail"] and team["fix"].startswith("wait:")
    assert login["status"] == "fail" and "login expired since" in login["detail"]
    assert "'h'" in login["detail"] and login["fix"].startswith("log the CLI in again")
    assert run.code == 1  # an expired login needs someone
    run = await agentrt("doctor", "--backend", "claude", env=base_env)
    assert "credential team" in run.stdout and "fix: wait:" in run.stdout


async def test_the_next_program_on_the_file_runs_the_parked_request_after_the_reset(
    base_env: dict[str, str],
) -> None:
    where = base_env["AGENTRT_STORE"]
    _, resets_at = await program(FIRST, base_env, where, lambda: time.time() + RESET)
    assert time.time() < resets_at, "the first program took longer than RESET to end"
    said, _ = await program(SECOND, base_env, where, lambda: resets_at)
    answered = json.loads(said)
    assert answered["text"] == "LATER" and answered["at"] >= resets_at
    assert answered["prompts"] == ["later"]  # no turn ran before the reset
    run = await agentrt("status", "--json", env=base_env)
    [a] = [row for row in json.loads(run.stdout) if row["name"] == "a"]
    assert (a["state"], a["parked_until"]) == ("not owned", None)


def open_store(where: str) -> SQLiteStore | PostgresStore:
    return PostgresStore(where) if "host=" in where else SQLiteStore(where)


async def status_rows(env: dict[str, str], where: str) -> dict[str, dict[str, Any]]:
    run = await agentrt("status", "--store", where, "--json", env=env)
    assert run.code == 0, run.stderr
    return {row["name"]: row for row in json.loads(run.stdout)}


async def test_unhalt_from_another_program_lets_the_owner_go_on_without_a_restart(
    base_env: dict[str, str], store_argument: str
) -> None:
    expired = ScriptedBackend(
        [Fail(StopReason.CREDENTIAL_EXPIRED, "OAuth token has expired")],
        default=lambda call: reply(call.prompt.upper()),
    )
    echo = ScriptedBackend(default=lambda call: reply(call.prompt.upper()))
    # While halted, the owner reads the store every login_check seconds.
    common: dict[str, Any] = {"credential": "team", "login_check": 0.05}
    async with open_runtime(store=open_store(store_argument)) as rt:
        await rt.start_agent(Agent, name="a", backend=expired, **common)
        await rt.start_agent(Agent, name="b", backend=echo, **common)
        # An agent whose policy is "fail" is not halted with the others.
        await rt.start_agent(Agent, name="f", backend=echo, on_credential_expired="fail", **common)
        with pytest.raises(TurnFailed):
            await rt.ask("a", "first")
        waiting = await rt.tell("b", "waits")
        rows = await status_rows(base_env, store_argument)
        assert [rows[n]["state"] for n in ("a", "b", "f")] == ["halted", "halted", "owned"]
        assert rows["f"]["halt_reason"] is None and rows["f"]["credential"] is None
        assert (await rt.status("b")).state == "halted"

        run = await agentrt("unhalt", "team", "--store", store_argument, "--json", env=base_env)
        assert run.code == 0, run.stderr
        [unhalted] = json.loads(run.stdout)["unhalted"]
        assert (unhalted["credential"], unhalted["agents"]) == ("team", ["a", "b"])
        assert unhalted["halt_reason"].startswith("credential_expired: team")
        with trio.fail_after(BOUND):
            result = await rt.wait(waiting)
        assert result.response is not None and result.response.text == "WAITS"
        assert (await rt.ask("a", "again")).text == "AGAIN"
        rows = await status_rows(base_env, store_argument)
        assert [rows[n]["state"] for n in ("a", "b", "f")] == ["owned"] * 3

        # Nothing is halted any more: naming it is an error, --all says so.
        run = await agentrt("unhalt", "team", "--store", store_argument, env=base_env)
        assert run.code == 1 and "credential 'team' is not halted" in run.stderr
        run = await agentrt("unhalt", "--all", "--store", store_argument, "--json", env=base_env)
        assert (run.code, json.loads(run.stdout)) == (0, {"unhalted": []})


async def test_unhalt_names_an_agent_or_every_halted_credential_and_refuses_others(
    base_env: dict[str, str],
) -> None:
    where = base_env["AGENTRT_STORE"]
    await program(FIRST, base_env, where, lambda: time.time() + HOUR)
    for args in (["nobody"], ["--agent", "a"], ["--agent", "nobody"], ["team"]):
        run = await agentrt("unhalt", *args, "--json", env=base_env)
        error = json.loads(run.stdout)["error"]
        assert (run.code, error["exit_code"]) == (1, 1), run.stderr
        assert "agentrt doctor" in error["fix"]
    assert "(halted: 'login')" in (await agentrt("unhalt", "nobody", env=base_env)).stderr
    run = await agentrt("unhalt", "--agent", "h", env=base_env)
    assert run.code == 0 and "Unhalted credential login (agents 'h')" in run.stdout
    rows = await status_rows(base_env, where)
    assert (rows["h"]["state"], rows["a"]["state"]) == ("not owned", "parked")
    run = await agentrt("unhalt", "--all", env=base_env)
    assert (run.code, run.stdout.strip()) == (0, f"No credential is halted in {where}.")
    run = await agentrt("unhalt", "--all", "login", env=base_env)
    assert run.code == 2 and "not allowed with argument" in run.stderr
