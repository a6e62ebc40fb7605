"""``agentrt doctor`` on the acp backend: nothing to check until the agent's command is
known (the option, or $AGENTRT_ACP_COMMAND); then its binary, version and what it supports."""

from __future__ import annotations

from pathlib import Path

from ._run import agentrt
from .test_cli_doctor import lines_of


async def test_doctor_skips_acp_until_its_command_is_named(base_env: dict[str, str]) -> None:
    env = {k: v for k, v in base_env.items() if k != "AGENTRT_ACP_COMMAND"}
    found = lines_of((await agentrt("doctor", env=env)).stdout)
    assert found["acp backend"].startswith("-- option 'command'=None: name the ACP agent")
    run = await agentrt("doctor", "--backend", "acp", env=env)
    assert run.code == 1 and "AGENTRT_ACP_COMMAND" in run.stdout


async def test_doctor_checks_the_named_acp_agent(base_env: dict[str, str], tmp_path: Path) -> None:
    agent = tmp_path / "acp-agent"
    agent.write_text("#!/bin/sh\necho 'acp-agent 4.5.6'\n")
    agent.chmod(0o755)
    env = {**base_env, "AGENTRT_ACP_COMMAND": f"{agent} --acp"}
    found = lines_of((await agentrt("doctor", "--backend", "acp", env=env)).stdout)
    assert found["acp binary"] == f"ok {agent}"
    assert found["acp version"] == "ok 4.5.6 (the version agentrt was written for)"
    assert found["acp supports"] == (
        "ok per turn yes, warm yes, approvals yes, hooks no, app tools no, portable sessions no"
    )
