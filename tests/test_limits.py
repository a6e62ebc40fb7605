"""Tier 3: a turn cannot take the machine down. Its cgroup's limits (memory, tasks, CPU) from
the agent's ``limits``, a turn the OOM killer hit ending ``oom_killed``, and a model that
repeats itself ending ``stuck``."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from cli_programs import SID, FakeClaude, answer, init_frame, result_frame
from proc_helpers import wait_until

from agentrt import (
    Agent,
    Failed,
    InvalidOptions,
    Limits,
    Prompt,
    Ref,
    Response,
    Runtime,
    StopReason,
    TurnFailed,
    open_runtime,
)
from agentrt._driver import _process
from agentrt._driver._cgroup import TurnCgroups, Unavailable, own_cgroup, v2_directory
from agentrt._driver._limits import oom_kills

KILL_GRACE: dict[str, Any] = {"kill_grace": 0.3}
ALL = Limits(memory="64M", tasks=16, cpus=0.5)


def cgroups_here() -> str | None:
    try:
        os.rmdir(TurnCgroups.create(*own_cgroup()).path)
    except Unavailable as exc:
        return str(exc)
    return None


NO_CGROUPS = cgroups_here()
needs_cgroups = pytest.mark.skipif(NO_CGROUPS is not None, reason=f"no cgroups: {NO_CGROUPS}")


def hierarchy_root() -> str | None:
    """The directory of cgroup v2's root, or None without cgroup v2."""
    try:
        with open("/proc/self/mountinfo") as f:
            return v2_directory(f.read(), "0::/\n")[0]
    except Unavailable:
        return None


def limits_here() -> str | None:
    """Why limits cannot be had here, in a cgroup of their own below the root (as root),
    or None if they can."""
    root = hierarchy_root()
    if root is None or os.geteuid() != 0:
        return "no cgroup v2, or not root"
    with open(f"{root}/cgroup.controllers") as f:
        missing = ALL.controllers() - set(f.read().split())
    return f"cgroup v2 has no {' '.join(sorted(missing))} controller here" if missing else None


WHY_NOT = limits_here()
needs_limits = pytest.mark.skipif(WHY_NOT is not None, reason=f"no cgroup limits: {WHY_NOT}")


@pytest.fixture
def limits_cgroup(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A cgroup with no process of its own, right below the root (the controllers enabled
    for it), named by AGENTRT_CGROUP: where the runtimes of a test make theirs."""
    root = hierarchy_root()
    assert root is not None
    with open(f"{root}/cgroup.subtree_control", "w") as f:
        f.write(" ".join(f"+{name}" for name in sorted(ALL.controllers())))
    path = f"{root}/test-limits-{os.getpid()}"
    os.mkdir(path)
    monkeypatch.setenv("AGENTRT_CGROUP", path)
    try:
        yield path
    finally:
        os.rmdir(path)


async def turn_cgroup_of(record: Path) -> Path:
    """The directory of the cgroup of the running turn whose CLI recorded itself."""
    await wait_until(record.exists, bound=30)
    pid = json.loads(await trio.Path(record).read_text())["pid"]
    proc_cgroup = await trio.Path(f"/proc/{pid}/cgroup").read_text()
    name = next(line[3:] for line in proc_cgroup.splitlines() if line.startswith("0::"))
    mountinfo = await trio.Path("/proc/self/mountinfo").read_text()
    return Path(v2_directory(mountinfo, f"0::{name}\n")[0])


def runtime_cgroup(rt: Runtime) -> str:
    tracker = rt._context.tracker
    assert tracker is not None
    return tracker.isolation.removeprefix("cgroup v2 at ")


# -- the option -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "key"),
    [
        ({"memory": "2X"}, "limits.memory"),
        ({"memory": 4096}, "limits.memory"),  # bytes: "4096" meant "4096M"?
        ({"memory": 1.5}, "limits.memory"),
        ({"tasks": 0}, "limits.tasks"),
        ({"tasks": True}, "limits.tasks"),
        ({"cpus": 0}, "limits.cpus"),
        ({"cpus": float("inf")}, "limits.cpus"),
        # Past what the kernel's files take: the first a float's overflow (OverflowError
        # before), the others would fail each turn's cgroup or wrap around to a small limit.
        ({"memory": "9" * 400}, "limits.memory"),
        ({"memory": "8388608T"}, "limits.memory"),  # 2**63
        ({"memory": 2**64}, "limits.memory"),
        ({"tasks": 4 * 1024 * 1024 + 1}, "limits.tasks"),
        ({"cpus": 1e9}, "limits.cpus"),
        ({"best_effort": "yes"}, "limits.best_effort"),
    ],
)
def test_bad_limits_are_refused_naming_the_limit(given: dict[str, Any], key: str) -> None:
    with pytest.raises(InvalidOptions) as refused:
        Limits(**given)
    assert refused.value.key == key
    assert refused.value.value == next(iter(given.values()))


def test_limits_are_what_the_cgroup_files_take() -> None:
    limits = Limits(memory="1.5G", tasks=512, cpus=1.5)
    assert limits.memory == 1536 * 1024**2
    assert Limits(memory="512MiB").memory == Limits(memory=512 * 1024**2).memory
    assert limits.files() == {
        "memory.max": str(1536 * 1024**2),
        "memory.swap.max": "0",
        "memory.oom.group": "1",
        "pids.max": "512",
        "cpu.max": "150000 100000",
    }
    assert Limits(cpus=0.01).files() == {"cpu.max": "1000 100000"}
    assert Limits(tasks=8).controllers() == {"pids"}
    # The kernel's most are taken.
    most = Limits(memory=2**63 - 1, tasks=4 * 1024 * 1024, cpus=((1 << 44) - 1) / 100_000)
    assert most.files()["pids.max"] == "4194304"
    assert most.files()["cpu.max"] == f"{(1 << 44) - 1} 100000"
    assert most.files()["memory.max"] == str(2**63 - 1)


async def test_start_agent_refuses_what_is_not_limits_or_a_repeat_count(tmp_path: Path) -> None:
    cli = FakeClaude(tmp_path / "cli", [["emit", result_frame("ok")]])
    async with open_runtime() as rt:
        for key, value in [("limits", {"memory": "2G"}), ("stuck_repeats", 1)]:
            with pytest.raises(InvalidOptions) as refused:
                await rt.start_agent(
                    Agent, name="coder", backend="claude", binary=cli.binary, **{key: value}
                )
            assert (refused.value.key, refused.value.value) == (key, value)


async def test_limits_where_turns_get_no_cgroup_are_refused_unless_best_effort(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cli = FakeClaude(tmp_path / "cli", [["emit", init_frame()], ["emit", result_frame("ok")]])
    async with open_runtime(cgroups=False) as rt:
        with pytest.raises(InvalidOptions) as refused:
            await rt.start_agent(
                Agent, name="coder", backend="claude", binary=cli.binary, limits=ALL
            )
        assert refused.value.key == "limits"
        assert "turns get no cgroup here: cgroups=False" in refused.value.why
        assert "best_effort=True" in refused.value.why
        assert "coder" not in rt.agents()
        await rt.start_agent(
            Agent,
            name="coder",
            backend="claude",
            binary=cli.binary,
            limits=Limits(memory="1G", best_effort=True),
        )
        assert (await rt.ask("coder", "hi")).text == "ok"
    [warning] = [r for r in caplog.records if "limits are not held" in r.getMessage()]
    assert warning.levelno == logging.WARNING
    assert "cgroups=False" in warning.getMessage()


@needs_cgroups
async def test_limits_where_the_controllers_cannot_be_had_are_refused_saying_why(
    tmp_path: Path,
) -> None:
    # The runtime's cgroup is under this program's own, which holds this program: cgroup
    # v2 gives it no controllers (where it has them at all).
    cli = FakeClaude(tmp_path / "cli", [["emit", result_frame("ok")]])
    async with open_runtime() as rt:
        with pytest.raises(InvalidOptions) as refused:
            await rt.start_agent(
                Agent, name="coder", backend="claude", binary=cli.binary, limits=ALL
            )
    assert refused.value.key == "limits"
    why = refused.value.why
    assert why.startswith("cannot be held here: ")
    assert "offers no" in why or "AGENTRT_CGROUP=<the directory of one>" in why


@needs_cgroups
async def test_agentrt_cgroup_names_where_the_turns_cgroups_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parent, _ = own_cgroup()
    chosen = trio.Path(parent, f"chosen-{os.getpid()}")
    await chosen.mkdir()
    record = tmp_path / "record.json"
    cli = FakeClaude(tmp_path / "cli", [["record", str(record)], ["emit", init_frame()], ["hang"]])
    monkeypatch.setenv("AGENTRT_CGROUP", str(chosen))
    try:
        async with open_runtime() as rt:
            assert runtime_cgroup(rt).startswith(f"{chosen}/agentrt-{os.getpid()}-")
            await rt.start_agent(
                Agent, name="coder", backend="claude", binary=cli.binary, **KILL_GRACE
            )
            ref = await rt.tell("coder", "where am I")
            assert await turn_cgroup_of(record) == Path(runtime_cgroup(rt), "t0")
            await rt.interrupt("coder")
            assert isinstance(await rt.wait(ref), Failed)
    finally:
        await chosen.rmdir()
    monkeypatch.setenv("AGENTRT_CGROUP", str(tmp_path))
    async with open_runtime() as rt:
        assert (
            runtime_cgroup(rt)
            == f"/proc walk (AGENTRT_CGROUP={tmp_path} is not a cgroup directory)"
        )


def test_oom_kills_are_read_from_memory_events(tmp_path: Path) -> None:
    assert oom_kills(str(tmp_path)) == 0  # no memory controller (or the cgroup gone)
    (tmp_path / "memory.events").write_text(
        "low 0\nhigh 0\nmax 12\noom 2\noom_kill 3\noom_group_kill 1\n"
    )
    assert oom_kills(str(tmp_path)) == 3


# -- a turn the OOM killer hit, as the runtime sees it ----------------------------------------


OOM_KILLED = [["emit", init_frame()], ["kill", "SIGKILL"]]


def the_kernel_counts(monkeypatch: pytest.MonkeyPatch, kills: int) -> None:
    # What memory.events says where no kernel here can say it (no memory controller): the
    # runtime reads it from the turn's own cgroup.
    monkeypatch.setattr(_process, "oom_kills", lambda path: kills if "/t" in path else 0)


@needs_cgroups
@pytest.mark.parametrize(
    "warm",
    [
        pytest.param({}, id="per-turn"),
        pytest.param({"keep_alive": 30}, id="warm"),
    ],
)
async def test_a_turn_the_oom_killer_hit_ends_oom_killed_and_the_next_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, warm: dict[str, Any]
) -> None:
    if warm:
        live = [["live", {"turns": [OOM_KILLED[1:]], "session_id": SID}]]
        answers = [["live", {"turns": [[["answer"]]], "session_id": SID}]]
        program = [["by_run", str(tmp_path / "runs"), [live, answers]]]
    else:
        program = OOM_KILLED
    cli = FakeClaude(tmp_path / "cli", program)
    the_kernel_counts(monkeypatch, 2)
    async with open_runtime() as rt:
        await rt.start_agent(
            Agent,
            name="coder",
            backend="claude",
            binary=cli.binary,
            limits=Limits(memory="64M", best_effort=True),
            **warm,
            **KILL_GRACE,
        )
        with pytest.raises(TurnFailed) as failed:
            await rt.ask("coder", "use too much")
        assert failed.value.reason is StopReason.OOM_KILLED
        assert "killed 2 process(es)" in failed.value.message
        assert str(64 * 1024**2) in failed.value.message
        the_kernel_counts(monkeypatch, 0)
        if not warm:
            cli.answer("back")
        response = await rt.ask("coder", "again")
        assert response.text == ("1: again" if warm else "back")
        assert response.session_id == SID


async def test_without_limits_a_killed_turn_is_no_oom(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cli = FakeClaude(tmp_path / "cli", OOM_KILLED)
    the_kernel_counts(monkeypatch, 2)
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="coder", backend="claude", binary=cli.binary)
        with pytest.raises(TurnFailed) as failed:
            await rt.ask("coder", "crash")
        assert failed.value.reason is StopReason.PROCESS_CRASHED


# -- the kernel holds them --------------------------------------------------------------------


@needs_limits
async def test_a_turn_over_its_memory_ends_oom_killed_and_the_next_resumes(
    tmp_path: Path, limits_cgroup: str
) -> None:
    cli = FakeClaude(tmp_path / "cli", [["emit", init_frame()], ["allocate", 256], ["hang"]])
    async with open_runtime() as rt:
        await rt.start_agent(
            Agent,
            name="coder",
            backend="claude",
            binary=cli.binary,
            limits=Limits(memory="64M"),
            **KILL_GRACE,
        )
        with pytest.raises(TurnFailed) as failed:
            await rt.ask("coder", "use too much")
        assert failed.value.reason is StopReason.OOM_KILLED
        assert str(64 * 1024**2) in failed.value.message
        assert failed.value.session_id == SID
        cli.answer("back")
        assert (await rt.ask("coder", "again")).text == "back"
        assert cli.resumed() == SID


@needs_limits
async def test_a_fork_bomb_is_bounded_by_tasks_and_nothing_is_left(
    tmp_path: Path, limits_cgroup: str
) -> None:
    forks = tmp_path / "forks.json"
    program = [
        ["emit", init_frame()],
        ["fork_until_refused", 200, str(forks)],
        ["emit", result_frame("done")],
    ]
    cli = FakeClaude(tmp_path / "cli", program)
    async with open_runtime() as rt:
        await rt.start_agent(
            Agent, name="coder", backend="claude", binary=cli.binary, limits=Limits(tasks=8)
        )
        assert (await rt.ask("coder", "fork")).text == "done"
    counted = json.loads(forks.read_text())
    assert counted["refused"] is True
    assert counted["forked"] < 8  # the CLI itself counts
    # The autouse fixture checks that none of the children outlived the turn.


@needs_limits
async def test_the_turns_cgroup_has_the_cpu_quota(tmp_path: Path, limits_cgroup: str) -> None:
    record = tmp_path / "record.json"
    cli = FakeClaude(tmp_path / "cli", [["record", str(record)], ["emit", init_frame()], ["hang"]])
    async with open_runtime() as rt:
        await rt.start_agent(
            Agent,
            name="coder",
            backend="claude",
            binary=cli.binary,
            limits=Limits(cpus=1.5, tasks=64),
            **KILL_GRACE,
        )
        ref = await rt.tell("coder", "work")
        turn = await turn_cgroup_of(record)
        assert (turn / "cpu.max").read_text().split() == ["150000", "100000"]
        assert (turn / "pids.max").read_text().strip() == "64"
        await rt.interrupt("coder")
        assert isinstance(await rt.wait(ref), Failed)


# -- stuck turns ------------------------------------------------------------------------------


def tool_call(n: int, command: str, output: str, *, error: bool = False) -> list[Any]:
    """One tool call of the model and its result, as Claude Code prints them."""
    use_id = f"toolu_{n}"
    use = {"type": "tool_use", "id": use_id, "name": "Bash", "input": {"command": command}}
    result = {"type": "tool_result", "tool_use_id": use_id, "content": output, "is_error": error}
    return [
        ["emit", {"type": "assistant", "message": {"content": [use]}, "session_id": SID}],
        ["emit", {"type": "user", "message": {"content": [result]}, "session_id": SID}],
    ]


def calls(*made: tuple[str, str, bool]) -> list[Any]:
    program: list[Any] = [["emit", init_frame()]]
    for n, (command, output, error) in enumerate(made):
        program += tool_call(n, command, output, error=error)
    return [*program, ["emit", result_frame("finished")]]


SAME = ("make test", "1 failed", False)


async def test_the_same_call_with_the_same_result_ends_the_turn_stuck(tmp_path: Path) -> None:
    cli = FakeClaude(tmp_path / "cli", calls(SAME, SAME, SAME, SAME))
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="coder", backend="claude", binary=cli.binary, **KILL_GRACE)
        with pytest.raises(TurnFailed) as failed:
            await rt.ask("coder", "fix the tests")
        assert failed.value.reason is StopReason.STUCK
        assert failed.value.detail == {"tool_name": "Bash", "times": 4, "option": "stuck_repeats"}
        assert failed.value.session_id == SID
        # The agent lives, and its next turn resumes the session.
        cli.answer("unstuck")
        assert (await rt.ask("coder", "try another way")).text == "unstuck"
        assert cli.resumed() == SID


async def test_the_agents_handle_error_decides_what_follows_a_stuck_turn(tmp_path: Path) -> None:
    class Unsticks(Agent):
        def __init__(self) -> None:
            self.answered = trio.Event()
            self.text = ""

        def handle_error(self, ref: Ref, error: TurnFailed) -> Prompt | None:
            if error.reason is StopReason.STUCK:
                tool = error.detail["tool_name"]
                return Prompt(f"{tool} keeps giving the same answer: try another way")
            return None

        def handle_response(self, ref: Ref, response: Response) -> None:
            self.text = response.text
            self.answered.set()

    record = tmp_path / "cli" / "record.json"  # where FakeClaude.resumed reads
    stuck = calls(SAME, SAME, SAME, SAME)
    program = [["by_run", str(tmp_path / "runs"), [stuck, answer(record)]]]
    cli = FakeClaude(tmp_path / "cli", program)
    agent = Unsticks()
    async with open_runtime() as rt:
        await rt.start_agent(agent, name="coder", backend="claude", binary=cli.binary)
        with pytest.raises(TurnFailed) as failed:
            await rt.ask("coder", "fix the tests")
        assert failed.value.reason is StopReason.STUCK
        await agent.answered.wait()
    assert agent.text == "ok"
    assert cli.resumed() == SID
    assert "Bash keeps giving the same answer" in json.loads(record.read_text())["stdin"]


async def test_the_same_call_failing_ends_the_turn_stuck_sooner(tmp_path: Path) -> None:
    failing = [("cat x", f"no such file (attempt {n})", True) for n in range(3)]
    # A model that would go on: the turn is interrupted (long before the watchdog).
    cli = FakeClaude(tmp_path / "cli", [*calls(*failing)[:-1], ["hang"]])
    async with open_runtime() as rt:
        await rt.start_agent(
            Agent, name="coder", backend="claude", binary=cli.binary, watchdog=60, **KILL_GRACE
        )
        with pytest.raises(TurnFailed) as failed:
            await rt.ask("coder", "read x")
        assert failed.value.reason is StopReason.STUCK
        assert failed.value.detail == {"tool_name": "Bash", "times": 3, "option": "stuck_errors"}


@pytest.mark.parametrize(
    ("made", "options"),
    [
        # Something changed between the calls: the model is making progress.
        ([SAME, SAME, SAME, ("make test", "0 failed", False), SAME, SAME, SAME], {}),
        ([SAME, SAME, ("git diff", "", False), SAME, SAME], {}),
        ([("a", "x", True), ("b", "x", True), ("a", "x", True), ("b", "x", True)], {}),
        # Turned off, or set higher.
        ([SAME] * 6, {"stuck_repeats": None}),
        ([SAME] * 6, {"stuck_repeats": 7}),
        ([("cat x", "gone", True)] * 4, {"stuck_errors": None, "stuck_repeats": None}),
    ],
)
async def test_calls_that_do_not_repeat_enough_let_the_turn_finish(
    tmp_path: Path, made: list[tuple[str, str, bool]], options: dict[str, Any]
) -> None:
    cli = FakeClaude(tmp_path / "cli", calls(*made))
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="coder", backend="claude", binary=cli.binary, **options)
        assert (await rt.ask("coder", "work")).text == "finished"
