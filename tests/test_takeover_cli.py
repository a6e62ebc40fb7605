"""One live CLI per agent across a takeover, with real programs on a real PostgreSQL: a warm
agent's runtime (tests/chaos_host.py) is SIGKILLed with its fence guard in the middle of a
turn, as the OOM killer or a kill of the runtime's processes might; the turn's CLI runs on.
The next owner, a hosting runtime already open on the same node (which takes the name at
once) or on another node of this machine (once the lease has expired), must not start the
agent's CLI while the dead owner's lives."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
import trio
from proc_helpers import (
    fence_guards,
    kill_marked,
    running,
    store_programs,
    turn_processes,
    wait_until,
)

import agentrt
from agentrt.lowlevel import TURN_MARKER_ENV as MARKER_ENV
from agentrt.testing import fake_cli_executable

CHILD = Path(__file__).parent / "chaos_host.py"
TTL = "4"


@pytest.mark.parametrize("node", ["node-a", "node-b"], ids=["same-node", "other-node"])
async def test_a_takeover_starts_no_cli_while_the_dead_owners_runs(
    postgres_dsn: str, tmp_path: Path, node: str
) -> None:
    # The first process (the owner's) never ends its turn; the next one (the taker's) answers.
    binary = fake_cli_executable(
        str(tmp_path),
        [
            "by_run",
            str(tmp_path / "runs"),
            [[["live", {"turns": [[["hang"]]]}]], [["live", {"turns": [[["answer"]]]}]]],
        ],
        name="claude",
    )
    work, homes = tmp_path / "work", tmp_path / "homes"
    work.mkdir()
    args = [TTL, binary, binary, str(work), str(homes)]
    async with (
        store_programs(CHILD, postgres_dsn) as start,
        agentrt.open_runtime(
            store=agentrt.PostgresStore(postgres_dsn), node="driver", lease_ttl=4, kill_grace=0.5
        ) as rt,
    ):
        owner = await start("node-a", *args, "w:warm")
        assert await owner.line(bound=60) == "READY"
        taker = await start(node, *args)
        assert await taker.line(bound=60) == "READY"
        prefix = f"{owner.pid}."
        try:
            async with trio.open_nursery() as nursery:
                # Its answer never comes: the owner dies in the turn.
                nursery.start_soon(_ask_quietly, rt, "first")
                [old] = await wait_until(lambda: turn_processes(prefix), bound=30)
                for guard in fence_guards(owner.pid):
                    os.kill(guard, signal.SIGKILL)
                await owner.kill()
                nursery.cancel_scope.cancel()
            # The taker has the agent once it answers. A hanging CLI never ends by itself:
            # the dead owner's must have been killed, and before the taker's started.
            together: list[int] = []
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_watch_together, old.pid, f"{taker.pid}.", together)
                with trio.fail_after(60):
                    while (response := await _ask_quietly(rt, "second")) is None:  # noqa: ASYNC110 (asked again, not polled)
                        await trio.sleep(0.1)
                nursery.cancel_scope.cancel()
            assert response.text == "1: second"
            assert not running(old.pid), "the dead owner's CLI runs beside the taker's"
            assert not together, f"both CLIs were alive at once: {together}"
            [new] = turn_processes(f"{taker.pid}.")  # the taker's warm CLI, alone
            assert new.pid != old.pid
        finally:
            await kill_marked(MARKER_ENV, prefix, prefix=True)


async def _watch_together(old: int, taker: str, together: list[int]) -> None:
    """Note each look at /proc that finds the old CLI alive beside a CLI of the taker."""
    while True:
        if running(old) and (new := turn_processes(taker)):
            together.extend(info.pid for info in new)
        await trio.sleep(0.005)


async def _ask_quietly(rt: agentrt.Runtime, prompt: str) -> agentrt.Response | None:
    """The agent's answer, or None while no runtime runs it (or its owner just died)."""
    try:
        return await rt.ask("w", prompt)
    except agentrt.AgentRTError:
        return None
