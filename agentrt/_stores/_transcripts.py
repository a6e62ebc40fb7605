"""Portable sessions in the store: the CLI's transcript of an agent's session, kept as the
chunks each turn appended, so a runtime on another node can write it back before resuming.

One agent name has at most one stored transcript, of its current session: a chunk for
another session (or at offset 0) replaces what was stored. Each chunk is one row, so a turn
writes only what it added (never the whole transcript again); a row's size is bounded by
the engine (SQLite's default SQLITE_MAX_LENGTH and PostgreSQL's ``bytea`` both 1 GB), and a
restore reads the whole transcript into memory once.
"""

from __future__ import annotations

from typing import Any, ClassVar, Protocol

import attrs

from .._errors import StoreError
from .._records import StoredTranscript
from ._sql import SqlCalls


def check_transcript_path(path: str) -> None:
    """Raise `ValueError` unless ``path`` (a transcript's path in its CLI home) is relative
    and has no empty, ``.`` or ``..`` part: a store refuses such a path before writing it."""
    # Written back under the agent's CLI home: never outside it.
    parts = path.split("/")
    if not path or path.startswith("/") or any(part in ("", ".", "..") for part in parts):
        raise ValueError(f"transcript path {path!r} must be relative, without '.' or '..'")


def stale_chunk(where: str, name: str, session_id: str, offset: int) -> StoreError:
    """The `StoreError` a store raises when a transcript chunk does not start where the
    stored transcript ends (``offset``): it writes nothing then."""
    return StoreError(
        where,
        f"the stored transcript of agent {name!r} (session {session_id}) does not end at "
        f"byte {offset}, so the chunk would not follow it; nothing was written",
    )


# Each store's migration names its engine's blob type for BYTES.
CREATE_TRANSCRIPTS = """
CREATE TABLE transcripts (
    name TEXT NOT NULL,
    start INTEGER NOT NULL,
    session_id TEXT NOT NULL,
    path TEXT NOT NULL,
    data BYTES NOT NULL,
    PRIMARY KEY (name, start)
)
"""

# The statements with ``?`` placeholders; LENGTH is the engine's byte length of a blob.
_DELETE = "DELETE FROM transcripts WHERE name = ?"
_APPEND = """
INSERT INTO transcripts (name, start, session_id, path, data)
SELECT ?, ?, ?, ?, ?
WHERE (SELECT COALESCE(SUM(LENGTH(data)), 0) FROM transcripts WHERE name = ?) = ?
    AND NOT EXISTS (SELECT 1 FROM transcripts WHERE name = ? AND session_id <> ?)
"""
_SELECT = "SELECT session_id, path, data FROM transcripts WHERE name = ? ORDER BY start"


class _SqlStore(SqlCalls, Protocol):
    _LENGTH: str


class SqlTranscripts:
    """The transcript methods of a SQL store (over its ``_call``, fenced by the agent's
    lease as every other write); ``_LENGTH`` is its engine's byte length function."""

    _LENGTH: ClassVar[str] = "LENGTH"

    async def append_transcript(
        self: _SqlStore, name: str, *, session_id: str, path: str, offset: int, data: bytes
    ) -> None:
        """Append ``data`` to the stored transcript of ``name``, which must be ``offset``
        bytes of session ``session_id`` long (``offset=0`` replaces whatever is stored);
        else `StoreError`, writing nothing."""
        check_transcript_path(path)
        delete = self._sql(_DELETE)
        append = self._sql(_APPEND.replace("LENGTH", self._LENGTH))
        params = (name, offset, session_id, path, bytes(data), name, offset, name, session_id)

        def work(conn: Any) -> int:
            if offset == 0:
                conn.execute(delete, (name,))
            rowcount: int = conn.execute(append, params).rowcount
            return rowcount

        if await self._call(work, fence=name) == 0:
            raise stale_chunk(self._where, name, session_id, offset)

    async def load_transcript(self: _SqlStore, name: str) -> StoredTranscript | None:
        """The stored transcript of ``name``, or None."""
        select = self._sql(_SELECT)

        def work(conn: Any) -> list[tuple[Any, ...]]:
            return list(conn.execute(select, (name,)))

        rows = await self._call(work)
        if not rows:
            return None
        session_id, path = rows[0][0], rows[0][1]
        return StoredTranscript(session_id, path, b"".join(bytes(row[2]) for row in rows))


@attrs.define
class MemoryTranscripts:
    """The transcript methods for `MemoryStore`, over its chunk lists."""

    chunks: dict[str, list[tuple[str, str, bytes]]] = attrs.field(factory=dict)

    def append(
        self, where: str, name: str, session_id: str, path: str, offset: int, data: bytes
    ) -> None:
        check_transcript_path(path)
        stored = [] if offset == 0 else self.chunks.get(name, [])
        if sum(len(c[2]) for c in stored) != offset or any(c[0] != session_id for c in stored):
            raise stale_chunk(where, name, session_id, offset)
        self.chunks[name] = [*stored, (session_id, path, bytes(data))]

    def load(self, name: str) -> StoredTranscript | None:
        stored = self.chunks.get(name)
        if not stored:
            return None
        return StoredTranscript(stored[0][0], stored[0][1], b"".join(c[2] for c in stored))
