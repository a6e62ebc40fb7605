"""Portable sessions (``portable=True``): each agent's own CLI home, sharing the user's login,
and the CLI's transcript carried in the store, so a runtime on another node resumes it.

The login is shared by links into the user's home; a CLI that replaces its link with a
file (a token refresh written by write-then-rename) has it published back to the user's
after the turn, and the link made again, so the agents keep one login (`relink_login`).

After each turn the bytes the CLI added to the transcript file are appended to the store
(`TranscriptStore.append_transcript`), before the turn's answer is returned: only when the
file's start is still what the store holds (its SHA-256), else the file is stored anew, so
the store never holds two copies spliced into a broken line. Before the first turn an
instance runs on a stored session, the copy here is made the stored one: written from the
store where it is missing, shorter or different (another node ran later turns), or, where
it is the stored one and more (turns this node answered but could not store), the rest is
stored first. The store is waited for, up to the agent's ``transcript_wait``; a turn whose
copy could not be made the stored one does not start.
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import attrs
import trio

from ._errors import InvalidOptions, LeaseLost, StoreError
from ._records import StoredTranscript
from ._stores._protocols import TranscriptStore
from ._stores._sqlite import state_directory
from ._stores._transcripts import check_transcript_path
from .backend import Backend, PortableBackend

logger = logging.getLogger("agentrt")


def default_cli_homes() -> Path:
    """Where portable agents' CLI homes live unless ``cli_homes`` says:
    ``$XDG_STATE_HOME/agentrt/cli-homes`` (an absolute XDG_STATE_HOME only), else
    ``~/.local/state/agentrt/cli-homes``."""
    return state_directory() / "cli-homes"


def home_folder(name: str) -> str:
    """A directory name for an agent name (which may hold "/", ".." or anything printable):
    its safe characters for reading, a hash of the whole so two names never share one."""
    digest = hashlib.sha256(name.encode()).hexdigest()[:16]
    return f"{re.sub(r'[^A-Za-z0-9_-]', '_', name)[:48]}-{digest}"


# In an agent's CLI home, agentrt's own link to each of the user's login files, by the
# name it has in the home: the CLI never writes these, so a link it replaced is known.
_LOGINS = ".agentrt-logins"


def share_login(backend: PortableBackend, options: Any, home: Path) -> None:
    """Create ``home`` (0700) with a symlink to each of the user's login files that exists:
    the agent logs in as the user, a refreshed token is seen by all (`relink_login`), and
    no secret is copied anywhere."""
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    record = home / _LOGINS
    record.mkdir(mode=0o700, exist_ok=True)
    for name, source in backend.login_files(options).items():
        kept = record / name
        if os.path.lexists(source) and os.path.realpath(kept) != os.path.realpath(source):
            _link(kept, source)  # new, or the user's login moved
    relink_login(home)


def relink_login(home: Path) -> None:
    """Link the agent's CLI home to the user's login files again where its CLI replaced a
    link with a file of its own: Claude Code (measured on 2.1.332) writes a refreshed login
    to a new file it renames over the path, link or not. A file newer than the user's is
    the login now (an OAuth refresh token is used once): it becomes the user's, written
    beside it and renamed over it, so the other agents and the user read it too; an older
    one is dropped (the user logged in again since)."""
    record = home / _LOGINS
    if not record.is_dir():
        return
    for kept in record.iterdir():
        link, source = home / kept.name, os.path.realpath(kept)
        if os.path.realpath(link) == source:
            continue
        if link.is_file() and not link.is_symlink() and _newer(link, source):
            logger.info("CLI home %s: its %s was replaced; the user's is now that", home, link.name)
            _publish(link.read_bytes(), source)
        _link(link, source)


def _newer(path: Path, than: str) -> bool:
    try:
        return path.stat().st_mtime_ns > os.stat(than).st_mtime_ns
    except FileNotFoundError:
        return True


def _publish(data: bytes, path: str) -> None:
    """``path`` replaced by ``data`` at once (0600: a login)."""
    partial = f"{path}.agentrt-partial"
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "wb") as file:
        file.write(data)
        file.flush()
        os.fsync(file.fileno())
    os.replace(partial, path)


def _link(link: Path, target: str) -> None:
    """``link`` made a symlink to ``target`` at once, whatever it was."""
    partial = link.with_name(link.name + ".agentrt-partial")
    partial.unlink(missing_ok=True)
    partial.symlink_to(target)
    os.replace(partial, link)


def portable_options(backend: Backend, options: Any, name: str, cli_homes: str | None) -> Any:
    """``options`` pointed at the agent's own CLI home (created, sharing the login);
    `InvalidOptions` for a backend without a transcript file to carry."""
    if not isinstance(backend, PortableBackend):
        raise InvalidOptions(
            "portable", True, f"the {backend.name!r} backend keeps no transcript file to carry"
        )
    home = (Path(cli_homes) if cli_homes else default_cli_homes()) / home_folder(name)
    share_login(backend, options, home)
    return backend.with_cli_home(options, str(home))


def read_from(path: Path, offset: int) -> bytes:
    with path.open("rb") as file:
        file.seek(offset)
        return file.read()


def write_whole(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` at once (a reader never sees half a transcript)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".agentrt-partial")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "wb") as file:
        file.write(data)
    os.replace(partial, path)


@attrs.define
class PortableSession:
    """One agent's transcript between its CLI home and the store. ``stored`` and ``digest``
    are the length and SHA-256 of what the store holds of ``session_id``'s transcript, as
    this runtime last saw it (None: not known, the store is read before the next turn);
    ``wait`` bounds how long a turn waits for the store (None: no bound)."""

    store: TranscriptStore
    name: str
    backend: PortableBackend
    home: Path
    wait: float | None
    session_id: str | None = None
    path: str | None = None
    stored: int | None = None
    digest: bytes = b""

    def _local(self, session_id: str) -> Path | None:
        if self.path is not None and self.session_id == session_id:
            return self.home / self.path
        found = sorted(self.home.glob(self.backend.transcript_pattern(session_id)))
        return found[0] if found else None

    def _known(self, session_id: str, path: str | None, stored: int, digest: bytes) -> None:
        self.session_id, self.path, self.stored, self.digest = session_id, path, stored, digest

    async def before_turn(self, session_id: str | None) -> None:
        """Make this node's copy of ``session_id``'s transcript the stored one before the CLI
        resumes it: written here where it is missing, shorter or different (another node ran
        later turns); where it is the stored one and more (turns this node answered but
        could not store), the rest is stored first. A no-op for a new session, and while
        this runtime knows what the store holds.

        Raises `StoreError` when the store could not be read or written within ``wait``
        seconds (`OSError`, `ValueError` for a copy that cannot be written here): the turn
        must not start then, or the CLI would resume a stale copy, or none."""
        if session_id is None or (self.stored is not None and self.session_id == session_id):
            return
        # A copy this instance's own turn left, which the store could not take, is the
        # agent's: no other runtime can have written meanwhile (this one holds the lease).
        own = self.session_id == session_id
        await self._retried(self._store_local if own else self._restore, session_id)

    async def after_turn(self, session_id: str | None) -> bool:
        """Store what the turn added to ``session_id``'s transcript, waiting up to ``wait``
        seconds for the store. Whether the store holds this node's copy; False is logged:
        the copy is stored before this runtime's next turn, but a runtime that takes the
        agent over first resumes the conversation without this turn. First, a login the CLI
        refreshed into a file of its own becomes the user's again (`relink_login`)."""
        try:
            await trio.to_thread.run_sync(relink_login, self.home)
        except OSError as exc:
            logger.warning(
                "agent %r: its CLI's login could not be shared again: %s", self.name, exc
            )
        if session_id is None:
            return True
        try:
            if self.stored is not None or self.session_id != session_id:
                try:
                    await self._append_new(session_id)
                    return True
                except StoreError as exc:
                    # It may or may not have been made: the store is read before trying again.
                    self.session_id, self.path, self.stored = session_id, None, None
                    if isinstance(exc, LeaseLost):
                        raise
            await self._retried(self._store_local, session_id)
            return True
        except (StoreError, OSError) as exc:
            self._warn("was not stored", session_id, exc)
            return False

    async def _retried(self, work: Callable[[str], Awaitable[None]], session_id: str) -> None:
        """``work(session_id)`` until it goes through, for at most ``wait`` seconds in all;
        a `LeaseLost` at once (the agent is being stopped: waiting cannot help)."""
        deadline = trio.current_time() + (math.inf if self.wait is None else self.wait)
        failed: StoreError | None = None
        delay = _FIRST_RETRY
        while True:
            with trio.move_on_at(deadline) as bound:
                try:
                    await work(session_id)
                    return
                except StoreError as exc:
                    if isinstance(exc, LeaseLost):
                        raise
                    if failed is None:
                        self._warn("waits for the store", session_id, exc)
                    failed = exc
                await trio.sleep(delay)
            if bound.cancelled_caught:
                if failed is None:
                    where = type(self.store).__name__
                    failed = StoreError(where, f"no answer within {self.wait:g} s")
                raise failed
            delay = min(delay * 2, _LAST_RETRY)

    async def _restore(self, session_id: str) -> None:
        """One attempt of `before_turn`."""
        stored = await self.store.load_transcript(self.name)
        if stored is None or stored.session_id != session_id:
            # The store has no transcript of this session: this node's copy is all there is.
            await self._store(session_id, None)
            return
        check_transcript_path(stored.path)  # never written outside the home
        target = self.home / stored.path
        here = await trio.to_thread.run_sync(_read, target)
        data = stored.data
        if here is not None and len(here) > len(data) and here.startswith(data):
            await self._store(session_id, stored, target)
            return
        if here != data:
            if here is not None and not data.startswith(here):
                # Turns answered here that the store never got (their Responses said so),
                # beside the store's later turns: the store's conversation is the agent's.
                why = f"{len(here)} bytes here, replaced by the store's {len(data)} bytes"
                self._warn("differs from the stored one", session_id, why)
            await trio.to_thread.run_sync(write_whole, target, data)
            self._log("restored from the store", session_id, len(data))
        digest = await trio.to_thread.run_sync(_digest, data)
        self._known(session_id, stored.path, len(data), digest)

    async def _store_local(self, session_id: str) -> None:
        """One attempt of `after_turn` once a write has failed: the store is read first."""
        await self._store(session_id, await self.store.load_transcript(self.name))

    async def _store(
        self, session_id: str, stored: StoredTranscript | None, local: Path | None = None
    ) -> None:
        """Make the store, which holds ``stored``, hold this node's copy (``local``, else
        found): the rest appended where the copy extends it, else stored anew (this node
        ran the last turn)."""
        if local is None:
            local = await trio.to_thread.run_sync(self._local, session_id)
        here = None if local is None else await trio.to_thread.run_sync(_read, local)
        if local is None or not here:
            self._known(session_id, None, 0, _digest(b""))
            return
        offset = 0
        if stored is not None and stored.session_id == session_id and here.startswith(stored.data):
            offset = len(stored.data)
        path = local.relative_to(self.home).as_posix()
        if offset < len(here):
            await self.store.append_transcript(
                self.name, session_id=session_id, path=path, offset=offset, data=here[offset:]
            )
            self._log("stored from this node's copy", session_id, len(here) - offset)
        self._known(session_id, path, len(here), await trio.to_thread.run_sync(_digest, here))

    async def _append_new(self, session_id: str) -> None:
        """Append what the turn added to the copy here, which extended the stored one; a
        new session's copy, or one whose start changed (rewritten), is stored anew."""
        local = await trio.to_thread.run_sync(self._local, session_id)
        if local is None:
            return
        same = self.session_id == session_id and self.stored is not None
        offset = self.stored if same and self.stored is not None else 0
        new = await trio.to_thread.run_sync(_after, local, offset, self.digest)
        if new is None:
            return
        offset, data, digest = new
        path = local.relative_to(self.home).as_posix()
        if data:
            await self.store.append_transcript(
                self.name, session_id=session_id, path=path, offset=offset, data=data
            )
        self._known(session_id, path, offset + len(data), digest)

    def _log(self, what: str, session_id: str, size: int) -> None:
        logger.info(
            "agent %r: session %s's transcript %s (%d bytes)",
            self.name,
            session_id,
            what,
            size,
            extra={"agent": self.name, "session_id": session_id},
        )

    def _warn(self, what: str, session_id: str, why: object) -> None:
        logger.warning(
            "agent %r: session %s's transcript %s: %s",
            self.name,
            session_id,
            what,
            why,
            extra={"agent": self.name, "session_id": session_id},
        )


# The store is tried again after these many seconds, doubling up to the last.
_FIRST_RETRY = 0.05
_LAST_RETRY = 1.0


def _digest(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def _after(path: Path, offset: int, digest: bytes) -> tuple[int, bytes, bytes] | None:
    """What of the file at ``path`` follows its first ``offset`` bytes, whose SHA-256 must
    be ``digest`` (else all of it, from 0: never a splice of two different copies), with
    where it starts and the whole file's SHA-256; None for no file. Only what follows is
    held in memory."""
    try:
        file = path.open("rb")
    except FileNotFoundError:
        return None
    with file:
        hashed = hashlib.sha256()
        left = offset
        while left and (chunk := file.read(min(left, _CHUNK))):
            hashed.update(chunk)
            left -= len(chunk)
        if left or hashed.digest() != digest:
            file.seek(0)
            offset, hashed = 0, hashlib.sha256()
        data = file.read()
    hashed.update(data)
    return offset, data, hashed.digest()


_CHUNK = 1024 * 1024
