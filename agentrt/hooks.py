"""The hook events of a live CLI, one class per event: what ``Agent.handle_hook`` is
given. `Hook` is the base of them all (the fields every event has); each subclass is one
event, with the fields the CLI sends for it and ``raw``, what it sent. `HookKind` names the
kinds an agent lists in ``Agent.hooks``, and `HOOK_KINDS` is every one of them.

The answers a handler returns, `agentrt.Block` and `agentrt.AddContext`, are in `agentrt`
beside the other answers an agent gives (`agentrt.Allow`, `agentrt.Deny`, `agentrt.Prompt`).
"""

from ._hooks import HOOK_KINDS as HOOK_KINDS
from ._hooks import ConfigChangeHook as ConfigChangeHook
from ._hooks import CwdChangedHook as CwdChangedHook
from ._hooks import DirectoryAddedHook as DirectoryAddedHook
from ._hooks import ElicitationHook as ElicitationHook
from ._hooks import ElicitationResultHook as ElicitationResultHook
from ._hooks import FileChangedHook as FileChangedHook
from ._hooks import Hook as Hook
from ._hooks import HookKind as HookKind
from ._hooks import InstructionsLoadedHook as InstructionsLoadedHook
from ._hooks import InterruptHook as InterruptHook
from ._hooks import MessageDisplayHook as MessageDisplayHook
from ._hooks import NotificationHook as NotificationHook
from ._hooks import PermissionDeniedHook as PermissionDeniedHook
from ._hooks import PermissionRequestHook as PermissionRequestHook
from ._hooks import PostCompactHook as PostCompactHook
from ._hooks import PostModelSwitchHook as PostModelSwitchHook
from ._hooks import PostToolBatchHook as PostToolBatchHook
from ._hooks import PostToolUseFailureHook as PostToolUseFailureHook
from ._hooks import PostToolUseHook as PostToolUseHook
from ._hooks import PreCompactHook as PreCompactHook
from ._hooks import PreModelSwitchHook as PreModelSwitchHook
from ._hooks import PreSkillShellCommandHook as PreSkillShellCommandHook
from ._hooks import PreToolUseHook as PreToolUseHook
from ._hooks import SessionEndHook as SessionEndHook
from ._hooks import SessionStartHook as SessionStartHook
from ._hooks import SetupHook as SetupHook
from ._hooks import StopFailureHook as StopFailureHook
from ._hooks import StopHook as StopHook
from ._hooks import SubagentStartHook as SubagentStartHook
from ._hooks import SubagentStopHook as SubagentStopHook
from ._hooks import TaskCompletedHook as TaskCompletedHook
from ._hooks import TaskCreatedHook as TaskCreatedHook
from ._hooks import TeammateIdleHook as TeammateIdleHook
from ._hooks import UserPromptExpansionHook as UserPromptExpansionHook
from ._hooks import UserPromptSubmitHook as UserPromptSubmitHook
from ._hooks import WorktreeCreateHook as WorktreeCreateHook
from ._hooks import WorktreeRemoveHook as WorktreeRemoveHook
from ._util import fixup_module_metadata as _fixup_module_metadata

__all__ = [
    "HOOK_KINDS",
    "ConfigChangeHook",
    "CwdChangedHook",
    "DirectoryAddedHook",
    "ElicitationHook",
    "ElicitationResultHook",
    "FileChangedHook",
    "Hook",
    "HookKind",
    "InstructionsLoadedHook",
    "InterruptHook",
    "MessageDisplayHook",
    "NotificationHook",
    "PermissionDeniedHook",
    "PermissionRequestHook",
    "PostCompactHook",
    "PostModelSwitchHook",
    "PostToolBatchHook",
    "PostToolUseFailureHook",
    "PostToolUseHook",
    "PreCompactHook",
    "PreModelSwitchHook",
    "PreSkillShellCommandHook",
    "PreToolUseHook",
    "SessionEndHook",
    "SessionStartHook",
    "SetupHook",
    "StopFailureHook",
    "StopHook",
    "SubagentStartHook",
    "SubagentStopHook",
    "TaskCompletedHook",
    "TaskCreatedHook",
    "TeammateIdleHook",
    "UserPromptExpansionHook",
    "UserPromptSubmitHook",
    "WorktreeCreateHook",
    "WorktreeRemoveHook",
]

_fixup_module_metadata(__name__, {name: globals()[name] for name in __all__})
