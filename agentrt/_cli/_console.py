"""``agentrt console``: the operator console over a store, served until Ctrl+C."""

from __future__ import annotations

import argparse
import signal

import trio

from .._console._serve import open_console
from .._runtime import open_runtime
from ._render import Output
from ._store import cli_store


async def run_console(args: argparse.Namespace, out: Output) -> int:
    """Serve the console of every agent in the store (on PostgreSQL, every node's; their
    calls routed to their owners) at ``--bind`` and print its URL, which carries the token;
    exit 130 at Ctrl+C."""
    token = "" if args.no_token else None
    # Ctrl+C is received, not raised: a KeyboardInterrupt raised wherever the signal lands
    # could land inside the server's handling of a response and break it half-way.
    with trio.open_signal_receiver(signal.SIGINT) as signals:
        async with (
            open_runtime(store=cli_store(args), node=args.node) as rt,
            open_console(rt, bind=args.bind, token=token) as console,
        ):
            if out.json_mode:
                out.data({"url": console.url, "address": console.address})
            else:
                out.say(f"The agentrt console is at {console.url}")
                out.say("(the link carries its token; Ctrl+C stops it)")
            async for _ in signals:
                break
    return out.interrupted()
