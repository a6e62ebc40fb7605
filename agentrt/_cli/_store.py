"""The store a command's ``--store`` names: PostgreSQL for a DSN, else an SQLite file."""

from __future__ import annotations

import argparse
from pathlib import Path

from .._stores._postgres import PostgresStore
from .._stores._protocols import SessionStore
from .._stores._sqlite import SQLiteStore, default_store_path
from ._args import is_dsn


def store_path(args: argparse.Namespace) -> Path:
    """The SQLite file ``--store`` names, else the default one."""
    return Path(args.store).expanduser() if args.store else default_store_path()


def cli_store(args: argparse.Namespace) -> SessionStore:
    """The store ``--store`` names (not opened): PostgreSQL for a DSN, else SQLite."""
    return PostgresStore(args.store) if is_dsn(args.store) else SQLiteStore(store_path(args))
