"""A program that owns agent "coder" on an SQLite store and fills its durable queue until
it is killed, for the test that SIGKILLs it (test_request_store.py).

    python request_child.py STORE

Takes the lease of "coder", queues ``p0``, ``p1``, ... printing ``ACCEPTED <id>`` once each
enqueue has returned, and after the third claims the head, printing ``CLAIMED <id>``.
"""

from __future__ import annotations

import itertools
import os
import sys

import trio

from agentrt import SQLiteStore
from agentrt.store import LeaseOwner


async def main(path: str) -> None:
    owner = LeaseOwner(node="child", pid=os.getpid(), start_time=0, runtime_id="child")
    async with SQLiteStore(path) as store:
        await store.acquire_lease("coder", owner, ttl=3600.0)
        await store.checkpoint_session("coder", backend="claude", session_id="s-1", cwd=None)
        for n in itertools.count():
            id = await store.enqueue_request(
                "coder",
                id=f"p{n}",
                prompt=f"prompt {n}",
                key=f"job-{n}",
                origin="tell",
                max_pending=100_000,
                max_pending_bytes=100_000_000,
            )
            print(f"ACCEPTED {id}", flush=True)
            if n == 2:
                claimed = await store.claim_request("coder")
                assert claimed is not None
                print(f"CLAIMED {claimed.id}", flush=True)


if __name__ == "__main__":
    trio.run(main, sys.argv[1])
