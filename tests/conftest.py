"""After every test, no process this test session started may be left running, nor a cgroup
its runtimes made for their turns; and no test writes a session store into the user's home.
Also the fixtures several tiers share: the pinned claude binary, a process marker, a clean
``CLAUDE_CLI``, a throwaway PostgreSQL, the fake Anthropic API for the pinned claude."""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pg_server
import pytest
import trio
import worker_cgroup
from hypothesis import HealthCheck, settings
from proc_helpers import ProcInfo, descendants, kill_marked, proc_info, snapshot, turn_processes
from realcli._claude import MARKER_VAR, claude_binary, claude_version, npm_available
from trio.testing import MockClock

from agentrt import MemoryStore, SessionStore, _runtime
from agentrt._driver import _cgroup
from agentrt.backend import AMBIENT_AUTH_VARS
from agentrt.testing import FakeAnthropic, open_fake_anthropic

REAL_DEFAULT_STORE = _runtime._default_store

# Property tests must not depend on the machine's speed: no per-example deadline, and no
# failing health check for examples a loaded machine generates slowly.
settings.register_profile("suite", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("suite")


def pytest_configure(config: pytest.Config) -> None:
    # A suite started as a background job (nohup, `&`, some CI runners) starts with SIGINT
    # ignored, and every program a test starts would inherit that: the tests that press
    # Ctrl+C on a program mean a terminal's, which Python turns into KeyboardInterrupt.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    # The process that runs tests gets a cgroup of its own (tests/worker_cgroup.py); a
    # parallel run's controller runs none, and its workers each make their own.
    if not getattr(config.option, "numprocesses", None) or hasattr(config, "workerinput"):
        config.stash[_LEAVE_CGROUP] = worker_cgroup.enter()


def pytest_unconfigure(config: pytest.Config) -> None:
    if leave := config.stash.get(_LEAVE_CGROUP, None):
        leave()


_LEAVE_CGROUP = pytest.StashKey[Callable[[], None] | None]()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Long tests first: a parallel run hands its workers tests in collection order (after
    # the xdist groups), so a minute-long test collected last would run alone at the end
    # while the other workers sit idle. The sort is stable: the rest keep their order.
    items.sort(key=lambda item: item.get_closest_marker("long") is None)


@pytest.fixture(autouse=True)
def private_store(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``open_runtime()`` without a store gets a MemoryStore here: the SQLite default waits
    on a worker thread, which lets an autojumping MockClock run ahead of the test. Anything
    that still asks for the default path (child processes, `default_store` below) gets one
    in the test's own directory."""
    monkeypatch.setenv("AGENTRT_STORE", str(tmp_path / "agentrt-store" / "sessions.sqlite3"))
    monkeypatch.setattr(_runtime, "_default_store", MemoryStore)


@pytest.fixture
def default_store(monkeypatch: pytest.MonkeyPatch) -> None:
    """Give ``open_runtime()`` its real default (SQLite at ``$AGENTRT_STORE``) back."""

    def real() -> SessionStore:
        return REAL_DEFAULT_STORE()

    monkeypatch.setattr(_runtime, "_default_store", real)


def leftover_processes() -> list[ProcInfo]:
    """Running processes we started: descendants of this process, and anything carrying a
    turn marker issued by it (a setsid'd orphan reparented away from us)."""
    procs = snapshot()
    ours = {p.pid for p in turn_processes(f"{os.getpid()}.")}
    ours |= descendants(procs, [os.getpid(), *ours])
    servers = set(pg_server.SERVER_PIDS)  # the session's PostgreSQL, kept between tests
    ours -= servers | descendants(procs, servers)
    return [info for pid in sorted(ours) if (info := proc_info(pid)) is not None]


def leftover_cgroups() -> list[Path]:
    """The cgroups runtimes of this process made for their turns (named for our pid)."""
    try:
        parent, _ = _cgroup.own_cgroup()
    except _cgroup.Unavailable:
        return []
    return sorted(Path(parent).glob(f"agentrt-{os.getpid()}-*"))


def _exiting(left: list[ProcInfo]) -> bool:
    """Whether all of ``left`` are exiting: a process with no command line has released its
    memory on its way out (a fork not yet exec'd still shows its parent's), and shows as
    running until it is a zombie."""
    return all(not p.cmdline for p in left)


@pytest.fixture(autouse=True)
def no_leftover_processes() -> Iterator[None]:
    yield
    left = leftover_processes()
    deadline = time.monotonic() + 5
    while left and _exiting(left) and time.monotonic() < deadline:
        time.sleep(0.01)
        left = leftover_processes()
    cgroups = leftover_cgroups()
    for path in cgroups:  # so that one leak does not fail every later test
        trio.run(_cgroup.remove_tree, str(path))
    if left:
        described = [f"{p.pid} ({p.state}) {p.cmdline[:200]}" for p in left]
        for p in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p.pid, signal.SIGKILL)
        pytest.fail("processes left running:\n" + "\n".join(described))
    if cgroups:
        pytest.fail("turn cgroups left behind:\n" + "\n".join(map(str, cgroups)))


@pytest.fixture
def autojump_clock() -> MockClock:
    """The clock of tier-2 tests (pytest-trio runs a test on a clock fixture it is given):
    time moves on only when every task is blocked, at once to the next deadline."""
    return MockClock(autojump_threshold=0)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[pg_server.Server]:
    """A throwaway PostgreSQL for the session (tests/pg_server.py); skips where none is
    installed."""
    with pg_server.running_server() as server:
        yield server


@pytest.fixture
def postgres_dsn(postgres_server: pg_server.Server) -> Iterator[str]:
    """The DSN of a new, empty database on the session's PostgreSQL, dropped after the test."""
    dsn = postgres_server.create_database()
    yield dsn
    # A test that stops the shared server (an outage) and fails before it starts it again
    # must not take every later PostgreSQL test of this worker down with it.
    if postgres_server.process is None:
        postgres_server.start()
    postgres_server.drop_database(dsn)


@pytest.fixture
def no_claude_cli(monkeypatch: pytest.MonkeyPatch) -> None:
    """No ``CLAUDE_CLI`` from the environment: the tests pin the binary the backend picks."""
    monkeypatch.delenv("CLAUDE_CLI", raising=False)


@pytest.fixture(scope="session")
def claude_bin() -> Path:
    """The pinned claude binary (`make claude-cli`); a skip only when npm is absent."""
    version = claude_version()
    binary = claude_binary()
    if binary.exists():
        return binary
    if not npm_available():
        pytest.skip(f"npm not found, so claude {version} is not installed")
    pytest.fail(f"claude {version} is not installed at {binary}: run `make claude-cli`")


@pytest.fixture
async def process_marker() -> AsyncIterator[str]:
    """A value for AGENTRT_TEST_MARKER; after the test, no process carrying it may be alive."""
    marker = uuid.uuid4().hex
    yield marker
    leftovers = await kill_marked(MARKER_VAR, marker)
    assert not leftovers, f"processes left behind (now killed): {leftovers}"


@pytest.fixture
def pinned_claude() -> Path:
    """The pinned claude binary; a skip only when npm is absent."""
    binary = claude_binary()
    if not binary.exists():
        if not npm_available():
            pytest.skip("npm not found, so the pinned claude is not installed")
        pytest.fail(f"the pinned claude is not installed at {binary}: run `make claude-cli`")
    return binary


@pytest.fixture
async def fake_claude(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, pinned_claude: Path
) -> AsyncIterator[FakeAnthropic]:
    """The fake Anthropic API, with this test's environment pointing the pinned claude at
    it (the environment agents inherit), and a store of the test's own."""
    home = tmp_path / "home"
    (home / "tmp").mkdir(parents=True)
    for name in AMBIENT_AUTH_VARS | {"CLAUDE_CONFIG_DIR", "CLAUDECODE"}:
        monkeypatch.delenv(name, raising=False)
    async with open_fake_anthropic() as api:
        settings = {
            **api.claude_env(str(home)),
            "CLAUDE_CLI": str(pinned_claude),
            "TMPDIR": str(home / "tmp"),
            "AGENTRT_STORE": str(tmp_path / "sessions.sqlite3"),
        }
        for name, value in settings.items():
            monkeypatch.setenv(name, value)
        yield api
