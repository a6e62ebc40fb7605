"""How an agent instance runs its turns, decided once, here, when the instance is made.

`choose_mode` reads the backend's `Capabilities` for the instance's options, its
``keep_alive`` and the callbacks its class overrides, and returns one `Mode`:

- `InProcess`: the backend makes the frames itself (the scripted test backend); no process;
- `OneShot`: one CLI process per turn, read to its end;
- `Live`: a live CLI process, with stdin kept open for the turn's prompt and for answers to
  the CLI's questions (approvals, hooks): one per turn (``keep_alive`` None), or kept warm
  between turns for ``keep_alive`` seconds. Also every turn of a backend whose CLI takes
  prompts over its live channel only (``Capabilities.per_turn`` False: an ACP agent).

A combination the backend cannot honour is refused with `InvalidOptions`, naming the
option and why, before anything runs: ``handle_hook`` on a CLI without hooks, ``approve_tool``
on options that give no approvals, ``keep_alive`` without a live process, ``when_busy="steer"``
without a warm CLI that takes a message mid-turn.

The mode carries what the rest of the runtime asks of it, so that only this module tells
the modes apart: whether its turns run CLI processes (``runs_processes``), whether the
instance holds one live CLI for its life (``holds_cli``), whether the CLI's version is
probed (``probe_version``), which requests its warm CLI takes between turns (``warm``,
``calls``), and what a turn reads its frames from (``frame_source``).
"""

from __future__ import annotations

import functools
import math
import weakref
from collections.abc import Callable
from typing import Any, ClassVar

import attrs

from ._channel import ChannelCall
from ._driver._lifecycle import LiveSettings
from ._driver._process_slots import ProcessSlots
from ._errors import InvalidOptions
from ._hooks import HookKind
from ._options import AgentOptions
from ._status import ModeName
from ._turn_source import ChannelSource, FrameSource, InProcessSource
from .backend import Backend, Capabilities, InProcessBackend

# What makes an instance's CLI lifecycle from the live CLI's settings (None: one process
# per turn); the actor's, which holds what the lifecycle needs besides.
OpenCli = Callable[[LiveSettings | None], ChannelSource]


@attrs.frozen
class InProcess:
    """The backend's ``run`` makes each turn's frames; no process runs."""

    runner: InProcessBackend
    runs_processes: ClassVar[bool] = False
    holds_cli: ClassVar[bool] = False
    probe_version: ClassVar[bool] = False
    warm: ClassVar[bool] = False
    calls: ClassVar[frozenset[ChannelCall]] = frozenset()
    name: ClassVar[ModeName] = "in_process"

    def frame_source(
        self,
        backend: Backend,
        backend_options: Any,
        options: AgentOptions,
        slots: ProcessSlots,
        open_cli: OpenCli,
    ) -> FrameSource:
        """What a turn reads: the frames the runner makes as it makes them."""
        return InProcessSource(self.runner, backend, backend_options, slots)


@attrs.frozen
class OneShot:
    """One CLI process per turn, its prompt on argv or stdin, read until it exits.
    ``probe_version``: the CLI reports no version of its own, so the runtime asks it
    (`Capabilities.version_probe`)."""

    probe_version: bool = False
    runs_processes: ClassVar[bool] = True
    holds_cli: ClassVar[bool] = False
    warm: ClassVar[bool] = False
    calls: ClassVar[frozenset[ChannelCall]] = frozenset()
    name: ClassVar[ModeName] = "one_shot"

    def frame_source(
        self,
        backend: Backend,
        backend_options: Any,
        options: AgentOptions,
        slots: ProcessSlots,
        open_cli: OpenCli,
    ) -> FrameSource:
        """What a turn reads: a CLI process of its own."""
        return open_cli(None)


@attrs.frozen
class Live:
    """A live CLI process (`agentrt.backend.LiveBackend`): kept ``keep_alive`` seconds
    between turns (``"warm"``), or one per turn when None (``"live"``: the channel that
    ``approvals`` and ``hooks`` need)."""

    keep_alive: float | None
    approvals: bool
    # The hook kinds the agent is called for (none: no hooks).
    hooks: frozenset[HookKind]
    # The runtime's requests its process takes between turns (Runtime.set_model, ...).
    calls: frozenset[ChannelCall] = frozenset()
    # As OneShot's: the runtime asks the CLI its version (Capabilities.version_probe).
    probe_version: bool = False
    runs_processes: ClassVar[bool] = True
    # The instance holds the live CLI's lifecycle for its whole life (the actor's nursery).
    holds_cli: ClassVar[bool] = True

    @property
    def name(self) -> ModeName:
        return "live" if self.keep_alive is None else "warm"

    @property
    def warm(self) -> bool:
        """Whether the CLI lives on between turns, so that it takes ``calls`` there."""
        return self.keep_alive is not None

    def frame_source(
        self,
        backend: Backend,
        backend_options: Any,
        options: AgentOptions,
        slots: ProcessSlots,
        open_cli: OpenCli,
    ) -> FrameSource:
        """What a turn reads: the instance's live CLI, under the agent's options."""
        return open_cli(
            LiveSettings(
                keep_alive=self.keep_alive,
                approvals=self.approvals,
                hooks=self.hooks,
                kill_grace=options.kill_grace,
                recycle_turns=options.recycle_turns,
                recycle_rss_bytes=options.recycle_rss_bytes,
                background=options.background,
            )
        )


Mode = InProcess | OneShot | Live

# Modes are shared between the instances that run alike (memory per idle agent). An
# in-process mode is found by its backend's id while some instance holds it: it holds the
# backend, so that id is not reused meanwhile.
ONE_SHOT = OneShot()
_ONE_SHOT_PROBED = OneShot(probe_version=True)
_in_process: weakref.WeakValueDictionary[int, InProcess] = weakref.WeakValueDictionary()


@functools.lru_cache(maxsize=64)
def _live(
    keep_alive: float | None,
    approvals: bool,
    hooks: frozenset[HookKind],
    calls: frozenset[ChannelCall],
    probe_version: bool,
) -> Live:
    return Live(keep_alive, approvals, hooks, calls, probe_version)


def _runs_in(backend: Backend) -> InProcess:
    if not isinstance(backend, InProcessBackend):
        raise TypeError(f"the {backend.name!r} backend declares in_process but has no run()")
    mode = _in_process.get(id(backend))
    if mode is None:
        mode = _in_process[id(backend)] = InProcess(backend)
    return mode


def capabilities(backend: Backend, backend_options: Any) -> Capabilities:
    """What ``backend`` declares for these options; without ``capabilities``, one CLI
    process per turn (or none, for an in-process backend)."""
    declare = getattr(backend, "capabilities", None)
    if declare is None:
        return Capabilities(in_process=isinstance(backend, InProcessBackend))
    caps = declare(backend_options)
    if not isinstance(caps, Capabilities):
        raise TypeError(
            f"the {backend.name!r} backend's capabilities() returned {caps!r}; "
            "expected agentrt.backend.Capabilities"
        )
    return caps


def choose_mode(
    backend: Backend,
    backend_options: Any,
    options: AgentOptions,
    overrides: frozenset[str],
    *,
    agent_class: str = "Agent",
    hook_kinds: frozenset[HookKind] = frozenset(),
) -> Mode:
    """The mode of an instance of ``agent_class`` (whose class overrides the callbacks
    ``overrides`` names, and is called for the hooks ``hook_kinds`` lists) on ``backend``
    with these options; `InvalidOptions` for what the backend cannot honour."""
    caps = capabilities(backend, backend_options)
    if options.required_mcp and not (caps.in_process or caps.mcp_status):
        why = (
            f"the {backend.name!r} backend's CLI does not report its MCP servers' status "
            "(Capabilities.mcp_status), so a failed one could not be told; leave it empty"
        )
        raise InvalidOptions("required_mcp", options.required_mcp, why)
    keep_alive = options.keep_alive
    if options.background is not None and keep_alive is None:
        # One process per turn: the turn's end kills its whole tree, background work too.
        shown = True if options.background == math.inf else options.background
        raise InvalidOptions(
            "background",
            shown,
            "background work outlives its turn only on a warm agent: set keep_alive=SECONDS "
            "too, or leave background False (each turn's end kills what it started)",
        )
    hooks = "handle_hook" in overrides
    approvals = "approve_tool" in overrides
    which = f"the {backend.name!r} backend"
    if caps.in_process:
        no_cli = f"{which} runs its turns in process, without a CLI"
        if hooks:
            raise InvalidOptions("handle_hook", f"{agent_class}.handle_hook", f"{no_cli} to call")
        if approvals:
            raise InvalidOptions("approve_tool", f"{agent_class}.approve_tool", f"{no_cli} to ask")
        if keep_alive is not None:
            raise InvalidOptions("keep_alive", keep_alive, f"{no_cli} to keep alive")
        if options.when_busy == "steer":
            raise InvalidOptions("when_busy", "steer", f"{no_cli} to steer")
        return _runs_in(backend)
    no_live = (
        f"{which} has no live process for these options ({caps.not_live})"
        if caps.not_live
        else f"{which} declares no live process (Backend.capabilities)"
    )
    if hooks and not caps.hooks:
        why = f"{which} has no hooks to call" if caps.live else f"{no_live}, which hooks need"
        raise InvalidOptions("handle_hook", f"{agent_class}.handle_hook", why)
    if approvals and not caps.approvals:
        why = f"{which} asks for no approvals" if caps.live else f"{no_live}, so nothing asks"
        raise InvalidOptions("approve_tool", f"{agent_class}.approve_tool", why)
    if keep_alive is not None and not caps.live:
        raise InvalidOptions(
            "keep_alive", keep_alive, f"{no_live}; leave it None for one process per turn"
        )
    if options.when_busy == "steer" and (keep_alive is None or "steer" not in caps.calls):
        why = (
            f"{which}'s live CLI takes no message mid-turn; use 'interrupt' or 'enqueue'"
            if keep_alive is not None
            else "a steer joins the turn on a warm CLI: start the agent with keep_alive=SECONDS"
        )
        raise InvalidOptions("when_busy", "steer", why)
    if keep_alive is None and not (approvals or hooks) and caps.per_turn:
        return _ONE_SHOT_PROBED if caps.version_probe else ONE_SHOT
    hook_kinds = hook_kinds if hooks else frozenset()
    return _live(keep_alive, approvals, hook_kinds, caps.calls, caps.version_probe)
