"""Output of the ``agentrt`` command: rich on a terminal (when installed), plain text when
piped or without rich, JSON with ``--json``; errors as one line that says the fix."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TextIO

import attrs

if TYPE_CHECKING:
    from rich.console import Console, RenderableType
    from rich.live import Live
    from rich.spinner import Spinner


class CliError(Exception):
    """A failure the command reports as one sentence and its fix, without a traceback."""

    def __init__(self, message: str, fix: str | None = None, *, code: int = 1) -> None:
        self.message = message
        self.fix = fix
        self.code = code
        super().__init__(message)

    def line(self) -> str:
        fix = f" Fix: {self.fix}" if self.fix else ""
        return f"agentrt: {self.message}.{fix}"

    def data(self) -> dict[str, Any]:
        """The JSON shape of the failure, for ``--json``."""
        return {"error": {"message": self.message, "fix": self.fix, "exit_code": self.code}}


def rich_installed() -> bool:
    """Whether the optional ``agentrt[cli]`` extra (rich) can be imported."""
    return importlib.util.find_spec("rich") is not None


def _fancy(stream: TextIO) -> bool:
    return stream.isatty() and os.environ.get("TERM") != "dumb" and rich_installed()


def _console(stream: TextIO) -> Console:
    from rich.console import Console

    return Console(file=stream, highlight=False, soft_wrap=True)


@attrs.define(eq=False)
class Output:
    """Where and how a command prints. ``fancy`` (rich) only for a terminal, never with
    ``--json``; in JSON mode the command prints one JSON document and nothing else on
    stdout."""

    json_mode: bool = False
    stdout: TextIO = attrs.field(factory=lambda: sys.stdout)
    stderr: TextIO = attrs.field(factory=lambda: sys.stderr)
    fancy: bool = attrs.field(init=False)
    fancy_stderr: bool = attrs.field(init=False)
    _console: Console | None = attrs.field(init=False, default=None)
    _err_console: Console | None = attrs.field(init=False, default=None)

    def __attrs_post_init__(self) -> None:
        self.fancy = not self.json_mode and _fancy(self.stdout)
        self.fancy_stderr = not self.json_mode and _fancy(self.stderr)
        if self.fancy:
            self._console = _console(self.stdout)
        if self.fancy_stderr:
            self._err_console = _console(self.stderr)

    @property
    def console(self) -> Console:
        assert self._console is not None, "console is only there when fancy"
        return self._console

    def say(self, text: str = "", *, style: str | None = None, err: bool = False) -> None:
        """One line of text (never in JSON mode on stdout: there it goes to stderr)."""
        console = self._err_console if err else self._console
        if console is not None:
            from rich.text import Text

            console.print(Text(text, style=style or ""))
            return
        stream = self.stderr if err or self.json_mode else self.stdout
        print(text, file=stream, flush=True)

    def write(self, text: str, *, style: str | None = None) -> None:
        """Text as it streams in: no newline added."""
        if self._console is not None:
            from rich.text import Text

            self._console.print(Text(text, style=style or ""), end="")
            self._console.file.flush()
            return
        self.stdout.write(text)
        self.stdout.flush()

    def table(
        self, headers: Sequence[str], rows: Sequence[Sequence[str]], *, title: str = ""
    ) -> None:
        """Rows under headers: a rich table on a terminal, aligned columns otherwise."""
        if self._console is not None:
            self._console.print(rich_table(headers, rows, title=title))
            return
        if title:
            print(title, file=self.stdout)
        print(plain_table(headers, rows), file=self.stdout, flush=True)

    def data(self, value: Any) -> None:
        """The command's result as JSON on stdout."""
        print(json.dumps(value, indent=2, sort_keys=False), file=self.stdout, flush=True)

    def error(self, error: CliError) -> None:
        """The failure as its line on stderr and, with ``--json``, as a JSON object on
        stdout (so a script that reads stdout learns of it too)."""
        if self.json_mode:
            self.data(error.data())
        if self._err_console is not None:
            from rich.text import Text

            self._err_console.print(Text(error.line(), style="bold red"))
        else:
            print(error.line(), file=self.stderr, flush=True)

    def interrupted(self) -> int:
        """Ctrl+C ended the command: said on stderr (with ``--json`` also as a JSON error
        object on stdout); the exit code, 130."""
        if self.json_mode:
            self.data(CliError("interrupted", code=130).data())
        self.say("interrupted", err=True)
        return 130

    @contextmanager
    def progress(self, *, err: bool = False) -> Iterator[Progress]:
        """A transient spinner line, on a terminal only (``err``: on stderr)."""
        console = self._err_console if err else self._console
        progress = Progress(console)
        try:
            yield progress
        finally:
            progress.stop()

    @contextmanager
    def live(self) -> Iterator[LiveView]:
        """A region of stdout redrawn in place (fancy only)."""
        from rich.live import Live

        with Live(console=self.console, auto_refresh=False, transient=False) as live:
            yield LiveView(live)


class Progress:
    """A spinner with a line of text, drawn below the output; `update` redraws it (the
    caller ticks it, so no thread draws behind trio's back). Does nothing off a terminal."""

    def __init__(self, console: Console | None) -> None:
        self._console = console
        self._live: Live | None = None
        self._spinner: Spinner | None = None

    @property
    def active(self) -> bool:
        return self._live is not None

    def show(self, text: str) -> None:
        if self._console is None:
            return
        if self._live is None:
            from rich.live import Live
            from rich.spinner import Spinner

            self._spinner = Spinner("dots", text=text, style="cyan")
            self._live = Live(
                self._spinner, console=self._console, transient=True, auto_refresh=False
            )
            self._live.start()
        self.update(text)

    def update(self, text: str) -> None:
        if self._live is not None and self._spinner is not None:
            from rich.text import Text

            self._spinner.update(text=Text(text, style="dim"))
            self._live.refresh()

    def stop(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None


class LiveView:
    def __init__(self, live: Live) -> None:
        self._live = live

    def update(self, renderable: RenderableType) -> None:
        self._live.update(renderable, refresh=True)


def rich_table(headers: Sequence[str], rows: Sequence[Sequence[str]], *, title: str = "") -> Any:
    from rich import box
    from rich.table import Table

    table = Table(*headers, title=title or None, box=box.SIMPLE_HEAD, title_justify="left")
    for row in rows:
        table.add_row(*row)
    return table


def plain_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Columns padded to their widest cell, two spaces apart."""
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip()
        for line in (headers, *rows)
    ]
    return "\n".join(lines)


def short(text: str, width: int) -> str:
    """``text`` on one line, cut to ``width`` characters with an ellipsis."""
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"


def money(cost: float | None) -> str:
    return "-" if cost is None else f"${cost:.4f}"


def seconds(value: float) -> str:
    return f"{value:.1f}s"
