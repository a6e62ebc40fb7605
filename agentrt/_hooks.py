"""The hook events of a live CLI, one class per event (`Hook` and its subclasses), each with
the fields the CLI sends for it and ``raw``, what it sent.

The events are Claude Code's (the pinned CLI's own list); each has an agentrt name, its
`HookKind`, which an agent lists in ``Agent.hooks`` to be called for it. `HOOK_TYPES` maps
each kind to its class, for the backend that makes them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal, TypeVar, get_args

import attrs

HookKind = Literal[
    "before_tool",
    "after_tool",
    "tool_failed",
    "tool_batch_done",
    "notification",
    "prompt_submitted",
    "prompt_expanded",
    "session_started",
    "session_ending",
    "stopping",
    "stop_failed",
    "subagent_started",
    "subagent_stopping",
    "compacting",
    "compacted",
    "model_switching",
    "model_switched",
    "permission_requested",
    "permission_denied",
    "setup",
    "teammate_idle",
    "task_created",
    "task_completed",
    "elicitation",
    "elicitation_result",
    "config_changed",
    "worktree_creating",
    "worktree_removing",
    "instructions_loaded",
    "cwd_changed",
    "file_changed",
    "directory_added",
    "message_displayed",
    "skill_shell_command",
    "interrupted",
]

HOOK_KINDS: tuple[HookKind, ...] = get_args(HookKind)

# What an agent is called for unless its class says otherwise (``Agent.hooks``).
DEFAULT_HOOKS: frozenset[HookKind] = frozenset(
    ("before_tool", "after_tool", "prompt_submitted", "stopping", "subagent_stopping")
)


@attrs.frozen(kw_only=True)
class Hook:
    """One hook event of the running turn; its class says which (``kind``). Every event
    carries the session's ``session_id``, ``transcript_path`` and ``cwd``, the
    ``permission_mode`` in force, and inside a subagent its ``agent_id`` and ``agent_type``;
    ``raw`` is what the CLI sent. A field the CLI left out (or sent as another type) is
    None."""

    kind: ClassVar[HookKind]
    session_id: str | None = None
    transcript_path: str | None = None
    cwd: str | None = None
    permission_mode: str | None = None
    agent_id: str | None = None
    agent_type: str | None = None
    raw: Any = attrs.field(default=None, repr=False)


_H = TypeVar("_H", bound=type[Hook])
_TYPES: dict[HookKind, type[Hook]] = {}


def _hook(cls: _H) -> _H:
    _TYPES[cls.kind] = cls
    return cls


@_hook
@attrs.frozen(kw_only=True)
class PreToolUseHook(Hook):
    """``before_tool``, Claude Code's ``PreToolUse``: before a tool runs."""

    kind: ClassVar[HookKind] = "before_tool"
    tool_name: str | None = None
    tool_input: Any = None
    tool_use_id: str | None = None
    mcp_server: Any = None


@_hook
@attrs.frozen(kw_only=True)
class PostToolUseHook(Hook):
    """``after_tool``, Claude Code's ``PostToolUse``: after a tool succeeded."""

    kind: ClassVar[HookKind] = "after_tool"
    tool_name: str | None = None
    tool_input: Any = None
    tool_response: Any = None
    tool_use_id: str | None = None
    duration_ms: float | None = None
    mcp_server: Any = None


@_hook
@attrs.frozen(kw_only=True)
class PostToolUseFailureHook(Hook):
    """``tool_failed``, Claude Code's ``PostToolUseFailure``: after a tool failed (``is_interrupt``:
    it was interrupted)."""

    kind: ClassVar[HookKind] = "tool_failed"
    tool_name: str | None = None
    tool_input: Any = None
    tool_use_id: str | None = None
    error: str | None = None
    is_interrupt: bool | None = None
    duration_ms: float | None = None
    mcp_server: Any = None


@_hook
@attrs.frozen(kw_only=True)
class PostToolBatchHook(Hook):
    """``tool_batch_done``, Claude Code's ``PostToolBatch``: after a batch of parallel tool calls,
    once, with all of them."""

    kind: ClassVar[HookKind] = "tool_batch_done"
    tool_calls: tuple[Any, ...] | None = None


@_hook
@attrs.frozen(kw_only=True)
class NotificationHook(Hook):
    """``notification``, Claude Code's ``Notification``: the CLI notifies the user (a permission
    prompt, an idle prompt, ...)."""

    kind: ClassVar[HookKind] = "notification"
    message: str | None = None
    title: str | None = None
    notification_type: str | None = None


@_hook
@attrs.frozen(kw_only=True)
class UserPromptSubmitHook(Hook):
    """``prompt_submitted``, Claude Code's ``UserPromptSubmit``: a prompt was submitted, before the
    model sees it."""

    kind: ClassVar[HookKind] = "prompt_submitted"
    prompt: str | None = None
    source: str | None = None
    session_title: str | None = None


@_hook
@attrs.frozen(kw_only=True)
class UserPromptExpansionHook(Hook):
    """``prompt_expanded``, Claude Code's ``UserPromptExpansion``: a slash command or an MCP prompt
    was expanded into a prompt."""

    kind: ClassVar[HookKind] = "prompt_expanded"
    expansion_type: str | None = None
    command_name: str | None = None
    command_args: str | None = None
    command_source: str | None = None
    prompt: str | None = None


@_hook
@attrs.frozen(kw_only=True)
class SessionStartHook(Hook):
    """``session_started``, Claude Code's ``SessionStart``: the session started (``source``:
    startup, resume, clear, compact, fork)."""

    kind: ClassVar[HookKind] = "session_started"
    source: str | None = None
    model: str | None = None
    session_title: str | None = None
    seconds_since_last_response: float | None = None
    context_tokens: int | None = None


@_hook
@attrs.frozen(kw_only=True)
class SessionEndHook(Hook):
    """``session_ending``, Claude Code's ``SessionEnd``: the session ends (``reason``: clear,
    resume, logout, prompt_input_exit, other)."""

    kind: ClassVar[HookKind] = "session_ending"
    reason: str | None = None


@_hook
@attrs.frozen(kw_only=True)
class StopHook(Hook):
    """``stopping``, Claude Code's ``Stop``: the model is about to end its reply."""

    kind: ClassVar[HookKind] = "stopping"
    stop_hook_active: bool | None = None
    last_assistant_message: str | None = None
    background_tasks: tuple[Any, ...] | None = None


@_hook
@attrs.frozen(kw_only=True)
class StopFailureHook(Hook):
    """``stop_failed``, Claude Code's ``StopFailure``: the turn ended on an error (an API error,
    say)."""

    kind: ClassVar[HookKind] = "stop_failed"
    error: Any = None
    error_details: str | None = None
    last_assistant_message: str | None = None


@_hook
@attrs.frozen(kw_only=True)
class SubagentStartHook(Hook):
    """``subagent_started``, Claude Code's ``SubagentStart``: a subagent (a Task call) starts;
    ``agent_id`` and ``agent_type`` name it."""

    kind: ClassVar[HookKind] = "subagent_started"


@_hook
@attrs.frozen(kw_only=True)
class SubagentStopHook(Hook):
    """``subagent_stopping``, Claude Code's ``SubagentStop``: a subagent is ending its reply."""

    kind: ClassVar[HookKind] = "subagent_stopping"
    stop_hook_active: bool | None = None
    agent_transcript_path: str | None = None
    last_assistant_message: str | None = None
    background_tasks: tuple[Any, ...] | None = None


@_hook
@attrs.frozen(kw_only=True)
class PreCompactHook(Hook):
    """``compacting``, Claude Code's ``PreCompact``: before the conversation is compacted
    (``trigger``: manual or auto)."""

    kind: ClassVar[HookKind] = "compacting"
    trigger: str | None = None
    custom_instructions: str | None = None


@_hook
@attrs.frozen(kw_only=True)
class PostCompactHook(Hook):
    """``compacted``, Claude Code's ``PostCompact``: after the conversation was compacted, with its
    summary."""

    kind: ClassVar[HookKind] = "compacted"
    trigger: str | None = None
    compact_summary: str | None = None


@_hook
@attrs.frozen(kw_only=True)
class PreModelSwitchHook(Hook):
    """``model_switching``, Claude Code's ``PreModelSwitch``: before the model changes (``source``:
    command, picker, sdk)."""

    kind: ClassVar[HookKind] = "model_switching"
    from_model: str | None = None
    to_model: str | None = None
    requested_model: str | None = None
    source: str | None = None


@_hook
@attrs.frozen(kw_only=True)
class PostModelSwitchHook(Hook):
    """``model_switched``, Claude Code's ``PostModelSwitch``: after the model changed."""

    kind: ClassVar[HookKind] = "model_switched"
    from_model: str | None = None
    to_model: str | None = None
    requested_model: str | None = None
    source: str | None = None


@_hook
@attrs.frozen(kw_only=True)
class PermissionRequestHook(Hook):
    """``permission_requested``, Claude Code's ``PermissionRequest``: the CLI is about to ask
    whether a tool may run."""

    kind: ClassVar[HookKind] = "permission_requested"
    tool_name: str | None = None
    tool_input: Any = None
    permission_suggestions: tuple[Any, ...] | None = None
    mcp_server: Any = None


@_hook
@attrs.frozen(kw_only=True)
class PermissionDeniedHook(Hook):
    """``permission_denied``, Claude Code's ``PermissionDenied``: a tool call was denied by the
    permission settings."""

    kind: ClassVar[HookKind] = "permission_denied"
    tool_name: str | None = None
    tool_input: Any = None
    tool_use_id: str | None = None
    reason: str | None = None
    mcp_server: Any = None


@_hook
@attrs.frozen(kw_only=True)
class SetupHook(Hook):
    """``setup``, Claude Code's ``Setup``: setup runs (``trigger``: init or maintenance)."""

    kind: ClassVar[HookKind] = "setup"
    trigger: str | None = None


@_hook
@attrs.frozen(kw_only=True)
class TeammateIdleHook(Hook):
    """``teammate_idle``, Claude Code's ``TeammateIdle``: a teammate of an agent team went idle."""

    kind: ClassVar[HookKind] = "teammate_idle"
    teammate_name: str | None = None
    team_name: str | None = None


@_hook
@attrs.frozen(kw_only=True)
class TaskCreatedHook(Hook):
    """``task_created``, Claude Code's ``TaskCreated``: a task of the task list was created."""

    kind: ClassVar[HookKind] = "task_created"
    task_id: str | None = None
    task_subject: str | None = None
    task_description: str | None = None
    teammate_name: str | None = None
    team_name: str | None = None


@_hook
@attrs.frozen(kw_only=True)
class TaskCompletedHook(Hook):
    """``task_completed``, Claude Code's ``TaskCompleted``: a task list's task was completed."""

    kind: ClassVar[HookKind] = "task_completed"
    task_id: str | None = None
    task_subject: str | None = None
    task_description: str | None = None
    teammate_name: str | None = None
    team_name: str | None = None


@_hook
@attrs.frozen(kw_only=True)
class ElicitationHook(Hook):
    """``elicitation``, Claude Code's ``Elicitation``: an MCP server asks the user for input."""

    kind: ClassVar[HookKind] = "elicitation"
    mcp_server_name: str | None = None
    message: str | None = None
    mode: str | None = None
    url: str | None = None
    elicitation_id: str | None = None
    requested_schema: Any = None


@_hook
@attrs.frozen(kw_only=True)
class ElicitationResultHook(Hook):
    """``elicitation_result``, Claude Code's ``ElicitationResult``: the user answered an MCP
    server's elicitation."""

    kind: ClassVar[HookKind] = "elicitation_result"
    mcp_server_name: str | None = None
    elicitation_id: str | None = None
    mode: str | None = None
    action: str | None = None
    content: Any = None


@_hook
@attrs.frozen(kw_only=True)
class ConfigChangeHook(Hook):
    """``config_changed``, Claude Code's ``ConfigChange``: a settings file changed."""

    kind: ClassVar[HookKind] = "config_changed"
    source: str | None = None
    file_path: str | None = None


@_hook
@attrs.frozen(kw_only=True)
class WorktreeCreateHook(Hook):
    """``worktree_creating``, Claude Code's ``WorktreeCreate``: the CLI creates a git worktree."""

    kind: ClassVar[HookKind] = "worktree_creating"
    name: str | None = None


@_hook
@attrs.frozen(kw_only=True)
class WorktreeRemoveHook(Hook):
    """``worktree_removing``, Claude Code's ``WorktreeRemove``: the CLI removes a git worktree."""

    kind: ClassVar[HookKind] = "worktree_removing"
    worktree_path: str | None = None


@_hook
@attrs.frozen(kw_only=True)
class InstructionsLoadedHook(Hook):
    """``instructions_loaded``, Claude Code's ``InstructionsLoaded``: an instructions file
    (CLAUDE.md, a rule) was loaded."""

    kind: ClassVar[HookKind] = "instructions_loaded"
    file_path: str | None = None
    memory_type: str | None = None
    load_reason: str | None = None
    globs: tuple[Any, ...] | None = None
    trigger_file_path: str | None = None
    parent_file_path: str | None = None


@_hook
@attrs.frozen(kw_only=True)
class CwdChangedHook(Hook):
    """``cwd_changed``, Claude Code's ``CwdChanged``: the session's working directory changed."""

    kind: ClassVar[HookKind] = "cwd_changed"
    old_cwd: str | None = None
    new_cwd: str | None = None


@_hook
@attrs.frozen(kw_only=True)
class FileChangedHook(Hook):
    """``file_changed``, Claude Code's ``FileChanged``: a watched file changed (``event``: change,
    add, unlink)."""

    kind: ClassVar[HookKind] = "file_changed"
    file_path: str | None = None
    event: str | None = None


@_hook
@attrs.frozen(kw_only=True)
class DirectoryAddedHook(Hook):
    """``directory_added``, Claude Code's ``DirectoryAdded``: a directory was added."""

    kind: ClassVar[HookKind] = "directory_added"
    directory: str | None = None
    source: str | None = None


@_hook
@attrs.frozen(kw_only=True)
class MessageDisplayHook(Hook):
    """``message_displayed``, Claude Code's ``MessageDisplay``: a piece of an assistant message is
    displayed."""

    kind: ClassVar[HookKind] = "message_displayed"
    turn_id: str | None = None
    message_id: str | None = None
    index: int | None = None
    final: bool | None = None
    delta: str | None = None


@_hook
@attrs.frozen(kw_only=True)
class PreSkillShellCommandHook(Hook):
    """``skill_shell_command``, Claude Code's ``PreSkillShellCommand``: before a skill runs a shell
    command."""

    kind: ClassVar[HookKind] = "skill_shell_command"
    tool_name: str | None = None
    tool_input: Any = None
    tool_use_id: str | None = None
    command_name: str | None = None
    command_source: str | None = None
    invoked_by: str | None = None


@_hook
@attrs.frozen(kw_only=True)
class InterruptHook(Hook):
    """``interrupted``, Claude Code's ``Interrupt``: the running turn was interrupted
    (``source``: who, "user"; ``reason``: "stop"; ``via``: "client" for an interrupt in
    band). Sent from Claude Code 2.1.337; the pinned 2.1.332 accepts it and never sends it."""

    kind: ClassVar[HookKind] = "interrupted"
    source: str | None = None
    reason: str | None = None
    via: str | None = None


HOOK_TYPES: Mapping[HookKind, type[Hook]] = _TYPES
assert set(HOOK_TYPES) == set(HOOK_KINDS)
