"""``agentrt demo``: supervised agents at work, shown live, on a machine with no credentials.

Five agents share one runtime with a SQLite store and a process limit, on the real process
path. By default the model is agentrt's fake Anthropic API and the CLI ``$CLAUDE_CLI``,
else the pinned ``claude`` binary of a checkout (``make claude-cli``), else a bundled fake
CLI; ``--backend NAME`` (any installed backend) uses that backend's logged-in CLI and a
real model instead, with the options its `BackendInfo` declares. The story:

- workers w1..wN take the jobs queued in their mailboxes, a few CLIs at a time;
- ``sleepy`` gets a prompt the model never answers: its watchdog ends the turn; sleepy is
  started again without that watchdog, and its next job continues the same session;
- ``fragile`` notes a number, then its CLI is SIGKILLed mid-turn; the agent lets it crash,
  its supervisor starts a new instance, which continues its session and recalls
  the number.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import tempfile
import time
import webbrowser
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import AsyncExitStack, contextmanager
from pathlib import Path
from typing import Any

import attrs
import trio

from .._agent import Agent
from .._backends import backend_info, resolve_backend
from .._console._serve import open_console
from .._driver import _proctree
from .._errors import AgentNotFound, AgentRTError, TurnFailed
from .._events import Event, Response, StopReason, TextEvent, ToolUseEvent
from .._pinned import pinned_claude
from .._requests import Completed, Failed, Ref
from .._runtime import Runtime, open_runtime
from .._stores._sqlite import SQLiteStore
from ..testing import open_fake_anthropic
from ._demo_board import Board, _live_view, _print_summary, _summary_rows
from ._demo_model import (
    HANG_PROMPT,
    MIGRATE_PROMPT,
    RECALL_PROMPT,
    REMEMBER_PROMPT,
    FakeClaude,
    anthropic_script,
    job_prompt,
)
from ._render import CliError, Output, short

# How long the demo waits for a supervisor to bring a crashed agent back.
_RESTART_BOUND = 10.0
# What the demo checks, in story order; a check whose step never ran stays failed.
CHECKS = (
    "queued work done",
    "watchdog fired",
    "next turn after the watchdog resumed",
    "CLI killed mid-turn",
    "restarted",
    "resumed the same session",
    "remembered",
    "no process left behind",
)


@attrs.frozen
class Plan:
    """How much the demo does; ``--quick`` halves it."""

    workers: int
    jobs_each: int
    tool_seconds: float
    watchdog: float
    max_processes: int

    @classmethod
    def make(cls, *, quick: bool, real: bool) -> Plan:
        # sleepy's watchdog bounds only the turn that hangs (its next turn runs on an agent
        # started again without it), but that turn must still get its session id from the
        # CLI first: several times the CLI's start-up on a busy machine.
        if real:  # a real model takes a minute over the essay
            workers = 2 if quick else 3
            return cls(workers, jobs_each=2, tool_seconds=0, watchdog=12.0, max_processes=3)
        if quick:
            return cls(workers=2, jobs_each=2, tool_seconds=0.1, watchdog=5.0, max_processes=3)
        return cls(workers=3, jobs_each=3, tool_seconds=0.5, watchdog=6.0, max_processes=4)


class DemoAgent(Agent):
    """Reports each turn to the board; everything else is the default behaviour."""

    board: Board
    label: str

    def init_agent(self, **options: Any) -> Mapping[str, Any]:
        # The demo's own keywords; the rest are the backend's options.
        self.board, self.label = options.pop("board"), options.pop("label")
        return options

    def pre_turn(self, prompt: str) -> None:
        self.board.turn_started(self.label, prompt)

    def handle_stream_event(self, event: Event) -> None:
        self.board.stream_event(self.label, event)

    def post_turn(self, ref: Ref, outcome: Response | TurnFailed) -> None:
        self.board.turn_ended(self.label, outcome)


class Fragile(DemoAgent):
    """Lets it crash: a turn whose CLI died is not handled here, so the agent raises, and
    its supervisor starts a new instance, which continues its session."""

    def post_turn(self, ref: Ref, outcome: Response | TurnFailed) -> None:
        super().post_turn(ref, outcome)
        if isinstance(outcome, TurnFailed) and outcome.reason is StopReason.PROCESS_CRASHED:
            self.board.note(f"{self.label}: post_turn raises (let it crash)", "red")
            raise RuntimeError(f"{self.label}: my CLI was killed mid-turn")


def _cli_pid(cwd: str) -> int | None:
    """Our child process running in ``cwd``: the CLI of the agent that works there."""
    me, want = os.getpid(), os.path.realpath(cwd)
    for st in _proctree.snapshot().values():
        if st.ppid == me and not st.gone:
            try:
                if os.path.realpath(os.readlink(f"/proc/{st.pid}/cwd")) == want:
                    return st.pid
            except OSError:
                continue
    return None


def _store_file(given: str | None, scratch: str) -> Path:
    return Path(given).expanduser() if given else Path(scratch) / "sessions.sqlite3"


def _outcome(result: object) -> str:
    if isinstance(result, Failed) and isinstance(result.error, TurnFailed):
        return f"{result.error.reason.value}: {short(result.error.message, 90)}"
    if isinstance(result, Failed):
        return short(str(result.error), 90)
    return "complete" if isinstance(result, Completed) else type(result).__name__.lower()


def _leftover_processes() -> int:
    procs = _proctree.snapshot()
    return sum(1 for pid in _proctree.descendants(procs, [os.getpid()]) if not procs[pid].gone)


@attrs.define(eq=False)
class Demo:
    rt: Runtime
    board: Board
    plan: Plan
    cwds: dict[str, str]
    start: Callable[[str], Awaitable[object]]
    checks: dict[str, bool] = attrs.field(factory=lambda: dict.fromkeys(CHECKS, False))
    # Why a check failed, where the demo knows more than that it did not happen.
    why: dict[str, str] = attrs.field(factory=dict)

    def fail(self, check: str, why: str) -> None:
        self.why[check] = why
        self.board.note(f"✗ {check}: {why}", "bold red")

    async def workers(self) -> None:
        names = [f"w{i + 1}" for i in range(self.plan.workers)]
        refs: list[Ref] = []
        number = 1
        for _ in range(self.plan.jobs_each):
            for name in names:
                refs.append(await self.rt.tell(name, job_prompt(number)))
                number += 1
        self.board.note(
            f"queued {len(refs)} jobs in the mailboxes of {', '.join(names)}; at most "
            f"{self.plan.max_processes} CLIs run at once (max_processes)",
            "bold",
        )
        outcomes = [await self.rt.wait(ref) for ref in refs]
        failed = [o for o in outcomes if not isinstance(o, Completed)]
        self.checks["queued work done"] = not failed
        if failed:
            self.fail(
                "queued work done", f"{len(failed)} jobs did not complete: {_outcome(failed[0])}"
            )

    async def sleepy(self) -> None:
        hung = await self.rt.wait(await self.rt.tell("sleepy", HANG_PROMPT))
        error = hung.error if isinstance(hung, Failed) else None
        if not isinstance(error, TurnFailed) or error.reason is not StopReason.TOTAL_TIMEOUT:
            self.fail("watchdog fired", f"sleepy's turn ended with {_outcome(hung)}")
            return
        self.checks["watchdog fired"] = True
        if error.session_id is None:
            self.fail(
                "next turn after the watchdog resumed",
                "the CLI reported no session id before the watchdog fired",
            )
            return
        # Its next turn gets the default watchdog: a tight one would bound ordinary work too.
        await self.rt.stop_agent("sleepy")
        await self.start("sleepy")
        self.board.note("sleepy started again, with the default watchdog, on its session")
        job = job_prompt(self.plan.workers * self.plan.jobs_each + 1)
        after = await self.rt.wait(await self.rt.tell("sleepy", job))
        if not isinstance(after, Completed):
            self.fail("next turn after the watchdog resumed", f"it ended with {_outcome(after)}")
        elif after.response.session_id != error.session_id:
            self.fail(
                "next turn after the watchdog resumed",
                f"it ran in session {after.response.session_id}, not {error.session_id}",
            )
        else:
            self.checks["next turn after the watchdog resumed"] = True
            self.board.note("sleepy's next turn continued the same session", "green")

    async def fragile(self) -> None:
        rt, board = self.rt, self.board
        try:
            noted = await rt.ask("fragile", REMEMBER_PROMPT)
        except AgentRTError as exc:
            self.fail("CLI killed mid-turn", f"fragile could not take its first prompt: {exc}")
            return
        session = noted.session_id
        before = rt.whereis("fragile")
        ref = await rt.tell("fragile", MIGRATE_PROMPT)
        killed = False
        async with rt.stream(ref) as events:
            async for event in events:
                if isinstance(event, ToolUseEvent | TextEvent) and (
                    pid := _cli_pid(self.cwds["fragile"])
                ):
                    os.kill(pid, signal.SIGKILL)
                    killed = True
                    board.note(
                        f"chaos: SIGKILL to fragile's CLI (pid {pid}) in the middle of its turn",
                        "bold red",
                    )
                    break
        killed_turn = await rt.wait(ref)
        self.checks["CLI killed mid-turn"] = killed
        if not killed:
            self.fail("CLI killed mid-turn", f"the turn ended first, with {_outcome(killed_turn)}")
            return
        handle = None
        with trio.move_on_after(_RESTART_BOUND):
            while (handle := rt.whereis("fragile")) is None or handle == before:  # noqa: ASYNC110
                await trio.sleep(0.05)  # a restart has no event to wait on from outside
        if handle is None or handle == before:
            self.fail("restarted", f"fragile was not restarted within {_RESTART_BOUND:g} s")
            return
        self.checks["restarted"] = True
        restarts, where = (await rt.status("fragile")).restarts, short(session or "-", 13)
        board.note(
            f"supervisor restarted fragile (restart {restarts}): a new instance "
            f"(incarnation {handle.incarnation}) on its session {where}",
            "bold",
        )
        try:
            recalled = await rt.ask("fragile", RECALL_PROMPT)
        except AgentRTError as exc:
            self.fail("resumed the same session", f"the restarted fragile failed: {exc}")
            return
        same = recalled.session_id == session
        self.checks["resumed the same session"] = same
        self.checks["remembered"] = "42" in recalled.text
        if "42" not in recalled.text:
            self.fail("remembered", f"it answered {short(recalled.text, 40)!r}")
        where = short(recalled.session_id or "-", 13)
        board.note(
            f"fragile recalled {short(recalled.text, 40)!r} in session {where}"
            f" ({'the same session, resumed' if same else 'a NEW session'})",
            "bold green" if same else "bold red",
        )


@contextmanager
def _quiet_crash_logs(debug: bool) -> Iterator[None]:
    # The demo reports fragile's crash itself; the runtime's traceback would tear the view.
    logger = logging.getLogger("agentrt")
    level = logger.level
    if not debug:
        logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


async def run_demo(args: argparse.Namespace, out: Output) -> int:
    """Run the demo; exit 0 when everything happened as scripted."""
    real = args.backend is not None
    plan = Plan.make(quick=args.quick, real=real)
    debug = getattr(args, "debug", False)
    board = Board(out, live=out.fancy and not debug)
    names = [f"w{i + 1}" for i in range(plan.workers)]
    for name in names:
        board.add(name, "worker")
    board.add("sleepy", f"hangs, watchdog {plan.watchdog:g}s")
    board.add("fragile", "crashes")
    begun = time.monotonic()
    with (
        tempfile.TemporaryDirectory(prefix="agentrt-demo-") as scratch,
        _quiet_crash_logs(debug),
    ):
        store_file = _store_file(args.store, scratch)
        cwds = {name: os.path.join(scratch, "projects", name) for name in board.rows}
        for cwd in cwds.values():
            os.makedirs(cwd)
        async with AsyncExitStack() as stack:
            options, model, cli = await _setup(stack, args, scratch, plan, board, real)
            # The fake model API speaks Anthropic's protocol: without --backend, claude.
            backend = args.backend or "claude"
            lines = [
                f"agentrt demo: {len(board.rows)} supervised agents on the real process path",
                f"model: {model}",
                f"CLI:   {cli}",
                f"store: {store_file}"
                + ("" if args.store else " (temporary; --store PATH keeps it)"),
            ]
            for line in lines:
                out.say(line, style="bold" if line is lines[0] else "")
            out.say()
            store = SQLiteStore(store_file)
            rt = await stack.enter_async_context(
                open_runtime(store=store, max_processes=plan.max_processes)
            )
            if args.console:
                console = await stack.enter_async_context(open_console(rt))
                out.say(f"The demo's agents in the console: {console.url}", err=True)
                webbrowser.open(console.url)

            async def start(name: str, **extra: Any) -> object:
                return await rt.start_agent(
                    Fragile if name == "fragile" else DemoAgent,
                    name=name,
                    backend=backend,
                    restart="permanent",
                    board=board,
                    label=name,
                    cwd=cwds[name],
                    **options(name),
                    **extra,
                )

            for name in board.rows:
                await start(name, **({"watchdog": plan.watchdog} if name == "sleepy" else {}))
            demo = Demo(rt, board, plan, cwds, start)
            async with trio.open_nursery() as nursery:
                if board.live:

                    async def redraw() -> None:
                        with out.live() as live:
                            while True:
                                live.update(await _live_view(board, rt))
                                await trio.sleep(0.125)

                    nursery.start_soon(redraw)
                async with trio.open_nursery() as work:
                    work.start_soon(demo.workers)
                    work.start_soon(demo.sleepy)
                    work.start_soon(demo.fragile)
                await trio.sleep(0.15 if board.live else 0)  # one last frame
                nursery.cancel_scope.cancel()
            if args.console:
                out.say(
                    "The demo is done; Ctrl+C closes the console and prints the summary.", err=True
                )
                with trio.open_signal_receiver(signal.SIGINT) as interrupts:
                    async for _ in interrupts:
                        break
            for row in board.rows.values():
                # The supervisor's count, for the summary (the runtime closes next).
                with contextlib.suppress(AgentNotFound):
                    row.restarts = (await rt.status(row.name)).restarts
            records = {r.name: r for r in await store.list()}
        left = _leftover_processes()
    took = time.monotonic() - begun
    summary = _summary_rows(board, records)
    demo.checks["no process left behind"] = left == 0
    if left:
        demo.why["no process left behind"] = f"{left} processes of the demo still run"
    ok = all(demo.checks.values())
    if out.json_mode:
        out.data(
            {
                "ok": ok,
                "model": model,
                "cli": cli,
                "seconds": round(took, 1),
                "checks": demo.checks,
                "why": demo.why,
                "agents": summary,
            }
        )
    else:
        _print_summary(out, summary, demo.checks, demo.why, took)
    if not ok:
        failed = ", ".join(k for k, v in demo.checks.items() if not v)
        raise CliError(
            f"the demo did not go as scripted ({failed})",
            "rerun with --debug to see the runtime's log",
        )
    return 0


async def _setup(
    stack: AsyncExitStack,
    args: argparse.Namespace,
    scratch: str,
    plan: Plan,
    board: Board,
    real: bool,
) -> tuple[Any, str, str]:
    """Per-agent backend options, and what runs as the model and as the CLI."""
    if real:
        info = backend_info(resolve_backend(args.backend))

        def real_options(name: str) -> dict[str, Any]:
            # The crashing agent runs a shell command; the others need no tools.
            return dict(info.shell_options if name == "fragile" else info.quiet_options)

        return (
            real_options,
            f"your logged-in {args.backend} and a real model (this costs tokens)",
            f"{args.backend}'s CLI, as its backend finds it",
        )
    claude = None if args.fake_cli else _demo_claude(os.environ)
    if claude is None:
        folder = os.path.join(scratch, "bin")
        os.makedirs(folder)
        for name in board.rows:
            board.fakes[name] = FakeClaude(folder, name, plan.tool_seconds)
        why = (
            "--fake-cli"
            if args.fake_cli
            else "no claude: set CLAUDE_CLI to a claude binary (in a clone of agentrt, "
            "`make claude-cli` installs the pinned one)"
        )
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}

        def fake_options(name: str) -> dict[str, Any]:
            return {"binary": board.fakes[name].binary, "env_policy": "isolated", "env": env}

        return (
            fake_options,
            "scripted replies inside the bundled fake CLI",
            f"bundled fake CLI ({why})",
        )
    api = await stack.enter_async_context(
        open_fake_anthropic(anthropic_script(tool_seconds=plan.tool_seconds))
    )
    home = os.path.join(scratch, "home")
    os.makedirs(os.path.join(home, "tmp"))
    env = {
        **api.claude_env(home),
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "TMPDIR": os.path.join(home, "tmp"),
    }

    binary, shown = claude

    def claude_options(name: str) -> dict[str, Any]:
        return {"binary": binary, "env_policy": "isolated", "env": env}

    return (
        claude_options,
        f"agentrt's fake Anthropic API at {api.base_url} (no credentials, no network)",
        shown,
    )


def _demo_claude(environ: Mapping[str, str]) -> tuple[str, str] | None:
    """The claude binary the demo runs on the fake API, and how to name it: ``$CLAUDE_CLI``
    (as agents find it: an installed wheel has no checkout to hold a pinned one), else the
    pinned one of this checkout; None when there is neither."""
    given = environ.get("CLAUDE_CLI")
    if given:
        return given, f"{given} ($CLAUDE_CLI)"
    pinned = pinned_claude()
    return None if pinned is None else (str(pinned.path), str(pinned))
