"""Durable requests (`agentrt.store.RequestStore`) across a real SIGKILL: a program fills
an agent's queue on an SQLite file and is killed mid-stream; the next program finds every
request it was told was accepted, in order, and ends the one that was running
``owner_died``. (The conformance checks and the state machine of the queue run in
test_store_conformance.py.)"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import trio

from agentrt import SQLiteStore
from agentrt.store import LeaseOwner

CHILD = Path(__file__).parent / "request_child.py"


async def test_every_request_accepted_before_a_sigkill_is_queued_and_the_running_one_ends(
    tmp_path: Path,
) -> None:
    path = tmp_path / "sessions.sqlite3"
    process = await trio.lowlevel.open_process(
        [sys.executable, str(CHILD), str(path)], stdout=subprocess.PIPE
    )
    assert process.stdout is not None
    lines: list[str] = []
    buffer = b""
    try:
        # Bounded, not timed: a loaded machine starts the child and fsyncs slowly.
        with trio.fail_after(120):
            # Killed mid-stream: once it has claimed one and accepted some after that.
            while sum(line.startswith("ACCEPTED") for line in lines) < 20:
                chunk = await process.stdout.receive_some()
                assert chunk, f"the child ended: {lines[-3:]}"
                buffer += chunk
                *done, buffer = buffer.split(b"\n")
                lines += [line.decode() for line in done]
    finally:
        process.send_signal(signal.SIGKILL)
        await process.wait()
    accepted = [line.split()[1] for line in lines if line.startswith("ACCEPTED")]
    claimed = [line.split()[1] for line in lines if line.startswith("CLAIMED")]
    assert claimed == ["p0"]
    owner = LeaseOwner(node="next", pid=1, start_time=0, runtime_id="next")
    async with SQLiteStore(path) as store:
        queued = [request.id for request in await store.queued_requests("coder")]
        # Every accepted one is there, in order; one more may have committed unprinted.
        assert queued[: len(accepted) - 1] == accepted[1:]
        assert len(queued) - (len(accepted) - 1) in (0, 1)
        assert (
            await store.enqueue_request(
                "coder",
                id="again",
                prompt="prompt 7",
                key="job-7",
                origin="tell",
                max_pending=100_000,
                max_pending_bytes=100_000_000,
            )
            == "p7"
        )  # a retried tell of an accepted request stores nothing
        [dead] = [lease for lease in await store.leases() if lease.name == "coder"]
        await store.acquire_lease("coder", owner, ttl=60.0, replacing=dead.epoch)
        [died] = await store.end_orphaned_requests("coder", retry=False, result_ttl=60.0)
        assert died.id == "p0" and died.outcome is not None
        assert (died.outcome.outcome, died.outcome.session_id) == ("owner_died", "s-1")
        head = await store.claim_request("coder")
        assert head is not None and (head.id, head.attempts) == ("p1", 1)
