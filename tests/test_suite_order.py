"""The suite's own order: a test marked ``long`` is collected before the others (so a
parallel run starts it first), the others keeping their order."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def test_long_tests_are_collected_first_and_the_rest_keep_their_order() -> None:
    files = ["test_alarm.py", "test_durable_requests_model.py", "test_suite_order.py"]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
        + [str(HERE / name) for name in files],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    collected = [
        Path(line.split("::")[0]).name for line in done.stdout.splitlines() if "::" in line
    ]
    # The model's two tests (one a policy) are long; the alarm's tests came first before.
    assert collected[:2] == ["test_durable_requests_model.py"] * 2
    rest = collected[2:]
    assert rest == sorted(rest) and set(rest) == {"test_alarm.py", "test_suite_order.py"}
