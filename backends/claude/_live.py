"""`ClaudeLive`: one live ``claude -p --input-format stream-json`` process, as pure state.

The control protocol (``initialize``, one ``user`` message per turn, ``interrupt``,
``can_use_tool`` with ``--permission-prompt-tool stdio``) is agentrt's shared
`StreamJsonLive`. Claude's own part: the opening names the hooks the agent serves, and
the CLI's ``hook_callback`` requests for them become `HookCall` asks; its ``elicitation``
requests (an MCP server's question) become `ToolApproval` asks, as tool approvals are.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentrt.backend import (
    AddContext,
    Block,
    Command,
    HookCall,
    HookKind,
    SessionTotals,
    StreamJsonLive,
    ToolApproval,
    control_response,
)

from ._command import build_live_command
from ._elicitation import elicitation
from ._hooks import HOOK_EVENTS, hook_events, hook_output, make_hook
from ._options import ClaudeOptions
from ._translate import CLAUDE_DIALECT, ClaudeTranslator, claude_translator


class ClaudeLive(StreamJsonLive):
    """The `agentrt.backend.LiveProtocol` of one live Claude Code process: the shared
    stream-json control protocol, plus Claude's hooks (``hook_callback``)."""

    def __init__(
        self,
        options: ClaudeOptions,
        *,
        session_id: str | None,
        approvals: bool = False,
        hooks: frozenset[HookKind] = frozenset(),
    ) -> None:
        hook_config = None
        if hooks:
            hook_config = {
                event: [{"matcher": None, "hookCallbackIds": [event]}]
                for event in hook_events(hooks)
            }
        super().__init__(CLAUDE_DIALECT, initialize={"hooks": hook_config})
        self.command: Command = build_live_command(
            options, session_id=session_id, approvals=approvals
        )
        self._hooks = hooks
        # Whether the agent answers what the CLI asks (``approve_tool``): an MCP server's
        # question comes whatever the flags, and without it is refused (the CLI cancels it).
        self._asked = approvals

    def cli_request(
        self, request_id: str, subtype: Any, request: Mapping[str, Any]
    ) -> bytes | ToolApproval | HookCall:
        if subtype == "hook_callback" and self._hooks:
            return _hook(request_id, request, self._hooks)
        if subtype == "elicitation" and self._asked:
            return elicitation(request_id, request)
        return super().cli_request(request_id, subtype, request)

    def translator(self, *, baseline: SessionTotals | None = None) -> ClaudeTranslator:
        # The result's running totals are the session's, as in one-shot turns.
        return claude_translator(baseline)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _hook(
    request_id: str, request: Mapping[str, Any], kinds: frozenset[HookKind]
) -> HookCall | bytes:
    data = request.get("input")
    data = data if isinstance(data, Mapping) else {}
    event = _text(data.get("hook_event_name")) or _text(request.get("callback_id")) or ""
    kind = HOOK_EVENTS.get(event)
    if kind is None or kind not in kinds:
        return control_response(request_id, {})  # a hook agentrt did not ask for: go on

    def answer(reply: Block | AddContext | None) -> bytes:
        return control_response(request_id, hook_output(event, reply))

    return HookCall(hook=make_hook(kind, data), answer=answer)
