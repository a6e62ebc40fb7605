"""One live ``pi --mode rpc`` process for one conversation (warm sessions).

pi's RPC mode reads commands on stdin and prints their ``response`` frames and the
session's events (the same as ``--mode json``'s) on stdout. The opening turns pi's own
retries off (``set_auto_retry``: a failed run then ends its turn, at its ``agent_end``, and
agentrt's restart policy decides) and asks ``get_state`` for the session's id; a turn is
a ``prompt`` and ends at ``agent_end``; an interrupt is ``abort``, which ends the running
model call or tool and then the turn, in band, the process living on.

A steer (`Runtime.steer`) is ``steer``: pi queues the message and gives it to the model
with its next call, after the running model call (and its tools) end; when that call was
the turn's last, pi makes one more with the message, still before the turn's
``agent_end``. pi's ``response`` to the command is its acknowledgement (a `ControlAnswer`).
pi looks for steered messages once after each call: one that comes after the turn's last
look stays queued, and pi gives it to the model in the next turn, after its prompt.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

import msgspec

from agentrt.backend import (
    ChannelCall,
    Command,
    ControlAnswer,
    ControlRequest,
    FrameRole,
    ProtocolError,
    SessionTotals,
    redact,
)

from ._command import build_live_command
from ._options import PiOptions
from ._translate import PiTranslator

_encode = msgspec.json.Encoder().encode


class PiLive:
    """The `agentrt.backend.LiveProtocol` of one ``pi --mode rpc`` process. Built with
    `PiBackend.live`; ``session_id`` is the session to resume (None: a new one)."""

    def __init__(self, options: PiOptions, *, session_id: str | None) -> None:
        self._options = options
        self._command = build_live_command(options, session_id=session_id)
        self._session_id: str | None = None
        self._ids = itertools.count(1)
        self._in_turn = False

    @property
    def command(self) -> Command:
        return self._command

    @property
    def ready(self) -> bool:
        """Whether pi has named its session (the answer to the opening's ``get_state``)."""
        return self._session_id is not None

    def opening(self) -> bytes:
        """``set_auto_retry`` off, then ``get_state``."""
        return self._line("set_auto_retry", enabled=False) + self._line("get_state")

    def classify(self, frame: Any) -> FrameRole:
        """A ``response`` is control; ``agent_end`` ends a turn; anything else is the turn's."""
        kind = frame.get("type") if isinstance(frame, Mapping) else None
        if kind == "response":
            return "control"
        return "end" if kind == "agent_end" else "event"

    def control(self, frame: Any) -> bytes | ControlAnswer:
        """Takes the session id from ``get_state``'s answer and a ``steer``'s answer (pi's
        acknowledgement, or its refusal); another refused command than an ``abort`` (which
        comes after a turn already over) breaks the protocol."""
        command = frame.get("command")
        if command == "steer":
            request_id = str(frame.get("id"))
            if frame.get("success") is not True:
                return ControlAnswer(request_id, error=_brief(frame.get("error")))
            return ControlAnswer(request_id)
        if frame.get("success") is not True:
            if command == "abort":
                return b""
            raise ProtocolError(f"pi refused {command}: {_brief(frame.get('error'))}")
        if command == "get_state":
            data = frame.get("data")
            session_id = data.get("sessionId") if isinstance(data, Mapping) else None
            if not isinstance(session_id, str) or not session_id:
                raise ProtocolError(f"pi's state names no session: {_brief(data)}")
            self._session_id = session_id
        return b""

    def prompt(self, text: str) -> bytes:
        """``prompt`` with ``text``."""
        if self._session_id is None:
            raise RuntimeError("prompt() before pi has named its session")
        self._in_turn = True
        return self._line("prompt", message=text)

    def interrupt(self) -> bytes:
        """``abort`` (b"" between turns)."""
        return self._line("abort") if self._in_turn else b""

    def request(self, call: ChannelCall, argument: Any) -> ControlRequest:
        """``steer`` with ``argument``'s text (the only call a warm pi takes)."""
        assert call == "steer"
        request_id = f"agentrt-{next(self._ids)}"
        line = _encode({"id": request_id, "type": "steer", "message": argument}) + b"\n"
        return ControlRequest(request_id, line, _nothing)

    def translator(self, *, baseline: SessionTotals | None = None) -> PiTranslator:
        """A fresh translator for the next turn, which names the session first. Usage is
        per model call, so the turn's own (``baseline`` is not needed)."""
        return PiTranslator(model=self._options.model, session_id=self._session_id)

    def _line(self, kind: str, **fields: Any) -> bytes:
        return _encode({"id": f"agentrt-{next(self._ids)}", "type": kind, **fields}) + b"\n"


def _nothing(payload: Any) -> None:
    return None


def _brief(value: Any) -> str:
    return redact(_encode(value).decode(errors="replace"))[:500]
