"""The acp backend's live protocol and translator on frames recorded from the pinned CLIs'
ACP modes (gemini --acp 0.61.0, qwen --acp 0.24.4, against the fake APIs), as plain data:
the handshake's lines, what is control and what a turn's, the events, the answers to a
permission request."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentrt.backend import (
    Allow,
    Deny,
    ProtocolError,
    ResultEvent,
    SessionEvent,
    StopReason,
    TextEvent,
    ToolApproval,
    ToolResultEvent,
    ToolUseEvent,
)
from agentrt.backends.acp import AcpBackend, AcpLive

SESSION = "da147ac1-1654-4bf7-9e79-c387a84182ef"


def update(which: str, **fields: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": SESSION, "update": {"sessionUpdate": which, **fields}},
    }


def chunk(text: str) -> dict[str, Any]:
    return update("agent_message_chunk", content={"type": "text", "text": text})


def lines(data: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in data.splitlines()]


def ready(approvals: bool = False, session_id: str | None = None, **raw: Any) -> AcpLive:
    backend = AcpBackend(environ={})
    options = backend.parse_options({"command": ["gemini", "--acp"], "cwd": "/", **raw})
    live = backend.live(options, session_id=session_id, approvals=approvals)
    (initialize,) = lines(live.opening())
    assert initialize["method"] == "initialize"
    capabilities = initialize["params"]["clientCapabilities"]
    assert capabilities["fs"] == {"readTextFile": False, "writeTextFile": False}
    assert capabilities["terminal"] is False
    answer = {"protocolVersion": 1, "agentCapabilities": {"loadSession": True}}
    answer["agentInfo"] = {"name": "gemini-cli", "title": "Gemini CLI", "version": "0.61.0"}
    (opened,) = lines(live.control({"jsonrpc": "2.0", "id": 0, "result": answer}))  # type: ignore[arg-type]
    if session_id is None:
        assert opened["method"] == "session/new" and opened["params"] == {
            "cwd": "/",
            "mcpServers": [],
        }
        live.control({"jsonrpc": "2.0", "id": opened["id"], "result": {"sessionId": SESSION}})
    else:
        assert opened["method"] == "session/load"
        assert opened["params"]["sessionId"] == session_id
    return live


def test_a_text_turn_of_gemini() -> None:
    live = ready()
    assert live.ready
    translator = live.translator()
    (prompt,) = lines(live.prompt("first prompt"))
    assert prompt["params"] == {
        "sessionId": SESSION,
        "prompt": [{"type": "text", "text": "first prompt"}],
    }
    commands = update("available_commands_update", availableCommands=[])
    answer = {"jsonrpc": "2.0", "id": prompt["id"], "result": {"stopReason": "end_turn"}}
    frames = [commands, chunk("first "), chunk("answer"), answer]
    assert [live.classify(f) for f in frames] == ["event", "event", "event", "end"]
    events = [*translator.preamble(), *(e for f in frames for e in translator.feed(f))]
    assert events[0] == SessionEvent(session_id=SESSION)
    assert events[1].cli_version == "0.61.0"  # type: ignore[attr-defined]
    assert [e.text for e in events if type(e) is TextEvent] == ["first ", "answer"]
    (result,) = [e for e in events if type(e) is ResultEvent]
    assert (result.text, result.model_stop_reason) == ("first answer", "end_turn")
    # Between turns the agent's notifications are control, not output.
    assert live.classify(commands) == "control" and live.control(commands) == b""


def test_gemini_asks_about_a_tool_it_never_announced() -> None:
    # Its permission request names the call; the only update after it is the call's end.
    live = ready(approvals=True)
    translator = live.translator()
    live.prompt("run it")
    call = {
        "toolCallId": "run_shell_command_0",
        "status": "pending",
        "title": "echo hi",
        "kind": "execute",
    }
    options = [
        {"optionId": "proceed_always", "name": "Allow for this session", "kind": "allow_always"},
        {"optionId": "proceed_once", "name": "Allow", "kind": "allow_once"},
        {"optionId": "cancel", "name": "Reject", "kind": "reject_once"},
    ]
    asked = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "session/request_permission",
        "params": {"sessionId": SESSION, "options": options, "toolCall": call},
    }
    assert live.classify(asked) == "control"
    approval = live.control(asked)
    assert isinstance(approval, ToolApproval)
    assert approval.request.tool_name == "execute"
    assert approval.request.input == {"title": "echo hi"}
    chosen = lambda data: lines(data)[0]["result"]["outcome"]  # noqa: E731
    assert chosen(approval.answer(Allow())) == {"outcome": "selected", "optionId": "proceed_once"}
    assert chosen(approval.answer(Deny("no"))) == {"outcome": "selected", "optionId": "cancel"}
    # ACP cannot run another input than the one it asked about.
    changed = approval.answer(Allow(updated_input={"command": "rm -rf /"}))
    assert chosen(changed) == {"outcome": "selected", "optionId": "cancel"}
    done = update(
        "tool_call_update",
        toolCallId="run_shell_command_0",
        status="completed",
        title="echo hi",
        content=[],
        kind="execute",
    )
    events = translator.feed(done)
    assert [type(e) for e in events] == [ToolUseEvent, ToolResultEvent]


def test_qwen_tool_call_with_its_input_and_output() -> None:
    live = ready()
    translator = live.translator()
    live.prompt("run it")
    start = update(
        "tool_call",
        toolCallId="toolu_2",
        status="in_progress",
        title="Shell: echo hi",
        kind="execute",
        rawInput={"command": "echo hi"},
    )
    output = {"type": "content", "content": {"type": "text", "text": "Exit Code: 0"}}
    end = update("tool_call_update", toolCallId="toolu_2", status="completed", content=[output])
    events = [*translator.feed(chunk("let me")), *translator.feed(start), *translator.feed(end)]
    (tool,) = [e for e in events if type(e) is ToolUseEvent]
    assert (tool.id, tool.name, tool.input) == ("toolu_2", "execute", {"command": "echo hi"})
    assert events[1] == TextEvent(text="", message_boundary=True)  # the message before it ended
    (result,) = [e for e in events if type(e) is ToolResultEvent]
    assert (result.content, result.is_error) == ("Exit Code: 0", False)
    # Without approve_tool the backend rejects: qwen's own extension requests are refused.
    refused = lines(
        live.control({"jsonrpc": "2.0", "id": 1, "method": "craft/drainMidTurnQueue", "params": {}})
    )  # type: ignore[arg-type]
    assert refused[0]["error"]["code"] == -32601


def test_cancel_and_a_cancelled_answer() -> None:
    live = ready()
    translator = live.translator()
    assert live.interrupt() == b""  # between turns: nothing to cancel
    (prompt,) = lines(live.prompt("hang"))
    (cancel,) = lines(live.interrupt())
    assert cancel == {
        "jsonrpc": "2.0",
        "method": "session/cancel",
        "params": {"sessionId": SESSION},
    }
    answer = {"jsonrpc": "2.0", "id": prompt["id"], "result": {"stopReason": "cancelled"}}
    assert live.classify(answer) == "end"
    (event,) = translator.feed(answer)
    assert event.reason is StopReason.INTERRUPTED  # type: ignore[attr-defined]


def test_a_refused_load_is_session_lost() -> None:
    live = ready(session_id="gone")
    error = {
        "code": -32603,
        "message": "Internal error",
        "data": {"details": "No previous sessions found for this project."},
    }
    with pytest.raises(ProtocolError) as info:
        live.control({"jsonrpc": "2.0", "id": 1, "error": error})
    assert info.value.reason is StopReason.SESSION_LOST
    assert "No previous sessions found" in str(info.value)
