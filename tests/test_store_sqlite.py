"""SQLiteStore's file handling: location, schema and migrations, durability; and one
story written to both MemoryStore and SQLiteStore giving equal records. What every store
must do is the conformance kit's (tests/test_store_conformance.py)."""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import attrs
import pytest
import schema_steps
import trio
import trio.testing
from schema_steps import SQLITE_VERSION, back_to_sqlite

import agentrt
from agentrt import (
    MemoryStore,
    ResultEvent,
    SessionEvent,
    SessionStore,
    SQLiteStore,
    StopReason,
    StoreError,
    Usage,
    open_runtime,
)
from agentrt._stores import _sqlite_schema as sqlite_schema
from agentrt.backend import SessionTotals
from agentrt.store import (
    LeaseOwner,
    PendingApproval,
    StoredBudget,
    StoredCredential,
    StoredTurn,
    StoredWorkspace,
)
from agentrt.testing import Gate, ScriptedBackend, reply

T = TypeVar("T")


class FakeClock:
    """A wall clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


# --- MemoryStore and SQLiteStore: the same records (the kit checks each store alone) ---


async def test_both_stores_keep_every_field_alike(tmp_path: Path, clock: FakeClock) -> None:
    # Field by field, whole records: a write that one store drops or misnames shows here.
    async def story(store: SessionStore) -> tuple[agentrt.SessionRecord, ...]:
        async with store:
            await store.checkpoint_session("a", backend="claude", session_id="s1", cwd="/w")
            clock.now += 1
            await store.set_live_process(
                "a", pgid=10, pid=11, start_time=12, runtime_id="rt", marker="m"
            )
            await store.record_turn(
                "a",
                stop_reason="complete",
                cost_usd=0.5,
                usage=Usage(input_tokens=3, output_tokens=4),
                session_id="s2",
            )
            await store.save_state("a", b"blob")
            await store.checkpoint_session("b", backend="codex", session_id=None, cwd=None)
            clock.now += 1
            await store.clear_live_process("a")
            await store.record_turn(
                "b", stop_reason="interrupted", cost_usd=None, usage=None, session_id=None
            )
            return tuple(await store.list())

    start = clock.now
    memory = await story(MemoryStore(clock=clock))
    clock.now = start
    sqlite = await story(SQLiteStore(tmp_path / "sessions.sqlite3", clock=clock))
    assert memory == sqlite
    assert [r.name for r in memory] == ["a", "b"]
    assert (memory[0].turns, memory[0].session_id, memory[0].state) == (1, "s2", b"blob")


# --- SQLiteStore: location, file, schema, durability ---


def test_default_store_path_follows_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("AGENTRT_STORE", raising=False)
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    expected = tmp_path / "home" / ".local" / "state" / "agentrt" / "sessions.sqlite3"
    assert agentrt.default_store_path() == expected
    monkeypatch.setenv("XDG_STATE_HOME", "relative/is/ignored")
    assert agentrt.default_store_path() == expected
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert agentrt.default_store_path() == tmp_path / "xdg" / "agentrt" / "sessions.sqlite3"
    monkeypatch.setenv("AGENTRT_STORE", "~/elsewhere.db")
    assert agentrt.default_store_path() == tmp_path / "home" / "elsewhere.db"
    assert SQLiteStore().path == tmp_path / "home" / "elsewhere.db"


async def test_new_store_file_is_private_wal_and_current_schema(tmp_path: Path) -> None:
    path = tmp_path / "sessions.sqlite3"
    async with SQLiteStore(path) as store:
        await store.checkpoint_session("coder", backend="claude", session_id="s", cwd=None)
        assert os.stat(path).st_mode & 0o777 == 0o600
        assert os.stat(f"{path}-wal").st_mode & 0o777 == 0o600
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert conn.execute("PRAGMA user_version").fetchone() == (len(sqlite_schema.MIGRATIONS),)
        assert conn.execute("PRAGMA application_id").fetchone() == (sqlite_schema.APPLICATION_ID,)
    finally:
        conn.close()


def test_programs_opening_a_new_store_file_at_once_all_open_it(tmp_path: Path) -> None:
    # Two programs racing on one new file (the workspaces' race test, now and then): one
    # read the file's schema between the other's migration and its own next read ("not an
    # agentrt session store (it has other tables)"), or was told "database is locked" at
    # once switching it to WAL. Each open here is a thread of its own with its own trio
    # run and connection, four at a time, on 150 new files.
    def open_at(path: Path, start: threading.Barrier, failed: list[BaseException]) -> None:
        async def main() -> None:
            start.wait()
            async with SQLiteStore(path):
                pass

        try:
            trio.run(main)
        except BaseException as exc:
            failed.append(exc)

    failed: list[BaseException] = []
    for n in range(150):
        start = threading.Barrier(4)
        path = tmp_path / f"{n}.sqlite3"
        threads = [threading.Thread(target=open_at, args=(path, start, failed)) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert [str(exc) for exc in failed] == []


async def test_an_empty_v0_file_is_migrated_to_the_current_schema(tmp_path: Path) -> None:
    path = tmp_path / "sessions.sqlite3"
    path.touch()
    async with SQLiteStore(path) as store:
        await store.checkpoint_session("coder", backend="claude", session_id="s", cwd=None)
    async with SQLiteStore(path) as store:
        assert [r.name for r in await store.list()] == ["coder"]


async def test_an_older_schema_is_migrated_keeping_its_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "sessions.sqlite3"
    async with SQLiteStore(path) as store:
        await store.checkpoint_session("coder", backend="claude", session_id="s-1", cwd="/r")
    # A later agentrt adds a step; the file on disk is now one version behind.
    current = len(sqlite_schema.MIGRATIONS)
    step = ("ALTER TABLE sessions ADD COLUMN note TEXT", "UPDATE sessions SET note = 'migrated'")
    monkeypatch.setattr(sqlite_schema, "MIGRATIONS", (*sqlite_schema.MIGRATIONS, step))
    async with SQLiteStore(path) as store:
        record = await store.load("coder")
        assert record is not None and record.session_id == "s-1"
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA user_version").fetchone() == (current + 1,)
        assert conn.execute("SELECT note FROM sessions").fetchall() == [("migrated",)]
    finally:
        conn.close()


async def test_a_version_1_file_gains_the_later_columns(tmp_path: Path) -> None:
    path = tmp_path / "sessions.sqlite3"
    conn = sqlite3.connect(path)
    conn.executescript(sqlite_schema.CREATE_SESSIONS)
    conn.execute(
        "INSERT INTO sessions (name, backend, session_id, cwd, created_at, updated_at)"
        " VALUES ('coder', 'claude', 's-1', '/r', 0, 0)"
    )
    conn.execute(f"PRAGMA application_id = {sqlite_schema.APPLICATION_ID}")
    conn.execute("PRAGMA user_version = 1")
    conn.commit()
    conn.close()
    async with SQLiteStore(path) as store:
        record = await store.load("coder")
        assert record is not None
        assert (record.session_id, record.live_marker) == ("s-1", None)
        assert record.session_totals == SessionTotals()
        await store.set_live_process(
            "coder", pgid=5, pid=5, start_time=50, runtime_id="rt", marker="9.ff"
        )
        live = await store.live_processes()
        assert [r.live_marker for r in live] == ["9.ff"]
        await store.record_turn(
            "coder",
            stop_reason="complete",
            cost_usd=0.5,
            usage=Usage(input_tokens=3),
            session_id="s-1",
        )
        record = await store.load("coder")
        assert record is not None
        assert record.session_totals == SessionTotals(
            usage=Usage(input_tokens=3), cost_usd=0.5, turns=1
        )


async def test_a_version_8_file_gains_the_workspaces_keeping_its_approvals(
    tmp_path: Path,
) -> None:
    # Version 8 is the schema with the approvals table and no workspaces one.
    path = tmp_path / "sessions.sqlite3"
    approval = PendingApproval(
        id="a-1",
        name="coder",
        tool_name="Bash",
        tool_use_id="toolu_1",
        input='{"command": "ls"}',
        reason="shell",
        runtime_id="r-1",
        request=1,
        requested_at=1000.0,
        expires_at=1e12,  # pending: a request past its bound is not listed
    )
    async with SQLiteStore(path) as store:
        await store.put_approval(approval)
    back_to_sqlite(path, 8)
    workspace = StoredWorkspace(
        name="coder", repo="/r", path="/r.wt/coder", branch="agentrt/coder", base=None, node="a"
    )
    async with SQLiteStore(path) as store:
        assert list(await store.pending_approvals()) == [approval]
        await store.save_workspace(workspace)
        assert list(await store.workspaces()) == [workspace]
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA user_version").fetchone() == (SQLITE_VERSION,)
        tables = {
            row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        }
        assert {"approvals", "workspaces", "turn_history"} <= tables
    finally:
        conn.close()


async def test_a_version_9_file_gains_the_turn_history_keeping_its_sessions(
    tmp_path: Path,
) -> None:
    # Version 9 is the schema with the workspaces table and no turn history.
    path = tmp_path / "sessions.sqlite3"
    async with SQLiteStore(path) as store:
        await store.checkpoint_session("coder", backend="claude", session_id="s-1", cwd=None)
    back_to_sqlite(path, 9)
    turn = StoredTurn(
        name="coder",
        node="a",
        started_at=1000.0,
        ended_at=1001.0,
        duration=1.0,
        outcome="complete",
        cost_usd=0.5,
        usage=Usage(input_tokens=3),
        prompt="hello",
        answer="hi",
    )
    async with SQLiteStore(path) as store:
        await store.record_turn_with_history(turn, session_id=None, keep=10)
        assert list(await store.turn_history("coder", limit=10)) == [turn]
        record = await store.load("coder")
        assert record is not None and (record.session_id, record.turns) == ("s-1", 1)
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA user_version").fetchone() == (SQLITE_VERSION,)
    finally:
        conn.close()


async def test_a_version_10_file_gains_the_budgets_keeping_its_sessions(tmp_path: Path) -> None:
    # Version 10 is the schema with the turn history and no budgets.
    path = tmp_path / "sessions.sqlite3"
    async with SQLiteStore(path) as store:
        await store.checkpoint_session("coder", backend="claude", session_id="s-1", cwd=None)
    back_to_sqlite(path, 10)
    budget = StoredBudget(scope="runtime", key="k", usd=1.5, tokens=None)
    async with SQLiteStore(path) as store:
        await store.save_budgets("coder", (budget,))
        assert list(await store.budgets()) == [("coder", (budget,))]
        record = await store.load("coder")
        assert record is not None and record.session_id == "s-1"
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA user_version").fetchone() == (SQLITE_VERSION,)
    finally:
        conn.close()


async def test_a_failing_migration_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "sessions.sqlite3"
    async with SQLiteStore(path) as store:
        await store.checkpoint_session("coder", backend="claude", session_id="s-1", cwd="/r")
    current = len(sqlite_schema.MIGRATIONS)
    step = ("ALTER TABLE sessions ADD COLUMN note TEXT", "THIS IS NOT SQL")
    monkeypatch.setattr(sqlite_schema, "MIGRATIONS", (*sqlite_schema.MIGRATIONS, step))
    with pytest.raises(StoreError, match=str(path)):
        async with SQLiteStore(path):
            pass
    monkeypatch.undo()
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA user_version").fetchone() == (current,)
        columns = [row[1] for row in conn.execute("PRAGMA table_info(sessions)")]
        assert "note" not in columns
    finally:
        conn.close()
    async with SQLiteStore(path) as store:
        record = await store.load("coder")
        assert record is not None and record.session_id == "s-1"


async def test_a_newer_schema_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "sessions.sqlite3"
    async with SQLiteStore(path) as store:
        await store.checkpoint_session("coder", backend="claude", session_id="s-1", cwd=None)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    before = path.read_bytes()
    with pytest.raises(StoreError, match="schema version 99 is newer") as info:
        async with SQLiteStore(path):
            pass
    assert info.value.path == str(path)
    assert path.read_bytes() == before


async def test_another_applications_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (x)")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    with pytest.raises(StoreError, match="not an agentrt session store"):
        async with SQLiteStore(path):
            pass
    assert path.read_bytes() == before
    assert not await trio.Path(f"{path}-wal").exists()


async def test_a_garbage_file_is_refused_naming_it_and_not_reset(tmp_path: Path) -> None:
    path = tmp_path / "sessions.sqlite3"
    garbage = b"this is not a database\n" * 500
    path.write_bytes(garbage)
    with pytest.raises(StoreError) as info:
        async with SQLiteStore(path):
            pass
    assert info.value.path == str(path)
    assert str(path) in str(info.value)
    assert "not a database" in str(info.value)
    assert path.read_bytes() == garbage


async def test_a_corrupt_page_is_found_at_open(tmp_path: Path) -> None:
    path = tmp_path / "sessions.sqlite3"
    async with SQLiteStore(path) as store:
        for i in range(200):  # a few pages of rows
            await store.checkpoint_session(f"agent-{i}", backend="claude", session_id="s", cwd="/")
    assert not await trio.Path(
        f"{path}-wal"
    ).exists()  # the last close folded the WAL into the file
    data = bytearray(path.read_bytes())
    page = 4096
    assert len(data) >= 3 * page
    data[page + 100 : 2 * page] = b"\xa5" * (page - 100)  # scribble over page 2's cells
    path.write_bytes(bytes(data))
    with pytest.raises(StoreError, match=str(path)):
        async with SQLiteStore(path):
            pass
    assert path.read_bytes() == bytes(data)


async def test_a_directory_path_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "sessions.sqlite3"
    path.mkdir()
    with pytest.raises(StoreError, match="Is a directory") as info:
        async with SQLiteStore(path):
            pass
    assert info.value.path == str(path)


async def test_a_path_under_a_regular_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    path = tmp_path / "file" / "sessions.sqlite3"
    with pytest.raises(StoreError, match="is not a directory") as info:
        async with SQLiteStore(path):
            pass
    assert info.value.path == str(path)
    assert str(tmp_path / "file") in info.value.why


async def test_a_named_path_in_a_missing_directory_is_refused_and_nothing_made(
    tmp_path: Path,
) -> None:
    path = tmp_path / "no" / "such" / "sessions.sqlite3"
    with pytest.raises(StoreError, match="does not exist") as info:
        async with SQLiteStore(path):
            pass
    assert info.value.why.startswith(f"its directory {path.parent} does not exist")
    assert not (tmp_path / "no").exists()


async def test_the_default_location_gets_its_directories(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENTRT_STORE", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    async with SQLiteStore() as store:
        await store.checkpoint_session("a", backend="claude", session_id="s1", cwd=None)
    made = tmp_path / "state" / "agentrt"
    assert (made / "sessions.sqlite3").is_file()
    assert made.stat().st_mode & 0o777 == 0o700


@pytest.mark.parametrize("change", ["directory deleted", "file replaced"])
async def test_a_store_whose_file_went_away_refuses_writes_that_would_be_lost(
    tmp_path: Path, change: str
) -> None:
    directory = tmp_path / "state"
    directory.mkdir()
    path = directory / "sessions.sqlite3"
    async with SQLiteStore(path) as store:
        await store.checkpoint_session("a", backend="claude", session_id="s1", cwd=None)
        if change == "directory deleted":
            shutil.rmtree(directory)
        else:
            async with SQLiteStore(tmp_path / "other.sqlite3"):
                pass
            os.replace(tmp_path / "other.sqlite3", path)
        with pytest.raises(StoreError, match="deleted or replaced") as info:
            await store.checkpoint_session("a", backend="claude", session_id="s2", cwd=None)
        assert info.value.path == str(path)
        with pytest.raises(StoreError, match="deleted or replaced"):
            await store.record_turn(
                "a", stop_reason="complete", cost_usd=None, usage=None, session_id=None
            )


async def test_a_turn_whose_session_id_cannot_be_kept_fails_as_store_failed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    directory = tmp_path / "state"
    directory.mkdir()
    gate = Gate()
    backend = ScriptedBackend(
        [gate, SessionEvent(session_id="s-lost"), ResultEvent(text="answer")],
        reply("next", session_id="s-next"),
    )
    async with agentrt.open_runtime(store=SQLiteStore(directory / "sessions.sqlite3")) as rt:
        await rt.start_agent(agentrt.Agent, name="a", backend=backend)
        ref = await rt.tell("a", "hi")
        await gate.wait_reached()
        shutil.rmtree(directory)  # as by a cleanup job, mid-run
        gate.release()
        outcome = await rt.wait(ref)
        assert isinstance(outcome, agentrt.Failed)
        error = outcome.error
        assert isinstance(error, agentrt.TurnFailed)
        assert error.reason is StopReason.STORE_FAILED
        assert error.session_id == "s-lost"  # the caller still learns the id
        assert "could not keep session s-lost" in error.message
        assert "deleted or replaced" in error.message
        assert isinstance(error.__cause__, StoreError)
        # The store that keeps requests cannot accept this one: refused, nothing runs.
        with pytest.raises(StoreError) as again:
            await rt.ask("a", "again")
        assert "deleted or replaced" in str(again.value)
    logged = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert any(
        "could not keep session s-lost" in m and "StoreError" in m and "deleted or replaced" in m
        for m in logged
    ), logged


def _python(code: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code)]


def _drop_file_permission_override() -> None:
    """In a child about to exec: lose root's power to ignore file modes."""
    libc = ctypes.CDLL(None, use_errno=True)
    pr_capbset_drop, cap_dac_override, cap_dac_read_search = 24, 1, 2
    for cap in (cap_dac_override, cap_dac_read_search):
        if libc.prctl(pr_capbset_drop, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


async def test_an_unreadable_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "sessions.sqlite3"
    path.write_bytes(b"")
    path.chmod(0)
    code = """
        import sys, trio, agentrt
        async def main():
            try:
                async with agentrt.SQLiteStore(sys.argv[1]):
                    pass
            except agentrt.StoreError as exc:
                print(f"{exc.path}|{exc}")
        trio.run(main)
    """
    # root reads any file, so as root the child runs without that capability.
    as_root = os.geteuid() == 0
    result = await trio.run_process(
        [*_python(code), str(path)],
        capture_stdout=True,
        capture_stderr=True,
        preexec_fn=_drop_file_permission_override if as_root else None,
    )
    assert result.returncode == 0, result.stderr.decode()
    reported_path, message = result.stdout.decode().strip().split("|", 1)
    assert reported_path == str(path)
    assert "Permission denied" in message
    assert str(path) in message


async def test_a_checkpoint_survives_sigkill_of_the_writing_process(tmp_path: Path) -> None:
    path = tmp_path / "sessions.sqlite3"
    code = """
        import sys, trio, agentrt
        async def main():
            async with agentrt.SQLiteStore(sys.argv[1]) as store:
                await store.checkpoint_session(
                    "coder", backend="claude", session_id="s-durable", cwd="/repo")
                await store.set_live_process(
                    "coder", pgid=4242, pid=4243, start_time=99, runtime_id="rt-dead")
                await store.record_turn(
                    "coder", stop_reason="complete", cost_usd=0.75, usage=None,
                    session_id=None)
                sys.stdout.write("checkpointed\\n")
                sys.stdout.flush()
                await trio.sleep_forever()
        trio.run(main)
    """
    proc = await trio.lowlevel.open_process([*_python(code), str(path)], stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        with trio.fail_after(30):
            line = b""
            while not line.endswith(b"\n"):
                chunk = await proc.stdout.receive_some(64)
                assert chunk, "the child ended before checkpointing"
                line += chunk
        assert line == b"checkpointed\n"
        # The writer never closes its connection: no WAL checkpoint, no clean shutdown.
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        with trio.CancelScope(shield=True):
            await proc.wait()
            if proc.stdout is not None:
                await proc.stdout.aclose()
    assert proc.returncode == -signal.SIGKILL
    assert (await trio.Path(f"{path}-wal").stat()).st_size > 0
    async with SQLiteStore(path) as store:
        record = await store.load("coder")
    assert record is not None
    assert (record.session_id, record.cwd, record.turns, record.cost_usd) == (
        "s-durable",
        "/repo",
        1,
        0.75,
    )
    assert (record.live_pgid, record.live_pid, record.runtime_id) == (4242, 4243, "rt-dead")


async def test_two_stores_on_one_file_share_its_writes(tmp_path: Path) -> None:
    path = tmp_path / "sessions.sqlite3"
    async with SQLiteStore(path) as one, SQLiteStore(path) as two:
        await one.checkpoint_session("shared", backend="claude", session_id=None, cwd=None)

        async def turns(store: SQLiteStore, count: int) -> None:
            for _ in range(count):
                await store.record_turn(
                    "shared", stop_reason="complete", cost_usd=1.0, usage=None, session_id=None
                )

        async with trio.open_nursery() as nursery:
            for s in (one, two, one, two):
                nursery.start_soon(turns, s, 10)
        record = await two.load("shared")
        assert record is not None
        assert (record.turns, record.cost_usd) == (40, 40.0)


async def test_one_call_at_a_time_runs_on_the_connection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lock = threading.Lock()
    active = 0
    peak = 0
    calls = 0
    real_run_sync = trio.to_thread.run_sync

    async def counting_run_sync(fn: Callable[[], T], **kwargs: Any) -> T:
        def counted() -> T:
            nonlocal active, peak, calls
            with lock:
                active += 1
                calls += 1
                peak = max(peak, active)
            try:
                return fn()
            finally:
                with lock:
                    active -= 1

        return await real_run_sync(counted, **kwargs)

    monkeypatch.setattr(trio.to_thread, "run_sync", counting_run_sync)
    async with SQLiteStore(tmp_path / "sessions.sqlite3") as store:
        for i in range(100):
            await store.checkpoint_session(
                f"agent-{i}", backend="claude", session_id=None, cwd=None
            )
        async with trio.open_nursery() as nursery:
            for i in range(50):
                nursery.start_soon(store.list)
                nursery.start_soon(store.clear_live_process, f"agent-{i}")
    assert calls >= 1 + 100 + 100 + 1  # open, checkpoints, the concurrent calls, close
    assert peak == 1


def test_sqlite3_is_imported_only_when_a_sqlite_store_opens() -> None:
    # Memory a runtime on a MemoryStore never needs (how much: bench/README.md).
    probe = "import sys, agentrt\nagentrt.open_runtime, agentrt.MemoryStore\n"
    probe += "print('sqlite3' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.stdout.strip() == "False", done.stderr


async def test_a_version_12_file_gains_the_credentials_keeping_its_requests(
    tmp_path: Path,
) -> None:
    # Version 12 is the schema with the durable requests and no credentials' holds.
    path = tmp_path / "sessions.sqlite3"
    async with SQLiteStore(path) as store:
        await store.checkpoint_session("coder", backend="claude", session_id="s-1", cwd=None)
        await store.enqueue_request(
            "coder",
            id="r-1",
            prompt="hello",
            key=None,
            origin="tell",
            max_pending=10,
            max_pending_bytes=1000,
        )
    back_to_sqlite(path, 12)
    parked = StoredCredential(key="named:team", label="team", parked_until=2e9, park_reason="x")
    async with SQLiteStore(path) as store:
        assert list(await store.credentials()) == []
        await store.save_credential(parked)
        await store.use_credential("coder", "named:team")
        assert list(await store.credentials()) == [attrs.evolve(parked, agents=("coder",))]
        assert [r.id for r in await store.queued_requests("coder")] == ["r-1"]
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA user_version").fetchone() == (SQLITE_VERSION,)
    finally:
        conn.close()


async def test_a_version_11_file_gains_the_durable_requests_keeping_its_sessions(
    tmp_path: Path,
) -> None:
    # Version 11 is the schema with the budgets and no requests table.
    path = tmp_path / "sessions.sqlite3"
    async with SQLiteStore(path) as store:
        await store.checkpoint_session("coder", backend="claude", session_id="s-1", cwd=None)
    back_to_sqlite(path, 11)
    async with SQLiteStore(path) as store:
        accepted = await store.enqueue_request(
            "coder",
            id="r-1",
            prompt="hello",
            key="job-1",
            origin="tell",
            max_pending=10,
            max_pending_bytes=1000,
        )
        assert accepted == "r-1"
        assert [r.id for r in await store.queued_requests("coder")] == ["r-1"]
        record = await store.load("coder")
        assert record is not None and record.session_id == "s-1"
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA user_version").fetchone() == (SQLITE_VERSION,)
    finally:
        conn.close()


def _sqlite_schema(path: Path) -> dict[str, set[str]]:
    """Each table of the file at ``path``, with its columns and indexes."""
    conn = sqlite3.connect(path)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {
            table: {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}
            | {f"index {r[1]}" for r in conn.execute(f"PRAGMA index_list({table})")}
            for table in tables
        }
    finally:
        conn.close()


async def test_every_earlier_version_the_schema_steps_name_upgrades_to_a_new_files_schema(
    tmp_path: Path,
) -> None:
    # The upgrade tests take a file back to version N by the steps themselves
    # (schema_steps.back_to_sqlite): each version goes back to what its steps made, and
    # comes forward to what a new file gets.
    path = tmp_path / "sessions.sqlite3"
    async with SQLiteStore(path):
        pass
    new = _sqlite_schema(path)
    assert set(new) == schema_steps.tables(schema_steps.SQLITE_STEPS, SQLITE_VERSION)
    for version in range(1, SQLITE_VERSION):
        back_to_sqlite(path, version)
        assert set(_sqlite_schema(path)) == schema_steps.tables(schema_steps.SQLITE_STEPS, version)
        async with SQLiteStore(path):
            pass
        assert _sqlite_schema(path) == new, version


async def test_a_version_13_file_gains_the_schedules_keeping_its_requests(
    tmp_path: Path,
) -> None:
    # Version 13 is the schema with the credentials' holds and no schedules table.
    path = tmp_path / "sessions.sqlite3"
    async with SQLiteStore(path) as store:
        await store.enqueue_request(
            "coder",
            id="r-1",
            prompt="hello",
            key=None,
            origin="tell",
            max_pending=10,
            max_pending_bytes=1000,
        )
    back_to_sqlite(path, 13)
    async with open_runtime(store=SQLiteStore(path)) as rt:
        made = await rt.schedule("coder", "nightly", every=86400)
        assert [s.id for s in await rt.schedules("coder")] == [made.id]
    async with SQLiteStore(path) as store:
        assert [r.id for r in await store.queued_requests("coder")] == ["r-1"]
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA user_version").fetchone() == (SQLITE_VERSION,)
    finally:
        conn.close()


async def test_a_lease_renewal_goes_before_the_calls_waiting_for_the_connection(
    tmp_path: Path,
) -> None:
    """As on PostgreSQL (test_store_postgres.py): the renewal waits for the call in flight
    only, not for the writes queued before it. Here those writes wait for the file's write
    lock, which another connection holds."""
    path = tmp_path / "s.sqlite3"
    owner = LeaseOwner(node="n", pid=1, start_time=1, runtime_id="r")
    done: list[str] = []
    async with SQLiteStore(path) as store:
        await store.acquire_lease("coder", owner, ttl=600)

        async def write(index: int) -> None:
            await store.checkpoint_session(
                "coder", backend="claude", session_id=f"s-{index}", cwd=None
            )
            done.append(f"write {index}")

        async def renew() -> None:
            assert await store.renew_leases(ttl=600) == frozenset()
            done.append("renewal")

        locker = sqlite3.connect(path, isolation_level=None)
        try:
            locker.execute("BEGIN IMMEDIATE")
            async with trio.open_nursery() as nursery:
                for index in range(4):
                    nursery.start_soon(write, index)
                    await trio.testing.wait_all_tasks_blocked()
                nursery.start_soon(renew)
                await trio.testing.wait_all_tasks_blocked()
                locker.execute("COMMIT")  # the lock goes: the call in flight ends, then the rest
        finally:
            locker.close()
    assert done == ["write 0", "renewal", "write 1", "write 2", "write 3"]


async def test_a_version_14_file_gains_the_agents_holds_keeping_its_credentials(
    tmp_path: Path,
) -> None:
    # Version 14 is the schema whose agent_credentials rows say nothing of the agents'
    # policies: a credential's halt and park hold every agent stored as using it.
    path = tmp_path / "sessions.sqlite3"
    halted = StoredCredential(key="named:team", label="team", halt_reason="x", halted_since=1.0)
    async with SQLiteStore(path) as store:
        await store.save_credential(halted)
        await store.use_credential("a", halted.key)
    back_to_sqlite(path, 14)
    async with SQLiteStore(path) as store:
        assert list(await store.credentials()) == [attrs.evolve(halted, agents=("a",))]
        await store.use_credential("b", halted.key, halts=False)
        [stored] = await store.credentials()
        assert (stored.agents, stored.ignore_halt, stored.ignore_park) == (("a", "b"), ("b",), ())
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA user_version").fetchone() == (SQLITE_VERSION,)
    finally:
        conn.close()
