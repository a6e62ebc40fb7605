"""One live CLI per agent across a takeover, with real programs on a real PostgreSQL: a warm
agent's runtime (tests/chaos_host.py) is SIGKILLed with its fence guard in the middle of a
turn, as the OOM killer or a kill of the runtime's processes might; the turn's CLI runs on.
The next owner, a hosting runtime already open on the same node (which takes the name at
once) or on another node of this machine (once the lease has expired), must not start the
agent's CLI while the dead owner's lives."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

import pytest
import trio
from proc_helpers import (
    fence_guards,
    kill_marked,
    proc_info,
    read_stat,
    running,
    store_programs,
    turn_processes,
    wait_until,
)
from test_isolation import needs_cgroups

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


GATE_HOST = Path(__file__).parent / "gate_host.py"


@needs_cgroups  # the spawn holds its child at the gate only to move it into its cgroup
async def test_an_owner_frozen_in_a_spawn_wakes_after_the_takeover_and_runs_no_cli(
    postgres_dsn: str, tmp_path: Path
) -> None:
    # The owner is frozen (SIGSTOP) past its lease with its warm CLI's child waiting at the
    # spawn gate: unmarked until it execs, so its fence guard passed it by, and the owner,
    # awake again, let it run as its first act, beside the new owner's CLI.
    binary = fake_cli_executable(str(tmp_path), ["live", {"turns": [[["answer"]]]}], name="claude")
    work, homes = tmp_path / "work", tmp_path / "homes"
    work.mkdir()
    args = [TTL, binary, binary, str(work), str(homes)]
    async with (
        store_programs(CHILD, postgres_dsn) as start,
        store_programs(GATE_HOST, postgres_dsn) as start_frozen,
        agentrt.open_runtime(
            store=agentrt.PostgresStore(postgres_dsn), node="driver", lease_ttl=4, kill_grace=0.5
        ) as rt,
    ):
        owner = await start_frozen("freeze", "node-a", *args, "w:warm")
        assert await owner.line(bound=60) == "READY"
        taker = await start("node-b", *args)
        assert await taker.line(bound=60) == "READY"
        together: list[int] = []
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_ask_quietly, rt, "first")  # its answer never comes
                gate = await owner.line(bound=60)
                assert gate.startswith("GATE "), gate
                child = int(gate.split()[1])
                await wait_until(lambda: (info := proc_info(owner.pid)) and info.state == "T")
                nursery.cancel_scope.cancel()
            # Past the owner's deadline its guard kills the child at the gate, long before
            # the lease can pass to node-b (a zombie now: the frozen owner cannot reap it).
            await wait_until(lambda: not running(child), bound=30)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_watch_all_together, f"{owner.pid}.", f"{taker.pid}.", together)
                with trio.fail_after(60):
                    while (response := await _ask_quietly(rt, "second")) is None:  # noqa: ASYNC110 (asked again, not polled)
                        await trio.sleep(0.1)
                assert response.text == "1: second"
                os.kill(owner.pid, signal.SIGCONT)
                # Awake, the owner ends its spawn: it reaps the dead child, then runs its
                # fence; the taker answers meanwhile, on its own CLI.
                await wait_until(lambda: read_stat(child) is None, bound=30)
                with trio.fail_after(60):
                    assert (await rt.ask("w", "third")).text == "2: third"
                nursery.cancel_scope.cancel()
            assert not together, f"both CLIs were alive at once: {together}"
            assert turn_processes(f"{owner.pid}.") == []
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(owner.pid, signal.SIGCONT)


async def _watch_all_together(old: str, new: str, together: list[int]) -> None:
    """Note each look at /proc that finds a turn process of ``old`` alive beside one of
    ``new``."""
    while True:
        if (olds := turn_processes(old)) and turn_processes(new):
            together.extend(info.pid for info in olds)
        await trio.sleep(0.005)
