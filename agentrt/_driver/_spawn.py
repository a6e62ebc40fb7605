"""Starting a turn's CLI without forking the runtime.

`subprocess` forks as soon as anything has to run between fork and exec (``preexec_fn``),
and a fork write-protects the runtime's whole heap: the spawn copies its page tables, and
the runtime then takes a page fault on every page it writes afterwards, so a busy runtime
pays most. glibc's ``posix_spawn`` clones with ``CLONE_VM | CLONE_VFORK`` (no copy at all)
and does in the child everything a CLI needs: a new session, every signal back to its
default disposition and an empty signal mask (a runtime started in the background by a
shell has SIGINT and SIGQUIT ignored, and the CLI would inherit that and not be
interruptible), its cwd, its pipes on 0-2 and no other descriptor. Python's
``os.posix_spawn`` has no chdir, so the C functions are called through ctypes.

Entering the turn's cgroup: posix_spawn has no action for it (glibc 2.36 has no
``posix_spawnattr_setcgroup_np``), so the child's first step is to open a FIFO, which
blocks it until a writer comes. The spawn runs in a thread of ours kept for spawning; the
caller meanwhile finds the new child among that thread's children, writes its pid into the
turn's ``cgroup.procs``, and only then opens the FIFO's other end, again and again until the
spawn returns (a writer wakes only a reader already waiting). The CLI never runs a single
instruction outside its cgroup; if the move fails, the child is killed before it execs.

Nothing wakes a child at the gate but its runtime (it waits with every signal blocked), so a
runtime killed meanwhile would leave it there for ever. It therefore closes the runtime's
descriptors before it waits, and holds the gate at a known fd under a name carrying the
runtime's pid (`agentrt._driver._fence_guard.GATE_DIRECTORY`): the runtime's fence guard
then sees the runtime end, and SIGKILLs the children waiting at its gate with its turns.
The same holds for a runtime frozen past its lease: its guard kills the child at the gate
before the runtime, awake again, could let it exec.

Where any of this is missing (another libc, no pidfd, no ``/proc/<pid>/task/<tid>/children``)
`spawn` falls back to `subprocess` with a ``preexec_fn`` that does the same in a fork, for
every signal Python can name (the C library's own, glibc's 32 and 33, keep what they were).
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import functools
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from typing import Any, Protocol

import attrs
import trio

from ._fence_guard import GATE_DIRECTORY, GATE_FD

# <spawn.h> on Linux, glibc and musl alike.
_SETSIGDEF = 0x04
_SETSIGMASK = 0x08
_SETSID = 0x80
# Opaque C objects, given more room than any libc needs (glibc: 80 and 336 bytes).
_FILE_ACTIONS_WORDS = 64
_ATTR_WORDS = 128
_SIGSET_WORDS = 1024 // (8 * ctypes.sizeof(ctypes.c_ulong))  # glibc's sigset_t: 1024 bits
_NSIG = 65  # Linux: signals 1-64
_UNCATCHABLE = (signal.SIGKILL, signal.SIGSTOP)
# How long the child may take to appear among the spawning thread's children.
_APPEAR_BOUND = 5.0
_POLL = 50e-6
_FS_ENCODING = sys.getfilesystemencoding()
_FS_ERRORS = sys.getfilesystemencodeerrors()
# Once the gate has let a reader through: how often it is opened again, in case that reader
# was not this spawn's child (see `_Spawner._run_one`).
_REOPEN = 0.005


_P = ctypes.c_void_p
_SIGNATURES: dict[str, list[Any]] = {
    "posix_spawn": [_P, ctypes.c_char_p, _P, _P, _P, _P],
    "posix_spawn_file_actions_init": [_P],
    "posix_spawn_file_actions_destroy": [_P],
    "posix_spawn_file_actions_adddup2": [_P, ctypes.c_int, ctypes.c_int],
    "posix_spawn_file_actions_addopen": [
        _P,
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_int,
        ctypes.c_uint,
    ],
    "posix_spawn_file_actions_addchdir_np": [_P, ctypes.c_char_p],
    "posix_spawn_file_actions_addclosefrom_np": [_P, ctypes.c_int],
    "posix_spawnattr_init": [_P],
    "posix_spawnattr_destroy": [_P],
    "posix_spawnattr_setflags": [_P, ctypes.c_short],
    "posix_spawnattr_setsigdefault": [_P, _P],
    "posix_spawnattr_setsigmask": [_P, _P],
}


class Spawned(Protocol):
    """What a spawn returns: the child's pid, its pipes, and ``wait`` (reaps, returns the
    exit code as `subprocess` gives it: ``-N`` for a signal)."""

    pid: int

    @property
    def stdin(self) -> trio.abc.SendStream | None: ...

    @property
    def stdout(self) -> trio.abc.ReceiveStream | None: ...

    @property
    def stderr(self) -> trio.abc.ReceiveStream | None: ...

    async def wait(self) -> int: ...


class Gate(Protocol):
    """Where the child goes before it runs: ``move(pid)`` puts it there or raises OSError;
    ``enter`` does the same from inside the child (``preexec_fn``, the fallback)."""

    def move(self, pid: int) -> None: ...

    @property
    def enter(self) -> Callable[[], object]: ...


class CannotEnter(OSError):
    """The child could not be moved into its cgroup; it was killed before it ran."""


def _default_signals() -> list[int]:
    # Every signal a handler can be set for: the CLI starts as if nothing had been inherited.
    return sorted(int(s) for s in signal.valid_signals() if s not in _UNCATCHABLE)


def _sigset(signals: Iterable[int]) -> ctypes.Array[ctypes.c_ulong]:
    words = (ctypes.c_ulong * _SIGSET_WORDS)()
    bits = 8 * ctypes.sizeof(ctypes.c_ulong)
    for sig in signals:
        if sig not in _UNCATCHABLE:
            words[(sig - 1) // bits] |= 1 << ((sig - 1) % bits)
    return words


@attrs.define
class _Libc:
    c: Any
    sigdefault: Any  # signals 1-64 but SIGKILL and SIGSTOP
    empty: Any  # an empty sigset

    @classmethod
    def load(cls) -> _Libc | None:
        if not os.path.exists(f"/proc/self/task/{threading.get_native_id()}/children"):
            return None
        try:
            os.close(os.pidfd_open(os.getpid()))
            c = ctypes.CDLL(None, use_errno=True)
            for name, argtypes in _SIGNATURES.items():
                function = getattr(c, name)
                function.argtypes = argtypes
                function.restype = ctypes.c_int
        except (OSError, AttributeError):  # no pidfds, another libc, an older glibc
            return None
        # Built bit by bit (the kernel's layout: bit sig-1): sigaddset refuses the signals
        # glibc keeps for itself, and posix_spawn would pass those on ignored.
        sigdefault = _sigset(range(1, _NSIG))
        empty = _sigset(())
        return cls(c, sigdefault, empty)

    @contextmanager
    def prepared(
        self,
        path: bytes,
        argv: Sequence[bytes],
        env: Sequence[bytes],
        cwd: bytes | None,
        fds: tuple[int, int, int],
        gate: bytes | None,
    ) -> Iterator[Callable[[], int]]:
        """A posix_spawn ready to call, all set up here (the call alone may run in another
        thread); it returns the pid or raises OSError (errno as the child saw it)."""
        c = self.c
        actions = (ctypes.c_uint64 * _FILE_ACTIONS_WORDS)()
        attr = (ctypes.c_uint64 * _ATTR_WORDS)()
        _check(c.posix_spawn_file_actions_init(actions))
        try:
            _check(c.posix_spawnattr_init(attr))
            try:
                for target, fd in enumerate(fds):
                    _check(c.posix_spawn_file_actions_adddup2(actions, fd, target))
                if cwd is not None:
                    _check(c.posix_spawn_file_actions_addchdir_np(actions, cwd))
                # Before the gate: a child that waits there for ever (its runtime killed)
                # must hold none of the runtime's descriptors, the fence guard's stdin
                # among them, or the guard would never see the runtime end.
                _check(c.posix_spawn_file_actions_addclosefrom_np(actions, 3))
                if gate is not None:
                    # The gate held first as a path only (which does not block), at the fd
                    # where the fence guard looks for a child waiting at its runtime's gate;
                    # then opened to read, which blocks until a writer comes. Both close at
                    # exec.
                    for fd, flags in ((GATE_FD, os.O_PATH), (GATE_FD + 1, os.O_RDONLY)):
                        _check(
                            c.posix_spawn_file_actions_addopen(
                                actions, fd, gate, flags | os.O_CLOEXEC, 0
                            )
                        )
                _check(c.posix_spawnattr_setflags(attr, _SETSID | _SETSIGDEF | _SETSIGMASK))
                _check(c.posix_spawnattr_setsigdefault(attr, self.sigdefault))
                _check(c.posix_spawnattr_setsigmask(attr, self.empty))
                pid = ctypes.c_int(0)
                c_argv = (ctypes.c_char_p * (len(argv) + 1))(*argv, None)
                c_env = (ctypes.c_char_p * (len(env) + 1))(*env, None)

                def call() -> int:
                    _check(c.posix_spawn(ctypes.byref(pid), path, actions, attr, c_argv, c_env))
                    return pid.value

                yield call
            finally:
                c.posix_spawnattr_destroy(attr)
        finally:
            c.posix_spawn_file_actions_destroy(actions)


def _check(code: int) -> None:
    if code != 0:
        raise OSError(code, os.strerror(code))


@functools.cache
def _libc() -> _Libc | None:
    return _Libc.load()


@attrs.define(eq=False)
class _Request:
    spawn: Callable[[], int]
    before: set[int]  # the spawning thread's children before this spawn
    returned: threading.Event = attrs.Factory(threading.Event)
    pid: int | None = None
    error: Exception | None = None


class _Spawner:
    """The thread that gated spawns run in, one for the process while it is in use (see
    `spawner_in_use`), ended only once it has no child: a child whose parent thread exits
    would get its PR_SET_PDEATHSIG signal. Orphans are adopted by the main thread, never
    by this one, so every new child of it is the spawn's."""

    def __init__(self) -> None:
        self._requests: queue.SimpleQueue[_Request | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="agentrt-spawn", daemon=True)
        self._tid = 0
        self._started = threading.Event()
        self._one_at_a_time = threading.Lock()
        self._fifo_fd = _anonymous_fifo()
        self.fifo = f"/proc/{os.getpid()}/fd/{self._fifo_fd}"
        self._thread.start()
        self._started.wait()

    def stop(self) -> bool:
        """End the thread and close the FIFO, unless a child of the thread still runs (or
        awaits its reaping); whether it ended. Called with no spawn running."""
        with self._one_at_a_time:
            if self.children():
                return False
            self._requests.put(None)
        self._thread.join()
        os.close(self._fifo_fd)
        return True

    def _run(self) -> None:
        self._tid = threading.get_native_id()
        self._started.set()
        while True:
            request = self._requests.get()
            if request is None:
                return
            try:
                request.pid = request.spawn()
            except Exception as exc:  # the caller's to raise; this thread serves the next
                request.error = exc
            finally:
                request.returned.set()

    def children(self) -> set[int]:
        with open(f"/proc/self/task/{self._tid}/children", "rb") as f:
            return {int(pid) for pid in f.read().split()}

    def run(self, spawn: Callable[[], int], gate: Gate) -> int:
        """Run ``spawn`` here, moving its child with ``gate`` while it waits at the FIFO;
        returns the pid or raises OSError (`CannotEnter` if the move failed: the child was
        killed before it ran)."""
        with self._one_at_a_time:  # so that one new child of the thread is this one's
            return self._run_one(spawn, gate)

    def _run_one(self, spawn: Callable[[], int], gate: Gate) -> int:
        request = _Request(spawn, self.children())
        self._requests.put(request)
        refused: OSError | None = None
        try:
            refused = self._move(request, gate)
        except BaseException:
            refused = OSError(errno.ECANCELED, "interrupted")
            raise
        finally:
            # Whether moved, dead or on its way to exec, the child must not wait at the gate
            # for ever. An open wakes only a reader already waiting: the FIFO is opened until
            # an open succeeds (or the spawn returned, the child dead before the gate). That
            # can succeed before this child waits, because the FIFO may have another reader
            # (the previous spawn's child, whose close-on-exec comes after posix_spawn has
            # returned), and the child would then wait for the next writer: so it is opened
            # again every _REOPEN until the spawn returns. (Opened every _POLL throughout, a
            # spawn took some 40 opens and wake-ups while its child went on to its exec.)
            while not _open_gate(self.fifo):
                if request.returned.wait(_POLL):
                    break
            while not request.returned.wait(_REOPEN):
                _open_gate(self.fifo)
            if refused is not None and request.pid is not None:
                with suppress(ProcessLookupError):
                    os.kill(request.pid, signal.SIGKILL)
                os.waitpid(request.pid, 0)
                request.pid = None
        if refused is not None:
            raise CannotEnter(refused.errno, refused.strerror)
        if request.error is not None:
            raise request.error
        assert request.pid is not None
        return request.pid

    def _move(self, request: _Request, gate: Gate) -> OSError | None:
        # Find the child and move it; the refusal if the move failed (the child killed where it
        # waits) or the child never showed.
        deadline = time.monotonic() + _APPEAR_BOUND
        while not request.returned.is_set():
            new = self.children() - request.before
            if new:
                (child,) = new
                try:
                    gate.move(child)
                except OSError as exc:
                    os.kill(child, signal.SIGKILL)  # our unreaped child: no reused pid
                    return exc
                return None
            if request.returned.wait(_POLL):
                break
            if time.monotonic() > deadline:
                return OSError(errno.ETIMEDOUT, "the new process did not show in /proc")
        return None


def _open_gate(fifo: str) -> bool:
    # Succeeds only once the child waits at its end (a FIFO without a reader refuses a
    # non-blocking writer); opening it wakes the child, which needs the writer no longer.
    try:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            return False
        raise
    os.close(fd)
    return True


def _anonymous_fifo() -> int:
    # A FIFO that leaves nothing on disk, not even if we are killed: made in a private
    # directory, held by an O_PATH descriptor (neither a reader nor a writer), removed, and
    # opened again through /proc by the child and by us.
    directory = tempfile.mkdtemp(prefix=GATE_DIRECTORY.format(pid=os.getpid()))
    path = os.path.join(directory, "gate")
    try:
        os.mkfifo(path, 0o600)
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    finally:
        with suppress(FileNotFoundError):
            os.unlink(path)
        os.rmdir(directory)
    return fd


@attrs.define(eq=False)
class _Spawners:
    """The process's spawner and how many users hold it; its lock guards both, so a last
    user's stop and a new user's first spawn (from another runtime's thread) never meet."""

    lock: threading.Lock = attrs.Factory(threading.Lock)
    users: int = 0
    current: _Spawner | None = None


_spawners = _Spawners()


def _spawner() -> _Spawner:
    with _spawners.lock:
        if _spawners.current is None:
            _spawners.current = _Spawner()
        return _spawners.current


@contextmanager
def spawner_in_use() -> Iterator[None]:
    """Hold the process's spawner for gated spawns (made at the first, not here); the last
    holder to leave ends its thread and closes its FIFO, so a process whose runtimes have
    all closed keeps neither. The next holder's first gated spawn makes them again."""
    with _spawners.lock:
        _spawners.users += 1
    try:
        yield
    finally:
        with _spawners.lock:
            _spawners.users -= 1
            spawner = _spawners.current
            if _spawners.users == 0 and spawner is not None and spawner.stop():
                _spawners.current = None


def _forget_spawners() -> None:
    _spawners.lock = threading.Lock()  # another thread may have held it at the fork
    _spawners.users = 0
    _spawners.current = None


# A forked child of the runtime has none of its threads (nor its holders): it makes its own
# spawner.
os.register_at_fork(after_in_child=_forget_spawners)


################
# Spawning
################


@attrs.define(eq=False)
class _Process:
    pid: int
    # Opened at the spawn, while nobody can have reaped the child, so it names this one:
    # the driver watches the exit on it, `wait` reaps through it, and the driver closes it
    # (`agentrt._driver._process.CliProcess`) once it is done with the process.
    pidfd: int
    stdin: trio.lowlevel.FdStream
    stdout: trio.lowlevel.FdStream
    stderr: trio.lowlevel.FdStream
    _returncode: int | None = None

    async def wait(self) -> int:
        while self._returncode is None:
            # Most waits come once the driver has seen the exit: then reaped at once, with
            # no wait registered with the event loop.
            self._returncode = _reap(self.pidfd)
            if self._returncode is None:
                await trio.lowlevel.wait_readable(self.pidfd)
        return self._returncode


def _reap(pidfd: int) -> int | None:
    # The exit code as subprocess gives it, or None while the process runs.
    info = os.waitid(os.P_PIDFD, pidfd, os.WEXITED | os.WNOHANG)
    if info is None:
        return None
    return info.si_status if info.si_code == os.CLD_EXITED else -info.si_status


@trio.lowlevel.enable_ki_protection  # a KeyboardInterrupt must not leave a child at the gate
async def spawn(
    argv: Sequence[str], env: Mapping[str, str], cwd: str | None, gate: Gate | None
) -> Spawned:
    """Start ``argv`` with exactly ``env`` in ``cwd``, in a new session, with pipes on its
    stdin, stdout and stderr and no other descriptor, every signal at its default
    disposition and none blocked, and (with ``gate``) moved before it runs. Raises OSError
    (`CannotEnter` when the move failed; ``filename`` names ``cwd`` when that was missing).

    Cancellation: not a checkpoint on the common path; the spawn is never left half done.
    """
    libc = _libc()
    if libc is None:
        return await _fork_spawn(argv, env, cwd, gate)
    path = os.fsencode(_executable(argv[0], env))
    # As os.fsencode encodes a str, without a Python call per string: the environment is a
    # few dozen of them, every spawn.
    c_argv = [arg.encode(_FS_ENCODING, _FS_ERRORS) for arg in argv]
    c_env = [f"{key}={value}".encode(_FS_ENCODING, _FS_ERRORS) for key, value in env.items()]
    c_cwd = None if cwd is None else os.fsencode(cwd)
    stdin_r, stdin_w = os.pipe()
    stdout_r, stdout_w = os.pipe()
    stderr_r, stderr_w = os.pipe()
    theirs = [_above_stdio(fd) for fd in (stdin_r, stdout_w, stderr_w)]
    ours = (stdin_w, stdout_r, stderr_r)
    try:
        fds = (theirs[0], theirs[1], theirs[2])
        spawner = None if gate is None else _spawner()
        fifo = None if spawner is None else os.fsencode(spawner.fifo)
        with libc.prepared(path, c_argv, c_env, c_cwd, fds, fifo) as call:
            pid = call() if spawner is None or gate is None else spawner.run(call, gate)
    except CannotEnter:
        _close(ours)
        raise
    except OSError as exc:
        _close(ours)
        raise _spawn_error(exc, argv[0], cwd) from None
    finally:
        _close(theirs)
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        # Out of descriptors: the child must not run on unwatched. SIGKILL ends it within
        # moments, so the wait for it hardly blocks.
        _close(ours)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)  # noqa: ASYNC222
        raise
    return _Process(
        pid,
        pidfd,
        trio.lowlevel.FdStream(stdin_w),
        trio.lowlevel.FdStream(stdout_r),
        trio.lowlevel.FdStream(stderr_r),
    )


def find_executable(name: str, env: Mapping[str, str]) -> str | None:
    """The file a spawn with this environment runs for ``name``, as subprocess finds it: a
    name with a slash as it is (after the chdir), else the first executable file of that
    name on the child's own PATH; None when there is none."""
    if os.sep in name:
        return name
    return shutil.which(name, path=os.pathsep.join(os.get_exec_path(dict(env))))


def _executable(name: str, env: Mapping[str, str]) -> str:
    found = find_executable(name, env)
    if found is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), name)
    return found


def _spawn_error(exc: OSError, name: str, cwd: str | None) -> OSError:
    # posix_spawn reports the chdir's failure and the exec's alike; the cwd is looked at.
    if exc.filename is not None:
        return exc
    blame = cwd if cwd is not None and not os.access(cwd, os.X_OK) else name
    return OSError(exc.errno, exc.strerror, blame)


def _above_stdio(fd: int) -> int:
    # The child's dup2 onto 0-2 must not overwrite a source it has yet to copy.
    if fd > 2:
        return fd
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    os.close(fd)
    return moved


def _close(fds: Sequence[int]) -> None:
    for fd in fds:
        os.close(fd)


async def _fork_spawn(
    argv: Sequence[str], env: Mapping[str, str], cwd: str | None, gate: Gate | None
) -> Spawned:
    # Without posix_spawn's attributes: a preexec_fn does their work, which costs a fork;
    # skipped (vfork) where nothing needs doing: no cgroup, no signal ignored or blocked.
    setup = None
    if gate is not None or _signals_need_reset():
        setup = functools.partial(_reset_signals_then, None if gate is None else gate.enter)
    try:
        return await trio.lowlevel.open_process(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env),
            cwd=cwd,
            start_new_session=True,
            preexec_fn=setup,
        )
    except subprocess.SubprocessError as exc:  # raised by the preexec_fn: the cgroup
        raise CannotEnter(errno.EPERM, str(exc)) from exc


def _signals_need_reset() -> bool:
    # subprocess resets handled signals itself; ignored and blocked ones it passes on.
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, ())
    return bool(blocked) or any(
        signal.getsignal(sig) is signal.SIG_IGN for sig in _default_signals()
    )


def _reset_signals_then(enter: Callable[[], object] | None) -> None:
    for sig in _default_signals():
        signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, ())
    if enter is not None:
        enter()
