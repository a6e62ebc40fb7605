"""How a turn's CLI is started: with every signal at its default disposition and none
blocked, whatever the runtime inherited, so an interrupt reaches it in band."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

CHILD = Path(__file__).parent / "signal_child.py"
INIT = {"type": "system", "subtype": "init", "session_id": "s-1", "model": "fake-model"}


def script_cli(directory: Path) -> tuple[Path, Path]:
    """A ``claude`` that is a shell script: it records its signal state (the blocked and the
    ignored sets of /proc/self/status), reports a session and waits in ``sleep``, which a
    SIGINT at its default disposition ends."""
    binary, record = directory / "claude", directory / "signals"
    binary.write_text(
        "#!/bin/sh\n"
        # Read by the shell itself: a shell waiting for a child blocks every signal.
        'while read -r line; do case $line in Sig[BI]*) echo "$line";; esac; done'
        f" < /proc/self/status > '{record}'\n"
        f"echo '{json.dumps(INIT)}'\n"
        "exec sleep 600\n"
    )
    binary.chmod(0o755)
    return binary, record


def started_with_sigint_ignored() -> list[str]:
    # What a shell does for a background job (``runtime &``): SIGINT and SIGQUIT ignored.
    return ["sh", "-c", 'trap "" INT QUIT; exec "$@"', "sh"]


def block_sigint() -> None:
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})


@pytest.mark.parametrize(
    ("prefix", "preexec"),
    [(started_with_sigint_ignored(), None), ([], block_sigint)],
    ids=["sigint-ignored", "sigint-blocked"],
)
async def test_a_cli_is_interrupted_in_band_whatever_signal_state_the_runtime_inherited(
    tmp_path: Path, prefix: list[str], preexec: Any
) -> None:
    binary, record = script_cli(tmp_path)
    with trio.fail_after(60):
        done = await trio.run_process(
            [*prefix, sys.executable, str(CHILD), str(binary)],
            capture_stdout=True,
            preexec_fn=preexec,
            stderr=subprocess.STDOUT,
            check=False,
        )
    assert done.returncode == 0, done.stdout.decode()
    outcome = json.loads(done.stdout.decode().splitlines()[-1])
    # The CLI saw nothing ignored and nothing blocked, and died of the SIGINT itself: no
    # SIGTERM a second later.
    assert record.read_text().split() == ["SigBlk:", "0" * 16, "SigIgn:", "0" * 16], (
        record.read_text()
    )
    assert outcome == {"reason": "interrupted", "signal": signal.SIGINT, "runtime_unchanged": True}
