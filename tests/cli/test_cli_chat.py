"""`agentrt chat` in a pseudo-terminal, as a person types it: streaming text and tool
calls, Ctrl+C interrupting a turn, Ctrl+C twice leaving; and with piped stdin."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pty
import struct
import termios
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import attrs
import pytest
import trio

from agentrt.testing import (
    AnthropicCutStream,
    AnthropicHang,
    AnthropicReply,
    AnthropicText,
    AnthropicToolUse,
    FakeAnthropic,
    RecordedRequest,
    fake_cli_executable,
)

from ._run import agentrt, open_agentrt, plain

pytestmark = pytest.mark.realcli


def model(request: RecordedRequest) -> AnthropicReply:
    if request.tool_results():
        return AnthropicText("All done.")
    prompt = request.last_user_text()
    if prompt == "run something":
        return AnthropicToolUse("Bash", {"command": "echo tool-output-here"}, text="Running it.")
    if prompt == "take forever":
        return AnthropicHang()
    if prompt == "cut once":  # the CLI retries a cut stream once, without streaming
        return (
            AnthropicCutStream("Partial ans", linger=1.0)
            if request.stream
            else AnthropicText("Whole.")
        )
    earlier = [t for t in request.texts("user")[:-1] if not t.startswith("<system-reminder>")]
    return AnthropicText(f"Hi there. Earlier: {' / '.join(earlier) or 'nothing'}.")


def _own_terminal() -> None:
    # In the child: a session of its own with the pty as its controlling terminal, so a
    # Ctrl+C typed into the pty reaches it as SIGINT (as in a real terminal).
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


@attrs.define
class Terminal:
    """The test's side of the pty: what it typed and what the command printed."""

    stream: trio.lowlevel.FdStream
    seen: str = ""

    async def type(self, text: str) -> None:
        await self.stream.send_all(text.encode())

    async def expect(self, needle: str, bound: float = 20.0) -> str:
        """Read until ``needle`` appears in the (escape-free) output after what was
        expected before; return that new output."""
        with trio.fail_after(bound):
            while needle not in plain(self.seen):
                try:
                    data = await self.stream.receive_some(65536)
                except (OSError, trio.BrokenResourceError):  # EIO: the command has exited
                    data = b""
                if not data:
                    raise AssertionError(f"{needle!r} never came; output:\n{plain(self.seen)}")
                self.seen += data.decode(errors="replace")
        text = plain(self.seen)
        end = text.index(needle) + len(needle)
        self.seen = text[end:]
        return text[:end]


@asynccontextmanager
async def open_chat(
    env: dict[str, str], *args: str
) -> AsyncIterator[tuple[Terminal, trio.Process]]:
    main, tty = pty.openpty()
    fcntl.ioctl(tty, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    stream = trio.lowlevel.FdStream(main)
    try:
        async with open_agentrt(
            "chat",
            *args,
            env={**env, "TERM": "xterm-256color"},
            stdin=tty,
            stdout=tty,
            stderr=tty,
            preexec_fn=_own_terminal,
        ) as process:
            os.close(tty)
            tty = -1
            yield Terminal(stream), process
    finally:
        if tty >= 0:
            os.close(tty)
        await stream.aclose()


async def test_chat_in_a_terminal(
    claude_env: dict[str, str], api: FakeAnthropic, tmp_path: Path
) -> None:
    api.set_script(model)
    with trio.fail_after(60):
        async with open_chat(claude_env, "bob", "--cwd", str(tmp_path)) as (term, process):
            await term.expect("a new session")
            await term.expect("you> ")
            await term.type("hello\n")
            said = await term.expect("you> ")
            assert "bob> Hi there. Earlier: nothing." in said
            assert "10 in / 5 out" in said

            await term.type("run something\n")
            said = await term.expect("you> ")
            assert "bob> Running it." in said
            assert "⚙ Bash: echo tool-output-here" in said
            assert "↳ tool-output-here" in said
            assert said.index("Running it.") < said.index("⚙ Bash") < said.index("All done.")

            await term.type("take forever\n")
            await api.wait_requests(4)  # the model call that never gets an answer
            await term.type("\x03")  # Ctrl+C: the tty sends SIGINT to the chat
            said = await term.expect("you> ")
            assert "(interrupting the turn)" in said and "(interrupted)" in said

            await term.type("\x03")
            await term.expect("(Ctrl+C again, Ctrl+D or /exit to leave)")
            await term.type("\x03")
            assert await process.wait() == 0
    [record] = json.loads((await agentrt("sessions", "--json", env=claude_env)).stdout)
    assert record["turns"] == 3 and record["last_stop_reason"] == "interrupted"


async def test_chat_from_piped_stdin(
    claude_env: dict[str, str], api: FakeAnthropic, tmp_path: Path
) -> None:
    api.set_script(model)
    run = await agentrt(
        "chat", "bob", "--cwd", str(tmp_path), env=claude_env, stdin=b"hello\n\n/exit\nignored\n"
    )
    assert run.code == 0, run.stderr
    assert "bob> Hi there. Earlier: nothing.\n" in run.stdout
    assert "ignored" not in run.stdout and len(api.message_requests) == 1


async def test_chat_continues_next_time(
    claude_env: dict[str, str], api: FakeAnthropic, tmp_path: Path
) -> None:
    api.set_script(model)
    first = await agentrt("chat", "bob", "--cwd", str(tmp_path), env=claude_env, stdin=b"hello\n")
    assert first.code == 0, first.stderr
    second = await agentrt("chat", "bob", env=claude_env, stdin=b"again\n")
    assert second.code == 0, second.stderr
    assert "continuing session" in second.stdout
    assert "bob> Hi there. Earlier: hello" in second.stdout


async def test_chat_says_when_the_cli_abandons_a_reply(
    claude_env: dict[str, str], api: FakeAnthropic, tmp_path: Path
) -> None:
    api.set_script(model)
    run = await agentrt("chat", "bob", "--cwd", str(tmp_path), env=claude_env, stdin=b"cut once\n")
    assert run.code == 0, run.stderr
    shown = run.stdout
    assert "bob> Partial ans" in shown
    assert "(the CLI abandoned that reply, 11 characters; retrying)" in shown
    assert shown.index("Partial ans") < shown.index("abandoned") < shown.index("bob> Whole.")


async def test_an_unknown_command_is_not_sent_to_the_model(
    claude_env: dict[str, str], api: FakeAnthropic, tmp_path: Path
) -> None:
    api.set_script(model)
    typed = b"/rest\n/usr/bin is a path\n//clear\n"
    run = await agentrt("chat", "bob", "--cwd", str(tmp_path), env=claude_env, stdin=typed)
    assert run.code == 0, run.stderr
    assert "(unknown command /rest: nothing was sent)\nCommands: /reset" in run.stdout
    assert [r.last_user_text() for r in api.message_requests] == ["/usr/bin is a path"]
    # "//clear" went to the CLI as "/clear", Claude Code's own command: a turn, no model call.
    assert run.stdout.count(" · session ") == 2


async def test_ctrl_d_at_the_prompt_leaves_on_a_line_of_its_own(
    claude_env: dict[str, str], tmp_path: Path
) -> None:
    with trio.fail_after(60):
        async with open_chat(claude_env, "bob", "--cwd", str(tmp_path)) as (term, process):
            await term.expect("you> ")
            await term.type("\x04")  # Ctrl+D: end of input
            assert await process.wait() == 0
            rest = b""
            with contextlib.suppress(OSError, trio.BrokenResourceError):  # EIO once it is gone
                while chunk := await term.stream.receive_some(65536):
                    rest += chunk
    # What the shell prints next starts on a line of its own.
    assert plain(term.seen + rest.decode()) == "\n"


async def test_chat_runs_every_turn_on_one_warm_cli(
    claude_env: dict[str, str], tmp_path: Path
) -> None:
    # The fake CLI's live mode counts its turns: one process answered both lines.
    live = fake_cli_executable(str(tmp_path), ["live", {"session_id": "s-1"}])
    env = {**claude_env, "CLAUDE_CLI": live}
    run = await agentrt("chat", "bob", "--cwd", str(tmp_path), env=env, stdin=b"one\ntwo\n")
    assert run.code == 0, run.stderr
    assert "bob> 1: one\n" in run.stdout and "bob> 2: two\n" in run.stdout


async def test_chat_on_options_only_codex_exec_takes_runs_a_process_per_turn(
    base_env: dict[str, str], tmp_path: Path
) -> None:
    # No live codex with extra flags (exec only): chat does not ask for a warm CLI there
    # (start_agent would refuse keep_alive), and each line runs its own codex exec.
    THREAD = "01a23174-c13c-7580-bacf-e3a4ff5f593c"
    said = {"id": "m", "type": "agent_message", "text": "Hi from exec."}
    codex = fake_cli_executable(
        str(tmp_path),
        ["emit", {"type": "thread.started", "thread_id": THREAD}],
        ["emit", {"type": "item.completed", "item": said}],
        ["emit", {"type": "turn.completed", "usage": {}}],
        name="codex",
    )
    env = {**base_env, "CODEX_CLI": codex}
    where = ("--backend", "codex", "--cwd", str(tmp_path), "-o", 'extra_args=["--oss"]')
    run = await agentrt("chat", "bob", *where, env=env, stdin=b"one\ntwo\n")
    assert run.code == 0, run.stderr
    assert run.stdout.count("bob> Hi from exec.\n") == 2
