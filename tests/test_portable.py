"""Portable sessions: the stores' transcript chunks, reading the CLI's file by offset after
a turn, writing the stored transcript back before one, and each agent's own CLI home."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio
import trio.testing
from schema_steps import SQLITE_VERSION, back_to_postgres

import agentrt
from agentrt import (
    InvalidOptions,
    LeaseLost,
    LeaseOwner,
    MemoryStore,
    PostgresStore,
    SessionStore,
    SQLiteStore,
    StoredTranscript,
    StoreError,
)
from agentrt._portable import PortableSession, default_cli_homes, home_folder, share_login
from agentrt.backends.claude import ClaudeBackend
from agentrt.backends.codex import CodexBackend
from agentrt.testing import ScriptedBackend, reply

A = LeaseOwner(node="host-a", pid=4242, start_time=7, runtime_id="host-a:4242:7:x")
B = LeaseOwner(node="host-b", pid=5151, start_time=7, runtime_id="host-b:5151:7:x")
PATH = "projects/-w/s1.jsonl"


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SessionStore]:
    made: SessionStore
    if request.param == "memory":
        made = MemoryStore()
    elif request.param == "sqlite":
        made = SQLiteStore(tmp_path / "sessions.sqlite3")
    else:
        made = PostgresStore(request.getfixturevalue("postgres_dsn"))
    async with made:
        yield made


# --- the stores ---------------------------------------------------------------------


async def test_chunks_append_at_the_stored_end_and_a_new_session_replaces(
    store: SessionStore,
) -> None:
    assert await store.load_transcript("x") is None
    await store.append_transcript("x", session_id="s1", path=PATH, offset=0, data=b"one\n")
    await store.append_transcript("x", session_id="s1", path=PATH, offset=4, data=b"two\n")
    assert await store.load_transcript("x") == StoredTranscript("s1", PATH, b"one\ntwo\n")
    await store.append_transcript("x", session_id="s2", path="p/s2.jsonl", offset=0, data=b"n")
    assert await store.load_transcript("x") == StoredTranscript("s2", "p/s2.jsonl", b"n")
    assert await store.load_transcript("y") is None


@pytest.mark.parametrize(("session_id", "offset"), [("s1", 3), ("s1", 9), ("s2", 4)])
async def test_a_chunk_that_would_not_follow_is_refused_writing_nothing(
    store: SessionStore, session_id: str, offset: int
) -> None:
    await store.append_transcript("x", session_id="s1", path=PATH, offset=0, data=b"one\n")
    with pytest.raises(StoreError, match="does not end at byte"):
        await store.append_transcript(
            "x", session_id=session_id, path=PATH, offset=offset, data=b"more"
        )
    assert await store.load_transcript("x") == StoredTranscript("s1", PATH, b"one\n")


@pytest.mark.parametrize("path", ["/etc/passwd", "../up.jsonl", "a/./b", "a//b", ""])
async def test_a_path_outside_the_cli_home_is_refused(store: SessionStore, path: str) -> None:
    with pytest.raises(ValueError, match="must be relative"):
        await store.append_transcript("x", session_id="s1", path=path, offset=0, data=b"d")
    assert await store.load_transcript("x") is None


async def test_a_runtime_that_lost_the_lease_cannot_append(tmp_path: Path) -> None:
    path = tmp_path / "sessions.sqlite3"
    clock = [0.0]
    async with (
        SQLiteStore(path, lease_clock=lambda: clock[0]) as one,
        SQLiteStore(path, lease_clock=lambda: clock[0]) as two,
    ):
        await one.acquire_lease("x", A, ttl=10)
        await one.append_transcript("x", session_id="s1", path=PATH, offset=0, data=b"a")
        clock[0] = 11.0  # expired: B takes it
        await two.acquire_lease("x", B, ttl=10)
        with pytest.raises(LeaseLost):
            await one.append_transcript("x", session_id="s1", path=PATH, offset=1, data=b"b")
        await two.append_transcript("x", session_id="s1", path=PATH, offset=1, data=b"c")
        assert (await one.load_transcript("x")) == StoredTranscript("s1", PATH, b"ac")


async def test_the_sqlite_schema_gains_the_transcripts_table(tmp_path: Path) -> None:
    import sqlite3

    async with SQLiteStore(tmp_path / "s.sqlite3"):
        pass
    conn = sqlite3.connect(tmp_path / "s.sqlite3")
    try:
        (version,) = conn.execute("PRAGMA user_version").fetchone()
        columns = [row[1] for row in conn.execute("PRAGMA table_info(transcripts)")]
    finally:
        conn.close()
    # Migrated to the newest version (5 added the transcripts), whatever came after 5.
    assert version == SQLITE_VERSION >= 5
    assert columns == ["name", "start", "session_id", "path", "data"]


# --- offset reading and restoring --------------------------------------------------------


def session(store: SessionStore, home: Path, wait: float | None = 10.0) -> PortableSession:
    return PortableSession(store, "coder", ClaudeBackend(), home, wait)


def write_transcript(home: Path, session_id: str, data: bytes) -> Path:
    path = home / "projects" / "-w" / f"{session_id}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


async def chunk_sizes(path: Path) -> list[tuple[int, int]]:
    import sqlite3

    conn = sqlite3.connect(path)
    try:
        sql = "SELECT start, length(data) FROM transcripts ORDER BY start"
        return [(start, size) for start, size in conn.execute(sql)]
    finally:
        conn.close()


async def test_after_each_turn_only_the_new_bytes_are_stored(tmp_path: Path) -> None:
    db = tmp_path / "s.sqlite3"
    home = tmp_path / "home"
    async with SQLiteStore(db) as store:
        portable = session(store, home)
        await portable.after_turn(None)  # no session yet: nothing to carry
        await portable.after_turn("s1")  # no file yet: nothing either
        assert await store.load_transcript("coder") is None

        file = write_transcript(home, "s1", b'{"turn":1}\n')
        await portable.after_turn("s1")
        with file.open("ab") as out:
            out.write(b'{"turn":2}\n')
        await portable.after_turn("s1")
        await portable.after_turn("s1")  # nothing new: no write
        assert await chunk_sizes(db) == [(0, 11), (11, 11)]
        stored = await store.load_transcript("coder")
        assert stored == StoredTranscript("s1", "projects/-w/s1.jsonl", file.read_bytes())

        file.write_bytes(b"short\n")  # rewritten shorter: stored anew
        await portable.after_turn("s1")
        assert await chunk_sizes(db) == [(0, 6)]

        # Rewritten longer, its start changed: stored anew, never the store's start with
        # this file's end (a line cut in two).
        rewritten = b'{"rewritten":1}\n{"turn":2}\n'
        file.write_bytes(rewritten)
        await portable.after_turn("s1")
        assert await chunk_sizes(db) == [(0, len(rewritten))]
        assert (await store.load_transcript("coder")) == StoredTranscript("s1", PATH, rewritten)

        write_transcript(home, "s2", b"new session\n")  # a new session replaces the old
        await portable.after_turn("s2")
        stored = await store.load_transcript("coder")
        assert stored is not None and (stored.session_id, stored.data) == ("s2", b"new session\n")


async def test_before_a_turn_a_missing_or_shorter_copy_is_restored(tmp_path: Path) -> None:
    store = MemoryStore()
    async with store:
        data = b'{"turn":1}\n{"turn":2}\n'
        await store.append_transcript("coder", session_id="s1", path=PATH, offset=0, data=data)
        target = tmp_path / "b" / PATH

        await session(store, tmp_path / "b").before_turn("s1")  # missing here
        assert target.read_bytes() == data
        assert target.stat().st_mode & 0o777 == 0o600

        target.write_bytes(b'{"turn":1}\n')  # stale: the other node ran turn 2
        await session(store, tmp_path / "b").before_turn("s1")
        assert target.read_bytes() == data

        longer = data + b'{"turn":3}\n'  # this node is ahead (a store write failed)
        target.write_bytes(longer)
        await session(store, tmp_path / "b").before_turn("s1")
        assert target.read_bytes() == longer
        # Stored before the turn: a node that takes the agent over next has turn 3 too.
        assert await store.load_transcript("coder") == StoredTranscript("s1", PATH, longer)

        # Not shorter, but different: turn 3 here was never stored (its Response said so)
        # and another node's turn 3 was. The store's copy is resumed, never this one.
        diverged = data + b'{"turn":"3, answered here and not stored"}\n'
        target.write_bytes(diverged)
        await session(store, tmp_path / "b").before_turn("s1")
        assert target.read_bytes() == longer

        await session(store, tmp_path / "c").before_turn("s9")  # another session: untouched
        await session(store, tmp_path / "c").before_turn(None)
        assert not (tmp_path / "c").exists()


async def test_a_restored_copy_then_stores_only_what_the_next_turn_adds(tmp_path: Path) -> None:
    store = MemoryStore()
    async with store:
        await store.append_transcript("coder", session_id="s1", path=PATH, offset=0, data=b"1\n")
        portable = session(store, tmp_path / "b")
        await portable.before_turn("s1")
        with (tmp_path / "b" / PATH).open("ab") as out:
            out.write(b"2\n")
        await portable.after_turn("s1")
        # Had it started again at 0, offset 0 would have replaced rather than appended.
        assert await store.load_transcript("coder") == StoredTranscript("s1", PATH, b"1\n2\n")


class Flaky:
    """A store's transcripts whose writes fail, or whose reads and writes fail, while told."""

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self.writes_fail = self.reads_fail = False

    async def append_transcript(
        self, name: str, *, session_id: str, path: str, offset: int, data: bytes
    ) -> None:
        if self.writes_fail:
            raise StoreError("<flaky>", "down")
        await self.store.append_transcript(
            name, session_id=session_id, path=path, offset=offset, data=data
        )

    async def load_transcript(self, name: str) -> StoredTranscript | None:
        if self.reads_fail:
            raise StoreError("<flaky>", "down")
        return await self.store.load_transcript(name)


async def test_a_copy_the_store_could_not_take_is_stored_before_the_next_turn_here(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    """A write that fails is tried for ``wait`` seconds, then reported; before the next
    turn of the same instance its copy (rewritten by the CLI, even) is stored, as the
    agent's; another instance, a takeover, restores the store's instead of its own."""
    async with MemoryStore() as memory:
        flaky = Flaky(memory)
        home = tmp_path / "a"
        portable = PortableSession(flaky, "coder", ClaudeBackend(), home, 10.0)
        file = write_transcript(home, "s1", b'{"turn":1}\n')
        assert await portable.after_turn("s1")
        rewritten = b'{"rewritten":1}\n{"turn":2}\n'
        file.write_bytes(rewritten)
        flaky.writes_fail = True
        started = trio.current_time()
        assert not await portable.after_turn("s1")
        assert trio.current_time() - started == pytest.approx(10.0)
        flaky.writes_fail = False
        # Unbounded from here: the autojumping clock would reach a bound while a worker
        # thread reads the file.
        portable.wait = None
        await portable.before_turn("s1")
        assert await memory.load_transcript("coder") == StoredTranscript("s1", PATH, rewritten)
        assert file.read_bytes() == rewritten

        other = tmp_path / "b"  # a copy of the first turn only, diverged: replaced
        write_transcript(other, "s1", b'{"turn":1}\n{"turn":"2, elsewhere"}\n')
        await PortableSession(flaky, "coder", ClaudeBackend(), other, None).before_turn("s1")
        assert (other / PATH).read_bytes() == rewritten


async def test_a_copy_that_cannot_be_restored_is_refused_after_the_wait(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    """The store unreadable past ``wait``: `before_turn` raises the store's error, this
    node's stale copy untouched (the turn must not start on it); back, it is restored."""
    async with MemoryStore() as memory:
        data = b'{"turn":1}\n{"turn":2}\n'
        await memory.append_transcript("coder", session_id="s1", path=PATH, offset=0, data=data)
        flaky = Flaky(memory)
        stale = write_transcript(tmp_path, "s1", b'{"turn":1}\n')
        portable = PortableSession(flaky, "coder", ClaudeBackend(), tmp_path, 3.0)
        flaky.reads_fail = True
        started = trio.current_time()
        with pytest.raises(StoreError, match="down"):
            await portable.before_turn("s1")
        assert trio.current_time() - started == pytest.approx(3.0)
        assert stale.read_bytes() == b'{"turn":1}\n'
        flaky.reads_fail = False
        portable.wait = None  # as above
        await portable.before_turn("s1")
        assert stale.read_bytes() == data


# --- the agent's own CLI home ------------------------------------------------------------


def test_each_agent_name_gets_a_folder_of_its_own() -> None:
    names = ["coder", "a/b", "a_b", "..", "ü", "x" * 200]
    folders = [home_folder(name) for name in names]
    assert len(set(folders)) == len(names)
    assert all("/" not in f and f not in (".", "..") and len(f) <= 65 for f in folders)
    assert home_folder("coder").startswith("coder-")


def test_the_default_cli_homes_follow_xdg_state_home(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert default_cli_homes() == tmp_path / "agentrt" / "cli-homes"
    monkeypatch.setenv("XDG_STATE_HOME", "relative")
    assert default_cli_homes() == Path.home() / ".local" / "state" / "agentrt" / "cli-homes"


def test_the_login_is_linked_not_copied(tmp_path: Path) -> None:
    user = tmp_path / "user"
    (user / ".claude").mkdir(parents=True)
    (user / ".claude" / ".credentials.json").write_text('{"token": "secret"}')
    backend = ClaudeBackend()
    options = backend.parse_options({"env": {"HOME": str(user)}, "env_policy": "isolated"})
    home = tmp_path / "homes" / "coder"
    share_login(backend, options, home)
    share_login(backend, options, home)  # again: idempotent
    link = home / ".credentials.json"
    assert link.is_symlink() and link.resolve() == (user / ".claude" / ".credentials.json")
    assert not os.path.lexists(home / ".claude.json")  # the user has none: nothing linked
    assert home.stat().st_mode & 0o777 == 0o700

    moved = backend.with_cli_home(options, str(home))
    assert backend.cli_home(moved) == str(home)
    assert moved.effective_env_policy == options.effective_env_policy == "isolated"
    command = backend.command(moved, "hi", session_id=None)
    assert command.env["CLAUDE_CONFIG_DIR"] == str(home)


def test_a_login_the_cli_replaced_with_a_file_is_the_users_again_when_newer(
    tmp_path: Path,
) -> None:
    """A CLI that writes its refreshed login by write-then-rename replaces its home's link
    with a file: that file, newer than the user's, becomes the user's login and the link
    comes back; an older one (the user logged in again since) is dropped."""
    user = tmp_path / "user"
    (user / ".claude").mkdir(parents=True)
    users = user / ".claude" / ".credentials.json"
    users.write_text('{"token": "old"}')
    os.utime(users, (1_000_000_000, 1_000_000_000))
    backend = ClaudeBackend()
    options = backend.parse_options({"env": {"HOME": str(user)}, "env_policy": "isolated"})
    home = tmp_path / "homes" / "coder"
    share_login(backend, options, home)
    entry = home / ".credentials.json"

    def replace(text: str, mtime: float) -> None:
        fresh = home / "fresh"
        fresh.write_text(text)
        os.utime(fresh, (mtime, mtime))
        os.replace(fresh, entry)

    replace('{"token": "rotated"}', 2_000_000_000)
    share_login(backend, options, home)
    assert entry.is_symlink() and entry.resolve() == users
    assert users.read_text() == '{"token": "rotated"}'
    assert users.stat().st_mode & 0o777 == 0o600
    replace('{"token": "stale"}', 1_000_000_000)
    share_login(backend, options, home)
    assert entry.is_symlink() and users.read_text() == '{"token": "rotated"}'
    assert sorted(p.name for p in users.parent.iterdir()) == [".credentials.json"]


async def test_portable_needs_a_backend_with_a_transcript_file(tmp_path: Path) -> None:
    async with agentrt.open_runtime(store=MemoryStore()) as rt:
        with pytest.raises(InvalidOptions, match="keeps no transcript file"):
            await rt.start_agent(
                agentrt.Agent, name="a", backend=ScriptedBackend(reply("x")), portable=True
            )
        with pytest.raises(InvalidOptions, match=r"cli_homes.*absolute"):
            await rt.start_agent(
                agentrt.Agent, name="b", backend=ScriptedBackend(reply("x")), cli_homes="rel"
            )
        with pytest.raises(InvalidOptions, match="portable"):
            await rt.start_agent(
                agentrt.Agent, name="c", backend=ScriptedBackend(reply("x")), portable="yes"
            )


async def test_a_version_2_postgres_database_gains_the_transcripts_table(
    postgres_dsn: str,
) -> None:
    async with PostgresStore(postgres_dsn) as store:
        await store.checkpoint_session("kept", backend="claude", session_id="s", cwd="/w")
    back_to_postgres(postgres_dsn, 2)  # before portable sessions
    async with PostgresStore(postgres_dsn) as store:
        assert (record := await store.load("kept")) is not None and record.session_id == "s"
        await store.append_transcript("kept", session_id="s", path=PATH, offset=0, data=b"d")
        assert await store.load_transcript("kept") == StoredTranscript("s", PATH, b"d")


def test_codex_gets_its_home_as_codex_home_with_the_users_login_linked(tmp_path: Path) -> None:
    user = tmp_path / "codex-home"
    user.mkdir()
    (user / "auth.json").write_text('{"OPENAI_API_KEY": "secret"}')
    (user / "config.toml").write_text('model = "m"\n')
    backend = CodexBackend(environ={})
    options = backend.parse_options({"env": {"CODEX_HOME": str(user)}})
    assert backend.cli_home(options) == str(user)
    home = tmp_path / "homes" / "coder"
    share_login(backend, options, home)
    assert sorted(p.name for p in home.iterdir() if p.is_symlink()) == ["auth.json", "config.toml"]
    assert (home / "auth.json").resolve() == user / "auth.json"

    moved = backend.with_cli_home(options, str(home))
    assert backend.cli_home(moved) == str(home)
    assert moved.effective_env_policy == options.effective_env_policy
    assert backend.command(moved, "hi", session_id=None).env["CODEX_HOME"] == str(home)
    rollout = home / "sessions/2026/12/01/rollout-2026-12-01T13-00-00-t1.jsonl"
    rollout.parent.mkdir(parents=True)
    rollout.touch()
    assert list(home.glob(backend.transcript_pattern("t1"))) == [rollout]
    assert list(home.glob(backend.transcript_pattern("t2"))) == []
