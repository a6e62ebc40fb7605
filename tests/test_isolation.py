"""Tier 3: a process that escapes its turn (double fork, setsid, ``env -i``) — killed with the
turn's cgroup where the kernel lets us, reaped once it dies where it does not."""

from __future__ import annotations

import errno
import json
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio
from cli_programs import FakeClaude, init_frame, result_frame
from proc_helpers import FAST, IGNORE_TERM, READY, Frames, fake, running, wait_until

from agentrt import (
    Agent,
    Allow,
    Runtime,
    StopReason,
    ToolRequest,
    open_runtime,
)
from agentrt._driver._cgroup import (
    TurnCgroup,
    TurnCgroups,
    Unavailable,
    open_isolation,
    own_cgroup,
    v2_directory,
)
from agentrt._driver._procfs import process_start_time, read_stat
from agentrt._driver._proctree import MARKER_ENV, adopted_orphans
from agentrt.lowlevel import ProcessFailure, ProcessTracker, open_cli_process
from agentrt.testing import fake_cli_argv, fake_cli_executable

KILL_GRACE: dict[str, Any] = {"kill_grace": 0.3}


def cgroups_here() -> str | None:
    """Why turns cannot get cgroups here (as a runtime would find), or None if they can."""
    try:
        os.rmdir(TurnCgroups.create(*own_cgroup()).path)
    except Unavailable as exc:
        return str(exc)
    return None


WHY_NOT = cgroups_here()
needs_cgroups = pytest.mark.skipif(WHY_NOT is not None, reason=f"no turn cgroups: {WHY_NOT}")


def daemon_program(record: Path, *rest: Any) -> list[Any]:
    """A turn that starts a SIGTERM-proof daemon escaping it every way a process can without
    cgroups, then runs ``rest``."""
    return [["emit", init_frame()], ["daemon", str(record), [IGNORE_TERM, ["hang"]]], *rest]


def daemon_pid(record: Path) -> int:
    facts = json.loads(record.read_text())
    assert MARKER_ENV not in facts["env"]  # env -i: the marker is gone
    pid: int = facts["pid"]
    return pid


def escaped(pid: int) -> bool:
    """Whether ``pid`` runs outside every tree a walk can find: in a session of its own
    (not the turn's), with no parent in the turn (its parent is us, the subreaper)."""
    st = read_stat(pid)
    return (
        st is not None
        and not st.gone
        and st.ppid == os.getpid()
        and st.session not in (os.getsid(0), pid)
    )


def isolation(rt: Runtime) -> str:
    tracker = rt._context.tracker
    assert tracker is not None
    return tracker.isolation


# -- finding cgroup v2 ------------------------------------------------------------------------

HYBRID = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""


def test_cgroup_v2_is_found_wherever_it_is_mounted() -> None:
    assert v2_directory(HYBRID, "1:cpu:/\n0::/\n") == ("/sys/fs/cgroup/unified", "/")
    own = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/run.scope\n"
    assert v2_directory(HYBRID, "4:memory:/x\n" + own) == (
        "/sys/fs/cgroup/unified/user.slice/user-1000.slice/user@1000.service/app.slice/run.scope",
        "/user.slice/user-1000.slice/user@1000.service/app.slice/run.scope",
    )
    # A container sees its own part of the hierarchy, mounted as its root; paths are escaped.
    nested = "50 1 0:40 /docker/c1 /my\\040cg rw - cgroup2 cgroup2 rw\n"
    assert v2_directory(nested, "0::/docker/c1/job\n") == ("/my cg/job", "/docker/c1/job")


@pytest.mark.parametrize(
    ("mountinfo", "proc_cgroup", "why"),
    [
        (HYBRID, "1:cpu:/\n", "in no cgroup v2 hierarchy"),
        (HYBRID.replace("cgroup2 cgroup2", "cgroup cgroup"), "0::/\n", "not mounted"),
        ("50 1 0:40 /docker/c1 /cg rw - cgroup2 cgroup2 rw\n", "0::/other\n", "outside"),
    ],
)
def test_without_a_usable_cgroup_v2_the_reason_is_said(
    mountinfo: str, proc_cgroup: str, why: str
) -> None:
    with pytest.raises(Unavailable, match=why):
        v2_directory(mountinfo, proc_cgroup)


async def test_the_variable_and_the_option_force_the_proc_walk(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with open_runtime(cgroups=False) as rt:
        assert isolation(rt) == "/proc walk (cgroups=False)"
    monkeypatch.setenv("AGENTRT_CGROUP", "off")
    async with open_runtime() as rt:
        assert isolation(rt) == "/proc walk (AGENTRT_CGROUP=off)"


# -- the cgroup path --------------------------------------------------------------------------


@needs_cgroups
async def test_the_runtimes_cgroup_is_made_under_its_own_and_removed_at_exit() -> None:
    parent, _ = own_cgroup()
    async with open_runtime() as rt:
        shown = isolation(rt)
        assert shown.startswith(f"cgroup v2 at {parent}/agentrt-{os.getpid()}-")
        path = trio.Path(shown.removeprefix("cgroup v2 at "))
        assert await path.is_dir()
    assert not await path.exists()


@needs_cgroups
async def test_a_daemon_that_escapes_every_walk_dies_with_its_turn(tmp_path: Path) -> None:
    record = tmp_path / "daemon.json"
    cli = FakeClaude(tmp_path / "cli", daemon_program(record, ["emit", result_frame("done")]))
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="coder", backend="claude", binary=cli.binary, **KILL_GRACE)
        response = await rt.ask("coder", "start the daemon")
        assert response.text == "done"
        assert read_stat(daemon_pid(record)) is None  # killed, and reaped: not even a zombie


@needs_cgroups
async def test_a_daemon_that_escapes_every_walk_dies_with_an_interrupted_turn(
    tmp_path: Path,
) -> None:
    record = tmp_path / "daemon.json"
    cli = FakeClaude(tmp_path / "cli", daemon_program(record, ["hang"]))
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="coder", backend="claude", binary=cli.binary, **KILL_GRACE)
        ref = await rt.tell("coder", "start the daemon")
        await wait_until(record.exists, bound=30)
        pid = daemon_pid(record)
        assert escaped(pid)
        assert await rt.interrupt("coder")
        await rt.wait(ref)
        assert read_stat(pid) is None


async def until_ready(frames: AsyncIterator[Any]) -> None:
    async for frame in frames:
        if frame == {"type": "ready"}:
            return
    raise AssertionError("no ready frame")


@needs_cgroups
async def test_a_turn_ending_leaves_another_turns_cgroup_alone(tmp_path: Path) -> None:
    tracker = ProcessTracker()
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    async with trio.open_nursery() as nursery:
        await nursery.start(tracker.run, 60.0)
        other_turn = fake(*daemon_program(second, READY, ["hang"]))
        async with open_cli_process(other_turn, FAST, tracker=tracker) as other:
            await until_ready(Frames(other))
            others = daemon_pid(second)
            ending_turn = fake(*daemon_program(first, READY, ["hang"]))
            async with open_cli_process(ending_turn, FAST, tracker=tracker) as ending:
                await until_ready(Frames(ending))
                mine = daemon_pid(first)
                assert escaped(mine)
            assert read_stat(mine) is None
            assert running(others) and running(other.pid)
        assert read_stat(others) is None
        nursery.cancel_scope.cancel()


@needs_cgroups
async def test_a_turn_cgroup_goes_with_the_cgroups_made_below_it(tmp_path: Path) -> None:
    # As a turn that runs another agentrt runtime (a test suite, say) leaves them when its
    # end kills that runtime too.
    tracker = ProcessTracker()
    async with trio.open_nursery() as nursery:
        await nursery.start(tracker.run, 60.0)
        async with open_cli_process(fake(READY, ["hang"]), FAST, tracker=tracker) as proc:
            await until_ready(Frames(proc))
            runtime_cgroup = trio.Path(tracker.isolation.removeprefix("cgroup v2 at "))
            [turn] = [p async for p in aiter_dir(runtime_cgroup)]
            await (turn / "agentrt-inner").mkdir()
            inner = TurnCgroup.create(f"{turn}/agentrt-inner/t0", "")
            # The inner runtime's CLI: started there, orphaned to us by a shell that exits.
            inner_argv = fake_cli_argv(IGNORE_TERM, ["hang"])
            started = await trio.run_process(
                ["sh", "-c", '"$@" >/dev/null 2>&1 & echo $!', "sh", *inner_argv],
                preexec_fn=inner.enter,
                capture_stdout=True,
            )
            inner_cli = int(started.stdout)
            assert running(inner_cli)
        assert [p async for p in aiter_dir(runtime_cgroup)] == []
        assert read_stat(inner_cli) is None  # killed despite SIGTERM, and reaped
        nursery.cancel_scope.cancel()


@needs_cgroups
async def test_the_next_turn_gets_the_last_ones_cgroup_unless_one_was_made_below_it() -> None:
    # A turn's cgroup made and removed costs some 130 us of CPU: an idle one is kept for the
    # next turn. Not one with a cgroup below it: that goes, with what was made below.
    tracker = ProcessTracker()
    async with trio.open_nursery() as nursery:
        await nursery.start(tracker.run, 60.0)
        runtime_cgroup = trio.Path(tracker.isolation.removeprefix("cgroup v2 at "))

        async def turn_cgroup(make_one_below: bool = False) -> trio.Path:
            async with open_cli_process(fake(READY, ["hang"]), FAST, tracker=tracker) as proc:
                await until_ready(Frames(proc))
                [cgroup] = [p async for p in aiter_dir(runtime_cgroup)]
                if make_one_below:
                    await (cgroup / "below").mkdir()
            return cgroup

        first = await turn_cgroup()
        assert await turn_cgroup(make_one_below=True) == first
        assert not await first.exists()
        assert await turn_cgroup() != first
        nursery.cancel_scope.cancel()
    assert not await runtime_cgroup.exists()


@needs_cgroups
async def test_a_warm_turns_process_in_a_cgroup_below_its_own_dies_at_the_turns_end(
    tmp_path: Path,
) -> None:
    # A warm turn's end spares the live CLI, so it signals the others one by one rather than
    # through the cgroup: it must find them in the cgroups below the turn's too. The daemon
    # (out of every walk's reach) is moved into one made mid-turn, as a container tool would.
    record = tmp_path / "daemon.json"
    tool = {"subtype": "can_use_tool", "tool_name": "Bash", "input": {}, "tool_use_id": "t1"}
    turn = [["daemon", str(record), [IGNORE_TERM, ["hang"]]], ["ask", tool], ["answer"]]
    binary = fake_cli_executable(str(tmp_path), ["live", {"turns": [turn]}], name="claude")

    class MovesTheDaemonDown(Agent):
        async def approve_tool(self, request: ToolRequest) -> Allow:
            [turn_cgroup] = [p async for p in aiter_dir(runtime_cgroup(rt))]
            below = turn_cgroup / "job"
            await below.mkdir()
            await (below / "cgroup.procs").write_text(str(daemon_pid(record)))
            return Allow()

    async with open_runtime() as rt:
        await rt.start_agent(
            MovesTheDaemonDown(),
            name="coder",
            backend="claude",
            binary=binary,
            keep_alive=30,
            **KILL_GRACE,
        )
        assert (await rt.ask("coder", "start the daemon")).text == "1: start the daemon"
        daemon = daemon_pid(record)
        assert read_stat(daemon) is None  # killed despite SIGTERM, and reaped
        cli = (await rt.status("coder")).cli_pid
        assert cli is not None and running(cli)  # the warm CLI lives on


def runtime_cgroup(rt: Runtime) -> trio.Path:
    return trio.Path(isolation(rt).removeprefix("cgroup v2 at "))


async def dead_runtimes_cgroup() -> Path:
    """The cgroup of a runtime that died, with an empty turn cgroup in it: its pid and start
    time, recorded in its name, name no process any more."""
    parent, _ = own_cgroup()
    gone = await trio.lowlevel.open_process([sys.executable, "-c", "pass"])
    start = process_start_time(gone.pid)
    await gone.wait()
    stale = Path(parent, f"agentrt-{gone.pid}-{start}-0badc0de")
    (stale / "t0").mkdir(parents=True)
    return stale


@needs_cgroups
async def test_a_stale_turn_cgroup_of_a_dead_runtime_is_killed_and_removed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="agentrt")
    stale = await dead_runtimes_cgroup()
    turn = TurnCgroup.create(f"{stale}/t1", "")
    left = await trio.lowlevel.open_process(
        [sys.executable, "-c", "import time; time.sleep(3600)"], preexec_fn=turn.enter
    )
    try:
        async with open_isolation() as found:
            assert found.cgroups is not None
            assert not await trio.Path(stale).exists()
        with trio.fail_after(10):
            assert await left.wait() == -signal.SIGKILL
    finally:
        left.kill()
        await left.wait()
    [record] = [r for r in caplog.records if str(stale) in r.getMessage()]
    assert record.levelno == logging.WARNING
    assert record.getMessage().startswith("killed 1 processes in cgroup ")


@needs_cgroups
async def test_an_empty_stale_cgroup_is_removed_without_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="agentrt")
    stale = await dead_runtimes_cgroup()
    async with open_isolation():
        assert not await trio.Path(stale).exists()
    [record] = [r for r in caplog.records if str(stale) in r.getMessage()]
    assert record.levelno == logging.DEBUG


@needs_cgroups
async def test_a_process_that_cannot_enter_its_cgroup_never_runs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def refuse(self: TurnCgroup, pid: int) -> None:
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))

    # The move comes before the child has run its program (it waits in the spawn); refused,
    # the child is killed there.
    monkeypatch.setattr(TurnCgroup, "move", refuse)
    record = tmp_path / "record.json"
    tracker = ProcessTracker()
    async with trio.open_nursery() as nursery:
        await nursery.start(tracker.run, 60.0)
        with pytest.raises(ProcessFailure) as failed:
            async with open_cli_process(fake(["record", str(record)]), FAST, tracker=tracker):
                raise AssertionError("it started")
        assert failed.value.reason is StopReason.SPAWN_FAILED
        assert "in its cgroup" in failed.value.message
        runtime_cgroup = trio.Path(tracker.isolation.removeprefix("cgroup v2 at "))
        assert [p.name async for p in aiter_dir(runtime_cgroup)] == []  # the turn's is gone
        nursery.cancel_scope.cancel()
    assert not record.exists()


@needs_cgroups
async def test_a_turn_whose_cgroup_cannot_be_made_fails_to_spawn(tmp_path: Path) -> None:
    record = tmp_path / "record.json"
    tracker = ProcessTracker()
    async with trio.open_nursery() as nursery:
        await nursery.start(tracker.run, 60.0)
        runtime_cgroup = trio.Path(tracker.isolation.removeprefix("cgroup v2 at "))
        await (runtime_cgroup / "cgroup.max.descendants").write_text("0")
        with pytest.raises(ProcessFailure) as failed:
            async with open_cli_process(fake(["record", str(record)]), FAST, tracker=tracker):
                raise AssertionError("it started")
        assert failed.value.reason is StopReason.SPAWN_FAILED
        assert "cannot create the turn's cgroup" in failed.value.message
        nursery.cancel_scope.cancel()
    assert not record.exists()


async def aiter_dir(path: trio.Path) -> AsyncIterator[trio.Path]:
    for entry in await path.iterdir():
        if await entry.is_dir():
            yield entry


# -- the fallback: the /proc walk -------------------------------------------------------------


async def test_without_cgroups_an_escaped_daemon_is_reaped_once_it_dies(tmp_path: Path) -> None:
    record = tmp_path / "daemon.json"
    cli = FakeClaude(tmp_path / "cli", daemon_program(record, ["emit", result_frame("done")]))
    async with open_runtime(cgroups=False) as rt:
        await rt.start_agent(Agent, name="coder", backend="claude", binary=cli.binary, **KILL_GRACE)
        await rt.ask("coder", "start the daemon")
        pid = daemon_pid(record)
        # Nothing ties it to the turn any more: it survives the turn (the documented limit of
        # the walk), but as our child (we are the subreaper) it is reaped when it dies.
        assert escaped(pid)
        os.kill(pid, signal.SIGKILL)
        await wait_until(lambda: read_stat(pid) is None, bound=10)


async def test_orphans_are_told_from_our_own_children() -> None:
    # Our own children, in our session or a new one, are never taken for adopted orphans: their
    # exit statuses belong to whoever started them.
    plain = await trio.lowlevel.open_process([sys.executable, "-c", "raise SystemExit(3)"])
    leader = await trio.lowlevel.open_process(
        [sys.executable, "-c", "raise SystemExit(4)"], start_new_session=True
    )
    await wait_until(lambda: not running(plain.pid) and not running(leader.pid), bound=10)
    assert {plain.pid, leader.pid}.isdisjoint(st.pid for st in adopted_orphans())
    assert (await plain.wait(), await leader.wait()) == (3, 4)
