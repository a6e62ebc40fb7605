"""One runtime of the cross-host chaos run (chaos_hosts.py), in a program of its own.

    python chaos_host.py DSN NODE LEASE_TTL BINARY WARM_BINARY CWD CLI_HOMES [NAME[:warm] ...]

Opens a runtime on the PostgreSQL store at DSN that hosts agents (``host_agents=True``: it
takes over any stored agent whose lease is free), starts the agents NAME given (portable,
with a failover spec; ``:warm`` keeps its CLI, WARM_BINARY, alive between turns), prints
``READY`` and runs until SIGINT, which closes the runtime as a program's Ctrl+C does.
"""

from __future__ import annotations

import contextlib
import sys

import trio
from hosted_agent import Hosted

import agentrt


async def main(
    dsn: str,
    node: str,
    lease_ttl: str,
    binary: str,
    warm_binary: str,
    cwd: str,
    homes: str,
    *names: str,
) -> None:
    async with agentrt.open_runtime(
        store=agentrt.PostgresStore(dsn),
        node=node,
        lease_ttl=float(lease_ttl),
        kill_grace=0.5,
        host_agents=True,
    ) as rt:
        for spec in names:
            name, _, warm = spec.partition(":")
            await rt.start_agent(
                Hosted,
                name=name,
                backend="claude",
                binary=warm_binary if warm else binary,
                cwd=cwd,
                portable=True,
                cli_homes=homes,
                keep_alive=30 if warm else None,
                kill_grace=0.5,
            )
        print("READY", flush=True)
        await trio.sleep_forever()


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        trio.run(main, *sys.argv[1:])
