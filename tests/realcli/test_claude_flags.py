"""The flag drift canary: the backend's argv, handed to the pinned binary, still parses.

About twenty representative option sets go through ``ClaudeBackend.parse_options`` and
``command()`` with an empty prompt; the real process driver runs each argv. The CLI parses
its arguments before anything else and, given no input, stops with "Input must be provided"
without calling the model (the fake checks that no call came). Only an argument rejection
("unknown option", a refused choice, a missing value) fails: a run that gets past parsing and
then fails for its own reasons (running as root with skipped permissions, an unknown agent)
has proved what this file is about. A flag that moves between CLI versions fails here, named
by its option set, instead of failing every turn of every agent that uses it.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any, get_args

import attrs
import pytest
import trio
from proc_helpers import Frames

from agentrt.backends.claude import SYSTEM_PROMPT_ARGV_LIMIT, ClaudeBackend, PermissionMode
from agentrt.lowlevel import ProcessLimits, open_cli_process

from ._claude import Claude

pytestmark = pytest.mark.realcli

# commander's own messages, which the CLI prints for arguments it cannot parse. The CLI's
# errors after parsing start with a capital "Error:" or name no option.
REJECTION = re.compile(
    r"^error: (?:unknown option|unknown command|too many arguments|missing required argument"
    r"|required option|option '[^']*' (?:argument|cannot be used))",
    re.MULTILINE,
)
NO_INPUT = "Input must be provided"
PARALLEL = 4


def option_sets(tmp: Path) -> dict[str, dict[str, Any]]:
    mcp_file = tmp / "mcp.json"
    mcp_file.write_text('{"mcpServers": {}}')
    prompt_file = tmp / "system.txt"
    prompt_file.write_text("You are terse.")
    sets: dict[str, dict[str, Any]] = {
        "defaults": {},
        "model": {"model": "claude-sonnet-4-5", "fallback_model": "claude-haiku-4-5"},
        "system_prompt": {"system_prompt": "You are terse.", "append_system_prompt": "Be brief."},
        "system_prompt_by_file": {"system_prompt": "x" * (SYSTEM_PROMPT_ARGV_LIMIT + 1)},
        "system_prompt_file": {"system_prompt_file": str(prompt_file)},
        "effort": {"effort": "high"},
        "limits": {"max_turns": 3, "max_budget_usd": 0.5},
        "json_schema": {"json_schema": {"type": "object", "properties": {"a": {"type": "string"}}}},
        "agent": {"agent": "reviewer"},
        "no_tools": {"tools": []},
        "tools": {
            "tools": ["Bash", "Read"],
            "allowed_tools": ["Bash(git:*)", "Read"],
            "disallowed_tools": ["WebFetch"],
        },
        "skip_permissions": {"dangerously_skip_permissions": True},
        "add_dir": {"add_dir": [str(tmp), str(tmp / "other")]},
        "mcp_inline": {"mcp_config": [{"mcpServers": {}}], "strict_mcp_config": True},
        "mcp_file": {"mcp_config": [str(mcp_file)]},
        "settings": {"settings": {"env": {}}, "setting_sources": ["user", "project"]},
        "no_setting_sources": {"setting_sources": []},
        "hermetic_full": {"hermetic": "full"},
        "hermetic_project": {"hermetic": "project"},
        "no_partial_messages": {"include_partial_messages": False},
        "resume": {"resume": str(uuid.uuid4())},
        "session_id": {"session_id": str(uuid.uuid4())},
        "continue": {"continue": True},
        "config_dir": {"config_dir": str(tmp / "config")},
    }
    for mode in get_args(PermissionMode):
        sets[f"permission_mode_{mode}"] = {"permission_mode": mode}
    return sets


@attrs.frozen
class Outcome:
    returncode: int | None
    stderr: str
    frames: int


async def run_argv(claude: Claude, options: dict[str, Any]) -> Outcome:
    backend = ClaudeBackend()
    parsed = backend.parse_options({**claude.agent_options(), **options})
    command = backend.command(parsed, "", session_id=None)
    async with open_cli_process(command, ProcessLimits(startup=60)) as proc:
        frames = [frame async for frame in Frames(proc)]
        status = await proc.wait()
        return Outcome(status.returncode, proc.stderr_tail, len(frames))


def rejection(outcome: Outcome) -> str | None:
    match = REJECTION.search(outcome.stderr)
    return match.group(0) if match else None


async def test_every_option_set_parses(claude: Claude, tmp_path: Path) -> None:
    sets = option_sets(tmp_path)
    outcomes: dict[str, Outcome] = {}
    limiter = trio.CapacityLimiter(PARALLEL)

    async def one(name: str) -> None:
        async with limiter:
            outcomes[name] = await run_argv(claude, sets[name])

    with trio.fail_after(120):
        async with trio.open_nursery() as nursery:
            for name in sets:
                nursery.start_soon(one, name)

    rejected = {name: r for name, o in outcomes.items() if (r := rejection(o)) is not None}
    assert rejected == {}, "the installed CLI refuses arguments the backend builds"
    # Past parsing, the empty prompt stopped the run before any work: no model call. (A few
    # sets stop even earlier, for their own reasons; most get to the missing input.)
    assert claude.api.message_requests == []
    reached_input = [name for name, o in outcomes.items() if NO_INPUT in o.stderr]
    assert "defaults" in reached_input and len(reached_input) >= len(sets) // 2, outcomes


async def test_the_canary_sees_a_rejection(claude: Claude) -> None:
    """The check is not vacuous: a flag the CLI does not know is caught."""
    outcome = await run_argv(claude, {"extra_args": ["--no-such-flag"]})
    assert rejection(outcome) == "error: unknown option"
    assert outcome.returncode == 1
