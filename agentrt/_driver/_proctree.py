"""The processes of one turn, found through /proc, and how they are all killed.

A turn's CLI runs as the leader of its own session and process group, but a group kill is
not enough: the real Claude CLI starts its Bash tool in a *new* session, and a CLI killed by
SIGKILL orphans whatever it started. So a turn's tree is every process that

- is the leader, or is in the leader's group or session (while that pgid cannot have been
  reused: the leader is still there, unreaped, or gone without its pid being taken again),
- carries the turn's env marker (``AGENTRT_TURN=<value>``, inherited unless a descendant
  clears its environment), or was seen in the tree before (pid and start time), or
- descends, by parent pid, from any of those.

Linux only; where /proc is missing the tree is just the group. Where the turn has a cgroup
of its own (`agentrt._driver._cgroup`), the tree is simply what that cgroup holds.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import secrets
import signal
import threading
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

import attrs
import trio

# The marker is read by the fence guard too, a program that imports nothing of agentrt.
from ._fence_guard import MARKER_ENV as MARKER_ENV
from ._fence_guard import marker_of as marker_of
from ._kept_file import KeptFile
from ._procfs import PROC, ProcStat, parse_stat, read_stat

if TYPE_CHECKING:
    from ._cgroup import TurnCgroup

# After SIGKILL, how long members may take to disappear before they are reported as survivors
# (a process in uninterruptible sleep can outlast any signal).
KILL_BOUND = 2.0

_POLL_FIRST = 0.005
_POLL_MAX = 0.05

_log = logging.getLogger("agentrt.process")


def snapshot() -> dict[int, ProcStat]:
    """The stat of every process on the machine (only the fields above; no other data)."""
    procs: dict[int, ProcStat] = {}
    try:
        names = os.listdir(PROC)
    except OSError:
        return procs
    for name in names:
        if name.isdigit() and (st := read_stat(int(name))) is not None:
            procs[st.pid] = st
    return procs


def _children(pid: int) -> list[int]:
    # The kernel's list of a process's children, per thread (a child belongs to the thread
    # that forked it). Empty for a zombie, whose children have been reparented already.
    try:
        tids = os.listdir(f"{PROC}/{pid}/task")
    except OSError:
        return []
    found: list[int] = []
    for tid in tids:
        found.extend(_thread_children(pid, tid))
    return found


def _thread_children(pid: int, tid: int | str) -> list[int]:
    try:
        fd = os.open(f"{PROC}/{pid}/task/{tid}/children", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return []
    try:
        data = b""
        while chunk := os.read(fd, 65536):
            data += chunk
    except OSError:
        return []
    finally:
        os.close(fd)
    return [int(child) for child in data.split()]


def _adopted() -> list[int]:
    """Our children that may be orphans of a turn's tree.

    The kernel hands an orphan to the subreaper's first thread that is not exiting: our
    main thread while it runs. Reading only its list matters because our other threads
    (trio's worker threads, which spawn the CLIs) are many, and every turn's end reads
    this; the turns' leaders, under those threads, are reached from each turn's leader.
    Once the main thread has finished, orphans may go to any thread: all are read."""
    pid = os.getpid()
    if threading.main_thread().is_alive():
        return _thread_children(pid, pid)
    return _children(pid)


def subtree(root: int, into: dict[int, ProcStat]) -> None:
    """Add the stat of ``root`` and of every process below it (by parent pid) to ``into``."""
    stack = [root]
    while stack:
        pid = stack.pop()
        if pid in into or (st := read_stat(pid)) is None:
            continue
        into[pid] = st
        stack.extend(_children(pid))


def descendants(procs: dict[int, ProcStat], roots: Iterable[int]) -> set[int]:
    """Every process in ``procs`` below ``roots`` by parent pid (roots excluded)."""
    children: defaultdict[int, list[int]] = defaultdict(list)
    for st in procs.values():
        children[st.ppid].append(st.pid)
    found: set[int] = set()
    stack = list(roots)
    while stack:
        for child in children[stack.pop()]:
            if child not in found:
                found.add(child)
                stack.append(child)
    return found


def new_marker(prefix: str | None = None) -> str:
    """A fresh marker value: ``prefix``, the turns' runtime's (`marker_prefix`; by default
    this process's pid, so a test can find what it started), and a random part (so two turns
    never share one)."""
    return f"{os.getpid() if prefix is None else prefix}.{secrets.token_hex(8)}"


def marker_prefix(runtime_id: str) -> str:
    """What the markers of the turns of the runtime ``runtime_id`` (of this process) start
    with: the pid, then the random part of the id (`agentrt._driver._runtimes.new_runtime_id`).
    Its fence guard kills by it (`agentrt._driver._fence_guard`), so it spares the turns of
    the process's other runtimes (one runtime per job, test after test in one worker, the
    asyncio and sync faces' threads)."""
    return f"{os.getpid()}.{runtime_id.rsplit(':', 1)[-1]}"


# The leaders of the turns running in this process, whatever runtime started them, each
# noted only while its pid is pinned (our child, exited or not, but not reaped), so the pid
# alone names it. Each was exec'd with its own turn's marker, so a scan for another turn
# passes them by without reading their stat or environ: with a hundred turns at once, the
# end of each would otherwise read those of every other.
_live_leaders: set[int] = set()


def track_leader(pid: int) -> None:
    """Note a turn's leader: our child, exec'd with its turn's marker, not to be reaped
    before `untrack_leader`."""
    _live_leaders.add(pid)


def untrack_leader(pid: int) -> None:
    """Undo `track_leader`; call it before the leader is reaped."""
    _live_leaders.discard(pid)


@attrs.define
class ProcTree:
    """The processes of one turn (see the module docstring for who counts)."""

    leader: int
    start_time: int
    pgid: int
    marker: str | None = None
    # Every process ever seen in the tree, pid -> start time; kept after they die so that a
    # zombie orphan can be recognised as ours and reaped.
    members: dict[int, int] = attrs.field(factory=dict)
    # The leader is our own child: while we are the subreaper, a scan walks only the
    # leader's subtree and our children instead of the whole machine.
    local: bool = False
    # The turn's own cgroup, the leader placed in it before exec: then its members are
    # exactly what the cgroup holds, and no walk is needed.
    cgroup: TurnCgroup | None = None
    # How many members were still running when `kill_tree` began (the turn's telemetry).
    killed: int = 0
    # The leader's stat, which every scan of its cgroup reads (see `close`).
    _leader_stat: KeptFile = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self._leader_stat = KeptFile(f"{PROC}/{self.leader}/stat")

    def close(self) -> None:
        """Close what the scans keep open; call it once the tree is done with."""
        self._leader_stat.close()

    @property
    def walks_machine(self) -> bool:
        """Whether a `scan` reads every process of the machine: it reads the turn's cgroup
        instead, or walks the leader's subtree while it is our child and we are the
        subreaper."""
        return self.cgroup is None and not (self.local and _subreaper_users)

    def scan(self, procs: dict[int, ProcStat] | None = None) -> list[ProcStat]:
        """Walk /proc (or a `snapshot` just taken; without one, a tree that does not
        `walks_machine` walks only its own subtree), or read the turn's cgroup: record every
        member, return the ones still running."""
        if self.cgroup is not None:
            return self._cgroup_scan(self.cgroup)
        if procs is None:
            procs = snapshot() if self.walks_machine else self._local_snapshot()
        me = os.getpid()
        leader = procs.get(self.leader)
        # While the leader exists unreaped, its pid (= pgid = sid) cannot be reused; once it is
        # gone, nothing else can hold that pgid as long as one of our members still does.
        group_ok = leader is None or leader.start_time == self.start_time
        found: set[int] = set()
        for st in procs.values():
            if st.pid == me:
                continue
            known = self.members.get(st.pid)
            if known == st.start_time or (
                group_ok
                and st.start_time >= self.start_time
                and (st.pid == self.leader or self.pgid in (st.pgrp, st.session))
            ):
                found.add(st.pid)
        if self.marker is not None:
            # The marker is new with this turn, so only a process started since the leader can
            # carry it: the environ of older ones (most of the machine) is never read.
            for st in procs.values():
                if (
                    st.start_time >= self.start_time
                    and st.pid not in found
                    and st.pid != me
                    and marker_of(st.pid) == self.marker
                ):
                    found.add(st.pid)
        found |= descendants(procs, found)
        found.discard(me)
        for pid in found:
            self.members[pid] = procs[pid].start_time
        return [procs[pid] for pid in found if not procs[pid].gone]

    def _cgroup_scan(self, cgroup: TurnCgroup) -> list[ProcStat]:
        live = []
        for pid in cgroup.pids():
            st = parse_stat(pid, self._leader_stat.read()) if pid == self.leader else read_stat(pid)
            if st is not None and not st.gone:
                self.members[pid] = st.start_time
                live.append(st)
        return live

    def kill(self, live: Iterable[ProcStat]) -> None:
        """SIGKILL the tree: its cgroup at once (what forks meanwhile included), else the
        group and every live member."""
        if self.cgroup is not None:
            self.cgroup.kill()
        else:
            self.signal(signal.SIGKILL, live)

    def _local_snapshot(self) -> dict[int, ProcStat]:
        # While we are the subreaper, every process of the tree descends from the leader or,
        # once orphaned, from us: walking those two subtrees finds what a walk of the whole
        # machine would, at a cost proportional to the turn's own tree. Our other children
        # (other turns) are looked at, not descended into.
        procs: dict[int, ProcStat] = {}
        subtree(self.leader, procs)
        for pid in _adopted():
            if pid in procs or pid in _live_leaders:  # ours, or another turn's leader
                continue
            if (st := read_stat(pid)) is None:
                continue
            if (
                self.members.get(pid) == st.start_time
                or self.pgid in (st.pgrp, st.session)
                or (
                    self.marker is not None
                    and st.start_time >= self.start_time
                    and marker_of(pid) == self.marker
                )
            ):
                subtree(pid, procs)
        return procs

    def signal(self, sig: int, live: Iterable[ProcStat]) -> None:
        """Send ``sig`` to the group (if it has live members) and to every live member
        outside it, each by pidfd so a pid reused meanwhile is never hit."""
        outside: list[ProcStat] = []
        group_live = False
        for st in live:
            if st.pgrp == self.pgid:
                group_live = True
            else:
                outside.append(st)
        if group_live:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pgid, sig)
        for st in outside:
            _signal_exact(st, sig)


def _signal_exact(st: ProcStat, sig: int) -> None:
    try:
        fd = os.pidfd_open(st.pid)
    except OSError:
        return
    try:
        now = read_stat(st.pid)
        if now is not None and now.start_time == st.start_time:
            signal.pidfd_send_signal(fd, sig)
    except OSError:
        pass
    finally:
        os.close(fd)


def still_running(live: Iterable[ProcStat]) -> list[ProcStat]:
    """The members of ``live`` that have not exited (a zombie counts as exited)."""
    out = []
    for st in live:
        now = read_stat(st.pid)
        if now is not None and now.start_time == st.start_time and not now.gone:
            out.append(now)
    return out


async def wait_gone(live: list[ProcStat], bound: float) -> list[ProcStat]:
    """Poll until every process in ``live`` has exited or ``bound`` seconds passed; return the
    ones still running."""
    delay = _POLL_FIRST
    with trio.move_on_after(bound):
        while live:
            await trio.sleep(delay)
            delay = min(delay * 2, _POLL_MAX)
            live = still_running(live)
    return still_running(live)


async def kill_tree(
    tree: ProcTree, *, term_grace: float, keep: Mapping[int, int] | None = None
) -> list[ProcStat]:
    """SIGTERM every running member (and SIGCONT, so a stopped one can act on it), wait up to
    ``term_grace``, then SIGKILL whatever runs and rescan, until a scan finds nobody or
    `KILL_BOUND` passes. Returns the survivors (normally none).

    ``keep`` (pid -> start time) spares those members, a warm CLI and what it had when it
    became ready: then each other member is signalled by itself (pidfd), never through the
    group or the cgroup, which hold the spared ones too.

    Cancellation: not meant to be cancelled; callers run it shielded. Bounded by
    ``term_grace + KILL_BOUND`` plus the cost of the scans.
    """

    def scan() -> list[ProcStat]:
        live = tree.scan()
        return live if keep is None else [st for st in live if keep.get(st.pid) != st.start_time]

    def send(sig: int, live: list[ProcStat]) -> None:
        if keep is None:
            tree.signal(sig, live)
        else:
            for st in live:
                _signal_exact(st, sig)

    live = scan()
    if not live:
        return []  # nobody runs, so nobody can have forked since: no rescan needed
    tree.killed += len(live)
    send(signal.SIGTERM, live)
    send(signal.SIGCONT, live)
    await wait_gone(live, term_grace)
    deadline = trio.current_time() + KILL_BOUND
    while True:
        # A full rescan, not just the known members: a dying process may have forked.
        live = scan()
        if not live or trio.current_time() >= deadline:
            return live
        if keep is None:
            tree.kill(live)
        else:
            send(signal.SIGKILL, live)
        await wait_gone(live, deadline - trio.current_time())


def adopted_orphans() -> list[ProcStat]:
    """Our children (running or zombies) that we cannot have forked ourselves, so reaping them
    takes nobody's exit status: a child we fork stays in our session or starts its own
    (setsid), so a child in a session some other process leads was reparented to us, the
    subreaper. Live turns' leaders are passed by."""
    me, ours = os.getpid(), os.getsid(0)
    found = []
    for pid in _adopted():
        if pid in _live_leaders or (st := read_stat(pid)) is None:
            continue
        if st.ppid == me and st.session not in (ours, pid):
            found.append(st)
    return found


def _exited_child() -> bool:
    # Whether any child of this process (whichever thread forked or adopted it) has exited
    # and waits to be reaped; WNOWAIT leaves it so.
    try:
        return os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:  # no children at all
        return False


def reap_adopted(tree: ProcTree) -> int:
    """Reap the tree's zombies whose parent is us (orphans adopted as a subreaper).

    Only those exact pids are waited for, never -1, and never the leader, whose exit status
    belongs to trio's Process object. With a cgroup, so are our zombie children that died in
    it: whatever forked after the last scan and was killed with the cgroup. Returns how many
    were reaped.
    """
    me = os.getpid()
    reaped = 0
    # Only a child that has exited can be reaped, and most ends of turns have none: one
    # query then saves reading our children and each one's cgroup.
    exited = _exited_child()
    if exited and tree.cgroup is not None:
        for pid in _adopted():
            if (
                pid not in tree.members
                and pid not in _live_leaders
                and tree.cgroup.holds(pid)
                and (st := read_stat(pid)) is not None
            ):
                tree.members[pid] = st.start_time
    for pid, start in list(tree.members.items()):
        if pid == tree.leader:
            continue
        st = read_stat(pid)
        if st is None or st.start_time != start:
            del tree.members[pid]
        elif exited and st.ppid == me and st.state == "Z":
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                continue
            del tree.members[pid]
            reaped += 1
    return reaped


async def kill_stale_group(
    pgid: int, pid: int, start_time: int, *, marker: str | None = None, term_grace: float = 2.0
) -> bool:
    """Kill what is left of a turn that a previous runtime recorded and could not clean up.

    ``pid`` and ``start_time`` are the recorded leader; a process now under that pid with
    another start time is a stranger and is left alone, as is its group. The turn's marker is
    read from the leader or a surviving group member when not given, so setsid'd orphans that
    carry it are found too. Returns True if any process of that turn was still running.

    Cancellation: bounded by ``term_grace`` plus a short kill bound; cancel it and the
    processes signalled so far stay signalled.
    """
    tree = ProcTree(leader=pid, start_time=start_time, pgid=pgid, marker=marker)
    live = tree.scan()
    if tree.marker is None:
        for st in sorted(live, key=lambda st: st.pid != pid):
            if (found := marker_of(st.pid)) is not None:
                tree.marker = found
                live = tree.scan()
                break
    if not live:
        return False
    survivors = await kill_tree(tree, term_grace=term_grace)
    if survivors:
        _log.warning("stale turn group %d: %d processes survived SIGKILL", pgid, len(survivors))
    reap_adopted(tree)
    return True


_PR_SET_CHILD_SUBREAPER = 36
_PR_GET_CHILD_SUBREAPER = 37
_subreaper_lock = threading.Lock()
_subreaper_users = 0
_subreaper_before = 0


def _prctl(option: int, arg: int | ctypes._CArgObject) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    result: int = libc.prctl(option, arg, 0, 0, 0)
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return result


def acquire_subreaper() -> bool:
    """Make this process a child subreaper (Linux), so orphans of our turns are reparented to
    us rather than to init. Counted: the flag is restored when the last user releases it.
    Returns whether the flag is on."""
    global _subreaper_users, _subreaper_before
    with _subreaper_lock:
        if _subreaper_users == 0:
            try:
                before = ctypes.c_int(0)
                _prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(before))
                _prctl(_PR_SET_CHILD_SUBREAPER, 1)
            except (OSError, AttributeError):
                return False
            _subreaper_before = before.value
        _subreaper_users += 1
        return True


def release_subreaper() -> None:
    """Undo one `acquire_subreaper` that returned True."""
    global _subreaper_users
    with _subreaper_lock:
        _subreaper_users -= 1
        if _subreaper_users == 0 and not _subreaper_before:
            _prctl(_PR_SET_CHILD_SUBREAPER, 0)
