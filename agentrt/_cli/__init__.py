"""The ``agentrt`` command: argument parsing, dispatch, and how failures are reported.

Exit codes: 0 success (``doctor``: healthy), 1 failure (a failed turn, an unhealthy set-up,
any error), 2 a usage error, 130 interrupted by Ctrl+C. An error is one line saying what
went wrong and how to fix it (with ``--json`` also a JSON error object on stdout); a usage
error shows the usage of the subcommand it was made on; ``--debug`` adds the traceback and
the runtime's debug log.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import traceback
from collections.abc import Awaitable, Callable, Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, NoReturn

from .._backends import backend_names
from .._errors import (
    AgentRTError,
    AgentStopped,
    BackendNotFound,
    CliNotFound,
    InvalidOptions,
    SessionMismatch,
    StoreError,
    TurnFailed,
)
from ._args import DSN_FIX, add_agent_arguments, is_dsn
from ._fixes import cli_not_found, turn_failed
from ._render import CliError, Output

Command = Callable[[argparse.Namespace, Output], Awaitable[int]]


# Each command's module is imported when that command runs: the parser (and `--help`) needs
# none of them, and `status` needs no runtime.
async def _run_ask(args: argparse.Namespace, out: Output) -> int:
    from ._agent import run_ask

    return await run_ask(args, out)


async def _run_demo(args: argparse.Namespace, out: Output) -> int:
    from ._demo import run_demo

    return await run_demo(args, out)


async def _run_doctor(args: argparse.Namespace, out: Output) -> int:
    from ._doctor import run_doctor

    return await run_doctor(args, out)


async def _run_chat(args: argparse.Namespace, out: Output) -> int:
    from ._chat import run_chat

    return await run_chat(args, out)


async def _run_console(args: argparse.Namespace, out: Output) -> int:
    from ._console import run_console

    return await run_console(args, out)


async def _run_status(args: argparse.Namespace, out: Output) -> int:
    from ._sessions import run_status

    return await run_status(args, out)


async def _run_sessions(args: argparse.Namespace, out: Output) -> int:
    from ._sessions import run_sessions

    return await run_sessions(args, out)


async def _run_unhalt(args: argparse.Namespace, out: Output) -> int:
    from ._unhalt import run_unhalt

    return await run_unhalt(args, out)


async def _run_workspaces(args: argparse.Namespace, out: Output) -> int:
    from ._workspaces import run_workspaces

    return await run_workspaces(args, out)


def _agentrt_version() -> str:
    try:
        return version("agentrt")
    except PackageNotFoundError:
        return "unknown"


class UsageError(Exception):
    """Bad arguments, with the parser of the (sub)command they were given to."""

    def __init__(self, parser: argparse.ArgumentParser, message: str) -> None:
        self.parser = parser
        self.message = message
        super().__init__(message)

    def report(self, *, json_mode: bool) -> int:
        """argparse's own report (that command's usage and the message) on stderr, and
        with ``--json`` a JSON error object on stdout; the exit code, 2."""
        self.parser.print_usage(sys.stderr)
        print(f"{self.parser.prog}: error: {self.message}", file=sys.stderr, flush=True)
        if json_mode:
            fix = f"`{self.parser.prog} --help` lists its arguments"
            Output(json_mode=True).data(CliError(self.message, fix, code=2).data())
        return 2


class _Parser(argparse.ArgumentParser):
    """Raises `UsageError` instead of exiting, and records on the namespace the innermost
    (sub)command parser, so arguments left over are reported with that command's usage."""

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extra = super().parse_known_args(args, namespace)
        if not hasattr(parsed, "usage_of"):  # a subcommand's parser finished first
            parsed.usage_of = self
        return parsed, extra

    def error(self, message: str) -> NoReturn:
        raise UsageError(self, message)


def _json_parser(default: Any) -> _Parser:
    parser = _Parser(add_help=False)
    parser.add_argument("--json", action="store_true", default=default, help="print JSON")
    return parser


def _store_parser(default: Any) -> _Parser:
    parser = _Parser(add_help=False)
    parser.add_argument(
        "--store",
        metavar="PATH",
        default=default,
        help="the session store: an SQLite file, or a PostgreSQL DSN ('host=...' or "
        "'postgresql://...') (default: $AGENTRT_STORE, else "
        "~/.local/state/agentrt/sessions.sqlite3)",
    )
    return parser


def build_parser() -> _Parser:
    """The parser of every subcommand."""
    common = _Parser(add_help=False)
    # SUPPRESS: a subcommand's default must not undo `agentrt --debug <command>`.
    common.add_argument(
        "--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks and logs"
    )
    with_json = _json_parser(False)
    with_store = _store_parser(None)
    # The actions of `sessions` take the same options; SUPPRESS keeps `sessions --json list`.
    nested = [common, _json_parser(argparse.SUPPRESS), _store_parser(argparse.SUPPRESS)]

    parser = _Parser(
        prog="agentrt",
        description="Supervised coding-CLI agents: demo, health check, chat, one-shot asks, "
        "stored sessions.",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks and logs")
    parser.add_argument("--version", action="version", version=f"agentrt {_agentrt_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = commands.add_parser(
        "demo",
        parents=[common, with_json],
        help="several supervised agents at work, on a fake model API (no credentials)",
        description="Run agents on the real process path against agentrt's fake model API: "
        "queued work, a watchdog, a crash and a resumed session, then a summary.",
    )
    installed = backend_names()
    demo.add_argument(
        "--backend",
        choices=installed,
        help="use this backend's logged-in CLI and a real model instead of the fake API "
        "(costs tokens)",
    )
    demo.add_argument(
        "--fake-cli",
        action="store_true",
        help="use the bundled fake CLI even when there is a claude ($CLAUDE_CLI, or the "
        "pinned one of a checkout)",
    )
    demo.add_argument("--quick", action="store_true", help="less work, shorter bounds")
    demo.add_argument(
        "--console",
        action="store_true",
        help="watch the agents in the operator console (its URL is printed and opened); "
        "it stays until Ctrl+C",
    )
    demo.add_argument(
        "--store",
        metavar="PATH",
        help="keep the demo's sessions in this store (default: a temporary one)",
    )
    demo.set_defaults(run=_run_demo)

    doctor = commands.add_parser(
        "doctor",
        parents=[common, with_json, with_store],
        help="check CLIs, credentials, the store and process limits",
        description="Check that agents can run here. Exit 0 when healthy, 1 otherwise; every "
        "problem is printed with its fix. Secret values are never printed.",
    )
    doctor.add_argument(
        "--backend", choices=installed, help="check this backend only (default: all)"
    )
    doctor.add_argument("--smoke", action="store_true", help="also run one real turn")
    doctor.set_defaults(run=_run_doctor)

    chat = commands.add_parser(
        "chat",
        parents=[common, with_store],
        help="talk to one agent interactively; its session is kept for next time",
        description="Interactive chat with one named agent. Ctrl+C interrupts the running "
        "turn; at the prompt, Ctrl+C twice or Ctrl+D leaves.",
    )
    add_agent_arguments(chat)
    chat.set_defaults(run=_run_chat)

    ask = commands.add_parser(
        "ask",
        parents=[common, with_json, with_store],
        help="send one prompt to a named agent and print the answer",
    )
    add_agent_arguments(ask)
    ask.add_argument("prompt", help="the prompt; - reads it from stdin")
    ask.set_defaults(run=_run_ask)

    sessions = commands.add_parser(
        "sessions",
        parents=[common, with_json, with_store],
        help="list, show or forget stored sessions",
    )
    actions = sessions.add_subparsers(dest="action", metavar="ACTION")
    actions.add_parser("list", parents=nested, help="every stored session")
    for action, text in (("show", "one session in full"), ("forget", "delete a session's row")):
        sub = actions.add_parser(action, parents=nested, help=text)
        sub.add_argument("session_name", metavar="NAME")
    sessions.set_defaults(run=_run_sessions)
    actions.add_parser("status", parents=nested, help="every agent's state and owner")

    status = commands.add_parser(
        "status",
        parents=[common, with_json, with_store],
        help="every agent's state and owner (node, pid), for all runtimes sharing the store",
    )
    status.set_defaults(run=_run_status)

    unhalt = commands.add_parser(
        "unhalt",
        parents=[common, with_json, with_store],
        help="let the agents an expired login halted go on, once it works again",
        description="Clear the halt of a credential whose login expired, in the store: the "
        "program that owns its agents lets them go on without a restart, and their next turn "
        "tries the login. Exit 1 when the credential or agent named is not halted.",
    )
    which = unhalt.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "credential",
        nargs="?",
        metavar="CREDENTIAL",
        help="the credential as `agentrt doctor` and `agentrt status --json` name it",
    )
    which.add_argument("--agent", metavar="NAME", help="the credential this agent uses")
    which.add_argument("--all", action="store_true", help="every halted credential")
    unhalt.set_defaults(run=_run_unhalt)

    workspaces = commands.add_parser(
        "workspaces",
        parents=[common, with_json, with_store],
        help="list, remove or prune the agents' git worktrees",
    )
    spaces = workspaces.add_subparsers(dest="action", metavar="ACTION")
    spaces.add_parser("list", parents=nested, help="every stored workspace, running or left")
    remove = spaces.add_parser(
        "remove", parents=nested, help="remove a stopped agent's worktree (its branch stays)"
    )
    remove.add_argument("workspace_name", metavar="NAME")
    remove.add_argument("--force", action="store_true", help="drop uncommitted changes too")
    prune = spaces.add_parser(
        "prune", parents=nested, help="forget the workspaces whose worktree is gone"
    )
    prune.add_argument("--node", help="the node whose workspaces to prune (default: this host)")
    workspaces.set_defaults(run=_run_workspaces)

    console = commands.add_parser(
        "console",
        parents=[common, with_json, with_store],
        help="the operator console: every agent of the store in a web page",
        description="Serve the console (fleet, agents, actions) over the store until Ctrl+C. "
        "It binds loopback by default and prints a URL carrying a random token.",
    )
    console.add_argument(
        "--bind",
        metavar="HOST:PORT",
        default="127.0.0.1:8765",
        help="where to listen (default: 127.0.0.1:8765; port 0 picks a free one)",
    )
    console.add_argument(
        "--no-token",
        action="store_true",
        help="serve without a token (refused beyond loopback)",
    )
    console.add_argument("--node", help="the console runtime's node name (default: the host name)")
    console.set_defaults(run=_run_console)
    return parser


# The options ask and chat take as arguments of their own rather than as -o KEY=VALUE.
_GIVEN_AS = {
    "name": "the NAME argument",
    "cwd": "--cwd",
    "backend": "--backend",
    "model": "--model",
}


def _leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in _leaves(inner)]
    return [error]


def describe(error: BaseException, store: str | None = None) -> CliError | None:
    """The one-line report of a known failure (``store``: the ``--store`` given); None for
    a bug."""
    if isinstance(error, CliError):
        return error
    if isinstance(error, TurnFailed):
        return turn_failed(None, error)
    if isinstance(error, CliNotFound):
        return cli_not_found(error)
    if isinstance(error, BackendNotFound):
        return CliError(str(error), f"pass --backend with one of: {', '.join(error.known)}")
    if isinstance(error, InvalidOptions):
        given = _GIVEN_AS.get(error.key, f"the -o {error.key}=VALUE option")
        return CliError(str(error), f"check {given} (docs/reference/options.md)")
    if isinstance(error, StoreError):
        if is_dsn(store):
            return CliError(str(error), DSN_FIX)
        parent = Path(error.path).parent
        if not parent.is_dir():
            return CliError(
                str(error), f"create {parent} first, or name a file in an existing directory"
            )
        return CliError(
            str(error), "move that file aside, or use another store with --store or AGENTRT_STORE"
        )
    if isinstance(error, SessionMismatch):
        return CliError(
            str(error),
            "pass --cwd with the stored directory (`agentrt sessions show NAME`), or --new",
        )
    if isinstance(error, AgentStopped):
        return CliError(str(error), "rerun with --debug to see why it stopped")
    if isinstance(error, AgentRTError):
        return CliError(str(error), "rerun with --debug for details")
    return None


def report(error: BaseException, out: Output, *, debug: bool, store: str | None = None) -> int:
    """Print ``error`` as the command's last word (``store``: the ``--store`` given);
    return the exit code."""
    leaves = _leaves(error)
    if any(isinstance(leaf, KeyboardInterrupt) for leaf in leaves):
        return out.interrupted()
    known = [d for leaf in leaves if (d := describe(leaf, store)) is not None]
    if debug or not known:
        traceback.print_exception(error, file=sys.stderr)
    if known:
        out.error(known[0])
        return known[0].code
    out.error(
        CliError(
            f"unexpected error: {type(leaves[0]).__name__}: {leaves[0]}",
            "this is a bug in agentrt; please report it with the traceback above",
        )
    )
    return 1


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``agentrt`` command; returns its exit code."""
    given = sys.argv[1:] if argv is None else list(argv)
    try:
        args, extra = build_parser().parse_known_args(given)
        if extra:
            args.usage_of.error(f"unrecognized arguments: {' '.join(extra)}")
    except UsageError as error:
        return error.report(json_mode="--json" in given)
    debug: bool = getattr(args, "debug", False)
    logging.basicConfig(
        level=logging.DEBUG if debug else logging.WARNING,
        format="%(name)s: %(levelname)s: %(message)s",
        stream=sys.stderr,
    )
    out = Output(json_mode=getattr(args, "json", False))
    run: Command = args.run
    try:
        import trio  # here, not at the top: parsing (and so `--help`) needs no trio

        # The launcher leaves Ctrl+C at its default action while it imports; trio turns it
        # into KeyboardInterrupt (see report) only when Python's own handler is in place.
        if signal.getsignal(signal.SIGINT) == signal.SIG_DFL:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        result: Any = trio.run(run, args, out)
    except BaseException as error:
        return report(error, out, debug=debug, store=getattr(args, "store", None))
    return int(result)
