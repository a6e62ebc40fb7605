"""``agentrt chat NAME``: an interactive conversation with one agent, streamed as it comes.

Ctrl+C while a turn runs interrupts that turn (the CLI ends it cleanly and keeps its
transcript); at the prompt, a first Ctrl+C says how to leave and a second one leaves, as
does Ctrl+D or ``/exit``. The session is in the store, so the next ``agentrt chat NAME``
continues the conversation. The agent is warm (``keep_alive``): one CLI process answers
every turn of the chat, so follow-up turns start in milliseconds.
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import sys
from typing import Any

import attrs
import trio

from .._errors import TurnFailed
from .._events import (
    Event,
    StopReason,
    TextEvent,
    TextRetractedEvent,
    ToolResultEvent,
    ToolUseEvent,
)
from .._requests import Completed, Failed, Ref
from .._runtime import Runtime
from ._agent import TurnWatch, footer, open_agent
from ._fixes import turn_failed
from ._render import Output, Progress, short

_HELP = (
    "Commands: /reset starts a new session, /exit leaves (so do Ctrl+D and Ctrl+C twice), "
    "/help shows this; start a line with // to send the CLI a /command of its own"
)
# Seconds the chat's CLI waits for the next line before it hibernates (the next turn then
# resumes the conversation on a new process).
CHAT_KEEP_ALIVE = 1800.0
# What looks like a command (so a typo is not sent to the model): one word, no path.
_COMMAND = re.compile(r"/[A-Za-z][\w-]*")


def tool_summary(event: ToolUseEvent) -> str:
    """A tool call on one line: the command, path or pattern it was given."""
    given = event.input
    if isinstance(given, dict):
        for key in ("command", "file_path", "path", "pattern", "url", "query", "description"):
            value = given.get(key)
            if isinstance(value, str) and value:
                return f"{event.name}: {short(value, 100)}"
        return f"{event.name} {short(json.dumps(given), 100)}"
    return event.name


def result_text(content: Any) -> str:
    """The readable text of a tool result (a string, or the CLI's list of content blocks)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(block.get("text", "")) if isinstance(block, dict) else str(block)
            for block in content
        )
    return "" if content is None else json.dumps(content)


@attrs.define(eq=False)
class _Chat:
    rt: Runtime
    name: str
    out: Output
    progress: Progress
    turn: Ref | None = None
    armed: bool = False  # one Ctrl+C was pressed at the prompt
    _midline: bool = False  # the last thing written did not end its line
    _watch: TurnWatch | None = None
    _activity: str = "thinking"

    async def loop(self) -> None:
        while True:
            line = await self._read()
            if line is None:
                self.out.say()
                return
            text = line.strip()
            self.armed = False
            if not text:
                continue
            if text.startswith("//"):
                await self._turn(text[1:])
            elif text in ("/exit", "/quit"):
                return
            elif text == "/help":
                self.out.say(_HELP, style="dim")
            elif text == "/reset":
                await self.rt.reset_session(self.name)
                self.out.say("(the next turn starts a new session)", style="dim")
            elif _COMMAND.fullmatch(word := text.split()[0]):
                self.out.say(f"(unknown command {word}: nothing was sent)", style="yellow")
                self.out.say(_HELP, style="dim")
            else:
                await self._turn(text)

    def _prompt(self) -> None:
        if sys.stdin.isatty():
            self.out.write("you> ", style="bold green")

    async def _read(self) -> str | None:
        self._prompt()
        # A thread, since stdin cannot be read asynchronously without changing the
        # terminal's flags; abandoned on exit (it holds no lock and no state of ours).
        line = await trio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
        return line or None

    async def on_signals(self, signals: Any, scope: trio.CancelScope) -> None:
        async for _ in signals:
            if self.turn is not None:
                self._end_line()
                self.out.say("(interrupting the turn)", style="yellow")
                await self.rt.interrupt_request(self.turn)
            elif self.armed:
                self.out.say()
                scope.cancel()
            else:
                self.armed = True
                self.out.say()
                self.out.say("(Ctrl+C again, Ctrl+D or /exit to leave)", style="dim")
                self._prompt()

    def _end_line(self) -> None:
        self.progress.stop()
        if self._midline:
            self.out.write("\n")
            self._midline = False

    def _wait(self, activity: str) -> None:
        self._activity = activity
        if self._watch is not None:
            self.progress.show(f"{activity} · {self._watch.line(self.name)}")

    def _show(self, event: Event) -> None:
        if self._watch is not None:
            self._watch.see(event)
        if isinstance(event, TextEvent):
            if event.text:
                self.progress.stop()
                if not self._midline:
                    self.out.write(f"{self.name}> ", style="bold cyan")
                self.out.write(event.text)
                self._midline = not event.text.endswith("\n")
            if event.message_boundary:
                self._end_line()
        elif isinstance(event, ToolUseEvent):
            self._end_line()
            self.out.say(f"  ⚙ {tool_summary(event)}", style="magenta")
            self._wait(f"running {event.name}")
        elif isinstance(event, TextRetractedEvent):
            # Printed text cannot be unprinted: say that it no longer counts.
            self._end_line()
            self.out.say(
                f"  (the CLI abandoned that reply, {len(event.text)} characters; retrying)",
                style="dim",
            )
        elif isinstance(event, ToolResultEvent):
            self._end_line()
            lines = result_text(event.content).strip().splitlines() or [""]
            more = f" (+{len(lines) - 1} lines)" if len(lines) > 1 else ""
            style = "red" if event.is_error else "dim"
            self.out.say(f"    ↳ {short(lines[0], 100)}{more}", style=style)
            self._wait("thinking")

    async def _turn(self, prompt: str) -> None:
        ref = self.turn = await self.rt.tell(self.name, prompt)
        self._watch = TurnWatch()
        try:
            async with trio.open_nursery() as nursery:

                async def tick() -> None:
                    while True:
                        if self.progress.active and self._watch is not None:
                            line = self._watch.line(self.name)
                            self.progress.update(f"{self._activity} · {line}")
                        await trio.sleep(0.1)

                nursery.start_soon(tick)
                self._wait("thinking")
                async for event in self.rt.stream(ref):
                    self._show(event)
                nursery.cancel_scope.cancel()
            outcome = await self.rt.wait(ref)
        finally:
            self.turn = None
            self._watch = None
            self._end_line()
        if isinstance(outcome, Completed):
            self.out.say(f"({footer(outcome.response)})", style="dim")
        elif isinstance(outcome, Failed) and isinstance(outcome.error, TurnFailed):
            if outcome.error.reason is StopReason.INTERRUPTED:
                self.out.say("(interrupted)", style="yellow")
            else:
                self.out.error(turn_failed(self.name, outcome.error))
        elif isinstance(outcome, Failed):
            raise outcome.error


async def run_chat(args: argparse.Namespace, out: Output) -> int:
    """Chat until the user leaves; exit 0."""
    with trio.open_signal_receiver(signal.SIGINT) as signals:
        async with (
            open_agent(args, keep_alive=CHAT_KEEP_ALIVE) as (rt, started),
            trio.open_nursery() as nursery,
        ):
            where = f"{started.backend} in {started.cwd}"
            if started.resumed is not None:
                record = started.resumed
                turns = record.session_totals.turns
                session = f"continuing session {record.session_id} ({turns} turns so far)"
            else:
                session = "a new session"
            out.say(f"Chat with {started.name!r}: {where}, {session}.", style="bold")
            out.say(_HELP, style="dim")
            with out.progress() as progress:
                chat = _Chat(rt, started.name, out, progress)
                nursery.start_soon(chat.on_signals, signals, nursery.cancel_scope)
                await chat.loop()
            nursery.cancel_scope.cancel()
    return 0
