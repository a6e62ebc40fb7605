"""``agentrt console``: the operator console over a store, served until Ctrl+C."""

from __future__ import annotations

import argparse

import trio

from .._console._serve import open_console
from .._runtime import open_runtime
from ._agent import cli_store
from ._render import Output


async def run_console(args: argparse.Namespace, out: Output) -> int:
    """Serve the console of every agent in the store (on PostgreSQL, every node's; their
    calls routed to their owners) at ``--bind`` and print its URL, which carries the token."""
    token = "" if args.no_token else None
    async with (
        open_runtime(store=cli_store(args), node=args.node) as rt,
        open_console(rt, bind=args.bind, token=token) as console,
    ):
        if out.json_mode:
            out.data({"url": console.url, "address": console.address})
        else:
            out.say(f"The agentrt console is at {console.url}")
            out.say("(the link carries its token; Ctrl+C stops it)")
        await trio.sleep_forever()
    return 0  # pragma: no cover - sleep_forever ends by Ctrl+C only
