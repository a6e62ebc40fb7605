"""``class Agent``: the behaviour application code subclasses."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Collection, Mapping, Sequence
from typing import Any, ClassVar

import attrs

from ._asks import Allow, AskOperator, Decision, HookAnswer, ToolRequest
from ._errors import InvalidOptions, TurnFailed, did_you_mean
from ._events import Event, Response
from ._hooks import DEFAULT_HOOKS, HOOK_KINDS, Hook, HookKind
from ._options import SessionLostPolicy
from ._requests import Ref
from ._tools import Tool


@attrs.frozen
class Prompt:
    """Returned by a handler: run ``text`` as this agent's next turn, before queued work.

    Returned by ``pre_turn``: run ``text`` instead of the prompt it was given."""

    text: str


@attrs.frozen
class Halt:
    """Returned by a handler: stop taking turns (queued work waits) until ``unhalt``."""


@attrs.frozen
class Stop:
    """Returned by a handler: this agent ends normally once the current request is answered.

    A normal end, unlike a crash: a ``permanent`` agent is restarted (its queued work waits
    for the new instance), a ``transient`` or ``temporary`` one leaves the runtime and its
    queued work fails with `AgentStopped` (reason ``"normal"``). ``terminate_agent``
    receives ``"normal"``."""


Reaction = Prompt | Halt | Stop | None


class Agent:
    """Base class of an agent. Every callback is optional.

    A callback may be a plain or an ``async`` method. All of them run in the agent's own
    task, one at a time, so state kept on the instance needs no locking. The decision
    callbacks (``handle_response``, ``handle_error``, ``handle_event``) may return
    `Prompt` (chain another turn, ahead of queued work), `Halt`, `Stop`, or None.

    Errors: an exception in ``handle_stream_event`` fails the turn (``turn_crashed``,
    reported to ``handle_error``); in ``handle_error`` or ``terminate_agent`` it is
    logged (logger ``"agentrt"``, redacted) and the agent goes on. In any other callback
    (or a return value that is not `Prompt`, `Halt`, `Stop` or None, or a state that
    cannot be checkpointed) the agent *crashes*: the exception is logged, the request it
    was processing (and any prompt it chained) fails with `AgentStopped` whose cause is the
    exception, ``terminate_agent`` receives the exception, and its supervisor decides what
    follows (see ``start_agent``'s ``restart``): a restarted agent is a new instance (for a
    class or factory; a given instance is reused) that gets ``init_agent`` again, its
    checkpointed state and its conversation; queued work waits for it.

    Cancellation: an ``async`` ``approve_tool`` or ``handle_hook`` that has not answered
    within the agent's ``approval_timeout`` is cancelled (the tool is denied; the hook gets
    no answer). A callback still running when its agent stops (`Runtime.stop_agent`, its
    supervisor's block or the runtime closing) is cancelled with the agent.

    Durable state: override ``checkpoint_state`` to return what must survive a crash or a
    restart of the whole program (any value msgspec encodes as JSON: builtins, msgspec
    Structs, dataclasses, attrs classes; ``bytes`` with ``state_type = bytes``), or None
    for nothing to keep; it is saved to the session store after every turn
    and every ``handle_event``, and given back to ``restore_state`` (decoded as
    ``state_type``) after ``init_agent`` whenever the agent resumes its session.

    ``on_session_lost`` is the default policy when the CLI no longer knows the session the
    agent resumes (``start_agent(on_session_lost=...)`` overrides it): ``"fail"`` fails
    that turn with ``session_lost`` and keeps the stored id (``reset_session`` starts
    afresh), ``"fresh"`` runs the same prompt once more on a new session.

    ``app_tools`` lists the application tools (`agentrt.tool`) the model may call, functions
    or methods of the class (``start_agent(app_tools=...)`` overrides it).

    ``hooks`` lists the hook kinds ``handle_hook`` is called for (`~agentrt.hooks.HookKind`;
    all of them: ``agentrt.hooks.HOOK_KINDS``); by default ``before_tool``, ``after_tool``,
    ``prompt_submitted``, ``stopping`` and ``subagent_stopping``. Each one the CLI fires is
    a round trip to the agent's task, so list only those the agent answers or reads.
    """

    state_type: ClassVar[Any] = Any
    on_session_lost: ClassVar[SessionLostPolicy] = "fail"
    app_tools: ClassVar[Sequence[Tool]] = ()
    hooks: ClassVar[Collection[HookKind]] = DEFAULT_HOOKS

    def init_agent(self, **options: Any) -> Mapping[str, Any] | Awaitable[Mapping[str, Any]]:
        """Called by ``start_agent`` (and again on each restart) with the options the
        runtime does not consume; returns the backend's options (by default, the options as
        given)."""
        return options

    def pre_turn(self, prompt: str) -> Reaction | Awaitable[Reaction]:
        """Before each turn: return `Prompt` to rewrite the prompt, `Halt` (or `Stop`) to
        halt (or end) with the request left at the head of the queue, or None to run it as
        is."""
        return None

    def approve_tool(
        self, request: ToolRequest
    ) -> Decision | AskOperator | Awaitable[Decision | AskOperator]:
        """Before the CLI runs a tool its permission settings do not already allow: return
        `Allow` (optionally with an updated input) or `Deny` (with a message for the model),
        or `AskOperator` to let a person decide in the operator console (the request waits
        in the store; the decision's ``decided_by`` is in the turn's `ToolDecisionEvent`).
        Not answered within ``approval_timeout``, the tool is denied; an exception denies
        it too, and crashes the agent. Overriding it gives the CLI a live input channel
        for every turn (one process per turn unless ``keep_alive`` keeps it).

        The model's questions for a person come here too, typed in ``request.question``:
        `UserQuestions` (Claude Code's ``AskUserQuestion``), answered with `Answers`, and
        `PlanApproval` (``ExitPlanMode``), answered `Allow` or `Deny`; `AskOperator` hands
        either to the console."""
        return Allow()

    def handle_hook(self, hook: Hook) -> HookAnswer | Awaitable[HookAnswer]:
        """A hook event of the running CLI, of a kind ``hooks`` lists (its class says
        which: `~agentrt.hooks.PreToolUseHook`, `~agentrt.hooks.SessionStartHook`, ...):
        return `Block`, `AddContext` or None (go on). Bounded by ``approval_timeout`` (then
        None); an exception crashes the agent. Overriding it gives the CLI a live input
        channel, as ``approve_tool`` does."""
        return None

    def handle_stream_event(self, event: Event) -> Awaitable[None] | None:
        """Every event of the running turn, as it arrives (the final one included)."""
        return None

    def handle_response(self, ref: Ref, response: Response) -> Reaction | Awaitable[Reaction]:
        """A turn succeeded."""
        return None

    def handle_error(self, ref: Ref, error: TurnFailed) -> Reaction | Awaitable[Reaction]:
        """A turn failed (timeout, interrupt, CLI error, ...)."""
        return None

    def post_turn(self, ref: Ref, outcome: Response | TurnFailed) -> Awaitable[None] | None:
        """After the decision callback of every turn, before the caller is answered."""
        return None

    def handle_event(self, event: Any) -> Reaction | Awaitable[Reaction]:
        """An event sent with ``notify``; while a turn runs it waits until the turn is over."""
        return None

    def terminate_agent(self, reason: str | BaseException) -> Awaitable[None] | None:
        """The agent is stopping: ``"stopped"``, ``"runtime closed"``, ``"normal"`` (it
        returned `Stop`), ``"restarting: ..."`` (its supervisor restarts it with a crashed
        sibling), or the exception it crashed with. Bounded in time; not called if the
        process itself dies."""
        return None

    def checkpoint_state(self) -> Any:
        """The agent's durable state (see the class docstring), or None: nothing to keep."""
        return None

    def restore_state(self, state: Any) -> Awaitable[None] | None:
        """Take back what ``checkpoint_state`` returned before, decoded as ``state_type``."""
        return None


CALLBACKS = (
    "pre_turn",
    "approve_tool",
    "handle_hook",
    "handle_stream_event",
    "handle_response",
    "handle_error",
    "post_turn",
    "handle_event",
    "terminate_agent",
    "checkpoint_state",
    "restore_state",
)

_overrides: dict[type, frozenset[str]] = {}


def overridden(agent_class: type) -> frozenset[str]:
    """The callbacks ``agent_class`` overrides; the runtime skips the default no-ops."""
    found = _overrides.get(agent_class)
    if found is None:
        found = frozenset(
            name
            for name in CALLBACKS
            if inspect.getattr_static(agent_class, name) is not Agent.__dict__[name]
        )
        _overrides[agent_class] = found
    return found


_hook_kinds: dict[type, frozenset[HookKind]] = {}


def hook_kinds(agent_class: type[Agent]) -> frozenset[HookKind]:
    """The hook kinds an instance of ``agent_class`` is called for (none unless it overrides
    ``handle_hook``); `InvalidOptions` for a kind the runtime does not know."""
    found = _hook_kinds.get(agent_class)
    if found is None:
        if "handle_hook" not in overridden(agent_class):
            found = frozenset()
        else:
            found = _checked_hooks(agent_class)
        _hook_kinds[agent_class] = found
    return found


def _checked_hooks(agent_class: type[Agent]) -> frozenset[HookKind]:
    where = f"{agent_class.__name__}.hooks"
    listed = agent_class.hooks
    if isinstance(listed, str) or not isinstance(listed, Collection):
        raise InvalidOptions(
            "hooks",
            listed,
            f"{where} must be a collection of hook kinds (agentrt.hooks.HOOK_KINDS)",
        )
    for kind in listed:
        if kind not in HOOK_KINDS:
            hint = did_you_mean(str(kind), HOOK_KINDS)
            raise InvalidOptions(
                "hooks", kind, f"{where} lists a kind that is not a hook kind{hint}"
            )
    if not listed:
        raise InvalidOptions("hooks", (), f"{where} is empty, so handle_hook would never be called")
    return frozenset(listed)
