"""Claude Code's hook events: their names, the typed `Hook` each becomes, and the answer the
CLI reads back (its hook output, as a ``hook_callback`` control response carries it).

The list is the pinned CLI's own (2.1.332 accepts these 34 in the ``initialize`` request's
``hooks``) and 2.1.337's ``Interrupt``, which 2.1.332 accepts and never sends; each is
called only for the kinds the agent lists (``Agent.hooks``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

import attrs

from agentrt.backend import HOOK_TYPES, AddContext, Block, Hook, HookKind

# Claude Code's name of each hook event, and agentrt's kind for it.
HOOK_EVENTS: dict[str, HookKind] = {
    "PreToolUse": "before_tool",
    "PostToolUse": "after_tool",
    "PostToolUseFailure": "tool_failed",
    "PostToolBatch": "tool_batch_done",
    "Notification": "notification",
    "UserPromptSubmit": "prompt_submitted",
    "UserPromptExpansion": "prompt_expanded",
    "SessionStart": "session_started",
    "SessionEnd": "session_ending",
    "Stop": "stopping",
    "StopFailure": "stop_failed",
    "SubagentStart": "subagent_started",
    "SubagentStop": "subagent_stopping",
    "PreCompact": "compacting",
    "PostCompact": "compacted",
    "PreModelSwitch": "model_switching",
    "PostModelSwitch": "model_switched",
    "PermissionRequest": "permission_requested",
    "PermissionDenied": "permission_denied",
    "Setup": "setup",
    "TeammateIdle": "teammate_idle",
    "TaskCreated": "task_created",
    "TaskCompleted": "task_completed",
    "Elicitation": "elicitation",
    "ElicitationResult": "elicitation_result",
    "ConfigChange": "config_changed",
    "WorktreeCreate": "worktree_creating",
    "WorktreeRemove": "worktree_removing",
    "InstructionsLoaded": "instructions_loaded",
    "CwdChanged": "cwd_changed",
    "FileChanged": "file_changed",
    "DirectoryAdded": "directory_added",
    "MessageDisplay": "message_displayed",
    "PreSkillShellCommand": "skill_shell_command",
    "Interrupt": "interrupted",
}

# The events whose hook output takes ``additionalContext`` (the CLI's hookSpecificOutput).
CONTEXT_EVENTS = frozenset(
    (
        "PreToolUse",
        "PostToolUse",
        "PostToolUseFailure",
        "PostToolBatch",
        "Notification",
        "UserPromptSubmit",
        "UserPromptExpansion",
        "SessionStart",
        "Setup",
        "Stop",
        "SubagentStart",
        "SubagentStop",
        "PostModelSwitch",
    )
)
# The events blocked through a permission decision rather than ``"decision": "block"``.
_PERMISSION_EVENTS = frozenset(("PreToolUse", "PreSkillShellCommand", "PreModelSwitch"))

# What a field's declared type takes from JSON (anything else is None).
_ACCEPTS: dict[str, Any] = {
    "str | None": lambda v: isinstance(v, str),
    "bool | None": lambda v: isinstance(v, bool),
    "int | None": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "float | None": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
}


def hook_events(kinds: Collection[HookKind]) -> list[str]:
    """The CLI's names of the events ``kinds`` lists, in the CLI's order."""
    return [event for event, kind in HOOK_EVENTS.items() if kind in kinds]


def make_hook(kind: HookKind, data: Mapping[str, Any]) -> Hook:
    """The typed hook of ``kind`` from the CLI's hook input ``data``: each field the value
    the CLI sent under its name, None where it sent none or another type."""
    cls = HOOK_TYPES[kind]
    values: dict[str, Any] = {}
    for field in attrs.fields(cls):
        if field.name == "raw":
            continue
        value = data.get(field.name)
        if field.type == "tuple[Any, ...] | None":
            value = tuple(value) if isinstance(value, list) else None
        elif (accepts := _ACCEPTS.get(str(field.type))) is not None and not accepts(value):
            value = None
        values[field.name] = value
    return cls(**values, raw=data)


def hook_output(event: str, reply: Block | AddContext | None) -> dict[str, Any]:
    """Claude Code's hook output for ``reply``: a tool (a skill's command, a model switch) is
    denied through its permission decision, a permission request through its decision;
    elsewhere ``"decision": "block"`` with the reason; context goes in hookSpecificOutput,
    where the event takes it."""
    if reply is None:
        return {}
    if isinstance(reply, AddContext):
        if event not in CONTEXT_EVENTS:
            return {}
        return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": reply.text}}
    if event in _PERMISSION_EVENTS:
        return {
            "hookSpecificOutput": {
                "hookEventName": event,
                "permissionDecision": "deny",
                "permissionDecisionReason": reply.reason,
            }
        }
    if event == "PermissionRequest":
        return {
            "hookSpecificOutput": {
                "hookEventName": event,
                "decision": {"behavior": "deny", "message": reply.reason},
            }
        }
    return {"decision": "block", "reason": reply.reason}
