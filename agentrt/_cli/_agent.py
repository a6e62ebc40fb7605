"""``agentrt ask`` and what it shares with ``agentrt chat``: one named agent in a runtime
whose SQLite store keeps its session between runs of the command."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import attrs
import trio

from .._agent import Agent
from .._arguments import check_directory
from .._backends import resolve_backend
from .._errors import InvalidOptions, TurnFailed
from .._events import Event, Response, ToolUseEvent, UsageEvent
from .._mode import capabilities
from .._options import split_options
from .._records import SessionRecord
from .._requests import Completed, Failed, Ref
from .._runtime import Runtime, open_runtime
from ._args import DEFAULT_BACKEND
from ._fixes import DEFAULT_FIX, turn_failed
from ._render import CliError, Output, money, seconds
from ._store import cli_store


@attrs.frozen
class Started:
    """The agent a command talks to, and the stored session it continues (if any)."""

    name: str
    backend: str
    cwd: str
    resumed: SessionRecord | None


def _working_directory(given: str | None) -> str:
    cwd = os.path.abspath(given or os.getcwd())
    try:
        return check_directory("cwd", cwd)
    except InvalidOptions as exc:
        raise CliError(f"the working directory {cwd} {exc.why}", "pass --cwd DIR") from None


def _has_live_cli(backend: str, options: Mapping[str, Any]) -> bool:
    """Whether an agent with these options has a live CLI to keep warm (codex with options
    only ``codex exec`` takes has none, and start_agent would refuse ``keep_alive``)."""
    chosen = resolve_backend(backend)
    try:
        parsed = chosen.parse_options(split_options(options)[1])
    except InvalidOptions:
        return True  # start_agent names the bad option, beside the runtime's own
    return capabilities(chosen, parsed).live


@asynccontextmanager
async def open_agent(
    args: argparse.Namespace, *, keep_alive: float | None = None
) -> AsyncIterator[tuple[Runtime, Started]]:
    """A runtime on the store ``--store`` names with the agent ``args.name`` started in it,
    warm for ``keep_alive`` seconds between turns where its backend has a live CLI for its
    options, unless ``-o keep_alive=...`` says otherwise (`CliNotFound` at once when its CLI
    is not installed: start_agent checks).

    The backend and cwd default to the stored session's, so ``agentrt ask NAME`` from any
    directory continues where the conversation was. An unknown backend or a ``--cwd``
    that is no directory is refused before the store is opened (nor made).

    Cancellation: leaving the block stops the agent; its cleanup is shielded.
    """
    if args.backend:
        resolve_backend(args.backend)  # an unknown name is the first thing to fix
    if args.cwd:
        _working_directory(args.cwd)
    store = cli_store(args)
    async with open_runtime(store=store) as rt:
        record = await store.load(args.name)
        if args.new:
            record = None
        backend = args.backend or (record.backend if record else DEFAULT_BACKEND)
        if record is not None and args.backend and args.backend != record.backend:
            raise CliError(
                f"agent {args.name!r} has a {record.backend} session, not a {args.backend} one",
                f"pass --backend {record.backend}, or --new to start over with {args.backend}",
            )
        cwd = _working_directory(args.cwd or (record.cwd if record else None))
        options: dict[str, Any] = dict(args.options)
        if args.model:
            options["model"] = args.model
        # A person waits at the terminal: a usage limit or an expired login is said, with
        # its reset or its fix, not waited out by the lone agent of a runtime that ends.
        options.setdefault("on_usage_limit", "fail")
        options.setdefault("on_credential_expired", "fail")
        warm = keep_alive is not None and "keep_alive" not in options
        if warm and _has_live_cli(backend, {**options, "cwd": cwd}):
            options["keep_alive"] = keep_alive
        # start_agent resumes the stored session itself ("auto"); --new drops it.
        resume = False if args.new else "auto"
        await rt.start_agent(
            Agent, name=args.name, backend=backend, cwd=cwd, resume=resume, **options
        )
        resumed = record if record is not None and record.session_id else None
        yield rt, Started(args.name, backend, cwd, resumed)


@attrs.define
class TurnWatch:
    """What a running turn has shown so far, for the progress line."""

    started: float = attrs.field(factory=trio.current_time)
    tools: int = 0
    tokens: int = 0
    last_tool: str | None = None

    def see(self, event: Event) -> None:
        if isinstance(event, ToolUseEvent):
            self.tools += 1
            self.last_tool = event.name
        elif isinstance(event, UsageEvent):
            self.tokens = event.usage.input_tokens + event.usage.output_tokens

    def line(self, name: str) -> str:
        parts = [name, seconds(trio.current_time() - self.started)]
        if self.tools:
            parts.append(f"{self.tools} tool call{'s' if self.tools != 1 else ''}")
        if self.tokens:
            parts.append(f"{self.tokens} tokens")
        return " · ".join(parts)


def response_data(name: str, response: Response) -> dict[str, Any]:
    """The JSON shape of a successful turn."""
    usage = response.usage
    return {
        "agent": name,
        "text": response.text,
        "final_message": response.final_message,
        "stop_reason": response.stop_reason.value,
        "session_id": response.session_id,
        "model": response.model,
        "cost_usd": response.cost_usd,
        "duration": round(response.duration, 3),
        "num_turns": response.num_turns,
        "usage": None
        if usage is None
        else {
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "cache_creation_input_tokens": usage.cache_creation_input_tokens,
            "cache_read_input_tokens": usage.cache_read_input_tokens,
        },
    }


def footer(response: Response) -> str:
    """One dim line under an answer: time, tokens, cost, session."""
    parts = [seconds(response.duration)]
    if response.usage is not None:
        parts.append(f"{response.usage.input_tokens} in / {response.usage.output_tokens} out")
    if response.cost_usd is not None:
        parts.append(money(response.cost_usd))
    if response.session_id:
        parts.append(f"session {response.session_id}")
    return " · ".join(parts)


async def _watch(rt: Runtime, ref: Ref, out: Output, watch: TurnWatch) -> None:
    with out.progress(err=True) as progress:
        progress.show(watch.line(ref.name))
        async with trio.open_nursery() as nursery:

            async def tick() -> None:
                while True:
                    progress.update(watch.line(ref.name))
                    await trio.sleep(0.1)

            nursery.start_soon(tick)
            async for event in rt.stream(ref):
                watch.see(event)
            nursery.cancel_scope.cancel()


async def run_ask(args: argparse.Namespace, out: Output) -> int:
    """``agentrt ask NAME PROMPT``: one turn; the answer on stdout, exit 0 on success,
    1 on a failed turn, 130 when Ctrl+C interrupted it."""
    prompt = args.prompt
    if prompt == "-":
        prompt = await trio.to_thread.run_sync(sys.stdin.read)
    if not prompt.strip():
        raise CliError("the prompt is empty", "pass the prompt as an argument, or - for stdin")
    interrupted = False
    with trio.open_signal_receiver(signal.SIGINT) as signals:
        async with open_agent(args) as (rt, _), trio.open_nursery() as nursery:
            ref = await rt.tell(args.name, prompt)
            watch = TurnWatch()

            async def on_sigint() -> None:
                nonlocal interrupted
                async for _ in signals:
                    if interrupted:  # a second Ctrl+C: stop waiting for the CLI to end
                        raise KeyboardInterrupt
                    interrupted = True
                    await rt.interrupt_request(ref)

            nursery.start_soon(on_sigint)
            await _watch(rt, ref, out, watch)
            outcome = await rt.wait(ref)
            nursery.cancel_scope.cancel()
    if isinstance(outcome, Completed):
        response = outcome.response
        if out.json_mode:
            out.data(response_data(args.name, response))
        else:
            out.say(response.text)
            out.say(footer(response), style="dim", err=True)
        return 0
    if interrupted:
        return out.interrupted()
    if isinstance(outcome, Failed):
        if isinstance(outcome.error, TurnFailed):
            raise turn_failed(args.name, outcome.error)
        raise outcome.error
    raise CliError(f"agent {args.name!r}: the request ended as {outcome!r}", DEFAULT_FIX)
