"""cgroup v2 isolation: each turn's processes in a cgroup of their own, killed as one.

Where the runtime may create cgroups (cgroup v2 with ``cgroup.kill``, Linux >= 5.14: as
root, or in a delegated subtree such as a systemd user slice), a runtime makes one cgroup
under the one it runs in (``agentrt-<pid>-<start time>-<random>``) and one per turn below
that. The turn's CLI is moved into its cgroup before it execs (agentrt._driver._spawn holds it at a
FIFO meanwhile), so everything it ever starts is born inside: no new session, double fork or
cleared environment leaves it, and ``cgroup.kill`` ends them all at once. Only the core
files are used (cgroup.procs, cgroup.kill, cgroup.events, cgroup.stat) unless an agent asks
for `Limits` (agentrt._driver._limits): then the controllers they need are enabled for the
runtime's turn cgroups, which the kernel allows only where cgroup v2's "no internal
processes" rule lets it (`TurnCgroups.enable`).

The v2 hierarchy may be mounted anywhere (beside v1 controllers, say): it is found in
/proc/self/mountinfo, and our own cgroup in the ``0::`` line of /proc/self/cgroup.
"""

from __future__ import annotations

import errno
import functools
import itertools
import logging
import os
import re
import secrets
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress

import attrs
import trio

from ._kept_file import KeptFile
from ._limits import Limits, apply_limits
from ._procfs import process_start_time

SWITCH_ENV = "AGENTRT_CGROUP"
_OFF = frozenset({"off", "0", "no", "false"})
_PREFIX = "agentrt-"
_STALE_NAME = re.compile(r"agentrt-(\d+)-(\d+)-[0-9a-f]+")
# How long a killed cgroup may take to empty (a process in uninterruptible sleep can outlast
# any signal) before it is left for the next start's stale sweep.
_EMPTY_BOUND = 2.0
_POLL_FIRST = 0.001
_POLL_MAX = 0.05
# How many idle turn cgroups a runtime keeps for its next turns (`TurnCgroups.keep`): making
# and removing one costs a turn some 130 us of CPU (mkdir, rmdir, the files opened).
_SPARE = 8

_log = logging.getLogger("agentrt.process")


class Unavailable(Exception):
    """cgroups cannot isolate turns here; the message says why."""


def _unescape(field: str) -> str:
    # mountinfo writes space, tab, newline and backslash in paths as octal escapes.
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def _v2_mounts(mountinfo: str) -> list[tuple[str, str]]:
    # (root, mount point) of each cgroup v2 mount.
    mounts = []
    for line in mountinfo.splitlines():
        fields = line.split()
        if " - " in line and line.split(" - ", 1)[1].split()[0] == "cgroup2":
            mounts.append((_unescape(fields[3]), _unescape(fields[4])))
    if not mounts:
        raise Unavailable("cgroup v2 is not mounted")
    return mounts


def v2_directory(mountinfo: str, proc_cgroup: str) -> tuple[str, str]:
    """Our own cgroup from the texts of /proc/self/mountinfo and /proc/self/cgroup: its
    directory, and its name in the v2 hierarchy (as /proc/<pid>/cgroup shows it). Raises
    `Unavailable`."""
    own = _v2_line(proc_cgroup)
    if own is None:
        raise Unavailable("this process is in no cgroup v2 hierarchy")
    mounts = _v2_mounts(mountinfo)
    for root, point in mounts:
        base = root.rstrip("/")
        if own == root or own.startswith(base + "/"):
            return (point.rstrip("/") + own[len(base) :].rstrip("/") or "/", own)
    raise Unavailable(f"our cgroup {own} is outside every cgroup v2 mount")


def _v2_line(proc_cgroup: str) -> str | None:
    own = next((line[3:] for line in proc_cgroup.splitlines() if line.startswith("0::")), None)
    return None if own is None else own.removesuffix(" (deleted)")


def chosen_directory(mountinfo: str, path: str) -> tuple[str, str]:
    """The cgroup at ``path`` (a directory in a cgroup v2 mount): its directory and name.
    Raises `Unavailable`."""
    path = os.path.normpath(path)
    for root, point in _v2_mounts(mountinfo):
        point = point.rstrip("/")
        if path == point or path.startswith(point + "/"):
            return (path, root.rstrip("/") + path[len(point) :] or "/")
    raise Unavailable(f"{SWITCH_ENV}={path} is in no cgroup v2 mount")


def own_cgroup() -> tuple[str, str]:
    """The cgroup (directory, name) this process's turn cgroups go under: its own, or the
    one ``AGENTRT_CGROUP`` names by its directory; or `Unavailable` saying why none
    (``AGENTRT_CGROUP=off`` included).

    Limits need a cgroup other than the program's own: the kernel enables controllers for
    the cgroups below a cgroup only while it holds no process (or is the root), and a
    program's own holds the program (a systemd unit's ``Delegate=yes`` cgroup with the
    program in a sub-cgroup, ``DelegateSubgroup=``, is one to name)."""
    switch = os.environ.get(SWITCH_ENV, "")
    if switch.lower() in _OFF:
        raise Unavailable(f"{SWITCH_ENV}={switch}")
    try:
        with open("/proc/self/mountinfo") as f:
            mountinfo = f.read()
        with open("/proc/self/cgroup") as f:
            proc_cgroup = f.read()
    except OSError as exc:
        raise Unavailable(f"cannot read /proc: {exc.strerror}") from exc
    if switch.startswith("/"):
        if not os.path.isfile(f"{switch}/cgroup.procs"):
            raise Unavailable(f"{SWITCH_ENV}={switch} is not a cgroup directory")
        return chosen_directory(mountinfo, switch)
    return v2_directory(mountinfo, proc_cgroup)


@attrs.define(eq=False)
class TurnCgroup:
    """One turn's cgroup. The spawn `move`s its child in before the child runs its program
    (agentrt._driver._spawn), so nothing it starts is ever outside."""

    path: str
    name: str  # as /proc/<pid>/cgroup shows it
    _procs_fd: int | None = None
    # Made with limits: not kept for another turn (its OOM count is this turn's).
    limited: bool = False
    # What `pids` reads at each turn's end, kept open.
    _procs: KeptFile = attrs.field(init=False)
    _stat: KeptFile = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self._procs = KeptFile(f"{self.path}/cgroup.procs")
        self._stat = KeptFile(f"{self.path}/cgroup.stat")

    @classmethod
    def create(cls, path: str, name: str, limits: Limits | None = None) -> TurnCgroup:
        os.mkdir(path)
        cgroup = cls(path, name, limited=limits is not None)
        try:
            if limits is not None:
                apply_limits(path, limits)
            cgroup._procs_fd = os.open(f"{path}/cgroup.procs", os.O_WRONLY | os.O_CLOEXEC)
        except OSError:
            os.rmdir(path)
            raise
        return cgroup

    def holds(self, pid: int) -> bool:
        """Whether ``pid`` is (or, a zombie now, was when it died) in this cgroup or below."""
        try:
            with open(f"/proc/{pid}/cgroup") as f:
                found = _v2_line(f.read())
        except OSError:
            return False
        return found is not None and (found == self.name or found.startswith(self.name + "/"))

    def move(self, pid: int) -> None:
        """Move ``pid`` (a spawned child not yet running its program) into the cgroup."""
        assert self._procs_fd is not None
        os.write(self._procs_fd, b"%d" % pid)

    @property
    def enter(self) -> Callable[[], object]:
        # The ``preexec_fn`` where the spawn has to fork (agentrt._driver._spawn): the child
        # makes one write(2) to an fd opened here ("0": the writer).
        assert self._procs_fd is not None
        return functools.partial(os.write, self._procs_fd, b"0")

    def pids(self) -> list[int]:
        """The processes in the cgroup and the cgroups below it now (zombies excluded: they
        have left it)."""
        procs = self._procs.read()
        if procs is None:
            return []
        pids = [int(pid) for pid in procs.split()]
        # Cgroups below a turn's exist only if something in the turn made them (another
        # runtime, a container tool): they are walked only when cgroup.stat counts one. It
        # is read after cgroup.procs, so a process that left for a new one since was either
        # listed above or moved into a cgroup made before this count.
        if self._descendants():
            with suppress(FileNotFoundError):
                for entry in os.scandir(self.path):
                    if entry.is_dir(follow_symlinks=False):
                        pids += _pids_below(entry.path)
        return pids

    def idle(self) -> bool:
        """Whether nothing runs in the cgroup and no cgroup was made below it: as a new
        one would be."""
        return not (self._procs.read() or b"").split() and self._descendants() == 0

    def _descendants(self) -> int:
        for line in (self._stat.read() or b"").splitlines():
            key, _, value = line.partition(b" ")
            if key == b"nr_descendants":
                return int(value)
        # Not counted (the cgroup is gone): the walk decides, and finds nothing.
        return 1

    def kill(self) -> None:
        """SIGKILL every process in the cgroup, including any forking meanwhile."""
        with suppress(FileNotFoundError), open(f"{self.path}/cgroup.kill", "w") as f:
            f.write("1")

    def populated(self) -> bool:
        try:
            with open(f"{self.path}/cgroup.events") as f:
                return "populated 1" in f.read()
        except FileNotFoundError:
            return False

    def remove(self) -> bool:
        """Remove the (empty) cgroup; if something still runs in it, kill it and leave the
        directory to `TurnCgroups.close` (or the next start). Returns whether it is gone."""
        if self._procs_fd is not None:
            os.close(self._procs_fd)
            self._procs_fd = None
        self._procs.close()
        self._stat.close()
        try:
            _rmdir_tree(self.path)
        except FileNotFoundError:
            pass
        except OSError:
            self.kill()
            return False
        return True


def _read_words(path: str) -> frozenset[str]:
    try:
        with open(path) as f:
            return frozenset(f.read().split())
    except OSError:
        return frozenset()


def _pids_below(path: str) -> list[int]:
    pids: list[int] = []
    try:
        with open(f"{path}/cgroup.procs", "rb") as f:
            pids += [int(pid) for pid in f.read().split()]
        for entry in os.scandir(path):
            if entry.is_dir(follow_symlinks=False):
                pids += _pids_below(entry.path)
    except FileNotFoundError:
        pass
    return pids


def _rmdir_tree(path: str) -> None:
    # cgroups below a turn's are possible (a turn that runs another agentrt runtime makes its
    # own there) and a cgroup with children cannot be removed: the deepest go first. A
    # cgroup's files are the kernel's and go with it.
    for entry in os.scandir(path):
        if entry.is_dir(follow_symlinks=False):
            _rmdir_tree(entry.path)
    os.rmdir(path)


async def wait_empty(cgroup: TurnCgroup, bound: float) -> bool:
    """Poll ``cgroup.events`` until nothing runs in the cgroup or ``bound`` seconds passed;
    return whether it is empty."""
    delay = _POLL_FIRST
    with trio.move_on_after(bound):
        while cgroup.populated():
            await trio.sleep(delay)
            delay = min(delay * 2, _POLL_MAX)
    return not cgroup.populated()


class TurnCgroups:
    """The runtime's cgroup for its turns, made under the cgroup it runs in."""

    def __init__(self, path: str, name: str) -> None:
        self.path = path
        self._name = name
        self._count = itertools.count()
        # The controllers enabled for the turn cgroups (`enable`).
        self._enabled: frozenset[str] = frozenset()
        # Idle turn cgroups without limits, kept for the next turns (`keep`).
        self._spare: list[TurnCgroup] = []

    @classmethod
    def create(cls, parent: str, parent_name: str) -> TurnCgroups:
        """Make the runtime's cgroup under ``parent`` (named ``parent_name``); raises
        `Unavailable` if turns cannot be isolated there (no permission, no ``cgroup.kill``)."""
        pid = os.getpid()
        leaf = f"{_PREFIX}{pid}-{process_start_time(pid) or 0}-{secrets.token_hex(4)}"
        path = f"{parent}/{leaf}"
        try:
            os.mkdir(path)
        except OSError as exc:
            raise Unavailable(f"cannot create a cgroup in {parent}: {exc.strerror}") from exc
        if not os.path.exists(f"{path}/cgroup.kill"):
            os.rmdir(path)
            raise Unavailable("the kernel has no cgroup.kill (Linux >= 5.14 needed)")
        # Moving a process needs write access to the cgroup.procs of the common ancestor of
        # where it is and where it goes: ours.
        if not os.access(f"{parent}/cgroup.procs", os.W_OK):
            os.rmdir(path)
            raise Unavailable(f"cannot move processes out of {parent}")
        return cls(path, f"{parent_name.rstrip('/')}/{leaf}")

    def new_turn(self, limits: Limits | None = None) -> TurnCgroup:
        """A cgroup for one turn (or warm CLI), with ``limits`` where they were enabled."""
        if limits is not None and not limits.controllers() <= self._enabled:
            limits = None  # best effort, and refused: start_agent warned
        if limits is None and self._spare:
            return self._spare.pop()
        leaf = f"t{next(self._count)}"
        return TurnCgroup.create(f"{self.path}/{leaf}", f"{self._name}/{leaf}", limits)

    def keep(self, cgroup: TurnCgroup) -> bool:
        """Keep a turn's cgroup, once the turn is done with it, for a later turn: only one
        without limits, with nothing running in it and no cgroup below it, so that what
        runs in it next is that turn's alone (its kill, `TurnCgroup.kill`, kills that
        turn's tree and nothing else). Whether it was kept; else the caller removes it."""
        if cgroup.limited or len(self._spare) >= _SPARE or not cgroup.idle():
            return False
        self._spare.append(cgroup)
        return True

    def enable(self, controllers: frozenset[str]) -> str | None:
        """Enable ``controllers`` for the turn cgroups; return why they cannot be, or None.

        They must be enabled in the ``cgroup.subtree_control`` of the cgroup this process
        runs in, then in the runtime's. The kernel refuses the first where that cgroup holds
        processes and is not the root (cgroup v2's "no internal processes" rule), and where
        the controllers are not there to give (bound to a cgroup v1 hierarchy, or not
        delegated)."""
        missing = controllers - self._enabled
        if not missing:
            return None
        parent = os.path.dirname(self.path)
        names = " ".join(sorted(missing))
        for where in (parent, self.path):
            offered = _read_words(f"{where}/cgroup.controllers")
            if not missing <= offered:
                lacking = " ".join(sorted(missing - offered))
                return (
                    f"cgroup v2 offers no {lacking} controller to {where} (bound to a cgroup "
                    "v1 hierarchy, or not delegated there)"
                )
            if missing <= _read_words(f"{where}/cgroup.subtree_control"):
                continue
            try:
                with open(f"{where}/cgroup.subtree_control", "w") as f:
                    f.write(" ".join(f"+{name}" for name in sorted(missing)))
            except OSError as exc:
                return f"cannot enable {names} for the cgroups below {where}: {exc.strerror}" + (
                    " (it holds processes, this program's among them: cgroup v2 gives "
                    "controllers only to cgroups without processes of their own, or to the "
                    f"root; {SWITCH_ENV}=<the directory of one> puts the turns' cgroups there)"
                    if exc.errno == errno.EBUSY
                    else ""
                )
        self._enabled |= missing
        return None

    async def close(self) -> None:
        """Kill and remove what turns left (normally nothing), then the runtime's cgroup.

        Cancellation: shielded and bounded by about 2 s."""
        for spare in self._spare:
            spare.remove()
        self._spare.clear()
        with trio.move_on_after(_EMPTY_BOUND, shield=True):
            await remove_tree(self.path)


async def remove_tree(path: str) -> bool:
    """Kill every turn cgroup under ``path``, wait for them to empty, remove them all."""
    with suppress(FileNotFoundError):
        for entry in os.scandir(path):
            if entry.is_dir():
                turn = TurnCgroup(entry.path, "")
                turn.kill()
                if await wait_empty(turn, _EMPTY_BOUND):
                    turn.remove()
    try:
        _rmdir_tree(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        _log.warning("cannot remove cgroup %s: %s", path, exc.strerror)
        return False
    return True


async def reap_stale(parent: str) -> int:
    """Kill and remove the turn cgroups that runtimes which have since died left under
    ``parent``; return how many runtimes' cgroups were removed. A runtime is known by the pid
    and start time in its cgroup's name, so a reused pid never passes for it.

    Cancellation: bounded by about 2 s per stale turn cgroup."""
    removed = 0
    with suppress(FileNotFoundError):
        for entry in os.scandir(parent):
            found = _STALE_NAME.fullmatch(entry.name)
            if found is None or not entry.is_dir():
                continue
            pid, start = int(found.group(1)), int(found.group(2))
            if process_start_time(pid) == start:
                continue  # that runtime is alive (maybe this very process)
            running = len(_pids_below(entry.path))
            if await remove_tree(entry.path):
                # Only killed processes are news; an empty cgroup is a crash's leftover.
                if running:
                    _log.warning(
                        "killed %d processes in cgroup %s, left by a runtime that died",
                        running,
                        entry.path,
                    )
                else:
                    _log.debug("removed cgroup %s, left by a runtime that died", entry.path)
                removed += 1
    return removed


@attrs.frozen
class Isolation:
    """How a runtime finds a turn's processes: a cgroup per turn under ``cgroups``, or (None)
    the /proc walk, ``reason`` saying why."""

    cgroups: TurnCgroups | None
    reason: str = ""

    def describe(self) -> str:
        if self.cgroups is not None:
            return f"cgroup v2 at {self.cgroups.path}"
        return f"/proc walk ({self.reason})"


@asynccontextmanager
async def open_isolation(enabled: bool = True) -> AsyncIterator[Isolation]:
    """The runtime's turn cgroups where the kernel lets us (stale ones of dead runtimes
    removed first), else the /proc walk; the cgroups are removed on the way out.

    Cancellation: opening and closing are bounded (about 2 s per stale turn cgroup)."""
    if not enabled:
        yield Isolation(None, "cgroups=False")
        return
    try:
        parent, name = own_cgroup()
        await reap_stale(parent)
        cgroups = TurnCgroups.create(parent, name)
    except Unavailable as exc:
        yield Isolation(None, str(exc))
        return
    try:
        yield Isolation(cgroups)
    finally:
        await cgroups.close()


async def probe() -> str:
    """What `open_isolation` would use here, said in one line (``agentrt doctor``); it
    creates and removes a runtime cgroup, and leaves stale ones alone."""
    try:
        cgroups = TurnCgroups.create(*own_cgroup())
    except Unavailable as exc:
        return Isolation(None, str(exc)).describe()
    await cgroups.close()
    return Isolation(cgroups).describe()
