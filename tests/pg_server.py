"""A throwaway PostgreSQL server for the tests, from the machine's installed binaries.

The binaries are found in ``$AGENTRT_PG_BIN``, by ``pg_config --bindir``, under
``/usr/lib/postgresql/<version>/bin`` (Debian's layout, newest first) or on PATH; none
found skips the PostgreSQL tier with a message saying so. PostgreSQL refuses to run as
root, so as root the cluster belongs to the ``postgres`` user (Debian's package makes it)
and the server runs as that user. It listens on a unix socket in its own directory only
(no TCP port to collide with), with ``fsync=off``: nothing here must survive a crash of
the machine. The server is a child of the test process, in a session of its own; the
leftover-process check (conftest.py) knows its pids.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

# The pids of running servers (and so their backends): not leftovers of a test.
SERVER_PIDS: set[int] = set()


def find_binaries() -> Path | None:
    override = os.environ.get("AGENTRT_PG_BIN")
    candidates = [Path(override)] if override else []
    if pg_config := shutil.which("pg_config"):
        with contextlib.suppress(OSError, subprocess.CalledProcessError):
            out = subprocess.run([pg_config, "--bindir"], capture_output=True, check=True)
            candidates.append(Path(out.stdout.decode().strip()))
    debian = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version, reverse=True)
    candidates += [Path(path) for path in debian]
    if postgres := shutil.which("postgres"):
        candidates.append(Path(postgres).resolve().parent)
    for folder in candidates:
        if (folder / "postgres").is_file() and (folder / "initdb").is_file():
            return folder
    return None


def _version(path: str) -> int:
    part = Path(path).parent.name
    return int(part) if part.isdigit() else 0


class Server:
    """One cluster in a temporary directory; `start`, `stop`, `restart`."""

    def __init__(self, binaries: Path) -> None:
        self.binaries = binaries
        self.user = "postgres" if os.geteuid() == 0 else None
        self.root = Path(tempfile.mkdtemp(prefix="agentrt-pg-"))
        self.data = self.root / "data"
        self.socket_dir = self.root / "run"
        self.socket_dir.mkdir()
        if self.user is not None:
            entry = pwd.getpwnam(self.user)
            for path in (self.root, self.socket_dir):
                os.chown(path, entry.pw_uid, entry.pw_gid)
        self.process: subprocess.Popen[bytes] | None = None
        self._run(["initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "-E", "UTF8"])

    def _run(self, argv: list[str]) -> None:
        argv = [str(self.binaries / argv[0]), *argv[1:], "--no-sync"]
        result = subprocess.run(argv, user=self.user, capture_output=True, cwd=self.root)
        if result.returncode != 0:
            raise RuntimeError(f"{argv[0]} failed: {result.stderr.decode(errors='replace')}")

    def dsn(self, dbname: str = "postgres") -> str:
        return f"host={self.socket_dir} user=postgres dbname={dbname}"

    def start(self) -> None:
        argv = [
            str(self.binaries / "postgres"),
            "-D",
            str(self.data),
            "-k",
            str(self.socket_dir),
            "-c",
            "listen_addresses=",
            "-c",
            "fsync=off",
            "-c",
            "full_page_writes=off",
            "-c",
            "max_connections=200",
        ]
        log = open(self.root / "server.log", "ab")  # noqa: SIM115 (the server's for its life)
        self.process = subprocess.Popen(
            argv,
            user=self.user,
            stdout=log,
            stderr=log,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            cwd=self.root,
        )
        log.close()
        SERVER_PIDS.add(self.process.pid)
        self._wait_ready()

    def _wait_ready(self) -> None:
        import psycopg

        deadline = time.monotonic() + 60
        while True:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"postgres exited: {(self.root / 'server.log').read_text()}")
            try:
                psycopg.connect(self.dsn(), connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        process.send_signal(signal.SIGINT)  # fast shutdown: clients are disconnected
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        SERVER_PIDS.discard(process.pid)

    def restart(self) -> None:
        self.stop()
        self.start()

    def create_database(self) -> str:
        name = f"t_{uuid.uuid4().hex[:12]}"
        self._execute(f"CREATE DATABASE {name}")
        return self.dsn(name)

    def drop_database(self, dsn: str) -> None:
        """Drop a database `create_database` made, cutting off whoever is still connected:
        a session that kept every test's copy of the template would write, and at its end
        remove, gigabytes."""
        self._execute(f"DROP DATABASE {dsn.rpartition('dbname=')[2]} WITH (FORCE)")

    def _execute(self, statement: str) -> None:
        import psycopg

        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(statement)

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)


@contextlib.contextmanager
def running_server() -> Iterator[Server]:
    binaries = find_binaries()
    if binaries is None:
        pytest.skip(
            "no PostgreSQL server binaries found (postgres and initdb: set AGENTRT_PG_BIN, "
            "or install Debian's postgresql package); the PostgreSQL tier is skipped"
        )
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.skip("psycopg is not installed (pip install -e '.[postgres]')")
    server = Server(binaries)
    try:
        server.start()
        yield server
    finally:
        server.remove()
