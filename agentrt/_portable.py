"""Portable sessions (``portable=True``): each agent's own CLI home, sharing the user's login,
and the CLI's transcript carried in the store, so a runtime on another node resumes it.

After each turn the transcript file is read from the offset the store already has, and only
the new bytes are appended (`TranscriptStore.append_transcript`). Before a turn that resumes a
session, a copy that is missing here or shorter than the stored one (another node ran the
later turns) is replaced by the stored transcript, then the CLI resumes as always.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from pathlib import Path
from typing import Any

import attrs
import trio

from ._errors import InvalidOptions, StoreError
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


def share_login(backend: PortableBackend, options: Any, home: Path) -> None:
    """Create ``home`` (0700) with a symlink to each of the user's login files that exists:
    the agent logs in as the user, a refreshed token is seen by both, and no secret is
    copied anywhere."""
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    for name, source in backend.login_files(options).items():
        link = home / name
        if not os.path.lexists(source) or os.path.realpath(link) == os.path.realpath(source):
            continue
        if link.is_symlink():
            link.unlink()  # the user's login moved
        if not link.exists():
            link.symlink_to(source)


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
    """One agent's transcript between its CLI home and the store. ``stored`` is how many
    bytes of ``session_id``'s transcript the store holds, as this runtime last saw it (None:
    not read yet)."""

    store: TranscriptStore
    name: str
    backend: PortableBackend
    home: Path
    session_id: str | None = None
    path: str | None = None
    stored: int | None = None

    def _local(self, session_id: str) -> Path | None:
        if self.path is not None and self.session_id == session_id:
            return self.home / self.path
        found = sorted(self.home.glob(self.backend.transcript_pattern(session_id)))
        return found[0] if found else None

    async def before_turn(self, session_id: str | None) -> None:
        """Write the stored transcript of ``session_id`` here if the copy here is missing or
        shorter; a no-op for a new session or once this runtime has read the store."""
        if session_id is None or (self.stored is not None and self.session_id == session_id):
            return
        try:
            restored = await self._restore(session_id)
        except (StoreError, OSError, ValueError) as exc:
            # The CLI resumes what this node has (or reports the session lost).
            self._warn("could not be restored", session_id, exc)
            return
        if restored:
            logger.info(
                "agent %r: session %s's transcript restored from the store (%d bytes)",
                self.name,
                session_id,
                restored,
                extra={"agent": self.name, "session_id": session_id},
            )

    async def _restore(self, session_id: str) -> int:
        """How many bytes were written here (0: the copy here was whole)."""
        stored = await self.store.load_transcript(self.name)
        self.session_id, self.path, self.stored = session_id, None, 0
        if stored is None or stored.session_id != session_id:
            return 0
        check_transcript_path(stored.path)  # never written outside the home
        self.path, self.stored = stored.path, len(stored.data)
        target = self.home / stored.path
        if await trio.to_thread.run_sync(_size, target) >= len(stored.data):
            return 0
        await trio.to_thread.run_sync(write_whole, target, stored.data)
        return len(stored.data)

    def _warn(self, what: str, session_id: str, exc: Exception) -> None:
        logger.warning(
            "agent %r: session %s's transcript %s: %s",
            self.name,
            session_id,
            what,
            exc,
            extra={"agent": self.name, "session_id": session_id},
        )

    async def after_turn(self, session_id: str | None) -> None:
        """Append what the turn added to ``session_id``'s transcript to the store. A failed
        write is logged, not raised: the turn is over, and the next turn sends it again."""
        if session_id is None:
            return
        local = await trio.to_thread.run_sync(self._local, session_id)
        if local is None:
            return
        offset = self.stored if self.session_id == session_id and self.stored else 0
        if await trio.to_thread.run_sync(_size, local) < offset:  # rewritten: store it anew
            offset = 0
        data = await trio.to_thread.run_sync(read_from, local, offset)
        if not data:
            return
        path = local.relative_to(self.home).as_posix()
        try:
            await self.store.append_transcript(
                self.name, session_id=session_id, path=path, offset=offset, data=data
            )
        except StoreError as exc:
            self.stored = None  # read the store again before the next turn
            self._warn("was not stored", session_id, exc)
            return
        self.session_id, self.path, self.stored = session_id, path, offset + len(data)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0
