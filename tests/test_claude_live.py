"""`ClaudeLive`, the claude backend's live protocol, as plain data: the lines it writes and
what it makes of the frames Claude Code prints on a live process (stream-json input)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentrt import AddContext, Agent, Allow, Answers, Block, Deny, McpElicitation, ToolRequest
from agentrt.backend import HookCall, ProtocolError, ToolApproval
from agentrt.backends.claude import ClaudeBackend

BACKEND = ClaudeBackend()


def live(**kwargs: Any) -> Any:
    options = BACKEND.parse_options({"binary": "claude"})
    return BACKEND.live(options, session_id=kwargs.pop("session_id", None), **kwargs)


def line(data: bytes) -> Any:
    assert data.endswith(b"\n") and data.count(b"\n") == 1
    return json.loads(data)


def test_the_command_reads_stream_json_and_resumes_the_session() -> None:
    argv = live(session_id="0b7e4a8e-1111-4222-8333-123456789abc").command.argv
    assert argv[:7] == (
        "claude",
        "-p",
        "--output-format",
        "stream-json",
        "--verbose",
        "--input-format",
        "stream-json",
    )
    assert "--resume" in argv and "--permission-prompt-tool" not in argv
    assert live().command.stdin == b""


def test_approvals_route_permission_prompts_over_stdio() -> None:
    assert live(approvals=True).command.argv[-2:] == ("--permission-prompt-tool", "stdio")


def test_the_handshake() -> None:
    protocol = live()
    opening = line(protocol.opening())
    assert opening["type"] == "control_request"
    assert opening["request"] == {"subtype": "initialize", "hooks": None}
    assert not protocol.ready
    answer = {
        "type": "control_response",
        "response": {"subtype": "success", "request_id": opening["request_id"], "response": {}},
    }
    assert protocol.classify(answer) == "control"
    assert protocol.control(answer) == b""
    assert protocol.ready


def test_a_refused_handshake_is_a_protocol_error() -> None:
    protocol = live()
    request_id = line(protocol.opening())["request_id"]
    refusal = {
        "type": "control_response",
        "response": {"subtype": "error", "request_id": request_id, "error": "bad"},
    }
    with pytest.raises(ProtocolError, match="initialize was refused"):
        protocol.control(refusal)


def test_hooks_are_named_in_the_opening() -> None:
    hooks = line(live(hooks=Agent.hooks).opening())["request"]["hooks"]
    assert set(hooks) == {"PreToolUse", "PostToolUse", "UserPromptSubmit", "Stop", "SubagentStop"}
    assert hooks["Stop"] == [{"matcher": None, "hookCallbackIds": ["Stop"]}]


def test_frames_a_turn_ends_at_and_the_lines_of_a_turn() -> None:
    protocol = live()
    assert protocol.classify({"type": "result", "subtype": "success"}) == "end"
    assert protocol.classify({"type": "system", "subtype": "init"}) == "event"
    assert protocol.classify(["not", "an", "object"]) == "event"
    assert line(protocol.prompt("hello")) == {
        "type": "user",
        "message": {"role": "user", "content": "hello"},
        "parent_tool_use_id": None,
    }
    assert line(protocol.interrupt())["request"] == {"subtype": "interrupt"}


def test_a_tool_approval_and_its_answers() -> None:
    frame = {
        "type": "control_request",
        "request_id": "r1",
        "request": {
            "subtype": "can_use_tool",
            "tool_name": "Bash",
            "input": {"command": "ls"},
            "tool_use_id": "toolu_1",
        },
    }
    ask = live(approvals=True).control(frame)
    assert isinstance(ask, ToolApproval)
    assert ask.request == ToolRequest("Bash", {"command": "ls"}, "toolu_1")
    allow = line(ask.answer(Allow()))["response"]
    assert allow == {
        "subtype": "success",
        "request_id": "r1",
        "response": {"behavior": "allow", "updatedInput": {"command": "ls"}},
    }
    deny = line(ask.answer(Deny("no")))["response"]["response"]
    assert deny == {"behavior": "deny", "message": "no"}


def test_an_mcp_elicitation_and_its_answers() -> None:
    # As 2.1.332 sends it (measured with a stdio server of the mcp package).
    schema = {
        "type": "object",
        "properties": {
            "colour": {"type": "string"},
            "count": {"type": "integer"},
            "ratio": {"type": "number"},
            "sure": {"type": "boolean"},
        },
        "required": ["colour"],
    }
    asked = {
        "mcp_server_name": "asker",
        "message": "Which colour?",
        "mode": "form",
        "requested_schema": schema,
        "property_order": ["colour", "count", "ratio", "sure"],
    }
    frame = {
        "type": "control_request",
        "request_id": "r5",
        "request": {"subtype": "elicitation", **asked},
    }
    ask = live(approvals=True).control(frame)
    assert isinstance(ask, ToolApproval)
    assert ask.request == ToolRequest(
        "McpElicitation", asked, "", question=McpElicitation("asker", "Which colour?", schema)
    )
    answers = Answers({"colour": "blue", "count": "3", "ratio": "0.5", "sure": "True"})
    assert line(ask.answer(answers))["response"] == {
        "subtype": "success",
        "request_id": "r5",
        "response": {
            "action": "accept",
            "content": {"colour": "blue", "count": 3, "ratio": 0.5, "sure": True},
        },
    }
    # A text that is not of its property's type goes as given: the server's check says so.
    unread = Answers({"count": "three", "other": "x"})
    assert line(ask.answer(unread))["response"]["response"]["content"] == {
        "count": "three",
        "other": "x",
    }
    edited = line(ask.answer(Allow(updated_input={"colour": "red", "count": 2})))
    assert edited["response"]["response"] == {
        "action": "accept",
        "content": {"colour": "red", "count": 2},
    }
    assert line(ask.answer(Allow()))["response"]["response"] == {"action": "accept"}
    assert line(ask.answer(Deny("no")))["response"]["response"] == {"action": "decline"}
    # Without approve_tool nobody answers it: refused, and the CLI cancels it.
    assert line(live().control(frame))["response"]["subtype"] == "error"


def test_a_hook_call_and_its_answers() -> None:
    frame = {
        "type": "control_request",
        "request_id": "r2",
        "request": {
            "subtype": "hook_callback",
            "callback_id": "PostToolUse",
            "input": {"hook_event_name": "PostToolUse", "tool_name": "Read", "tool_response": "x"},
        },
    }
    ask = live(hooks=Agent.hooks).control(frame)
    assert isinstance(ask, HookCall)
    assert (ask.hook.kind, ask.hook.tool_name, ask.hook.tool_response) == (
        "after_tool",
        "Read",
        "x",
    )
    assert line(ask.answer(None))["response"]["response"] == {}
    context = line(ask.answer(AddContext("note")))["response"]["response"]
    assert context == {
        "hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": "note"}
    }
    block = line(ask.answer(Block("why")))["response"]["response"]
    assert block == {"decision": "block", "reason": "why"}


def test_what_agentrt_does_not_serve_is_refused() -> None:
    frame = {"type": "control_request", "request_id": "r3", "request": {"subtype": "mcp_message"}}
    answer = line(live().control(frame))["response"]
    assert answer["subtype"] == "error" and answer["request_id"] == "r3"
    # Hooks that were not asked for are refused the same way.
    hook = {"type": "control_request", "request_id": "r4", "request": {"subtype": "hook_callback"}}
    assert line(live().control(hook))["response"]["subtype"] == "error"
    with pytest.raises(ProtocolError):
        live().control({"type": "control_request", "request": {}})
