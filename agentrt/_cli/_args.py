"""The arguments the ``agentrt`` commands share, known before any command runs: an agent's
(``ask``, ``chat``) and the store's. Building the parser imports nothing a command needs."""

from __future__ import annotations

import argparse
import json
from typing import Any

from .._backends import backend_names

DEFAULT_BACKEND = "claude"


def parse_option(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` from the command line; VALUE is JSON when it parses as JSON (numbers,
    lists, true/false, objects), else the string itself."""
    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        value: Any = json.loads(raw)
    except json.JSONDecodeError:
        value = raw
    return key, value


def add_agent_arguments(parser: argparse.ArgumentParser) -> None:
    """The options ``ask`` and ``chat`` share."""
    parser.add_argument("name", help="the agent's name: its session is stored under it")
    parser.add_argument(
        "--backend",
        help=f"one of {', '.join(backend_names())} (default: the stored one, else "
        f"{DEFAULT_BACKEND})",
    )
    parser.add_argument(
        "--cwd", help="the agent's working directory (default: the stored one, else here)"
    )
    parser.add_argument("--model", help="the model the CLI should use")
    parser.add_argument(
        "--new", action="store_true", help="start a new session instead of resuming the stored one"
    )
    parser.add_argument(
        "-o",
        "--option",
        dest="options",
        action="append",
        type=parse_option,
        default=[],
        metavar="KEY=VALUE",
        help="any start_agent option (runtime or backend), e.g. -o watchdog=900 "
        "-o 'allowed_tools=[\"Read\"]'",
    )


def is_dsn(value: str | None) -> bool:
    """Whether ``--store`` names a PostgreSQL database rather than an SQLite file."""
    return value is not None and (
        value.startswith(("postgresql://", "postgres://")) or "host=" in value
    )


# What to check when a database named by ``--store`` cannot be used.
DSN_FIX = (
    "check the DSN's host, port, dbname and user, and that the server accepts connections "
    "from here (the password belongs in PGPASSWORD or ~/.pgpass, not in the DSN)"
)
