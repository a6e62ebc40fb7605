"""Quickstart: one supervised agent answers one question.

    .venv/bin/python examples/quickstart.py [DIRECTORY]
    .venv/bin/python -m agentrt.testing.fake_anthropic --home /tmp/agentrt-quickstart \
        -- python examples/quickstart.py .

Needs a logged-in ``claude`` (``agentrt doctor`` checks). The session id is kept in the
SQLite store under the agent's name, so its conversation survives crashes and restarts
(on the fake API, with ``--home``: without it each run has a fresh HOME, so a fresh store).
"""

from __future__ import annotations

import sys

import trio

import agentrt


async def main(cwd: str = ".") -> agentrt.Response:
    async with agentrt.open_runtime(store=agentrt.SQLiteStore()) as rt:
        await rt.start_agent(agentrt.Agent, name="quickstart", backend="claude", cwd=cwd)
        response = await rt.ask("quickstart", "In one sentence: what is in this directory?")
        print(response.text)
        print(f"({response.duration:.1f} s, {response.stop_reason}, session {response.session_id})")
        return response


if __name__ == "__main__":
    trio.run(main, sys.argv[1] if len(sys.argv) > 1 else ".")
