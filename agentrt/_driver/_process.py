"""The process driver: one CLI process per turn, from spawn to the last member of its tree.

`open_cli_process` spawns a `Command` (`agentrt._driver._spawn`: no fork of the runtime, signals at
their defaults) in a new session with an env marker, feeds it stdin,
yields decoded stdout lines as frames under the startup/idle/line-size bounds, keeps the
newest stderr bytes, and on every way out runs the same shielded, bounded kill ladder over
the whole process tree (`agentrt._driver._proctree`). `ProcessTracker` is the runtime-wide part: it
makes the runtime a child subreaper and reaps the orphans of its turns.
"""

from __future__ import annotations

import fcntl
import logging
import math
import os
import secrets
import signal
import struct
import termios
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager, nullcontext, suppress
from typing import Any

import attrs
import msgspec
import trio

from .._errors import ProcessFailure
from .._events import StopReason
from .._exceptiongroups import collapse_exception_groups
from .._redact import redact
from ..backend import Command, ExitStatus
from ._cgroup import Isolation, TurnCgroup, open_isolation
from ._kept_file import KeptFile
from ._limits import Limits, oom_kills
from ._lines import LineSplitter, LineTooLong
from ._orphans import OrphanReaper
from ._procfs import process_start_time
from ._proctree import (
    KILL_BOUND,
    MARKER_ENV,
    ProcTree,
    acquire_subreaper,
    kill_stale_group,
    kill_tree,
    marker_prefix,
    new_marker,
    reap_adopted,
    release_subreaper,
    snapshot,
    track_leader,
    untrack_leader,
)
from ._secretfiles import materialized, write_config_files
from ._spawn import CannotEnter, Spawned, spawn, spawner_in_use

__all__ = [
    "BadLine",
    "CliProcess",
    "FrameBatch",
    "ProcessFailure",
    "ProcessInfo",
    "ProcessLimits",
    "ProcessTracker",
    "kill_stale_group",
    "open_cli_process",
    "process_start_time",
]

_log = logging.getLogger("agentrt.process")

# stdout is read in large chunks from a pipe enlarged to match, so a fast stream costs few
# wakeups; small reads still return as soon as anything is there. A turn's first read is
# small and each read that fills its chunk doubles the next, up to the largest: a turn
# pauses on its first read (the session checkpoint on the CLI's first line) holding that
# read's lines, and a hundred turns starting together held a hundred 256 KiB reads.
_FIRST_READ = 16 * 1024
_READ_CHUNK = 256 * 1024
_PIPE_SIZE = 1024 * 1024
_STDERR_CHUNK = 64 * 1024
_BAD_LINE_TEXT = 4096
_REAP_BOUND = 1.0
# While stderr stays open after the kill, the tree is scanned again this often: a member a
# scan missed (caught between fork and exec, say) would hold it for the whole drain bound.
_RESCAN_EVERY = 1.0
_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")

_decoder: msgspec.json.Decoder[Any] = msgspec.json.Decoder()
# What a decoder raises for a line it cannot read; msgspec's nesting limit is Python's
# recursion limit, so a line nested too deep raises RecursionError.
_UNREADABLE = (msgspec.DecodeError, RecursionError)


################################################################
# Limits, and what the driver reports
################################################################


@attrs.frozen
class ProcessLimits:
    """Bounds on one CLI process. Times are seconds; None turns a bound off."""

    # spawn -> first complete stdout line; past it: StopReason.STARTUP_TIMEOUT
    startup: float | None = 120.0
    # longest gap between stdout lines; past it: StopReason.IDLE_TIMEOUT
    idle: float | None = None
    # one stdout line, without its newline; past it: StopReason.OUTPUT_LINE_TOO_LONG
    max_line_bytes: int = 8 * 1024 * 1024
    # stderr ring; the newest bytes win
    stderr_bytes: int = 8192
    # after Command.interrupt_signal, before SIGTERM
    interrupt_grace: float = 1.0
    # after SIGTERM, before SIGKILL
    term_grace: float = 2.0
    # how long stderr may stay open after the tree is gone (a stranger holding the pipe)
    stderr_drain: float = 0.5
    # after the CLI exits, how long stdout is read in all: a grandchild that inherited stdout
    # must not keep the stream open for ever, however often it writes
    stdout_drain: float = 0.5
    # after stdout EOF, how long the CLI may take to exit before the kill ladder; past it:
    # StopReason.MALFORMED_OUTPUT (the lines read before it still count)
    eof_grace: float = 2.0
    # memory, tasks and CPU of the process's cgroup (with a tracker that has cgroups); past
    # the memory limit: StopReason.OOM_KILLED
    resources: Limits | None = None


@attrs.frozen
class BadLine:
    """A stdout line that is not valid JSON (or not valid UTF-8): reported, never fatal.

    ``text`` is the start of the line, decoded with replacement characters and redacted.
    """

    text: str
    size: int
    error: str


@attrs.frozen
class ProcessInfo:
    """Identity of a running turn process, enough to find and kill its tree later."""

    pid: int
    pgid: int
    start_time: int
    marker: str


################################################################
# Frames: stdout lines, decoded
################################################################


def _bad_line(line: bytes, exc: Exception) -> BadLine:
    text = redact(line[:_BAD_LINE_TEXT].decode("utf-8", "replace"))
    return BadLine(text=text, size=len(line), error=str(exc))


class FrameBatch:
    """The frames of one read of stdout, decoded one by one as they are iterated.

    Decoding lazily keeps one decoded frame alive per turn instead of a whole read's worth
    (a read of small lines is hundreds of dicts, megabytes as objects): with a hundred
    turns reading at once that difference is most of the runtime's memory, and the
    garbage collector's work grows with it.

    ``decode``, if given, is tried first on each line (a backend's typed decoder for its
    common frames); a line it rejects with `msgspec.DecodeError` (which includes
    `msgspec.ValidationError`) or cannot decode at all (`RecursionError`: JSON nested
    deeper than the decoder recurses) is decoded generically, so it still becomes a JSON
    value or a `BadLine`. Blank lines are skipped, so a batch may hold no frame at all.
    """

    __slots__ = ("_decode", "_lines")

    def __init__(self, lines: list[bytes], decode: Callable[[bytes], Any] | None = None) -> None:
        self._lines = lines
        self._decode = decode

    def __iter__(self) -> Iterator[Any]:
        # This runs for every stdout line: the common case is one call of the decoder.
        decode = self._decode or _decoder.decode
        for line in self._lines:
            try:
                frame = decode(line)
            except _UNREADABLE:
                frame = _decode_generic(line)
                if frame is _BLANK:
                    continue
            yield frame


def _decode_generic(line: bytes) -> Any:
    """A line the first decoder refused: a JSON value, a `BadLine`, or ``_BLANK``."""
    try:
        return _decoder.decode(line)
    except _UNREADABLE as exc:
        if not line or line.isspace():
            return _BLANK
        return _bad_line(line, exc)


# A blank line: skipped (not a frame, not a BadLine).
_BLANK = object()


class _Batches:
    __slots__ = ("_decode", "_proc")

    def __init__(self, proc: CliProcess, decode: Callable[[bytes], Any] | None) -> None:
        self._proc = proc
        self._decode = decode

    def __aiter__(self) -> _Batches:
        return self

    async def __anext__(self) -> FrameBatch:
        return await self._proc._next_batch(self._decode)


################################################################
# One running CLI process: exit, stdin, stderr ring, stdout under the bounds,
# and the kill ladder
################################################################


def _peek_exit_status(pid: int) -> ExitStatus:
    # WNOWAIT: read the status but leave the zombie for trio's Process.wait() to reap.
    info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT | os.WNOHANG)
    if info is None:
        return ExitStatus(None)
    if info.si_code == os.CLD_EXITED:
        return ExitStatus(info.si_status)
    return ExitStatus(None, info.si_status)


def _pipe_bytes(fd: int) -> int:
    """How many bytes wait in a pipe (an upper bound if the kernel will not say)."""
    try:
        return int(struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0])
    except OSError:
        return _PIPE_SIZE


class CliProcess:
    """A running CLI process, as `open_cli_process` yields it."""

    def __init__(
        self,
        process: Spawned,
        command: Command,
        limits: ProcessLimits,
        marker: str,
        cgroup: TurnCgroup | None = None,
        *,
        stdin_open: bool = False,
    ) -> None:
        assert process.stdin is not None and process.stderr is not None
        assert isinstance(process.stdout, trio.lowlevel.FdStream)
        self.pid: int = process.pid
        self.pgid: int = process.pid
        # The process is our unreaped child, so its /proc entry exists here.
        self.start_time: int = process_start_time(process.pid) or 0
        self.marker = marker
        self._process = process
        self._stdin = process.stdin
        self._stdout = process.stdout
        self._stderr_stream = process.stderr
        self._command = command
        self._limits = limits
        self._nursery: trio.Nursery | None = None
        self._tree = ProcTree(
            leader=self.pid,
            start_time=self.start_time,
            pgid=self.pgid,
            marker=marker,
            local=True,
            cgroup=cgroup,
        )
        # A pidfd tells us the leader exited without reaping it, so its pid (and with it the
        # pgid) stays pinned until the ladder is done with the group; it is the spawn's own
        # (which its wait() reaps through), ours to close. The fork fallback's trio Process
        # reaps its own way: then one of ours watches, or without pidfds trio's wait() does.
        self._pidfd: int | None = getattr(process, "pidfd", None)
        if self._pidfd is None:
            with suppress(AttributeError, OSError):
                self._pidfd = os.pidfd_open(self.pid)
        if self._pidfd is not None:
            track_leader(self.pid)  # until it is reaped (in _shutdown)
        # Read after each warm turn (recycle_rss_bytes).
        self._statm = KeptFile(f"/proc/{self.pid}/statm")
        self._splitter = LineSplitter(limits.max_line_bytes)
        self._chunk = _FIRST_READ
        # The lines of the last read, not yet decoded.
        self._lines: list[bytes] = []
        self._eof = False
        self._failure: ProcessFailure | None = None
        self._spawned_at = trio.current_time()
        self._last_line_at: float | None = None
        # Between a live process's turns: its reads have no startup or idle bound.
        self._between_turns = False
        self._read_scope: trio.CancelScope | None = None
        self._exited = trio.Event()
        self._exited_at: float | None = None
        # What stdout held when the exit was seen, and what has been read since: past the
        # drain bound only that backlog (the CLI's own last output) is still read.
        self._exit_backlog = 0
        self._read_since_exit = 0
        self._exit_status: ExitStatus | None = None
        self._stderr = bytearray()
        self._stderr_done = trio.Event()
        self._stdin_scope = trio.CancelScope()
        # A live CLI's stdin stays open for `send`, one writer at a time.
        self._stdin_open = stdin_open
        self._send_lock = trio.Lock()
        # Watching for exit and reading stderr must go on while the ladder runs, even when
        # the block around us was cancelled; they are shielded and stopped explicitly.
        self._watch_scope = trio.CancelScope(shield=True)
        self._stderr_scope = trio.CancelScope(shield=True)
        self._interrupted = False
        self._shutting_down = False
        self._shut_down = trio.Event()
        # Over /proc/sys/fs/pipe-max-size this fails, and the default size works, only slower.
        with suppress(OSError):
            fcntl.fcntl(self._stdout.fileno(), fcntl.F_SETPIPE_SZ, _PIPE_SIZE)

    @property
    def stderr_tail(self) -> str:
        """The newest ``limits.stderr_bytes`` of stderr, decoded and redacted."""
        return redact(self._stderr.decode("utf-8", "replace"))

    @property
    def exit_status(self) -> ExitStatus | None:
        """How the process ended, or None while it runs."""
        return self._exit_status

    def check_oom(self) -> None:
        """Raise `ProcessFailure` (``OOM_KILLED``) if the kernel's OOM killer killed any
        process of its cgroup: called once the process ended."""
        cgroup = self._tree.cgroup
        if cgroup is None or self._limits.resources is None:
            return
        killed = oom_kills(cgroup.path)
        if killed:
            limit = self._limits.resources.memory
            raise ProcessFailure(
                StopReason.OOM_KILLED,
                f"the kernel's OOM killer killed {killed} process(es) of the turn's tree, "
                f"over its memory limit ({limit} bytes); the turn's processes were killed",
            )

    @property
    def killed(self) -> int:
        """How many processes of the tree were still running when the kill ladder began
        (0 until it has run, and for a turn that left nothing behind)."""
        return self._tree.killed

    def batches(self, decode: Callable[[bytes], Any] | None = None) -> AsyncIterator[FrameBatch]:
        """The decoded stdout lines, one `FrameBatch` per read of stdout (up to 256 KiB of
        lines), decoded as it is iterated: JSON values, or `BadLine` for a line that is not
        JSON. A consumer that handles each frame without awaiting pays one ``await`` per
        read instead of one per line. ``decode`` is tried first on each line, with the
        generic decoder as fallback (see `FrameBatch`).

        Empty lines are skipped; a last line without a newline still counts. The stream ends
        at stdout EOF once the process exited, or ``limits.stdout_drain`` after the exit if
        something else holds stdout open (after `interrupt`, as soon as what the CLI left in
        the pipe is read). A bound crossed (startup, idle, line size, and ``limits.eof_grace``
        for a process that closed stdout and did not exit) runs the kill ladder and then
        raises `ProcessFailure`.

        Cancellation: the read stops at once; leaving ``open_cli_process`` then kills the tree.
        """
        return _Batches(self, decode)

    async def wait(self) -> ExitStatus:
        """Wait for the process to exit; return how it did.

        Cancellation: safe; the process is not touched.
        """
        await self._exited.wait()
        assert self._exit_status is not None
        return self._exit_status

    def interrupt(self) -> None:
        """Ask the process to stop: ``command.interrupt_signal`` (SIGTERM if None) to its
        group now, SIGTERM after ``limits.interrupt_grace``, SIGKILL after
        ``limits.term_grace``, each only if it is still running. Frames can be read meanwhile
        (a CLI may print its final result on the way out); once the process has exited,
        the stream ends as soon as what it left in the pipe is read. Idempotent; returns at
        once."""
        if self._interrupted or self._shutting_down:
            return
        self._interrupted = True
        if self._exited.is_set():
            self._shorten_read()
            return
        first = self._command.interrupt_signal or signal.SIGTERM
        self._signal_group(first)
        assert self._nursery is not None
        self._nursery.start_soon(self._escalate, first)

    ################
    # A live process: many turns on one process
    ################

    async def send(self, data: bytes) -> bool:
        """Write ``data`` to a live process's stdin (``open_cli_process(stdin_open=True)``);
        False if the process no longer reads it (it exited or closed stdin).

        Cancellation: safe between writes; a write cut short leaves a partial line, so
        callers end the process after a cancelled send."""
        assert self._stdin_open
        lock = self._send_lock
        try:
            # Free but for a question's answer beside an interrupt: send_all's checkpoint is
            # the schedule point, not a second one of the lock's.
            lock.acquire_nowait()
        except trio.WouldBlock:
            await lock.acquire()
        try:
            await self._stdin.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return False
        finally:
            lock.release()
        return True

    def begin_turn(self) -> None:
        """Start the bounds of a new turn on a live process: ``startup`` counts to the turn's
        first line, ``idle`` from there, and an earlier turn's interrupt is forgotten."""
        self._spawned_at = trio.current_time()
        self._last_line_at = None
        self._interrupted = False
        self._between_turns = False

    def end_turn(self) -> None:
        """A live process's turn is over: until the next `begin_turn`, what it prints comes
        when it comes (a background task's news, a turn it starts by itself), under no
        ``startup`` or ``idle`` bound."""
        self._between_turns = True

    def restart_idle(self) -> None:
        """Count ``idle`` from now (the CLI waited on us, not we on it)."""
        if self._last_line_at is not None:
            self._last_line_at = trio.current_time()

    def has_unread_output(self) -> bool:
        """Whether stdout holds anything not yet read: between a live process's turns,
        output nobody asked for."""
        return bool(self._lines) or self._splitter.pending or _pipe_bytes(self._stdout.fileno()) > 0

    def members(self) -> dict[int, int]:
        """The processes of the tree now, pid -> start time."""
        return {st.pid: st.start_time for st in self._tree.scan()}

    async def kill_others(self, keep: dict[int, int]) -> bool:
        """Kill every process of the tree but ``keep`` (see `members`), as the exit's ladder
        would; return whether none survived.

        Cancellation: not meant to be cancelled (a warm turn's end runs it shielded, so it
        takes no scope of its own); bounded by ``term_grace`` + 2 s."""
        survivors = await kill_tree(self._tree, term_grace=self._limits.term_grace, keep=keep)
        reap_adopted(self._tree)
        return not survivors

    def _kill_at_once(self) -> None:
        # Its agent's lease is lost: the whole tree SIGKILLed now (its cgroup, else its group
        # and every member), no interrupt, no grace; the ladder on the way out finds it gone.
        self._tree.kill(self._tree.scan())

    def rss_bytes(self) -> int | None:
        """The resident memory of the process itself, or None if unknown."""
        try:
            statm = self._statm.read()
            return None if statm is None else int(statm.split()[1]) * _PAGE_SIZE
        except (OSError, ValueError, IndexError):
            return None

    ################
    # Helper tasks: exit, stdin, stderr; the interrupt's escalation
    ################

    def _start(self, nursery: trio.Nursery) -> None:
        self._nursery = nursery
        nursery.start_soon(self._watch_exit)
        nursery.start_soon(self._write_stdin)
        nursery.start_soon(self._read_stderr)

    def _signal_group(self, sig: int) -> None:
        with suppress(ProcessLookupError):
            os.killpg(self.pgid, sig)

    async def _escalate(self, first: signal.Signals) -> None:
        if first != signal.SIGTERM:
            with trio.move_on_after(self._limits.interrupt_grace):
                await self._exited.wait()
            if self._exited.is_set():
                return
            self._signal_group(signal.SIGTERM)
        with trio.move_on_after(self._limits.term_grace):
            await self._exited.wait()
        if not self._exited.is_set():
            self._signal_group(signal.SIGKILL)

    async def _watch_exit(self) -> None:
        with self._watch_scope:
            if self._pidfd is not None:
                await trio.lowlevel.wait_readable(self._pidfd)
                status = _peek_exit_status(self.pid)
            else:
                code = await self._process.wait()
                status = ExitStatus(code) if code >= 0 else ExitStatus(None, -code)
        if self._watch_scope.cancelled_caught:
            return
        self._exit_status = status
        self._exited_at = trio.current_time()
        self._exit_backlog = _pipe_bytes(self._stdout.fileno())
        self._exited.set()
        self._shorten_read()

    def _shorten_read(self) -> None:
        # The exit (or an interrupt after it) brings the end of a read already waiting nearer.
        if self._read_scope is not None:
            self._read_scope.deadline = min(self._read_scope.deadline, self._deadline())

    def _stdout_drain(self) -> float:
        # After an interrupt the CLI has said its last word when it exits: what it wrote is
        # in the pipe and still read, but a child holding stdout open is not waited for.
        return 0.0 if self._interrupted else self._limits.stdout_drain

    async def _write_stdin(self) -> None:
        with self._stdin_scope:
            try:
                if self._command.stdin:
                    await self._stdin.send_all(self._command.stdin)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass  # the CLI closed stdin or exited before reading it all
        if self._stdin_open:
            return
        with trio.CancelScope(shield=True):
            await self._stdin.aclose()

    async def _read_stderr(self) -> None:
        keep = self._limits.stderr_bytes
        try:
            with self._stderr_scope:
                while chunk := await self._stderr_stream.receive_some(_STDERR_CHUNK):
                    self._stderr += chunk
                    if len(self._stderr) > keep:
                        del self._stderr[: len(self._stderr) - keep]
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            self._stderr_done.set()

    ################
    # Reading stdout under the bounds
    ################

    async def _next_batch(self, decode: Callable[[bytes], Any] | None = None) -> FrameBatch:
        while True:
            if self._lines:
                lines = self._lines
                self._lines = []
                return FrameBatch(lines, decode)
            elif self._failure is not None:
                raise self._failure
            elif self._eof:
                raise StopAsyncIteration
            else:
                await self._fill()

    def _deadline(self) -> float:
        limits = self._limits
        deadline = math.inf
        if self._between_turns:
            pass
        elif self._last_line_at is None:
            if limits.startup is not None:
                deadline = self._spawned_at + limits.startup
        elif limits.idle is not None:
            deadline = self._last_line_at + limits.idle
        if self._exited_at is not None:
            # In all, from the exit: a line from a grandchild does not renew it.
            deadline = min(deadline, self._exited_at + self._stdout_drain())
        return deadline

    def _may_read_late(self) -> bool:
        # Past a bound, what already waits in the pipe is read all the same (it is not
        # silence); after the exit only as much as the CLI left there, so a grandchild that
        # writes faster than we read cannot hold the stream.
        return self._exited_at is None or self._read_since_exit < self._exit_backlog

    def _read_nowait(self) -> bytes | None:
        try:
            return os.read(self._stdout.fileno(), self._chunk)
        except BlockingIOError:
            return None

    async def _fill(self) -> None:
        deadline = self._deadline()
        chunk: bytes | None = None
        if deadline <= trio.current_time():
            # The bound passed while the consumer was busy with earlier frames: what is already
            # in the pipe is not silence, so look before declaring a timeout.
            await trio.lowlevel.checkpoint()
            if self._may_read_late():
                chunk = self._read_nowait()
        if chunk is None:
            with trio.CancelScope(deadline=deadline) as scope:
                self._read_scope = scope
                try:
                    chunk = await self._stdout.receive_some(self._chunk)
                finally:
                    self._read_scope = None
            if chunk is None and self._may_read_late():
                # The deadline may have passed while this task waited its turn to run (many
                # busy turns): bytes already in the pipe are not silence either.
                chunk = self._read_nowait()
        if chunk is None:
            if self._exited_at is not None:
                _log.info("pid %d exited; something it started still holds stdout", self.pid)
                self._end_of_stream()
            elif self._last_line_at is None:
                await self._fail(
                    StopReason.STARTUP_TIMEOUT,
                    f"no stdout line within {self._limits.startup:g} s of spawn",
                )
            else:
                await self._fail(
                    StopReason.IDLE_TIMEOUT, f"no stdout line for {self._limits.idle:g} s"
                )
        elif not chunk:
            if not self._exited.is_set():
                await self._wait_exit_after_eof()
            self._end_of_stream()
        else:
            if self._exited_at is not None:
                self._read_since_exit += len(chunk)
            if len(chunk) == self._chunk and self._chunk < _READ_CHUNK:
                self._chunk *= 2
            try:
                lines = self._splitter.feed(chunk)
            except LineTooLong as exc:
                await self._fail(
                    StopReason.OUTPUT_LINE_TOO_LONG,
                    f"a stdout line exceeded max_line_bytes={exc.limit:,}"
                    f" ({exc.size:,} bytes read without a newline)",
                    exc,
                )
            if lines:
                self._last_line_at = trio.current_time()
                self._lines = lines

    async def _wait_exit_after_eof(self) -> None:
        # A CLI that closed its output and lingers is ended like one that stays silent; the
        # lines before its EOF are still delivered, then the failure.
        grace = self._limits.eof_grace
        with trio.move_on_after(grace):
            await self._exited.wait()
        if not self._exited.is_set():
            self._failure = ProcessFailure(
                StopReason.MALFORMED_OUTPUT,
                f"the CLI closed its output and did not exit within {grace:g} s",
            )
            await self._shutdown()

    def _end_of_stream(self) -> None:
        rest = self._splitter.finish()
        self._lines = [rest] if rest else []
        self._eof = True

    async def _fail(
        self, reason: StopReason, message: str, cause: BaseException | None = None
    ) -> None:
        self._failure = ProcessFailure(reason, message)
        self._lines = []
        await self._shutdown()
        raise self._failure from cause

    ################
    # The kill ladder
    ################

    async def _shutdown(self) -> None:
        """The kill ladder; runs once, shielded and bounded, whoever asks first."""
        if self._shutting_down:
            with trio.CancelScope(shield=True):
                await self._shut_down.wait()
            return
        self._shutting_down = True
        limits = self._limits
        bound = limits.term_grace + KILL_BOUND + limits.stderr_drain + 2 * _REAP_BOUND
        try:
            with trio.move_on_after(bound, shield=True):
                self._stdin_scope.cancel()
                await self._stdin.aclose()
                survivors = await kill_tree(self._tree, term_grace=limits.term_grace)
                if survivors:
                    _log.warning(
                        "pid %d: %d processes of its tree survived SIGKILL",
                        self.pid,
                        len(survivors),
                    )
                # A turn that ended by itself has exited and closed stderr by now: no bound
                # (a cancel scope each) to wait for what is already there.
                if not self._exited.is_set():
                    with trio.move_on_after(_REAP_BOUND):
                        await self._exited.wait()
                if not self._stderr_done.is_set():
                    with trio.move_on_after(limits.stderr_drain):
                        await self._drain_stderr(limits.term_grace)
                reap_adopted(self._tree)
                if self._exited.is_set():
                    untrack_leader(self.pid)
                    with trio.move_on_after(_REAP_BOUND):
                        await self._process.wait()
        finally:
            self._watch_scope.cancel()
            self._stderr_scope.cancel()
            self._shut_down.set()

    async def _drain_stderr(self, term_grace: float) -> None:
        while True:
            with trio.move_on_after(_RESCAN_EVERY):
                await self._stderr_done.wait()
                return
            await kill_tree(self._tree, term_grace=term_grace)

    async def _close(self) -> None:
        untrack_leader(self.pid)
        self._tree.close()
        self._statm.close()
        with trio.CancelScope(shield=True):
            await self._stdin.aclose()
            await self._stdout.aclose()
            await self._stderr_stream.aclose()
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None


################################################################
# The runtime-wide tracker: live turns, the subreaper, orphans
################################################################


class ProcessTracker:
    """The runtime-wide side of the process driver; one per runtime.

    It knows the turn processes started with it, and while `run` runs it makes this process a
    child subreaper (Linux), so orphans of those turns (a CLI killed by SIGKILL leaves its
    setsid'd tool processes behind) are reparented to us instead of init. Every ``interval``
    it walks the live turns' trees, so their members are known by pid and start time even
    after their parent dies, and reaps their zombies. It never waits for any pid it cannot
    attribute to a turn, so other children of the runtime keep their exit statuses.

    Where the kernel lets us (cgroup v2; ``cgroups=False`` or ``AGENTRT_CGROUP=off``
    forces the walk) each turn gets a cgroup of its own under one the tracker makes for the
    runtime (under ``AGENTRT_CGROUP`` where that names a cgroup's directory), so nothing a
    turn starts can leave its tree. Elsewhere an orphan that escaped every walk is reaped
    when it exits, as is one that died too late for a turn's ladder to reap it.

    ``runtime_id``: the runtime's (`agentrt.Runtime.runtime_id`; by default a fresh one);
    the markers of the turns started with the tracker start with ``marker_prefix``, by which
    that runtime's fence guard knows them.
    """

    def __init__(self, *, cgroups: bool = True, runtime_id: str | None = None) -> None:
        self.marker_prefix = marker_prefix(runtime_id or secrets.token_hex(4))
        self._trees: dict[int, ProcTree] = {}
        # Set while a turn process is live; an idle runtime does not walk /proc at all.
        self._busy = trio.Event()
        self._cgroups_wanted = cgroups
        self._isolation = Isolation(None, "the tracker is not running")
        self._orphans = OrphanReaper()
        # The live CLI processes of each agent (`_own`), for `kill_agent`.
        self._agents: dict[str, set[CliProcess]] = {}

    @property
    def isolation(self) -> str:
        """Which mechanism finds a turn's processes: ``"cgroup v2 at <path>"`` or
        ``"/proc walk (<reason>)"``."""
        return self._isolation.describe()

    def limits_refused(self, limits: Limits) -> str | None:
        """Why ``limits`` cannot hold for the turns of this tracker (while it runs), or None
        if they will (the controllers they need enabled now)."""
        cgroups = self._isolation.cgroups
        if cgroups is None:
            return f"turns get no cgroup here: {self._isolation.reason}"
        return cgroups.enable(limits.controllers())

    def live(self) -> tuple[ProcessInfo, ...]:
        """The turn processes running now."""
        return tuple(
            ProcessInfo(t.leader, t.pgid, t.start_time, t.marker or "")
            for t in self._trees.values()
        )

    def live_count(self) -> int:
        """How many turn processes run now; safe to call from another thread (a metric
        reader's)."""
        return len(self._trees)

    def reap(self) -> int:
        """Walk the live trees once and reap the adopted zombies among them; return how many.

        Synchronous and cheap (one pass over /proc); `run` calls it periodically.
        """
        # The whole machine is walked once, and only when a tree needs it: a turn in a cgroup
        # reads that, one whose leader is our child walks its own subtree (a walk of the
        # machine reads every process's stat: 3.5 ms of CPU with 190 processes).
        trees = self._trees.values()
        procs = snapshot() if any(tree.walks_machine for tree in trees) else None
        for tree in trees:
            tree.scan(procs)
        return sum(reap_adopted(tree) for tree in trees)

    async def run(
        self,
        interval: float = 1.0,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Be the subreaper and reap periodically until cancelled; start it with
        ``await nursery.start(tracker.run)``. The subreaper flag is restored on the way out.

        While it runs it holds the process's spawner (its thread and FIFO, for turns moved
        into their cgroups), which the last tracker of the process to stop ends.

        Cancellation: this is how it stops; nothing is left half done.
        """
        acquired = acquire_subreaper()
        try:
            with spawner_in_use():
                async with (
                    open_isolation(self._cgroups_wanted) as self._isolation,
                    trio.open_nursery() as nursery,
                ):
                    await nursery.start(self._orphans.run)
                    task_status.started()
                    while True:
                        await self._busy.wait()
                        self.reap()
                        await trio.sleep(interval)
        finally:
            self._isolation = Isolation(None, "the tracker has stopped")
            if acquired:
                release_subreaper()

    @contextmanager
    def _turn_cgroup(self, limits: Limits | None) -> Iterator[TurnCgroup | None]:
        # A cgroup for one turn, kept for the next (idle, after a turn that raised nothing)
        # or removed when the turn is done with it.
        cgroups = self._isolation.cgroups
        if cgroups is None:
            yield None
            return
        try:
            cgroup = cgroups.new_turn(limits)
        except OSError as exc:
            raise ProcessFailure(
                StopReason.SPAWN_FAILED, f"cannot create the turn's cgroup: {exc.strerror}"
            ) from exc
        kept = False
        try:
            yield cgroup
            kept = cgroups.keep(cgroup)
        finally:
            if not kept and not cgroup.remove():
                _log.warning("turn cgroup %s: not empty after the kill ladder", cgroup.path)

    @contextmanager
    def _own(self, agent: str, proc: CliProcess) -> Iterator[None]:
        # ``proc`` counts as one of ``agent``'s processes while the block runs.
        procs = self._agents.setdefault(agent, set())
        procs.add(proc)
        try:
            yield
        finally:
            procs.discard(proc)
            if not procs:
                del self._agents[agent]

    def kill_agent(self, agent: str) -> None:
        """SIGKILL the trees of ``agent``'s CLI processes now, with no interrupt and no
        grace: its lease is lost, so its conversation is another runtime's to go on with,
        which may be running it already (this runtime was frozen past its lease, or found
        the lease taken). A graceful stop would keep the CLI beside that owner's for its
        graces; the agent's own stop that follows finds the processes gone."""
        for proc in list(self._agents.get(agent, ())):
            proc._kill_at_once()

    def _add(self, tree: ProcTree) -> None:
        self._trees[tree.leader] = tree
        self._busy.set()

    def _remove(self, tree: ProcTree) -> None:
        self._trees.pop(tree.leader, None)
        if not self._trees:
            self._busy = trio.Event()
        # What escaped this turn's walk and is ours now (with a cgroup: what died in it
        # before it was ours, too late for the ladder to reap).
        self._orphans.sweep()


################################################################
# Spawn
################################################################


_DEFAULT_LIMITS = ProcessLimits()


def _spawn_message(argv: tuple[str, ...], cwd: str | None, exc: OSError) -> str:
    what = exc.strerror or str(exc)
    if isinstance(exc, CannotEnter):
        return f"cannot start {argv[0]!r} in its cgroup: {what}"
    if cwd is not None and exc.filename == cwd:
        return f"cannot start {argv[0]!r} in {cwd!r}: {what}"
    return f"cannot start {argv[0]!r}: {what}"


@asynccontextmanager
async def open_cli_process(
    command: Command,
    limits: ProcessLimits = _DEFAULT_LIMITS,
    *,
    tracker: ProcessTracker | None = None,
    stdin_open: bool = False,
) -> AsyncIterator[CliProcess]:
    """Run ``command`` as one turn's CLI process (or, with ``stdin_open``, a live CLI's for
    many turns: stdin is not closed after ``command.stdin``, `CliProcess.send` writes more).

    Secret files are written (0600, private directory), config files put in place, the
    process starts in a new session with ``AGENTRT_TURN=<marker>`` added to
    ``command.env`` (the child's whole environment), every signal at its default
    disposition and none blocked, and (with a ``tracker`` that has cgroups) in the turn's
    cgroup before it runs; ``command.stdin`` is written and closed, and stdout/stderr are
    read as `CliProcess` describes. A binary that is missing
    or not executable raises `ProcessFailure` (``SPAWN_FAILED``, naming the path).

    On the way out, however the block ends: stdin closed, SIGTERM to the group and to every
    other running member of the tree (found by group, session, env marker and parent pid),
    SIGKILL after ``limits.term_grace``, rescans until nobody runs (a zombie counts as gone),
    stderr drained for at most ``limits.stderr_drain``, adopted zombies reaped, secret files
    removed.

    Cancellation: cancel the block at any time; the cleanup is shielded and bounded by about
    ``term_grace + 2 s + stderr_drain``, and takes milliseconds when the process exits on
    SIGTERM.
    """
    marker = new_marker(None if tracker is None else tracker.marker_prefix)
    with (
        materialized(command) as (argv, env),
        nullcontext() if tracker is None else tracker._turn_cgroup(limits.resources) as cgroup,
    ):
        env[MARKER_ENV] = marker
        try:
            write_config_files(command.config_files)
        except OSError as exc:
            raise ProcessFailure(
                StopReason.SPAWN_FAILED, f"cannot write {exc.filename!r}: {exc.strerror or exc}"
            ) from exc
        try:
            process = await spawn(argv, env, command.cwd, cgroup)
        except OSError as exc:
            raise ProcessFailure(
                StopReason.SPAWN_FAILED, _spawn_message(argv, command.cwd, exc)
            ) from exc
        proc = CliProcess(process, command, limits, marker, cgroup, stdin_open=stdin_open)
        if tracker is not None:
            tracker._add(proc._tree)
        # The background tasks do not raise: what leaves is the caller's own exception.
        try:
            with collapse_exception_groups():
                async with trio.open_nursery() as nursery:
                    proc._start(nursery)
                    try:
                        yield proc
                    finally:
                        await proc._shutdown()
                        nursery.cancel_scope.cancel()
        finally:
            if tracker is not None:
                tracker._remove(proc._tree)
            await proc._close()
