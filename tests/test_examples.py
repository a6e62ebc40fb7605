"""Every example runs, on the mock clock so its sleeps cost nothing."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

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
