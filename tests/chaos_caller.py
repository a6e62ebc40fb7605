"""The second caller of the keyed chaos run (``chaos_hosts.py --keyed``), a program of its
own on the run's PostgreSQL store.

    python chaos_caller.py DSN LEASE_TTL NAME ...

Asks each agent NAME the driver's keyed prompts (``NAME/1``, ``NAME/2``, ..., each prompt
its own idempotency key), one at a time, at a pace of its own, so each request is sent by
two programs and made by whichever comes first. Prints ``RESULT <key> <outcome> <session
id>`` per outcome (`chaos_hosts.ask_keyed`), and ``DONE`` once its stdin closes and it has
stopped asking.
"""

from __future__ import annotations

import contextlib
import random
import sys

import trio
from chaos_hosts import ask_keyed

import agentrt


async def keep_asking(rt: agentrt.Runtime, name: str) -> None:
    rng = random.Random(name)
    for n in range(1, sys.maxsize):
        key = f"{name}/{n}"
        final = await ask_keyed(rt, name, key)
        session = None if final.response is None else final.response.session_id
        print(f"RESULT {key} {final.outcome} {session}", flush=True)
        await trio.sleep(rng.uniform(0.5, 2.0))


async def main(dsn: str, lease_ttl: str, *names: str) -> None:
    async with agentrt.open_runtime(
        store=agentrt.PostgresStore(dsn),
        node="caller",
        lease_ttl=float(lease_ttl),
        kill_grace=0.5,
    ) as rt:
        print("READY", flush=True)
        async with trio.open_nursery() as nursery:
            for name in names:
                nursery.start_soon(keep_asking, rt, name)
            stdin = trio.lowlevel.FdStream(0)
            while await stdin.receive_some():
                pass
            nursery.cancel_scope.cancel()
    print("DONE", flush=True)


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        trio.run(main, *sys.argv[1:])
