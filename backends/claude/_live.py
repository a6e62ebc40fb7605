"""`ClaudeLive`: one live ``claude -p --input-format stream-json`` process, as pure state.

The control protocol of Claude Code's stream-json input (what the Agent SDK speaks): the
client opens with an ``initialize`` control request and the CLI answers with a
``control_response``; each turn is one ``user`` message, and the turn ends at its
``result``. An ``interrupt`` control request ends a running turn: the CLI answers it, ends
the turn with an ``error_during_execution`` result and keeps running. Control requests the
CLI makes of the client (tool approvals, hooks, SDK MCP servers) are answered with an error:
agentrt offers none of them to the CLI yet, so none should come.
"""

from __future__ import annotations

import itertools
import json
import secrets
from collections.abc import Mapping
from typing import Any

from agentrt.backend import Command, FrameRole, ProtocolError, SessionTotals

from ._command import build_live_command
from ._options import ClaudeOptions
from ._translate import ClaudeTranslator

_CONTROL = frozenset(("control_response", "control_request", "control_cancel_request"))


def _line(value: Mapping[str, Any]) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode() + b"\n"


class ClaudeLive:
    """The `agentrt.backend.LiveProtocol` of one live Claude Code process."""

    def __init__(self, options: ClaudeOptions, *, session_id: str | None) -> None:
        self.command: Command = build_live_command(options, session_id=session_id)
        self.ready = False
        self._prefix = secrets.token_hex(4)
        self._ids = itertools.count(1)
        self._initialize = self._request_id()

    def _request_id(self) -> str:
        return f"req_{next(self._ids)}_{self._prefix}"

    def opening(self) -> bytes:
        return self._request(self._initialize, {"subtype": "initialize", "hooks": None})

    def classify(self, frame: Any) -> FrameRole:
        if type(frame) is not dict:
            return "event"  # the typed stream, assistant and user frames, or not an object
        kind = frame.get("type")
        if kind == "result":
            return "end"
        return "control" if kind in _CONTROL else "event"

    def control(self, frame: Any) -> bytes:
        kind = frame.get("type")
        if kind == "control_response":
            self._response(frame.get("response"))
        elif kind == "control_request":
            request_id = frame.get("request_id")
            request = frame.get("request")
            subtype = request.get("subtype") if isinstance(request, Mapping) else None
            if not isinstance(request_id, str):
                raise ProtocolError("a control request without a request_id")
            return _line(
                {
                    "type": "control_response",
                    "response": {
                        "subtype": "error",
                        "request_id": request_id,
                        "error": f"agentrt does not handle {subtype!r} control requests",
                    },
                }
            )
        return b""

    def _response(self, response: Any) -> None:
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
