"""Location transparency on a `SQLiteStore`: a call for an agent that another program on
this machine owns goes to that program's runtime over a Unix socket, and its answer comes
back on the same connection.

Each runtime listens on a socket of its own in the store's routing directory, ``FILE-routes``
beside the SQLite file, named by a hash of its runtime id; so the name's lease (which holds
its owner's runtime id) is all a caller reads to find it, and the store's schema is
unchanged. One connection per call: the caller sends one frame, the owner answers one frame.
A frame is a 4-byte big-endian length and a MessagePack body: a call's is (caller's runtime
id, name, call, arguments), the arguments being the routing codec's versioned envelope
(`agentrt._stores._route_codec`), as a row's column is on PostgreSQL; an answer's is the
codec's answer. A frame that does not decode, or of another routing protocol, is answered
with a `RoutingError`, as a row is. Sockets, not the store's rows with a wake-up: a routed
ask costs a fraction of a millisecond (``python -m bench routed_ask_sqlite``), a write of
the SQLite file several (each an fsync, behind the file's one writer), and a dead owner is
seen at once, as its connection ends.

Only this user: the directory is made mode 0700 and refused if another user owns it or
others may enter it, and each end checks the other's uid (``SO_PEERCRED``) and refuses a
connection of another user. A frame carries what a routed row carries on PostgreSQL, no
more; the socket's name carries a hash of the runtime id only.

Nothing hangs on a dead owner: its sockets close with its process, and its caller raises
`AgentStopped` then; on one frozen, once it no longer holds the name's lease (checked every
`CHECK_EVERY` seconds, with the runtime's own ``ended``). A caller that goes (cancelled)
closes its connection, and the owner cancels the call it was serving for it.

A socket is bound under a temporary name and renamed to its own once it listens, so a
socket file under a runtime's name always listens while that runtime lives: one that
refuses connections is stale (its runtime was killed) and is removed by the next runtime
that starts on the store; a runtime removes its own as it closes.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import logging
import os
import secrets
import socket
import stat
import struct
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import attrs
import msgspec
import trio

from .._errors import AgentNotFound, RoutingError, StoreError
from .._records import Lease, LeaseOwner
from ._protocols import Serve
from ._route_codec import decode_answer, encode_call, encode_error
from ._route_serving import finish_call, owner_stopped, start_call
from ._route_values import RowRefused, _decoder, _encoder, shown

logger = logging.getLogger("agentrt")

# How often a waiting caller looks at the owner's lease: an owner that froze (or gave the
# name up) is found within its lease_ttl plus this; one that died, at once.
CHECK_EVERY = 1.0
# The largest frame either end reads (an answer of events, a status, a prompt): a frame
# announcing more is refused rather than read into memory.
MAX_FRAME = 64 * 1024 * 1024
# A connection must bring its call within this long, or it is closed.
_CALL_WITHIN = 10.0
_LENGTH = struct.Struct(">I")
_CONNECT_REFUSED = (FileNotFoundError, ConnectionRefusedError, ConnectionResetError)


class _Request(msgspec.Struct, frozen=True, array_like=True):
    """A call's frame: the calling runtime (for the owner's logs), then what a routed row
    of PostgreSQL holds."""

    caller: str
    name: str
    call: str
    arguments: bytes


_requests = _decoder(_Request)


class _FrameRefused(Exception):
    """A frame announcing more than `MAX_FRAME` bytes."""


def routes_directory(store: Path) -> Path:
    """The directory of the routing sockets of the runtimes on the SQLite file ``store``."""
    return store.with_name(store.name + "-routes")


def socket_name(runtime_id: str) -> str:
    """The file name of a runtime's socket: a hash of its id, short and a valid name."""
    return hashlib.blake2b(runtime_id.encode(), digest_size=12).hexdigest() + ".sock"


@attrs.define(eq=False)
class SQLiteRouter:
    """Sends calls for names this runtime does not own, and serves the calls sent to it:
    the `agentrt.store.Router` of a `SQLiteStore`. ``lease_of(name)`` reads a name's
    lease from the store; ``ended(owner)`` says whether the runtime ``owner`` has certainly
    ended (its process is gone), so that a caller stops waiting on it."""

    directory: Path
    lease_of: Callable[[str], Awaitable[Lease | None]]
    me: LeaseOwner
    ended: Callable[[LeaseOwner], bool]
    # The directory, opened while the router runs: sockets are reached through it, so no
    # path is too long for a socket address and none is resolved again after the checks.
    _fd: int | None = attrs.field(default=None, init=False)

    async def run(
        self, serve: Serve, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Listen and serve until cancelled; start it with ``nursery.start`` (it has started
        once it listens)."""
        fd = _open_private_directory(self.directory)
        mine = socket_name(self.me.runtime_id)
        try:
            listener = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            with listener:
                temporary = f".{secrets.token_hex(8)}.tmp"
                await listener.bind(_at(fd, temporary))
                os.chmod(temporary, 0o600, dir_fd=fd)  # not the umask's: this user's only
                listener.listen(socket.SOMAXCONN)
                os.rename(temporary, mine, src_dir_fd=fd, dst_dir_fd=fd)
                try:
                    self._fd = fd
                    await _remove_stale(fd, keep=mine)
                    task_status.started()
                    accepting = trio.SocketListener(listener)
                    async with trio.open_nursery() as nursery:
                        while True:
                            stream = await accepting.accept()
                            nursery.start_soon(self._serve_connection, serve, stream)
                finally:
                    self._fd = None
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(mine, dir_fd=fd)
        except OSError as exc:
            why = f"cannot listen for routed calls in {self.directory}: {exc.strerror or exc}"
            raise StoreError(str(self.directory), why) from exc
        finally:
            os.close(fd)

    # --- the caller's side ---

    async def call(self, name: str, call: str, arguments: tuple[Any, ...]) -> Any:
        """Run ``call`` on the runtime that owns ``name``, and return what it returned (or
        raise what it raised). `AgentNotFound` when no live runtime owns ``name``;
        `AgentStopped` when its owner dies (or gives up the name) before answering."""
        try:
            row = encode_call(call, arguments)
        except RowRefused as exc:
            raise RoutingError(name, call, str(exc)) from None
        frame = _encoder.encode(_Request(self.me.runtime_id, name, call, row))
        if len(frame) > MAX_FRAME:
            # Refused here: the owner would refuse it unread and close, as a dead one does.
            why = f"its call is {len(frame)} bytes, over the {MAX_FRAME} a frame may have: not sent"
            raise RoutingError(name, call, why)
        lease = await self.lease_of(name)
        owner = None if lease is None or not lease.held else lease.owner
        if lease is None or owner is None or owner.runtime_id == self.me.runtime_id:
            # No live owner; or this runtime's own lease, of an agent starting or ending.
            raise AgentNotFound(name)
        # A tell, once sent, is seen through (its owner stores it whatever the caller does):
        # it returns its Ref, and a cancellation is seen after, as a local one's.
        with trio.CancelScope(shield=call == "tell"):
            async with await self._connect(name, call, owner) as stream:
                answer: bytes | None = None
                refused: str | None = None
                owner_left = False
                async with trio.open_nursery() as nursery:

                    async def watch() -> None:
                        nonlocal owner_left
                        while True:
                            await trio.sleep(CHECK_EVERY)
                            if not await self._still_owner(name, lease):
                                owner_left = True
                                nursery.cancel_scope.cancel()

                    nursery.start_soon(watch)
                    # Nothing raised in here: a nursery would wrap it in an ExceptionGroup.
                    try:
                        await stream.send_all(_LENGTH.pack(len(frame)) + frame)
                        answer = await _receive_frame(stream)
                    except (trio.BrokenResourceError, trio.ClosedResourceError):
                        pass  # the owner went: its socket closed with it
                    except _FrameRefused as exc:
                        refused = str(exc)
                    nursery.cancel_scope.cancel()
        if refused is not None:
            raise RoutingError(name, call, f"its answer was refused: {refused}")
        if owner_left or answer is None:
            raise owner_stopped(name, owner, call)
        try:
            return decode_answer(call, answer)
        except RowRefused as exc:
            why = f"its answer was refused: {shown(str(exc))}"
            raise RoutingError(name, call, why) from None

    async def _connect(self, name: str, call: str, owner: LeaseOwner) -> trio.SocketStream:
        fd = self._fd
        if fd is None:
            raise RoutingError(name, call, "this runtime's routing is not running")
        sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            await sock.connect(_at(fd, socket_name(owner.runtime_id)))
            uid = _peer_uid(sock)
            if uid != os.getuid():
                why = (
                    f"the socket of its owner's runtime is another user's (uid {uid}, this "
                    f"is uid {os.getuid()}): refused"
                )
                raise RoutingError(name, call, why)
        except _CONNECT_REFUSED:
            sock.close()
            # No socket listens under the owner's name: its runtime has ended.
            raise owner_stopped(name, owner, call) from None
        except OSError as exc:  # one this user may not use, say: the call was not sent
            sock.close()
            why = f"its owner's socket cannot be reached: {exc.strerror or exc}"
            raise RoutingError(name, call, why) from None
        except BaseException:
            sock.close()
            raise
        return trio.SocketStream(sock)

    async def _still_owner(self, name: str, lease: Lease) -> bool:
        try:
            current = await self.lease_of(name)
        except StoreError as exc:
            # The owner's death still ends the connection: wait on, and look again.
            logger.warning("agent %r: its routed call's owner could not be checked: %s", name, exc)
            return True
        if current is None or not current.held:
            return False
        if (current.epoch, current.owner) != (lease.epoch, lease.owner):
            return False
        return lease.owner is None or not self.ended(lease.owner)

    # --- the owner's side ---

    async def _serve_connection(self, serve: Serve, stream: trio.SocketStream) -> None:
        async with stream:
            uid = _peer_uid(stream.socket)
            if uid != os.getuid():
                logger.warning("a routed call from uid %s was refused: not this user's", uid)
                return
            try:
                with trio.fail_after(_CALL_WITHIN):
                    frame = await _receive_frame(stream)
            except (trio.TooSlowError, trio.BrokenResourceError, trio.ClosedResourceError):
                return  # no call came: nobody waits for an answer
            except _FrameRefused as exc:
                await _answer(stream, encode_error(RoutingError("?", "call", str(exc))))
                return
            if frame is None:
                return
            answer = await self._answer_of(serve, stream, frame)
            if answer is not None:
                await _answer(stream, answer)

    async def _answer_of(
        self, serve: Serve, stream: trio.SocketStream, frame: bytes
    ) -> bytes | None:
        """The answer to a call's frame; None when its caller went first."""
        try:
            request = _requests.decode(frame)
        except (msgspec.MsgspecError, ValueError, RecursionError) as exc:
            why = f"it is not a routed call of any protocol ({exc})"
            logger.warning("a routed call was refused: %s", shown(why))
            return encode_error(RoutingError("?", "call", shown(why)))
        caller, name, call = request.caller, request.name, request.call
        started = start_call(serve, caller, name, call, request.arguments)
        if isinstance(started, bytes):
            return started
        answer: bytes | None = None
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_cancel_when_closed, stream, nursery.cancel_scope)
            answer = await finish_call(name, call, started)
            nursery.cancel_scope.cancel()
        return answer


async def _answer(stream: trio.SocketStream, answer: bytes) -> None:
    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
        await stream.send_all(_LENGTH.pack(len(answer)) + answer)  # else its caller went


async def _cancel_when_closed(stream: trio.SocketStream, scope: trio.CancelScope) -> None:
    """Cancel ``scope`` once the caller closes its end: it sends nothing after its call."""
    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
        await stream.receive_some(1)
    scope.cancel()


async def _receive_frame(stream: trio.SocketStream) -> bytes | None:
    """One frame; None when the connection ends first."""
    head = await _receive_exactly(stream, _LENGTH.size)
    if head is None:
        return None
    (length,) = _LENGTH.unpack(head)
    if length > MAX_FRAME:
        raise _FrameRefused(f"a frame of {length} bytes, over the {MAX_FRAME} a frame may have")
    return await _receive_exactly(stream, length)


async def _receive_exactly(stream: trio.SocketStream, size: int) -> bytes | None:
    received = bytearray()
    while len(received) < size:
        chunk = await stream.receive_some(min(size - len(received), 1 << 20))
        if not chunk:
            return None
        received += chunk
    return bytes(received)


def _at(fd: int, name: str) -> str:
    # The directory's descriptor, not its path: an address has at most 107 bytes.
    return f"/proc/self/fd/{fd}/{name}"


def _peer_uid(sock: trio.socket.SocketType) -> int:
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return int(uid)


def _open_private_directory(directory: Path) -> int:
    """The routing directory, opened (made mode 0700 if missing); `StoreError` for one
    another user owns or others may enter."""
    try:
        with contextlib.suppress(FileExistsError):
            directory.mkdir(mode=0o700)
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        why = f"cannot open the directory of routed calls: {exc.strerror or exc}"
        raise StoreError(str(directory), why) from exc
    found = os.fstat(fd)
    if found.st_uid == os.getuid() and not found.st_mode & 0o077:
        return fd
    os.close(fd)
    mode = stat.filemode(found.st_mode)
    raise StoreError(
        str(directory),
        f"the directory of routed calls must be this user's (uid {os.getuid()}) with mode "
        f"0700; it is uid {found.st_uid}'s with {mode}: remove it, or chmod 700 it if it is yours",
    )


async def _remove_stale(fd: int, *, keep: str) -> None:
    """Remove the sockets of runtimes that ended without removing theirs (killed): each
    that refuses a connection (a live runtime's always listens)."""
    for name in os.listdir(fd):
        if not name.endswith(".sock") or name == keep:
            continue
        probe = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with probe:
            try:
                await probe.connect(_at(fd, name))
            except ConnectionRefusedError:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(name, dir_fd=fd)
            except OSError as exc:
                if exc.errno != errno.ENOENT:
                    logger.warning("routed calls: the socket %s could not be probed: %s", name, exc)
