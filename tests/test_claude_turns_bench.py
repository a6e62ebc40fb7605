"""bench/claude_stream.py keeps working: a quick run (1 MB, one round) prints its tables.
Nothing about speed is asserted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).parent.parent / "bench" / "claude_stream.py"


def test_the_claude_stream_benchmark_runs_in_a_quick_mode() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--mb", "1", "--rounds", "1", "--tiny", "3"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "| `ask()`, claude backend |" in done.stdout
    assert "tiny turn (3 in a row)" in done.stdout
