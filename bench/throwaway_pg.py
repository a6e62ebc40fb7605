"""A throwaway loopback PostgreSQL for the benchmarks (tests/pg_server.py), as a DSN."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@contextmanager
def throwaway_dsn() -> Iterator[tuple[str, int]]:
    """Yield a fresh database's DSN and the server's postmaster pid; remove it all after."""
    sys.path.insert(0, str(REPO / "tests"))
    import pg_server  # type: ignore[import-not-found]  # tests/, not a package

    binaries = pg_server.find_binaries()
    if binaries is None:
        sys.exit("no PostgreSQL binaries found (set AGENTRT_PG_BIN, or pass --dsn)")
    server = pg_server.Server(binaries)
    try:
        server.start()
        assert server.process is not None
        yield server.create_database(), server.process.pid
    finally:
        server.remove()
