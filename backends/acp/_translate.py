"""An ACP agent's frames of one turn -> agentrt events.

==============================================  ==========================================
frame                                           events
==============================================  ==========================================
before any frame (`AcpTranslator.preamble`)     `SessionEvent` (the session the handshake
                                                opened or loaded), `InitEvent` with the
                                                agent's ``agentInfo`` version
``session/update``:
  ``agent_message_chunk`` (text)                `TextEvent`
  ``tool_call``, or a ``tool_call_update`` of   `ToolUseEvent` (once per tool call id; the
  a call not seen yet                           name is its ``kind``, the input its
                                                ``rawInput``, else its ``title``), the
                                                open message ended first
  ``tool_call_update`` ``completed``/``failed``  `ToolResultEvent` (``failed``: an error)
  thoughts, the prompt's echo, plans, modes,    nothing
  commands, usage of the context window
  anything the schema does not know             `RawEvent`
the answer to ``session/prompt``:
  ``cancelled``                                 terminal `ErrorEvent` INTERRUPTED
  any other ``stopReason``                      `UsageEvent` (where the answer has
                                                ``usage``), terminal `ResultEvent` with the
                                                last message's text and the stop reason
  an error                                      terminal `ErrorEvent`: ``auth_required``
                                                (-32000) AUTHENTICATION_FAILED, else
                                                CLI_ERROR
==============================================  ==========================================

The stream's end without the answer: a signal is PROCESS_CRASHED, else MALFORMED_OUTPUT.
The protocol carries no cost.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pydantic
from acp.schema import (
    AgentMessageChunk,
    PromptResponse,
    SessionNotification,
    TextContentBlock,
    ToolCallProgress,
    ToolCallStart,
)
from acp.schema import Usage as AcpUsage

from agentrt.backend import (
    ErrorEvent,
    Event,
    ExitStatus,
    InitEvent,
    RawEvent,
    ResultEvent,
    SessionEvent,
    StopReason,
    TextEvent,
    ToolResultEvent,
    ToolUseEvent,
    Usage,
    UsageEvent,
    redact,
)

from ._wire import SESSION_UPDATE, error_text

# JSON-RPC error code of ACP's "authentication required".
AUTH_REQUIRED = -32000
_DONE = frozenset({"completed", "failed"})


class AcpTranslator:
    """Translates one turn's frames on an ACP agent (see the module's table). Pure; one per
    turn: `AcpLive.translator` makes it, knowing the session. The only answer to a request
    that reaches it is the prompt's (`AcpLive.classify` keeps the others)."""

    # A few frames a turn; each decoded generically (see Translator.decode).
    decode = None

    def __init__(self, *, session_id: str | None, version: str | None, agent: Any = None) -> None:
        self._session_id = session_id
        self._version = version
        self._agent = agent
        self._message: list[str] = []
        self._last_message = ""
        self._tools: set[str] = set()
        self._terminal_seen = False

    def preamble(self) -> Sequence[Event]:
        """The session and the agent's version, known from the handshake (none if it ended
        before its session opened)."""
        if self._session_id is None:
            return ()
        return (
            SessionEvent(session_id=self._session_id),
            InitEvent(cli_version=self._version, raw=self._agent),
        )

    def feed(self, frame: Any) -> Sequence[Event]:
        """Events for one decoded frame of the turn. Never raises on any JSON value."""
        if not isinstance(frame, Mapping):
            return [RawEvent(data=frame, note="not a JSON object")]
        if "method" not in frame and "id" in frame:
            return self._answer(frame)
        if frame.get("method") != SESSION_UPDATE:
            return [RawEvent(data=frame)]
        try:
            update = SessionNotification.model_validate(frame.get("params")).update
        except pydantic.ValidationError:
            return [RawEvent(data=frame, note="a session/update the ACP schema does not know")]
        if type(update) is AgentMessageChunk:
            content = update.content
            if type(content) is not TextContentBlock:
                return [RawEvent(data=frame, note="agent message content other than text")]
            if not content.text:
                return []
            self._message.append(content.text)
            return [TextEvent(text=content.text)]
        if type(update) is ToolCallStart or type(update) is ToolCallProgress:
            return self._tool(update)
        return []

    def finish(self, exit_status: ExitStatus, stderr_tail: str) -> Event | None:
        """None if the prompt was answered; else the classified end of the stream."""
        if self._terminal_seen:
            return None
        if exit_status.signal is not None:
            return ErrorEvent(
                reason=StopReason.PROCESS_CRASHED,
                message=f"the ACP agent was killed by signal {exit_status.signal}",
                session_id=self._session_id,
            )
        lines = [line.strip() for line in redact(stderr_tail).splitlines() if line.strip()]
        how = f"the ACP agent exited (code {exit_status.returncode}) before it answered the prompt"
        return ErrorEvent(
            reason=StopReason.MALFORMED_OUTPUT,
            message=f"{how}: {lines[-1][:500]}" if lines else how,
            session_id=self._session_id,
        )

    def _end_message(self) -> list[Event]:
        if not self._message:
            return []
        self._last_message = "".join(self._message)
        self._message.clear()
        return [TextEvent(text="", message_boundary=True)]

    def _tool(self, update: ToolCallStart | ToolCallProgress) -> list[Event]:
        events: list[Event] = []
        tool_id = update.tool_call_id
        if tool_id not in self._tools:
            self._tools.add(tool_id)
            events += self._end_message()
            tool_input = update.raw_input if update.raw_input else {"title": update.title}
            events.append(ToolUseEvent(id=tool_id, name=update.kind or "other", input=tool_input))
        if update.status in _DONE:
            events.append(
                ToolResultEvent(
                    tool_use_id=tool_id,
                    content=_tool_output(update),
                    is_error=update.status == "failed",
                )
            )
        return events

    def _answer(self, frame: Mapping[str, Any]) -> list[Event]:
        self._terminal_seen = True
        error = frame.get("error")
        if error is not None:
            code = error.get("code") if isinstance(error, Mapping) else None
            reason = (
                StopReason.AUTHENTICATION_FAILED if code == AUTH_REQUIRED else StopReason.CLI_ERROR
            )
            return [
                ErrorEvent(
                    reason=reason,
                    message=f"the ACP agent refused the prompt: {error_text(error)}",
                    session_id=self._session_id,
                    raw=dict(frame),
                )
            ]
        try:
            answer = PromptResponse.model_validate(frame.get("result"))
        except pydantic.ValidationError:
            return [
                ErrorEvent(
                    reason=StopReason.MALFORMED_OUTPUT,
                    message="the ACP agent's answer to the prompt is not a PromptResponse",
                    session_id=self._session_id,
                    raw=dict(frame),
                )
            ]
        if answer.stop_reason == "cancelled":
            return [
                ErrorEvent(
                    reason=StopReason.INTERRUPTED,
                    message="the ACP agent cancelled the turn",
                    session_id=self._session_id,
                )
            ]
        self._end_message()
        usage = None if answer.usage is None else _usage(answer.usage)
        result = ResultEvent(
            text=self._last_message,
            session_id=self._session_id,
            model_stop_reason=answer.stop_reason,
            usage=usage,
            raw=dict(frame),
        )
        return [UsageEvent(usage=usage), result] if usage is not None else [result]


def _tool_output(update: ToolCallStart | ToolCallProgress) -> Any:
    texts = [
        block.content.text
        for block in update.content or ()
        if getattr(block, "type", None) == "content" and type(block.content) is TextContentBlock
    ]
    if texts:
        return "\n".join(texts)
    return update.raw_output


def _usage(usage: AcpUsage) -> Usage:
    cached = usage.cached_read_tokens or 0
    return Usage(
        input_tokens=max(usage.input_tokens - cached, 0),
        output_tokens=usage.output_tokens,
        cache_read_input_tokens=cached,
        cache_creation_input_tokens=usage.cached_write_tokens or 0,
    )
