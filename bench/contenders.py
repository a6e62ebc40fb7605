"""Who is measured: the floors, claude-agent-sdk, and the places where agentrt plugs in.

Four registries, one per kind of measurement. A contender only says how to run; the
harness (bench.measure) times it, in a fresh process per measurement.

- `TURN_CONTENDERS`: stream one fixture turn (scenarios ``mix``, ``small``, ``tiny``,
  ``concurrent``). ``run(fixture, slots, body)`` sets up what it needs for ``slots``
  concurrent turns (untimed), then awaits ``body(turn)``; the harness times the calls
  ``await turn(slot)`` it makes inside ``body``. ``turn`` returns True when the turn ended
  with the fixture's ``result`` (the harness refuses a run that did not).
- `INTERRUPT_CONTENDERS`: ``run(cli, body)`` awaits ``body(start)``; ``await
  start(nursery)`` begins one turn of the fake CLI tree ``cli`` in ``nursery`` and returns
  the function the harness calls to interrupt it (its result is awaited if awaitable).
- `SCALE_CONTENDERS`: ``idle(n, checkpoint)`` starts ``n`` idle agents and awaits
  ``checkpoint()`` while they are all alive; ``asks(body)`` awaits ``body(ask)`` where each
  ``await ask()`` is one round trip.
- `CONVERSATION_CONTENDERS`: one conversation with the real claude CLI (scenario ``warm``).
  ``run(claude, body)`` awaits ``body(turn)``; ``await turn(prompt)`` is one turn of the
  conversation (the first one starts the CLI) and returns the result's text, or None when
  the turn did not end with a result.

The agentrt contenders are registered under the name "agentrt" (warm sessions:
"agentrt-warm"); the tables and the targets pick them up by those names.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import secrets
import signal
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, Literal

import attrs
import msgspec
import trio
import trio.testing

from .generate import Fixture

Loop = Literal["trio", "asyncio"]
Turn = Callable[[int], Awaitable[bool]]
TurnBody = Callable[[Turn], Awaitable[None]]
TurnRun = Callable[[Fixture, int, TurnBody], Awaitable[None]]
Interrupt = Callable[[], object]
Start = Callable[[trio.Nursery], Awaitable[Interrupt]]
InterruptRun = Callable[[str, Callable[[Start], Awaitable[None]]], Awaitable[None]]
Ask = Callable[[], Awaitable[object]]
IdleRun = Callable[[int, Callable[[], Awaitable[None]]], Awaitable[None]]
AsksRun = Callable[[Callable[[Ask], Awaitable[None]]], Awaitable[None]]
Say = Callable[[str], Awaitable[str | None]]
ConversationBody = Callable[[Say], Awaitable[None]]

THROUGHPUT = ("mix", "small")
TURN_SCENARIOS = (*THROUGHPUT, "tiny", "concurrent")
# Every pairwise ratio is against this one: open_process + receive_some + split + msgspec.
FLOOR = "trio-floor"
AGENTRT = "agentrt"
# Warm turns: agentrt with keep_alive, and their floor, one live fake CLI driven by hand.
AGENTRT_WARM = "agentrt-warm"
# The same per-turn agents with turn cgroups off: what a turn's cgroup costs (issue 22).
AGENTRT_NO_CGROUP = "agentrt-no-cgroup"
LIVE_FLOOR = "trio-floor-live"
# The real-claude conversation's floor: one stream-json claude process driven by hand.
CLAUDE_FLOOR = "claude-floor"
# Long enough that no warm process hibernates during a measurement.
KEEP_ALIVE = 600.0
# A turn's prompt; every fake ignores it (the SDK fake reads and drops it).
PROMPT = "bench"
_CHUNK = 65536
# The control protocol's opening, as claude-agent-sdk writes it (stream-json input).
_INITIALIZE = (
    b'{"type": "control_request", "request_id": "req_1_0a1b2c3d", "request": '
    b'{"subtype": "initialize", "hooks": null}}\n'
)


_INTERRUPT = (
    b'{"type":"control_request","request_id":"req_2_0a1b2c3d","request":{"subtype":"interrupt"}}\n'
)


def _user(prompt: str) -> bytes:
    message = {"role": "user", "content": prompt}
    return msgspec.json.encode({"type": "user", "message": message}) + b"\n"


@attrs.frozen
class TurnContender:
    name: str
    label: str
    loop: Loop
    scenarios: tuple[str, ...]
    run: TurnRun


@attrs.frozen
class InterruptContender:
    name: str
    label: str
    run: InterruptRun
    # Interrupts a warm turn: its CLI is a live process and stays (bench.interrupt).
    live: bool = False


@attrs.frozen
class ScaleContender:
    name: str
    label: str
    idle: IdleRun
    asks: AsksRun


@attrs.frozen
class Claude:
    """The real CLI of the ``warm`` scenario: its binary, a fresh project directory, and its
    whole environment (a fresh HOME, the fake API's URL and key)."""

    binary: str
    cwd: str
    env: dict[str, str]


ConversationRun = Callable[[Claude, ConversationBody], Awaitable[None]]


@attrs.frozen
class ConversationContender:
    name: str
    label: str
    loop: Loop
    run: ConversationRun
    # The real CLI it converses with, against that CLI's fake API ("claude" or "gemini").
    cli: str = "claude"


TURN_CONTENDERS: dict[str, TurnContender] = {}
INTERRUPT_CONTENDERS: dict[str, InterruptContender] = {}
SCALE_CONTENDERS: dict[str, ScaleContender] = {}
CONVERSATION_CONTENDERS: dict[str, ConversationContender] = {}


def turn_contender(
    name: str,
    label: str,
    *,
    loop: Loop = "trio",
    scenarios: tuple[str, ...] = TURN_SCENARIOS,
) -> Callable[[TurnRun], TurnRun]:
    """Register a turn contender (the decorated function is its ``run``)."""

    def register(run: TurnRun) -> TurnRun:
        TURN_CONTENDERS[name] = TurnContender(name, label, loop, scenarios, run)
        return run

    return register


# --- floors ------------------------------------------------------------------------------
# The first three block on purpose: nothing else runs in their process, and what they show
# is the cost with no event loop at all.


@turn_contender("raw", "raw pipe read, no parsing", scenarios=(*THROUGHPUT, "tiny"))
async def _raw(fixture: Fixture, slots: int, body: TurnBody) -> None:
    # Blocking reads with no event loop in the way: the pipe itself.
    async def turn(slot: int) -> bool:
        return _raw_read([fixture.cli], b"")

    await body(turn)


@turn_contender(
    "raw-sdk-fake",
    "raw pipe read, SDK fake (handshake)",
    scenarios=(*THROUGHPUT, "tiny"),
)
async def _raw_sdk_fake(fixture: Fixture, slots: int, body: TurnBody) -> None:
    # The SDK's fake CLI served to a reader that does the handshake by hand: shows the fake
    # (a shell answering the initialize request, then cat) is not what limits the SDK.
    handshake = _INITIALIZE + _user(PROMPT)

    async def turn(slot: int) -> bool:
        return _raw_read([fixture.sdk_cli], handshake)

    await body(turn)


def _raw_read(argv: list[str], stdin: bytes) -> bool:
    with subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True
    ) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(stdin)
        proc.stdin.close()
        fd = proc.stdout.fileno()
        tail = b""
        while chunk := os.read(fd, _CHUNK):
            tail = chunk
    return b'"type":"result"' in tail[-2048:]


@turn_contender("subprocess-run", "bare subprocess.run", scenarios=("tiny",))
async def _subprocess_run(fixture: Fixture, slots: int, body: TurnBody) -> None:
    async def turn(slot: int) -> bool:
        return _bare_run(fixture.cli)

    await body(turn)


def _bare_run(cli: str) -> bool:
    done = subprocess.run([cli], stdin=subprocess.DEVNULL, capture_output=True, check=True)
    return b'"type":"result"' in done.stdout[-2048:]


@turn_contender(FLOOR, "trio floor: open_process + receive_some + split + msgspec")
async def _trio_floor(fixture: Fixture, slots: int, body: TurnBody) -> None:
    decoder = msgspec.json.Decoder()

    async def turn(slot: int) -> bool:
        last: Any = None
        async for line in _trio_lines(fixture.cli):
            last = decoder.decode(line)
        return isinstance(last, dict) and last.get("type") == "result"

    await body(turn)


@turn_contender(
    "trio-translate",
    "trio floor + agentrt's ClaudeTranslator (its decode, then feed) per line",
)
async def _trio_translate(fixture: Fixture, slots: int, body: TurnBody) -> None:
    # What the claude backend's pure translation costs on top of the floor: a bound on how
    # close ask() can come to the floor, available before the runtime core exists.
    # Lines are decoded as the driver does: the translator's typed decoder first, the
    # generic one for the lines it refuses.
    from agentrt import ResultEvent
    from agentrt.backends.claude import ClaudeTranslator

    decoder = msgspec.json.Decoder()

    async def turn(slot: int) -> bool:
        translator = ClaudeTranslator()
        typed = translator.decode
        terminal = None
        async for line in _trio_lines(fixture.cli):
            try:
                frame = typed(line)
            except msgspec.DecodeError:
                frame = decoder.decode(line)
            for event in translator.feed(frame):
                if type(event) is ResultEvent:
                    terminal = event
        return terminal is not None

    await body(turn)


async def _trio_lines(cli: str) -> AsyncIterator[bytes]:
    """The stdout lines of one run of ``cli``; callers read to the end."""
    proc = await trio.lowlevel.open_process(
        [cli], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, start_new_session=True
    )
    try:
        assert proc.stdout is not None
        async for line in _split(proc.stdout):
            yield line
        await proc.wait()
    finally:
        await _close(proc)


async def _split(stdout: trio.abc.ReceiveStream) -> AsyncIterator[bytes]:
    """The non-empty lines of ``stdout``, up to its EOF."""
    pending: list[bytes] = []
    while chunk := await stdout.receive_some(_CHUNK):
        if b"\n" not in chunk:
            # Part of a long line: join once, when its newline arrives (linear, not
            # quadratic, in the line's length).
            pending.append(chunk)
            continue
        lines = chunk.split(b"\n")
        if pending:
            pending.append(lines[0])
            lines[0] = b"".join(pending)
            pending.clear()
        pending.append(lines.pop())
        for line in lines:
            if line:
                yield line
    if rest := b"".join(pending):
        yield rest


# --- warm turns: one live process per conversation ---------------------------------------


@attrs.define(eq=False)
class _Live:
    """One process reading stream-json input, driven by hand: the floor of warm turns.
    Every line it prints is decoded (msgspec, one decoder), as the trio floor does."""

    proc: trio.Process
    lines: AsyncIterator[bytes]
    decoder: msgspec.json.Decoder[Any] = attrs.field(factory=msgspec.json.Decoder)

    @classmethod
    async def open(cls, argv: list[str], **kwargs: Any) -> _Live:
        """Spawn and do the initialize handshake."""
        proc = await trio.lowlevel.open_process(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            start_new_session=True,
            **kwargs,
        )
        assert proc.stdout is not None
        live = cls(proc, _split(proc.stdout))
        await live.send(_INITIALIZE)
        if await live.until("control_response") is None:
            raise RuntimeError(f"{argv[0]} ended before answering the initialize request")
        return live

    async def send(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        await self.proc.stdin.send_all(data)

    async def until(self, kind: str) -> Any:
        """Read up to the next frame of type ``kind`` and return it (None at EOF)."""
        async for line in self.lines:
            frame = self.decoder.decode(line)
            if type(frame) is dict and frame.get("type") == kind:
                return frame
        return None

    async def turn(self, prompt: str) -> Any:
        """One user message, read to its result; the result frame (None at EOF)."""
        await self.send(_user(prompt))
        return await self.until("result")

    async def aclose(self) -> None:
        with trio.CancelScope(shield=True):
            assert self.proc.stdin is not None
            await self.proc.stdin.aclose()
            with trio.move_on_after(10):
                await self.proc.wait()
            await _close(self.proc)


@turn_contender(
    LIVE_FLOOR, "live trio floor: one process kept, a user message per turn, read to its result"
)
async def _live_floor(fixture: Fixture, slots: int, body: TurnBody) -> None:
    # The live fake CLI per slot, spawned and past its handshake before the clock starts:
    # a turn is one write and the floor's reading of the fixture.
    fakes: list[_Live] = []
    try:
        for _ in range(slots):
            fakes.append(await _Live.open([fixture.live_cli]))

        async def turn(slot: int) -> bool:
            return await fakes[slot].turn(PROMPT) is not None

        await body(turn)
    finally:
        for fake in fakes:
            await fake.aclose()


# --- claude-agent-sdk ----------------------------------------------------------------------


async def _sdk(fixture: Fixture, slots: int, body: TurnBody) -> None:
    # The SDK's defaults, as a Python user would call it; only cli_path points at the fake.
    from claude_agent_sdk import ClaudeAgentOptions, ResultMessage, query

    options = ClaudeAgentOptions(cli_path=fixture.sdk_cli)

    async def turn(slot: int) -> bool:
        last = None
        async for message in query(prompt=PROMPT, options=options):
            last = message
        return isinstance(last, ResultMessage)

    await body(turn)


# The SDK runs on anyio, so the same code serves both event loops.
turn_contender("sdk-asyncio", "claude_agent_sdk.query() on asyncio", loop="asyncio")(_sdk)
turn_contender("sdk-trio", "claude_agent_sdk.query() on trio (anyio)", loop="trio")(_sdk)


# --- agentrt: turns ---------------------------------------------------------------------


async def _agentrt_turns(
    fixture: Fixture, slots: int, body: TurnBody, *, warm: bool, cgroups: bool = True
) -> None:
    # One claude agent per slot with the fake as its binary; starting them is untimed. Each
    # turn is a whole ask(): spawn (per-turn) or the prompt written to the warm process,
    # the driver's bounds, translation, events, retention, the Response, and the check that
    # the turn's processes are gone. A warm agent answers one ask before the clock starts,
    # so every timed turn is a follow-up on its live process.
    import agentrt

    async with agentrt.open_runtime(store=agentrt.MemoryStore(), cgroups=cgroups) as rt:
        for slot in range(slots):
            await rt.start_agent(
                agentrt.Agent,
                name=f"a{slot}",
                backend="claude",
                binary=fixture.live_cli if warm else fixture.cli,
                retention="compact",
                keep_alive=KEEP_ALIVE if warm else None,
            )

        async def turn(slot: int) -> bool:
            response = await rt.ask(f"a{slot}", PROMPT)
            return response.stop_reason is agentrt.StopReason.COMPLETE

        if warm:
            for slot in range(slots):
                await turn(slot)
        await body(turn)


@turn_contender(AGENTRT, "agentrt ask(), claude backend, retention compact")
async def _agentrt(fixture: Fixture, slots: int, body: TurnBody) -> None:
    await _agentrt_turns(fixture, slots, body, warm=False)


@turn_contender(
    AGENTRT_NO_CGROUP,
    "agentrt ask(), claude backend, retention compact, cgroups=False",
    scenarios=("tiny", "concurrent"),
)
async def _agentrt_no_cgroup(fixture: Fixture, slots: int, body: TurnBody) -> None:
    await _agentrt_turns(fixture, slots, body, warm=False, cgroups=False)


@turn_contender(AGENTRT_WARM, "agentrt ask(), warm (keep_alive), retention compact")
async def _agentrt_warm(fixture: Fixture, slots: int, body: TurnBody) -> None:
    await _agentrt_turns(fixture, slots, body, warm=True)


# --- interrupt latency ---------------------------------------------------------------------


def interrupt_contender(
    name: str, label: str, *, live: bool = False
) -> Callable[[InterruptRun], InterruptRun]:
    """Register an interrupt contender (the decorated function is its ``run``)."""

    def register(run: InterruptRun) -> InterruptRun:
        INTERRUPT_CONTENDERS[name] = InterruptContender(name, label, run, live)
        return run

    return register


@interrupt_contender(FLOOR, "floor: SIGTERM to the group and to the known tree")
async def _interrupt_floor(cli: str, body: Callable[[Start], Awaitable[None]]) -> None:
    # The floor is told the tree (the fake prints its pids on its first line) and signals
    # every member at once; what remains is signal delivery, exit and our noticing it.
    # Orphans come back to us (subreaper) and are reaped by pid, so nothing outlives us.
    _become_subreaper()
    adopted: list[int] = []

    async def start(nursery: trio.Nursery) -> Interrupt:
        _reap(adopted)
        proc = await trio.lowlevel.open_process(
            [cli], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, start_new_session=True
        )
        assert proc.stdout is not None
        first = b""
        while b"\n" not in first:
            chunk = await proc.stdout.receive_some(_CHUNK)
            if not chunk:
                raise RuntimeError(f"{cli} ended before printing its tree")
            first += chunk
        tree: list[int] = msgspec.json.decode(first.split(b"\n", 1)[0])["pids"]
        adopted.extend(pid for pid in tree if pid != proc.pid)
        nursery.start_soon(_drain, proc)

        def interrupt() -> None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            for pid in tree:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)

        return interrupt

    try:
        await body(start)
    finally:
        _reap(adopted)


async def _drain(proc: trio.Process) -> None:
    assert proc.stdout is not None
    try:
        while await proc.stdout.receive_some(_CHUNK):
            pass
        await proc.wait()
    finally:
        await _close(proc)


async def _close(proc: trio.Process) -> None:
    # Normally a no-op past EOF and exit; on an error or cancellation, nothing outlives us.
    with trio.CancelScope(shield=True):
        if proc.stdout is not None:
            await proc.stdout.aclose()
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


_PR_SET_CHILD_SUBREAPER = 36


def _become_subreaper() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def _reap(pids: list[int]) -> None:
    # Called once the harness has seen every one of them exit: none can block.
    for pid in pids:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
    pids.clear()


@interrupt_contender(
    LIVE_FLOOR, "floor, warm: the interrupt request, and SIGTERM to the known children", live=True
)
async def _interrupt_live_floor(cli: str, body: Callable[[Start], Awaitable[None]]) -> None:
    # One live fake tree driven by hand: told the children (the init line), it signals them
    # and sends the CLI its interrupt request, then reads the turn to its result.
    _become_subreaper()
    adopted: list[int] = []
    live = await _Live.open([cli])
    try:

        async def start(nursery: trio.Nursery) -> Interrupt:
            _reap(adopted)
            await live.send(_user(PROMPT))
            init = await live.until("system")
            tree: list[int] = init["pids"]
            adopted.extend(tree)

            async def interrupt() -> None:
                for pid in tree:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGTERM)
                await live.send(_INTERRUPT)
                if await live.until("result") is None:
                    raise RuntimeError(f"{cli} ended instead of answering the interrupt")

            return interrupt

        await body(start)
    finally:
        await live.aclose()
        _reap(adopted)


async def _agentrt_interrupts(
    cli: str, body: Callable[[Start], Awaitable[None]], *, warm: bool
) -> None:
    # Per turn: await rt.interrupt() sends the claude backend's SIGINT to the group, then the
    # turn's kill ladder finds the rest of the tree (its setsid'd child too) and SIGTERMs
    # it. Warm: the CLI's own interrupt request in band; the CLI ends the turn and stays,
    # and the turn's end kills what the turn started.
    import agentrt

    async with agentrt.open_runtime(store=agentrt.MemoryStore()) as rt:
        # Warm: no recycling, so every interrupted turn must leave the same process behind.
        warm_options = {"keep_alive": KEEP_ALIVE, "recycle_turns": 10**9} if warm else {}
        await rt.start_agent(agentrt.Agent, name="a", backend="claude", binary=cli, **warm_options)
        warm_pid: list[int | None] = []

        async def ask() -> None:
            try:
                await rt.ask("a", PROMPT)
            except agentrt.TurnFailed as failed:
                if failed.reason is not agentrt.StopReason.INTERRUPTED:
                    raise
            else:
                raise RuntimeError("an interrupted turn completed")
            if warm:
                # Answered in band, the interrupt keeps the process for the next turn.
                warm_pid.append((await rt.status("a")).cli_pid)
                if None in warm_pid or len(set(warm_pid)) != 1:
                    raise RuntimeError(f"the warm CLI did not stay: pids {warm_pid}")

        async def interrupt() -> None:
            if not await rt.interrupt("a"):
                raise RuntimeError("interrupt() found no running turn")

        async def start(nursery: trio.Nursery) -> Interrupt:
            nursery.start_soon(ask)
            return interrupt

        await body(start)


@interrupt_contender(AGENTRT, "agentrt interrupt(), claude backend")
async def _agentrt_interrupt(cli: str, body: Callable[[Start], Awaitable[None]]) -> None:
    await _agentrt_interrupts(cli, body, warm=False)


@interrupt_contender(AGENTRT_WARM, "agentrt interrupt(), warm (in band)", live=True)
async def _agentrt_warm_interrupt(cli: str, body: Callable[[Start], Awaitable[None]]) -> None:
    await _agentrt_interrupts(cli, body, warm=True)


# --- idle agents and scripted round trips ---------------------------------------------------


async def _idle_floor(n: int, checkpoint: Callable[[], Awaitable[None]]) -> None:
    # An actor's least possible state: one task blocked on its own bounded mailbox.
    async def actor(mailbox: trio.MemoryReceiveChannel[object]) -> None:
        async for _ in mailbox:
            pass

    senders = []
    async with trio.open_nursery() as nursery:
        for _ in range(n):
            send, receive = trio.open_memory_channel[object](16)
            senders.append(send)
            nursery.start_soon(actor, receive)
        await trio.testing.wait_all_tasks_blocked()
        await checkpoint()
        nursery.cancel_scope.cancel()


async def _asks_floor(body: Callable[[Ask], Awaitable[None]]) -> None:
    # One round trip through an actor task: request on its mailbox, reply on a channel.
    requests_send, requests = trio.open_memory_channel[object](16)
    replies_send, replies = trio.open_memory_channel[object](1)

    async def actor() -> None:
        async for prompt in requests:
            await replies_send.send(prompt)

    async def ask() -> object:
        await requests_send.send(PROMPT)
        return await replies.receive()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(actor)
        await body(ask)
        nursery.cancel_scope.cancel()


SCALE_CONTENDERS[FLOOR] = ScaleContender(
    FLOOR, "floor: trio task + memory channel per agent", _idle_floor, _asks_floor
)

# --- agentrt: idle agents and scripted round trips -------------------------------------


def _scripted() -> Any:
    # A short Claude-like reply: a session event, a text event, a result. One backend object
    # serves every agent; record=False keeps it from growing with the asks.
    from agentrt.testing import ScriptedBackend, reply

    script = reply("ok", session_id="s-1")
    return ScriptedBackend(default=lambda call: script, record=False)


async def _agentrt_idle(n: int, checkpoint: Callable[[], Awaitable[None]]) -> None:
    # Plain agents with the default options, each after one ask (so it holds a session id).
    import agentrt

    backend = _scripted()
    async with agentrt.open_runtime(store=agentrt.MemoryStore()) as rt:
        await rt.start_agent(agentrt.Agent, name="warm", backend=backend)
        await rt.ask("warm", PROMPT)
        for i in range(n):
            await rt.start_agent(agentrt.Agent, name=f"a{i}", backend=backend)
        for i in range(n):
            await rt.ask(f"a{i}", PROMPT)
        await trio.testing.wait_all_tasks_blocked()
        await checkpoint()


async def _agentrt_asks(body: Callable[[Ask], Awaitable[None]]) -> None:
    # Each ask is a whole turn: mailbox, backend.command, the scripted run, three events
    # translated, stamped, retained and delivered, the Response, the caller woken.
    import agentrt

    async with agentrt.open_runtime(store=agentrt.MemoryStore()) as rt:
        await rt.start_agent(agentrt.Agent, name="a", backend=_scripted())

        async def ask() -> object:
            return await rt.ask("a", PROMPT)

        await body(ask)


SCALE_CONTENDERS[AGENTRT] = ScaleContender(
    AGENTRT, "agentrt, scripted backend", _agentrt_idle, _agentrt_asks
)


# --- the real claude: one conversation -----------------------------------------------------


def conversation_contender(
    name: str, label: str, *, loop: Loop = "trio", cli: str = "claude"
) -> Callable[[ConversationRun], ConversationRun]:
    """Register a conversation contender (the decorated function is its ``run``)."""

    def register(run: ConversationRun) -> ConversationRun:
        CONVERSATION_CONTENDERS[name] = ConversationContender(name, label, loop, run, cli)
        return run

    return register


# agentrt's argv for a live claude (its backend's defaults), so the floor does the same work.
LIVE_CLAUDE_ARGS = (
    "-p",
    "--output-format",
    "stream-json",
    "--verbose",
    "--input-format",
    "stream-json",
    "--include-partial-messages",
)


# What claude-agent-sdk runs (its defaults): no -p, an empty system prompt (so a shorter
# model request than Claude Code's own), and its entrypoint in the environment.
SDK_CLAUDE_ARGS = (
    "--output-format",
    "stream-json",
    "--verbose",
    "--system-prompt",
    "",
    "--include-partial-messages",
    "--input-format",
    "stream-json",
)


async def _hand_driven(
    claude: Claude, body: ConversationBody, args: tuple[str, ...], env: dict[str, str]
) -> None:
    live: _Live | None = None

    async def say(prompt: str) -> str | None:
        nonlocal live
        if live is None:
            live = await _Live.open(
                [claude.binary, *args],
                env={**claude.env, **env},
                cwd=claude.cwd,
                stderr=subprocess.DEVNULL,
            )
        result = await live.turn(prompt)
        return None if result is None else result.get("result")

    try:
        await body(say)
    finally:
        if live is not None:
            await live.aclose()


@conversation_contender(
    CLAUDE_FLOOR, "floor: one stream-json claude driven by hand (initialize, a message a turn)"
)
async def _claude_floor(claude: Claude, body: ConversationBody) -> None:
    await _hand_driven(claude, body, LIVE_CLAUDE_ARGS, {})


@conversation_contender(
    "claude-floor-sdk-argv", "floor, with the SDK's argv (empty system prompt, no -p)"
)
async def _claude_floor_sdk_argv(claude: Claude, body: ConversationBody) -> None:
    # Tells the SDK's own cost from that of the CLI it runs, which does less per turn.
    await _hand_driven(claude, body, SDK_CLAUDE_ARGS, {"CLAUDE_CODE_ENTRYPOINT": "sdk-py"})


async def _agentrt_conversation(
    claude: Claude, body: ConversationBody, keep_alive: float | None, **options: Any
) -> None:
    import agentrt

    # The claude backend runs this harness's claude unless told another binary; another
    # backend names its own (or, as the acp backend, a command).
    binary = {"binary": claude.binary} if options.get("backend", "claude") == "claude" else {}
    async with agentrt.open_runtime(store=agentrt.MemoryStore()) as rt:
        await rt.start_agent(
            agentrt.Agent,
            name="coder",
            **{"backend": "claude", **binary, **options},
            cwd=claude.cwd,
            env_policy="isolated",
            env=claude.env,
            keep_alive=keep_alive,
        )

        async def say(prompt: str) -> str | None:
            response = await rt.ask("coder", prompt)
            return response.text if response.stop_reason is agentrt.StopReason.COMPLETE else None

        await body(say)


@conversation_contender(AGENTRT, "agentrt ask(), per turn (keep_alive=None: --resume each turn)")
async def _agentrt_per_turn(claude: Claude, body: ConversationBody) -> None:
    await _agentrt_conversation(claude, body, None)


@conversation_contender(
    "agentrt-gemini",
    "agentrt ask(), gemini per turn (--resume each turn; the fake Gemini API)",
    cli="gemini",
)
async def _agentrt_gemini_per_turn(gemini: Claude, body: ConversationBody) -> None:
    import agentrt

    async with agentrt.open_runtime(store=agentrt.MemoryStore()) as rt:
        await rt.start_agent(
            agentrt.Agent,
            name="coder",
            backend="gemini",
            binary=gemini.binary,
            cwd=gemini.cwd,
            env_policy="isolated",
            env=gemini.env,
            gemini_home=gemini.env["HOME"],
            model="gemini-2.5-flash",  # pinned: no routing call before each turn
            max_attempts=1,
        )

        async def say(prompt: str) -> str | None:
            response = await rt.ask("coder", prompt)
            return response.text if response.stop_reason is agentrt.StopReason.COMPLETE else None

        await body(say)


@conversation_contender(AGENTRT_WARM, f"agentrt ask(), warm (keep_alive={KEEP_ALIVE:g})")
async def _agentrt_warm_conversation(claude: Claude, body: ConversationBody) -> None:
    await _agentrt_conversation(claude, body, KEEP_ALIVE)


@conversation_contender(
    "agentrt-warm-sdk-prompt", 'agentrt ask(), warm, system_prompt="" (the SDK\'s default)'
)
async def _agentrt_warm_sdk_prompt(claude: Claude, body: ConversationBody) -> None:
    await _agentrt_conversation(claude, body, KEEP_ALIVE, system_prompt="")


# Qwen Code beside claude, on the same fake API (its Anthropic auth reads the same
# ANTHROPIC_BASE_URL and key): the pinned binary where `make qwen-cli` puts it.
_ROOT = Path(__file__).resolve().parents[1]
_QWEN_VERSION = (_ROOT / "tests" / "realcli" / "QWEN_VERSION").read_text().strip()
QWEN_BINARY = _ROOT / ".cache" / "npm" / f"qwen-{_QWEN_VERSION}" / "node_modules" / ".bin" / "qwen"
QWEN_CONTENDERS = ("agentrt-qwen", "agentrt-qwen-warm")
_QWEN_OPTIONS = {"backend": "qwen", "auth_type": "anthropic", "model": "claude-fake"}


@conversation_contender(QWEN_CONTENDERS[0], "agentrt ask(), qwen backend, per turn (--resume)")
async def _agentrt_qwen_per_turn(claude: Claude, body: ConversationBody) -> None:
    await _agentrt_conversation(claude, body, None, binary=str(QWEN_BINARY), **_QWEN_OPTIONS)


@conversation_contender(
    QWEN_CONTENDERS[1], f"agentrt ask(), qwen backend, warm (keep_alive={KEEP_ALIVE:g})"
)
async def _agentrt_qwen_warm(claude: Claude, body: ConversationBody) -> None:
    await _agentrt_conversation(claude, body, KEEP_ALIVE, binary=str(QWEN_BINARY), **_QWEN_OPTIONS)


# opencode and pi beside claude, on the same fake API (each names it as a custom provider
# of its own: Anthropic's API at the fake's base URL, the key by its variable), one
# process per turn, and warm (opencode: one `opencode acp`; pi: one `pi --mode rpc`); and
# `opencode acp` on the acp backend, per turn and warm: the pinned binaries where
# `make opencode-cli` and `make pi-cli` put them.
def _pinned_npm(cli: str) -> Path:
    version = (_ROOT / "tests" / "realcli" / f"{cli.upper()}_VERSION").read_text().strip()
    return _ROOT / ".cache" / "npm" / f"{cli}-{version}" / "node_modules" / ".bin" / cli


OPENCODE_BINARY, PI_BINARY = _pinned_npm("opencode"), _pinned_npm("pi")
# The start-up fetches opencode would make (models catalogue, LSP servers, plugins): off.
_OPENCODE_OFFLINE = {
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
}


def _opencode_config(claude: Claude) -> dict[str, Any]:
    provider = {
        "npm": "@ai-sdk/anthropic",
        "options": {
            "baseURL": f"{claude.env['ANTHROPIC_BASE_URL']}/v1",
            "apiKey": "{env:ANTHROPIC_API_KEY}",
        },
        "models": {"claude-fake": {}},
    }
    return {"autoupdate": False, "provider": {"fake": provider}}


def _opencode_options(claude: Claude) -> tuple[Claude, dict[str, Any]]:
    offline = attrs.evolve(claude, env={**claude.env, **_OPENCODE_OFFLINE})
    options = {
        "backend": "opencode",
        "binary": str(OPENCODE_BINARY),
        "model": "fake/claude-fake",
        "config": _opencode_config(claude),
    }
    return offline, options


@conversation_contender("agentrt-opencode", "agentrt ask(), opencode backend, per turn (--session)")
async def _agentrt_opencode_per_turn(claude: Claude, body: ConversationBody) -> None:
    offline, options = _opencode_options(claude)
    await _agentrt_conversation(offline, body, None, **options)


@conversation_contender(
    "agentrt-opencode-warm",
    f"agentrt ask(), opencode backend, warm (keep_alive={KEEP_ALIVE:g}: one opencode acp)",
)
async def _agentrt_opencode_warm(claude: Claude, body: ConversationBody) -> None:
    offline, options = _opencode_options(claude)
    await _agentrt_conversation(offline, body, KEEP_ALIVE, **options)


def _acp_opencode(claude: Claude) -> tuple[Claude, dict[str, Any]]:
    # What the opencode backend writes for `opencode acp`, by hand: the config in a file
    # (the model, no title call), a password for its loopback server.
    config = {
        **_opencode_config(claude),
        "model": "fake/claude-fake",
        "agent": {"title": {"disable": True}},
    }
    path = os.path.join(claude.env["HOME"], "opencode-acp.json")
    with open(path, "w") as file:
        json.dump(config, file)
    env = {
        **claude.env,
        **_OPENCODE_OFFLINE,
        "OPENCODE_CONFIG": path,
        "OPENCODE_SERVER_PASSWORD": secrets.token_urlsafe(24),
    }
    options = {"backend": "acp", "command": [str(OPENCODE_BINARY), "acp"]}
    return attrs.evolve(claude, env=env), options


@conversation_contender(
    "agentrt-acp-opencode", "agentrt ask(), acp backend on opencode acp, a process per turn"
)
async def _agentrt_acp_opencode_per_turn(claude: Claude, body: ConversationBody) -> None:
    with_config, options = _acp_opencode(claude)
    await _agentrt_conversation(with_config, body, None, **options)


@conversation_contender(
    "agentrt-acp-opencode-warm",
    f"agentrt ask(), acp backend on opencode acp, warm (keep_alive={KEEP_ALIVE:g})",
)
async def _agentrt_acp_opencode_warm(claude: Claude, body: ConversationBody) -> None:
    with_config, options = _acp_opencode(claude)
    await _agentrt_conversation(with_config, body, KEEP_ALIVE, **options)


def _pi_options(claude: Claude) -> dict[str, Any]:
    provider = {
        "baseUrl": claude.env["ANTHROPIC_BASE_URL"],
        "api": "anthropic-messages",
        "apiKey": "ANTHROPIC_API_KEY",
        "models": [{"id": "claude-fake"}],
    }
    return {
        "backend": "pi",
        "binary": str(PI_BINARY),
        "pi_home": os.path.join(claude.env["HOME"], ".pi", "agent"),
        "models": {"providers": {"fake": provider}},
        "provider": "fake",
        "model": "claude-fake",
    }


@conversation_contender("agentrt-pi", "agentrt ask(), pi backend, per turn (--session)")
async def _agentrt_pi_per_turn(claude: Claude, body: ConversationBody) -> None:
    await _agentrt_conversation(claude, body, None, **_pi_options(claude))


@conversation_contender(
    "agentrt-pi-warm", f"agentrt ask(), pi backend, warm (keep_alive={KEEP_ALIVE:g})"
)
async def _agentrt_pi_warm(claude: Claude, body: ConversationBody) -> None:
    await _agentrt_conversation(claude, body, KEEP_ALIVE, **_pi_options(claude))


@conversation_contender("sdk-client", "claude_agent_sdk.ClaudeSDKClient on asyncio", loop="asyncio")
async def _sdk_client(claude: Claude, body: ConversationBody) -> None:
    # The SDK's defaults but for the binary, the directory, the environment (merged into the
    # SDK's own) and partial messages (agentrt's default, so the CLI streams the same lines).
    from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient, ResultMessage

    options = ClaudeAgentOptions(
        cli_path=claude.binary, cwd=claude.cwd, env=claude.env, include_partial_messages=True
    )
    client = ClaudeSDKClient(options)
    connected = False

    async def say(prompt: str) -> str | None:
        nonlocal connected
        if not connected:
            await client.connect()
            connected = True
        await client.query(prompt)
        async for message in client.receive_response():
            if isinstance(message, ResultMessage):
                return message.result
        return None

    try:
        await body(say)
    finally:
        await client.disconnect()
