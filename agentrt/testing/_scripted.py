"""``ScriptedBackend``: a backend whose turns follow scripts, without any process.

Each turn takes the next script (a list of steps) pushed with `ScriptedBackend.push`, or,
when none is left, the one its ``default`` function makes for the prompt. Steps:

- an `Event`: emitted as a frame (the scripted translator passes events through; any
  other value becomes a `RawEvent`, like an unknown CLI frame); the frames up to the next
  `Gate`, `Sleep`, `Exit` or `Raise` go to the turn together, as one read of a CLI's lines
  (a stop one of them causes takes effect from the next read: ``Sleep(0)`` between two
  frames has them read apart);
- `Gate`: the turn blocks until the test calls `Gate.release`;
- `Sleep`: the turn sleeps (use with ``trio.testing.MockClock``);
- `Fail`: a terminal `ErrorEvent`, then the "process" exits with status 1;
- `Exit`: the "process" ends with this exit status, without a terminal event;
- `Raise`: the backend raises mid-stream (the turn fails with ``turn_crashed``).

Every turn is recorded in `ScriptedBackend.calls`: the prompt, the session id it was
asked to resume, and its options.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs
import cattrs
import trio
from cattrs.errors import ClassValidationError, ForbiddenExtraKeysError

from .._errors import InvalidOptions
from .._events import (
    ErrorEvent,
    Event,
    RawEvent,
    ResultEvent,
    SessionEvent,
    SessionTotals,
    StopReason,
    TextEvent,
)
from ..backend import Capabilities, Command, ExitStatus


@attrs.frozen
class ScriptedOptions:
    """The scripted backend's options: ``cwd`` only (any other key is `InvalidOptions`)."""

    cwd: str | None = None


_OPTION_NAMES = tuple(field.name for field in attrs.fields(ScriptedOptions))


@attrs.frozen
class Call:
    """What one turn was given."""

    prompt: str
    session_id: str | None
    options: ScriptedOptions


class Gate:
    """A point in a script where the turn waits until the test releases it."""

    def __init__(self) -> None:
        self._reached = trio.Event()
        self._released = trio.Event()

    @property
    def reached(self) -> bool:
        return self._reached.is_set()

    async def wait_reached(self) -> None:
        """Wait until a turn has arrived at this gate.

        Cancellation: safe."""
        await self._reached.wait()

    def release(self) -> None:
        """Let the turn waiting at this gate (or the next one to arrive) go on."""
        self._released.set()

    async def _pass(self) -> None:
        self._reached.set()
        await self._released.wait()


@attrs.frozen
class Sleep:
    """A script step: the turn sleeps ``seconds`` (on the test's clock: with
    ``trio.testing.MockClock`` the sleep is free and the time exact). A bound or an interrupt
    ends it as it would end a CLI that says nothing."""

    seconds: float


@attrs.frozen
class Fail:
    """A script step: a terminal `ErrorEvent` with ``reason`` and ``message`` (and, for a
    usage limit, ``resets_at``: epoch seconds), then the "process" exits with status 1, so
    the turn fails with that reason."""

    reason: StopReason = StopReason.CLI_ERROR
    message: str = "scripted failure"
    resets_at: float | None = None


@attrs.frozen
class Exit:
    """A script step: the "process" ends with this exit status (or ``signal``) without a
    terminal event, as a CLI that dies mid-turn does (``malformed_output``, or
    ``process_crashed`` for a signal)."""

    returncode: int | None = 0
    signal: int | None = None


@attrs.frozen
class Raise:
    """A script step: the backend raises ``error`` mid-stream, as a translator bug would (the
    turn fails with ``turn_crashed``)."""

    error: Exception


# An Event, Gate, Sleep, Fail, Exit or Raise; anything else is emitted as a raw frame.
Step = object
Script = Sequence[Step]


def reply(text: str, *, session_id: str | None = None) -> list[Step]:
    """A complete successful turn: a session event (if ``session_id``), the text, the result."""
    steps: list[Step] = []
    if session_id is not None:
        steps.append(SessionEvent(session_id=session_id))
    steps.append(TextEvent(text=text, message_boundary=True))
    steps.append(ResultEvent(text=text, session_id=session_id))
    return steps


_CONTROL_STEPS = (Gate, Sleep, Fail, Exit, Raise)


class _Translator:
    decode = None  # every line decoded generically

    def feed(self, frame: Any) -> Sequence[Event]:
        if isinstance(frame, Event):
            return (frame,)
        return (RawEvent(data=frame, note="not an event"),)

    def finish(self, exit_status: ExitStatus, stderr_tail: str) -> Event | None:
        if exit_status.signal is not None:
            return ErrorEvent(
                reason=StopReason.PROCESS_CRASHED,
                message=f"killed by signal {exit_status.signal}",
            )
        if exit_status.returncode:
            return ErrorEvent(
                reason=StopReason.CLI_ERROR, message=f"exited with status {exit_status.returncode}"
            )
        return None  # a clean exit without a result: the turn calls it malformed


_TRANSLATOR = _Translator()
_IN_PROCESS = Capabilities(in_process=True)
_converter = cattrs.Converter(forbid_extra_keys=True)


class ScriptedBackend:
    """An in-process backend for tests, demos and benchmarks (see the module docstring).

    Implements both `agentrt.backend.Backend` and `agentrt.backend.InProcessBackend`:
    its turns run in process, so an agent on it has no CLI to keep alive (``keep_alive``)
    or to ask (``approve_tool``, ``handle_hook``).
    """

    name = "scripted"

    def __init__(
        self,
        *scripts: Script,
        default: Callable[[Call], Script] | None = None,
        record: bool = True,
    ) -> None:
        self._scripts: deque[Script] = deque(scripts)
        self._default = default
        self._record = record
        self.calls: list[Call] = []
        self._pending: dict[int, Call] = {}
        self._ids = 0

    def push(self, *steps: Step) -> None:
        """Add the script of one more turn."""
        self._scripts.append(steps)

    @property
    def prompts(self) -> list[str]:
        return [call.prompt for call in self.calls]

    @property
    def session_ids(self) -> list[str | None]:
        return [call.session_id for call in self.calls]

    def parse_options(self, raw: Mapping[str, Any]) -> ScriptedOptions:
        try:
            return _converter.structure(dict(raw), ScriptedOptions)
        except ClassValidationError as exc:
            for error in exc.exceptions:
                if isinstance(error, ForbiddenExtraKeysError):
                    key = sorted(error.extra_fields)[0]
                    raise InvalidOptions(
                        key,
                        raw[key],
                        "not an option of the scripted backend",
                        known_options=_OPTION_NAMES,
                    ) from exc
            raise InvalidOptions("options", dict(raw), str(exc)) from exc

    def command(self, options: ScriptedOptions, prompt: str, *, session_id: str | None) -> Command:
        call = Call(prompt, session_id, options)
        if self._record:
            self.calls.append(call)
        self._ids += 1
        self._pending[self._ids] = call
        return Command(argv=("scripted", str(self._ids)), cwd=options.cwd)

    def translator(
        self, options: ScriptedOptions, *, baseline: SessionTotals | None = None
    ) -> _Translator:
        # Scripted events carry each turn's own usage: nothing to subtract.
        return _TRANSLATOR

    def version_command(self, options: ScriptedOptions) -> Command:
        return Command(argv=("scripted", "--version"))

    def capabilities(self, options: ScriptedOptions) -> Capabilities:
        return _IN_PROCESS

    async def run(
        self, command: Command, emit: Callable[[Iterable[Any]], Awaitable[None]]
    ) -> ExitStatus:
        call = self._pending.pop(int(str(command.argv[1])))
        if self._scripts:
            script = self._scripts.popleft()
        elif self._default is not None:
            script = self._default(call)
        else:
            raise LookupError(f"no script left for the turn with prompt {call.prompt!r}")
        # The frames between two control steps go as one batch, as a CLI's lines printed
        # together reach the turn in one read.
        frames: list[Step] = []
        for step in script:
            if not isinstance(step, _CONTROL_STEPS):  # most steps are frames
                frames.append(step)
                continue
            if isinstance(step, Fail):
                frames.append(
                    ErrorEvent(reason=step.reason, message=step.message, resets_at=step.resets_at)
                )
            if frames:
                await emit(frames)
                frames = []
            if isinstance(step, Gate):
                await step._pass()
            elif isinstance(step, Sleep):
                await trio.sleep(step.seconds)
            elif isinstance(step, Fail):
                return ExitStatus(1)
            elif isinstance(step, Exit):
                return ExitStatus(step.returncode, step.signal)
            else:
                assert isinstance(step, Raise)
                raise step.error
        if frames:
            await emit(frames)
        return ExitStatus(0)
