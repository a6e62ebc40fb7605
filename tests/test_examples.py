"""Every example runs, on the mock clock so its sleeps cost nothing."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import agentrt

EXAMPLES = Path(__file__).parent.parent / "examples"


def load(name: str) -> object:
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


async def test_scripted_team(autojump_clock: object) -> None:
    module = load("scripted_team")
    out: list[str] = []
    await module.main(out)  # type: ignore[attr-defined]
    # The reviewer and the flaky agent hold both process slots; the writer starts when
    # the reviewer is done (0.5 s), the flaky turn holds its slot until its watchdog (1 s).
    assert out == [
        "[ 0.00s] told the reviewer; poll says Pending()",
        "[ 0.03s] writer is processing (waiting for a slot) with 2 asks queued",
        "[ 0.70s] writer answered 'done: outline'",
        "[ 0.90s] writer answered 'done: draft'",
        "[ 1.10s] writer answered 'done: polish'",
        "[ 1.10s] reviewer finished: Completed (1 reviewed)",
        "[ 1.10s] flaky turn ended by its watchdog: total_timeout",
        "[ 1.20s] flaky answered 'done: try again' on its next turn",
        "[ 1.20s] writer's session: writer-1",
    ]


async def test_restart_resume_on_its_sqlite_store() -> None:
    module = load("restart_resume")
    out: list[str] = []
    await module.main(out)  # type: ignore[attr-defined]
    # Real time: the same story, the same lines after the timestamps.
    assert [line[9:] for line in out] == [line[9:] for line in RESTART_RESUME]


async def test_restart_resume(autojump_clock: object) -> None:
    module = load("restart_resume")
    out: list[str] = []
    await module.main(out, agentrt.MemoryStore())  # type: ignore[attr-defined]
    assert out == RESTART_RESUME


# The crash is at 0 s; the supervisor restarts the ledger after its 0.1 s backoff, with its
# state and its session, and the queued prompt runs on the new instance.
RESTART_RESUME = [
    "[ 0.00s] init_agent: a new Ledger instance",
    "[ 0.00s] CLI turn for 'coffee 3.50' (a new session)",
    "[ 0.00s] answer: 'filed: coffee 3.50'",
    "[ 0.00s] CLI turn for '??? smudged receipt' (--resume ledger-1)",
    "[ 0.00s] the agent crashed: agent 'ledger' stopped: handle_response raised"
    " ValueError: cannot read this entry",
    "[ 0.00s] status: restarting, 1 prompt queued",
    "[ 0.10s] init_agent: a new Ledger instance",
    "[ 0.10s] restore_state: entries filed so far: 1",
    "[ 0.10s] CLI turn for 'lunch 12.00' (--resume ledger-1)",
    "[ 0.10s] answer: 'filed: lunch 12.00' (after 1 restart)",
    "[ 0.10s] -- the program exits and starts again --",
    "[ 0.10s] init_agent: a new Ledger instance",
    "[ 0.10s] restore_state: entries filed so far: 2",
    "[ 0.10s] CLI turn for 'train 7.20' (--resume ledger-1)",
    "[ 0.10s] answer: 'filed: train 7.20' on session ledger-1",
    "[ 0.10s] the store: 4 turns, last one complete",
]
