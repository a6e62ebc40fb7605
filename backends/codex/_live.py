"""One live ``codex app-server`` process for one conversation (warm sessions).

app-server speaks JSON-RPC 2.0 over stdio, one JSON object a line, without the
``"jsonrpc"`` member (checked against codex 0.171.0, where it is experimental; the facts
are in tests/realcli/CODEX.md). The opening is written at once: ``initialize``, the
``initialized`` notification, then ``thread/start`` (a new thread) or ``thread/resume``
(the thread id agentrt checkpointed: the same id ``codex exec resume`` takes, so warm and
per-turn turns continue one conversation). The process is ready when the thread is.

A turn is ``turn/start``; the notifications that name it go to a `CodexLiveTranslator`,
and it ends at its ``turn/completed``. ``turn/interrupt`` names the running turn, whose id
the ``turn/start`` answer carries; so does ``turn/steer`` (`Runtime.steer`: more input for
the running turn, which codex gives the model with its next call; the answer, or codex's
refusal once the turn is over, comes back as a `ControlAnswer`). Every other frame is
control: codex reports the thread's start and status, rate limits and, after a resume, the
saved usage totals.
Requests codex makes of the client: with ``approvals`` the thread's approval policy is
"untrusted" (codex asks before any command it does not know to be safe, and before a file
change), and its ``item/commandExecution/requestApproval`` and
``item/fileChange/requestApproval`` become `ToolApproval` questions (tools named as the
translator names their items: ``command_execution``, ``file_change``), answered "accept"
or "decline". codex takes no message with a decline (the model reads "rejected by user")
and cannot change a command: an ``Allow`` with ``updated_input`` is declined. Without
``approvals`` the policy is "never", as ``codex exec`` runs. Any other request is answered
with a JSON-RPC error.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

import msgspec

from agentrt.backend import (
    Allow,
    Answers,
    ChannelCall,
    Command,
    ControlAnswer,
    ControlRequest,
    Deny,
    FrameRole,
    ProtocolError,
    SessionTotals,
    ToolApproval,
    ToolRequest,
    redact,
)

from ._command import codex_env, config_args
from ._live_translate import CodexLiveTranslator
from ._options import CodexOptions

_encode = msgspec.json.Encoder().encode
# JSON-RPC's "method not found": what codex gets for a request agentrt does not answer.
_NOT_ANSWERED = -32601


# codex's approval requests, and the tool each is about (as the translator names its items).
_APPROVALS = {
    "item/commandExecution/requestApproval": "command_execution",
    "item/fileChange/requestApproval": "file_change",
}


def _approval(frame: Mapping[str, Any], tool_name: str) -> ToolApproval:
    request_id = frame.get("id")
    params = frame.get("params")
    params = params if isinstance(params, Mapping) else {}
    if tool_name == "command_execution":
        tool_input: Any = {"command": params.get("command"), "cwd": params.get("cwd")}
    else:
        tool_input = {"changes": params.get("changes"), "reason": params.get("reason")}

    def answer(decision: Allow | Deny | Answers) -> bytes:
        # codex cannot run another command than the one it asked about (and asks no
        # question that Answers answers).
        accepted = isinstance(decision, Allow) and decision.updated_input is None
        return _line(
            {"id": request_id, "result": {"decision": "accept" if accepted else "decline"}}
        )

    item_id = params.get("itemId")
    request = ToolRequest(tool_name, tool_input, item_id if isinstance(item_id, str) else "")
    return ToolApproval(request=request, answer=answer)


def exec_only(options: CodexOptions) -> str | None:
    """Why app-server cannot run these options, naming the first one only ``codex exec``
    has (``--approve-for-me``, ``--profile``, ``--image``, ``--output-schema``, extra
    flags), or None when it can."""
    o = options
    if o.approval == "approve-for-me":
        found = "approval='approve-for-me'"
    elif o.profile:
        found = f"profile={o.profile!r}"
    elif o.images:
        found = "images"
    elif o.output_schema is not None:
        found = "output_schema"
    elif o.extra_args:
        found = "extra_args"
    elif o.fork_session:
        found = "fork_session"
    else:
        return None
    return f"{found} runs on codex exec only"


class CodexLive:
    """The `agentrt.backend.LiveProtocol` of one ``codex app-server`` process: build it
    with `CodexBackend.live`. ``session_id`` is the thread to resume (None: a new one)."""

    def __init__(
        self,
        options: CodexOptions,
        *,
        session_id: str | None,
        environ: Mapping[str, str] | None = None,
        approvals: bool = False,
    ) -> None:
        self._options = options
        self._approvals = approvals
        self._resume = session_id
        self._thread_id: str | None = None
        self._command = Command(
            argv=(options.binary, "app-server", "--listen", "stdio://", *config_args(options)),
            env=codex_env(options, environ),
            cwd=options.cwd,
        )
        self._ids = itertools.count(1)
        self._pending: dict[int, str] = {}
        self._in_turn = False
        self._turn_id: str | None = None
        self._interrupt_wanted = False

    @property
    def command(self) -> Command:
        """``codex app-server --listen stdio:// [-c key=value ...]``."""
        return self._command

    @property
    def ready(self) -> bool:
        """Whether the thread has started (or resumed)."""
        return self._thread_id is not None

    @property
    def thread_id(self) -> str | None:
        """The thread this process runs, once ready."""
        return self._thread_id

    def opening(self) -> bytes:
        """``initialize``, ``initialized`` and the thread's start or resume, in one write."""
        o = self._options
        thread: dict[str, Any] = {"approvalPolicy": "untrusted" if self._approvals else "never"}
        if o.cwd:
            thread["cwd"] = o.cwd
        if o.model:
            thread["model"] = o.model
        sandbox = "danger-full-access" if o.approval == "bypass" else o.sandbox
        if sandbox:
            thread["sandbox"] = sandbox
        if self._resume is None:
            start = self._request("thread/start", thread)
        else:
            # excludeTurns: the process needs the thread, not its history sent back to us.
            resume = {"threadId": self._resume, "excludeTurns": True, **thread}
            start = self._request("thread/resume", resume)
        # codex puts the client's name in its User-Agent; the version is not checked.
        client = {"clientInfo": {"name": "agentrt", "version": "0"}}
        return self._request("initialize", client) + _line({"method": "initialized"}) + start

    def classify(self, frame: Any) -> FrameRole:
        """Answers and requests are control. A notification is the running turn's when it
        names that turn (``turn/completed`` its end); every other one is control: between
        turns, and during one what is about the thread (its start, status, a resume's saved
        totals, which name an earlier turn)."""
        if not isinstance(frame, Mapping):
            return "event" if self._in_turn else "control"  # the translator keeps it as raw
        if "id" in frame or "method" not in frame or not self._in_turn:
            return "control"
        turn_id = _turn_named(frame.get("params"))
        if turn_id is None or (self._turn_id is not None and turn_id != self._turn_id):
            return "control"
        if frame.get("method") == "turn/completed":
            self._in_turn = False
            self._turn_id = None
            return "end"
        return "event"

    def control(self, frame: Any) -> bytes | ToolApproval | ControlAnswer:
        """Take an answer (the thread id, the turn id) or a request of codex's; raises
        `ProtocolError` for an error answer the conversation cannot go on after."""
        if not isinstance(frame, Mapping) or ("method" in frame and "id" not in frame):
            return b""  # a notification between turns (status, rate limits, usage so far)
        if "method" in frame:
            method = frame.get("method")
            if self._approvals and method in _APPROVALS:
                return _approval(frame, _APPROVALS[method])
            asked = redact(str(method))
            refusal = {"code": _NOT_ANSWERED, "message": f"agentrt does not answer {asked}"}
            return _line({"id": frame.get("id"), "error": refusal})
        request_id = frame.get("id")
        method = self._pending.pop(request_id, None) if isinstance(request_id, int) else None
        if method is None:
            raise ProtocolError(f"codex answered a request agentrt did not make: {_brief(frame)}")
        error = frame.get("error")
        if method == "turn/steer":
            if error is not None:
                return ControlAnswer(str(request_id), error=_brief(error))
            return ControlAnswer(str(request_id), payload=frame.get("result"))
        if error is not None:
            if method == "turn/interrupt":
                return b""  # the turn had already ended ("no active turn to interrupt")
            raise ProtocolError(f"codex refused {method}: {_brief(error)}")
        result = frame.get("result")
        if method in ("thread/start", "thread/resume"):
            thread = result.get("thread") if isinstance(result, Mapping) else None
            thread_id = thread.get("id") if isinstance(thread, Mapping) else None
            if not isinstance(thread_id, str):
                raise ProtocolError(f"codex's {method} answer names no thread: {_brief(result)}")
            self._thread_id = thread_id
        elif method == "turn/start":
            turn = result.get("turn") if isinstance(result, Mapping) else None
            turn_id = turn.get("id") if isinstance(turn, Mapping) else None
            if not isinstance(turn_id, str):
                raise ProtocolError(f"codex's turn/start answer names no turn: {_brief(result)}")
            if self._in_turn:
                self._turn_id = turn_id
                if self._interrupt_wanted:
                    return self.interrupt()
        return b""

    def prompt(self, text: str) -> bytes:
        """``turn/start`` with ``text`` on the thread."""
        if self._thread_id is None:
            raise RuntimeError("prompt() before the app-server thread is ready")
        self._in_turn = True
        self._turn_id = None
        self._interrupt_wanted = False
        params = {"threadId": self._thread_id, "input": [_text_input(text)]}
        return self._request("turn/start", params)

    def interrupt(self) -> bytes:
        """``turn/interrupt`` of the running turn; sent as soon as codex has named the turn
        when it has not yet (b"" between turns)."""
        if not self._in_turn:
            return b""
        if self._turn_id is None:
            self._interrupt_wanted = True
            return b""
        self._interrupt_wanted = False
        params = {"threadId": self._thread_id, "turnId": self._turn_id}
        return self._request("turn/interrupt", params)

    def request(self, call: ChannelCall, argument: Any) -> ControlRequest:
        """``turn/steer``: ``argument``'s text for the running turn (the only call a warm
        codex takes); codex refuses it while it has not named the turn, or once it ended."""
        assert call == "steer"
        params: dict[str, Any] = {"threadId": self._thread_id, "input": [_text_input(argument)]}
        if self._turn_id is not None:
            params["expectedTurnId"] = self._turn_id
        request_id = next(self._ids)
        self._pending[request_id] = "turn/steer"
        line = _line({"id": request_id, "method": "turn/steer", "params": params})
        return ControlRequest(str(request_id), line, _nothing)

    def translator(self, *, baseline: SessionTotals | None = None) -> CodexLiveTranslator:
        """A fresh translator for the next turn on this thread (see `CodexLiveTranslator`)."""
        usage = None if baseline is None else baseline.usage
        thread_id = self._thread_id or self._resume
        return CodexLiveTranslator(
            session_id=thread_id, model=self._options.model, usage_baseline=usage
        )

    def _request(self, method: str, params: Mapping[str, Any]) -> bytes:
        request_id = next(self._ids)
        self._pending[request_id] = method
        return _line({"id": request_id, "method": method, "params": params})


def _turn_named(params: Any) -> str | None:
    """The turn a notification is about: ``params.turnId``, or ``params.turn.id``."""
    if not isinstance(params, Mapping):
        return None
    turn = params.get("turn")
    turn_id = params.get("turnId") or (turn.get("id") if isinstance(turn, Mapping) else None)
    return turn_id if isinstance(turn_id, str) else None


def _text_input(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text, "text_elements": []}


def _nothing(payload: Any) -> None:
    return None


def _line(message: Mapping[str, Any]) -> bytes:
    return _encode(message) + b"\n"


def _brief(value: Any) -> str:
    return redact(_encode(value).decode(errors="replace"))[:500]
