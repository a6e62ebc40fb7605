"""`ClaudeLive`: one live ``claude -p --input-format stream-json`` process, as pure state.

The control protocol (``initialize``, one ``user`` message per turn, ``interrupt``,
``can_use_tool`` with ``--permission-prompt-tool stdio``) is agentrt's shared
`StreamJsonLive`. Claude's own part: the opening names the hooks the agent serves, and
the CLI's ``hook_callback`` requests for them become `HookCall` asks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentrt.backend import (
    AddContext,
    Block,
    Command,
    Hook,
    HookCall,
    HookKind,
    SessionTotals,
    StreamJsonLive,
    ToolApproval,
    control_response,
)

from ._command import build_live_command
from ._options import ClaudeOptions
from ._translate import CLAUDE_DIALECT, ClaudeTranslator

# Claude Code's hook events, by agentrt's name for each (docs/tutorial/approvals-and-tools.md).
HOOK_EVENTS: dict[str, HookKind] = {
    "PreToolUse": "before_tool",
    "PostToolUse": "after_tool",
    "UserPromptSubmit": "prompt_submitted",
    "Stop": "stopping",
    "SubagentStop": "subagent_stopping",
}


class ClaudeLive(StreamJsonLive):
    """The `agentrt.backend.LiveProtocol` of one live Claude Code process: the shared
    stream-json control protocol, plus Claude's hooks (``hook_callback``)."""

    def __init__(
        self,
        options: ClaudeOptions,
        *,
        session_id: str | None,
        approvals: bool = False,
        hooks: bool = False,
    ) -> None:
        hook_config = None
        if hooks:
            hook_config = {
                event: [{"matcher": None, "hookCallbackIds": [event]}] for event in HOOK_EVENTS
            }
        super().__init__(CLAUDE_DIALECT, initialize={"hooks": hook_config})
        self.command: Command = build_live_command(
            options, session_id=session_id, approvals=approvals
        )
        self._hooks = hooks

    def cli_request(
        self, request_id: str, subtype: Any, request: Mapping[str, Any]
    ) -> bytes | ToolApproval | HookCall:
        if subtype == "hook_callback" and self._hooks:
            return _hook(request_id, request)
        return super().cli_request(request_id, subtype, request)

    def translator(self, *, baseline: SessionTotals | None = None) -> ClaudeTranslator:
        # The result's total_cost_usd is the session's running total, as in one-shot turns.
        return ClaudeTranslator(cost_baseline=0.0 if baseline is None else baseline.cost_usd)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _hook(request_id: str, request: Mapping[str, Any]) -> HookCall | bytes:
    data = request.get("input")
    data = data if isinstance(data, Mapping) else {}
    event = _text(data.get("hook_event_name")) or _text(request.get("callback_id")) or ""
    kind = HOOK_EVENTS.get(event)
    if kind is None:
        return control_response(request_id, {})  # a hook agentrt did not ask for: go on

    def answer(reply: Block | AddContext | None) -> bytes:
        return control_response(request_id, _hook_output(event, reply))

    hook = Hook(
        kind=kind,
        tool_name=_text(data.get("tool_name")),
        tool_input=data.get("tool_input"),
        tool_use_id=_text(data.get("tool_use_id")),
        tool_response=data.get("tool_response"),
        prompt=_text(data.get("prompt")),
        raw=data,
    )
    return HookCall(hook=hook, answer=answer)


def _hook_output(event: str, reply: Block | AddContext | None) -> dict[str, Any]:
    # Claude Code's hook output: a tool is denied through PreToolUse's permission decision;
    # elsewhere "decision": "block" with the reason; context goes in hookSpecificOutput.
    if reply is None:
        return {}
    if isinstance(reply, AddContext):
        if event in ("Stop", "SubagentStop"):
            return {}  # these hooks take no context
        return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": reply.text}}
    if event == "PreToolUse":
        return {
            "hookSpecificOutput": {
                "hookEventName": event,
                "permissionDecision": "deny",
                "permissionDecisionReason": reply.reason,
            }
        }
    return {"decision": "block", "reason": reply.reason}
