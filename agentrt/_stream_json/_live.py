"""`StreamJsonLive`: the control protocol of a live stream-json CLI process, as pure state.

Claude Code's ``--input-format stream-json`` (what the Agent SDK speaks), which Qwen Code
copies: the client opens with an ``initialize`` control request and the CLI answers with a
``control_response``; each turn is one ``user`` message, and the turn ends at its
``result``. An ``interrupt`` control request ends a running turn: the CLI answers it, ends
the turn with an error result and keeps running.

The CLI asks the client too, with control requests of its own: ``can_use_tool`` (may this
tool run?) becomes a `ToolApproval`. A backend takes the other requests its CLI sends
(Claude's ``hook_callback``) in `StreamJsonLive.cli_request`; the rest are answered with an
error: agentrt offers nothing more to the CLI (no SDK MCP servers, so no ``mcp_message``).

The CLI's news of its background tasks (``system`` frames ``task_started``,
``task_updated``, ``task_notification``, ``background_tasks_changed``) are ``"task"`` frames:
a turn's events during a turn, no turn's output between turns; `background_tasks` reads the
tasks running from them. A turn the CLI starts by itself (when a background task ends, it
prints ``init`` and runs the model on the task's notification) is ordinary turn output.

The runtime's own requests (`StreamJsonLive.request`: ``set_model``,
``set_permission_mode``, ``get_context_usage``, ``stop_task``) are answered with a
``control_response`` of their id, which `control` returns as a `ControlAnswer`.

A steer (`Runtime.steer`) is a ``user`` message written while a turn runs, with a ``uuid``
of its own. Claude Code (2.1.332, measured) folds it into the running turn: it acknowledges
it with a ``command_lifecycle`` frame of that uuid (``queued``, the `ControlAnswer`), hands
it to the model with the next tool result (``started``), and ``completed`` it. A message
that came too late for the turn's last model call runs next, as a turn of the CLI's own
with a result of its own: so while a steered message has not ``started``, a result is not
the turn's end, and the turn reads on to the result that answers it.
"""

from __future__ import annotations

import itertools
import json
import secrets
import uuid
from collections.abc import Mapping
from typing import Any

from .._asks import (
    Answers,
    Ask,
    Decision,
    Deny,
    PlanApproval,
    Question,
    QuestionOption,
    ToolApproval,
    ToolRequest,
    UserQuestions,
)
from .._channel import (
    BackgroundTask,
    ChannelCall,
    ContextCategory,
    ContextUsage,
    ControlAnswer,
    ControlRequest,
)
from .._events import SessionTotals
from ._dialect import StreamJsonDialect
from ._live_protocol import FrameRole, ProtocolError
from ._translator import StreamJsonTranslator

_CONTROL = frozenset(
    ("control_response", "control_request", "control_cancel_request", "command_lifecycle")
)
# The system frames that report the CLI's background tasks (see `StreamJsonLive.classify`).
_TASK_NEWS = frozenset(
    (
        "task_started",
        "task_updated",
        "task_progress",
        "task_notification",
        "background_tasks_changed",
    )
)
_UNANSWERED = {
    "behavior": "deny",
    "message": "this agent answers no tool approvals (start it with approve_tool to)",
}


def _line(value: Mapping[str, Any]) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode() + b"\n"


def control_response(request_id: str, response: Mapping[str, Any]) -> bytes:
    """The line that answers the CLI's control request ``request_id`` with ``response``."""
    return _line(
        {
            "type": "control_response",
            "response": {"subtype": "success", "request_id": request_id, "response": response},
        }
    )


def control_error(request_id: str, error: str) -> bytes:
    """The line that refuses the CLI's control request ``request_id``, saying ``error``."""
    return _line(
        {
            "type": "control_response",
            "response": {"subtype": "error", "request_id": request_id, "error": error},
        }
    )


class StreamJsonLive:
    """The `agentrt.backend.LiveProtocol` of one live stream-json process, but for its
    ``command``, which the backend sets. ``dialect``: its translator's; ``initialize``: the
    fields of the opening ``initialize`` request besides its subtype (Claude's ``hooks``).
    ``approvals``: whether the agent answers ``can_use_tool``; if not, each is denied here
    (a CLI that asks whenever its approval mode wants an answer, as Qwen Code does, then
    runs what it would run headless).
    """

    def __init__(
        self,
        dialect: StreamJsonDialect,
        *,
        initialize: Mapping[str, Any] | None = None,
        approvals: bool = True,
    ) -> None:
        self.ready = False
        self._approvals = approvals
        self._dialect = dialect
        self._initialize_fields = dict(initialize or {})
        self._prefix = secrets.token_hex(4)
        self._ids = itertools.count(1)
        self._initialize = self._request_id()
        # The steered messages the CLI has not handed to the model yet, by uuid.
        self._steering: set[str] = set()

    def _request_id(self) -> str:
        return f"req_{next(self._ids)}_{self._prefix}"

    def opening(self) -> bytes:
        request = {"subtype": "initialize", **self._initialize_fields}
        return self._request(self._initialize, request)

    def classify(self, frame: Any) -> FrameRole:
        if type(frame) is not dict:
            return "event"  # the typed stream, assistant and user frames, or not an object
        kind = frame.get("type")
        if kind == "result":
            # Not the end while a steered message waits: the CLI runs it next, in this turn.
            return "event" if self._steering else "end"
        if (kind == "user" and frame.get("isReplay") is True) or (
            kind == "system" and frame.get("subtype") == "status"
        ):
            # The CLI's echo of what the client did (set_model's "Set model to ..."), and its
            # news of its own state (set_permission_mode's new mode): no turn's output.
            return "control"
        if kind == "system" and frame.get("subtype") in _TASK_NEWS:
            return "task"
        return "control" if kind in _CONTROL else "event"

    def background_tasks(self, frame: Any) -> tuple[BackgroundTask, ...] | None:
        """The background tasks a ``"task"`` frame says run now (Claude's
        ``background_tasks_changed`` lists them all); None for a frame that does not say."""
        if type(frame) is not dict or frame.get("subtype") != "background_tasks_changed":
            return None
        tasks = frame.get("tasks")
        return tuple(
            BackgroundTask(
                task["task_id"], _text(task.get("description")) or "", _text(task.get("task_type"))
            )
            for task in (tasks if isinstance(tasks, list) else ())
            if isinstance(task, Mapping) and isinstance(task.get("task_id"), str)
        )

    def control(self, frame: Any) -> bytes | Ask | ControlAnswer:
        kind = frame.get("type")
        if kind == "control_response":
            return self._answered(frame.get("response"))
        elif kind == "command_lifecycle":
            return self._lifecycle(frame)
        elif kind == "control_request":
            request_id = frame.get("request_id")
            request = frame.get("request")
            if not isinstance(request_id, str) or not isinstance(request, Mapping):
                raise ProtocolError("a control request without a request_id or a request")
            subtype = request.get("subtype")
            if subtype == "can_use_tool":
                if not self._approvals:
                    return control_response(request_id, _UNANSWERED)
                return _approval(request_id, request)
            return self.cli_request(request_id, subtype, request)
        return b""

    def cli_request(self, request_id: str, subtype: Any, request: Mapping[str, Any]) -> bytes | Ask:
        """The answer to a control request of the CLI's other than ``can_use_tool``: here
        an error; a backend whose CLI asks more overrides this."""
        return control_error(request_id, f"agentrt does not handle {subtype!r} control requests")

    def _answered(self, response: Any) -> bytes | ControlAnswer:
        if not isinstance(response, Mapping):
            raise ProtocolError("a control response without a response")
        request_id = response.get("request_id")
        ok = response.get("subtype") == "success"
        if request_id != self._initialize:
            # An answer to a request of the runtime's (an interrupt's acknowledgement too).
            if not isinstance(request_id, str):
                raise ProtocolError("a control response without a request_id")
            if ok:
                return ControlAnswer(request_id, payload=response.get("response"))
            return ControlAnswer(request_id, error=str(response.get("error") or "refused"))
        if not ok:
            raise ProtocolError(f"initialize was refused: {response.get('error')!r}")
        self.ready = True
        return b""

    def _lifecycle(self, frame: Mapping[str, Any]) -> bytes | ControlAnswer:
        # A steered message's progress: any state acknowledges it (the CLI has it); once
        # started, the model has it, and a result may end the turn again.
        command = frame.get("command_uuid")
        if not isinstance(command, str):
            return b""
        if frame.get("state") != "queued":
            self._steering.discard(command)
        return ControlAnswer(command)

    def request(self, call: ChannelCall, argument: Any) -> ControlRequest:
        """The control request for the runtime's ``call`` with its ``argument`` (the model,
        the mode, the task id, the steered text; None for ``context_usage``)."""
        if call == "steer":
            message_id = str(uuid.uuid4())
            self._steering.add(message_id)
            return ControlRequest(message_id, self._message(argument, message_id), _nothing)
        request_id = self._request_id()
        fields: dict[str, Any]
        decode: Any = _nothing
        if call == "set_model":
            fields = {"subtype": "set_model", "model": argument}
        elif call == "set_permission_mode":
            fields = {"subtype": "set_permission_mode", "mode": argument}
        elif call == "context_usage":
            # "summary": from the last response's usage, without the CLI's token-count calls.
            fields = {"subtype": "get_context_usage", "detail": "summary"}
            decode = context_usage
        else:
            fields = {"subtype": "stop_task", "task_id": argument}
        return ControlRequest(request_id, self._request(request_id, fields), decode)

    def prompt(self, text: str) -> bytes:
        return self._message(text)

    def _message(self, text: str, message_id: str | None = None) -> bytes:
        message: dict[str, Any] = {
            "type": "user",
            "message": {"role": "user", "content": text},
            "parent_tool_use_id": None,
        }
        if message_id is not None:
            message["uuid"] = message_id
        return _line(message)

    def interrupt(self) -> bytes:
        return self._request(self._request_id(), {"subtype": "interrupt"})

    def _request(self, request_id: str, request: Mapping[str, Any]) -> bytes:
        return _line({"type": "control_request", "request_id": request_id, "request": request})

    def translator(self, *, baseline: SessionTotals | None = None) -> StreamJsonTranslator:
        # The result's total_cost_usd is the session's running total, as in one-shot turns.
        cost = 0.0 if baseline is None else baseline.cost_usd
        return StreamJsonTranslator(self._dialect, cost_baseline=cost)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _approval(request_id: str, request: Mapping[str, Any]) -> ToolApproval:
    tool_input = request.get("input")

    def answer(decision: Decision) -> bytes:
        if isinstance(decision, Deny):
            return control_response(request_id, {"behavior": "deny", "message": decision.message})
        if isinstance(decision, Answers):
            # As the Agent SDK answers AskUserQuestion: its input, plus the answers by question.
            asked = tool_input if isinstance(tool_input, Mapping) else {}
            updated: Any = {**asked, "answers": dict(decision.answers)}
        else:
            updated = tool_input if decision.updated_input is None else decision.updated_input
        return control_response(request_id, {"behavior": "allow", "updatedInput": updated})

    tool_name = _text(request.get("tool_name")) or ""
    tool = ToolRequest(
        tool_name=tool_name,
        input=tool_input,
        tool_use_id=_text(request.get("tool_use_id")) or "",
        question=_question(tool_name, tool_input),
    )
    return ToolApproval(request=tool, answer=answer)


def _question(tool_name: str, tool_input: Any) -> UserQuestions | PlanApproval | None:
    # Claude Code's tools that ask the user, typed from their input (measured with 2.1.332:
    # ExitPlanMode's approval request carries an empty input, the plan being in a file).
    fields = tool_input if isinstance(tool_input, Mapping) else {}
    if tool_name == "ExitPlanMode":
        return PlanApproval(plan=_text(fields.get("plan")))
    if tool_name != "AskUserQuestion":
        return None
    asked = fields.get("questions")
    return UserQuestions(
        tuple(
            Question(
                question=q["question"],
                header=_text(q.get("header")) or "",
                options=tuple(
                    QuestionOption(o["label"], _text(o.get("description")) or "")
                    for o in q.get("options") or ()
                    if isinstance(o, Mapping) and isinstance(o.get("label"), str)
                ),
                multi_select=q.get("multiSelect") is True,
            )
            for q in (asked if isinstance(asked, list) else ())
            if isinstance(q, Mapping) and isinstance(q.get("question"), str)
        )
    )


def _nothing(payload: Any) -> None:
    return None


def _number(value: Any) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value
    raise ProtocolError(f"a context usage with {value!r} where a number belongs")


def context_usage(payload: Any) -> ContextUsage:
    """The `ContextUsage` of a ``get_context_usage`` answer; `ProtocolError` if it has not
    the numbers."""
    if not isinstance(payload, Mapping):
        raise ProtocolError("a context usage answer that is not an object")
    rows = payload.get("categories")
    categories = tuple(
        ContextCategory(row["name"], int(row["tokens"]), _text(row.get("kind")))
        for row in (rows if isinstance(rows, list) else ())
        if isinstance(row, Mapping)
        and isinstance(row.get("name"), str)
        and isinstance(row.get("tokens"), int)
    )
    return ContextUsage(
        total_tokens=int(_number(payload.get("totalTokens"))),
        max_tokens=int(_number(payload.get("maxTokens"))),
        percentage=float(_number(payload.get("percentage"))),
        model=_text(payload.get("model")),
        categories=categories,
        raw=payload,
    )
