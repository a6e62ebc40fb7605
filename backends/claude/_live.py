"""`ClaudeLive`: one live ``claude -p --input-format stream-json`` process, as pure state.

The control protocol of Claude Code's stream-json input (what the Agent SDK speaks): the
client opens with an ``initialize`` control request (naming the hooks it serves) and the
CLI answers with a ``control_response``; each turn is one ``user`` message, and the turn
ends at its ``result``. An ``interrupt`` control request ends a running turn: the CLI
answers it, ends the turn with an ``error_during_execution`` result and keeps running.

The CLI asks the client too, with control requests of its own: ``can_use_tool`` (with
``--permission-prompt-tool stdio``: may this tool run?) becomes a `ToolApproval`;
``hook_callback`` (for the hooks the opening named) a `HookCall`. Anything else is
answered with an error: agentrt offers nothing more to the CLI.
"""

from __future__ import annotations

import itertools
import json
import secrets
from collections.abc import Mapping
from typing import Any

from agentrt.backend import (
    AddContext,
    Allow,
    Block,
    Command,
    Deny,
    FrameRole,
    Hook,
    HookCall,
    HookKind,
    ProtocolError,
    SessionTotals,
    ToolApproval,
    ToolRequest,
)

from ._command import build_live_command
from ._options import ClaudeOptions
from ._translate import ClaudeTranslator

_CONTROL = frozenset(("control_response", "control_request", "control_cancel_request"))

# Claude Code's hook events, by agentrt's name for each (docs/tutorial/approvals-and-tools.md).
HOOK_EVENTS: dict[str, HookKind] = {
    "PreToolUse": "before_tool",
    "PostToolUse": "after_tool",
    "UserPromptSubmit": "prompt_submitted",
    "Stop": "stopping",
    "SubagentStop": "subagent_stopping",
}


def _line(value: Mapping[str, Any]) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode() + b"\n"


def _response(request_id: str, response: Mapping[str, Any]) -> bytes:
    return _line(
        {
            "type": "control_response",
            "response": {"subtype": "success", "request_id": request_id, "response": response},
        }
    )


def _error(request_id: str, error: str) -> bytes:
    return _line(
        {
            "type": "control_response",
            "response": {"subtype": "error", "request_id": request_id, "error": error},
        }
    )


class ClaudeLive:
    """The `agentrt.backend.LiveProtocol` of one live Claude Code process."""

    def __init__(
        self,
        options: ClaudeOptions,
        *,
        session_id: str | None,
        approvals: bool = False,
        hooks: bool = False,
    ) -> None:
        self.command: Command = build_live_command(
            options, session_id=session_id, approvals=approvals
        )
        self.ready = False
        self._hooks = hooks
        self._prefix = secrets.token_hex(4)
        self._ids = itertools.count(1)
        self._initialize = self._request_id()

    def _request_id(self) -> str:
        return f"req_{next(self._ids)}_{self._prefix}"

    def opening(self) -> bytes:
        hooks = None
        if self._hooks:
            hooks = {
                event: [{"matcher": None, "hookCallbackIds": [event]}] for event in HOOK_EVENTS
            }
        return self._request(self._initialize, {"subtype": "initialize", "hooks": hooks})

    def classify(self, frame: Any) -> FrameRole:
        if type(frame) is not dict:
            return "event"  # the typed stream, assistant and user frames, or not an object
        kind = frame.get("type")
        if kind == "result":
            return "end"
        return "control" if kind in _CONTROL else "event"

    def control(self, frame: Any) -> bytes | ToolApproval | HookCall:
        kind = frame.get("type")
        if kind == "control_response":
            self._answered(frame.get("response"))
        elif kind == "control_request":
            request_id = frame.get("request_id")
            request = frame.get("request")
            if not isinstance(request_id, str) or not isinstance(request, Mapping):
                raise ProtocolError("a control request without a request_id or a request")
            subtype = request.get("subtype")
            if subtype == "can_use_tool":
                return _approval(request_id, request)
            if subtype == "hook_callback" and self._hooks:
                return _hook(request_id, request)
            return _error(request_id, f"agentrt does not handle {subtype!r} control requests")
        return b""

    def _answered(self, response: Any) -> None:
        if not isinstance(response, Mapping):
            raise ProtocolError("a control response without a response")
        if response.get("request_id") != self._initialize:
            return  # an interrupt's acknowledgement
        if response.get("subtype") != "success":
            raise ProtocolError(f"initialize was refused: {response.get('error')!r}")
        self.ready = True

    def prompt(self, text: str) -> bytes:
        return _line(
            {
                "type": "user",
                "message": {"role": "user", "content": text},
                "parent_tool_use_id": None,
            }
        )

    def interrupt(self) -> bytes:
        return self._request(self._request_id(), {"subtype": "interrupt"})

    def _request(self, request_id: str, request: Mapping[str, Any]) -> bytes:
        return _line({"type": "control_request", "request_id": request_id, "request": request})

    def translator(self, *, baseline: SessionTotals | None = None) -> ClaudeTranslator:
        # The result's total_cost_usd is the session's running total, as in one-shot turns.
        return ClaudeTranslator(cost_baseline=0.0 if baseline is None else baseline.cost_usd)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _approval(request_id: str, request: Mapping[str, Any]) -> ToolApproval:
    tool_input = request.get("input")

    def answer(decision: Allow | Deny) -> bytes:
        if isinstance(decision, Deny):
            return _response(request_id, {"behavior": "deny", "message": decision.message})
        updated = tool_input if decision.updated_input is None else decision.updated_input
        return _response(request_id, {"behavior": "allow", "updatedInput": updated})

    tool = ToolRequest(
        tool_name=_text(request.get("tool_name")) or "",
        input=tool_input,
        tool_use_id=_text(request.get("tool_use_id")) or "",
    )
    return ToolApproval(request=tool, answer=answer)


def _hook(request_id: str, request: Mapping[str, Any]) -> HookCall | bytes:
    data = request.get("input")
    data = data if isinstance(data, Mapping) else {}
    event = _text(data.get("hook_event_name")) or _text(request.get("callback_id")) or ""
    kind = HOOK_EVENTS.get(event)
    if kind is None:
        return _response(request_id, {})  # a hook agentrt did not ask for: go on

    def answer(reply: Block | AddContext | None) -> bytes:
        return _response(request_id, _hook_output(event, reply))

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
