"""Claude Code's hook events, the unit: every event the pinned CLI accepts becomes its typed
hook (each field as the CLI sent it, a mistyped one None, ``raw`` the whole input), only
for the kinds the agent lists, and each answer becomes the hook output the CLI reads."""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest

import agentrt
import agentrt.hooks
from agentrt import AddContext, Block
from agentrt.backend import HOOK_TYPES, HookCall
from agentrt.backends.claude import ClaudeBackend
from agentrt.backends.claude._hooks import CONTEXT_EVENTS, HOOK_EVENTS

BACKEND = ClaudeBackend()
COMMON = {
    "session_id": "s-1",
    "transcript_path": "/t/s-1.jsonl",
    "cwd": "/repo",
    "permission_mode": "default",
}
# A value of each declared field type, as the CLI sends it.
SAMPLES = {
    "str | None": "text",
    "bool | None": True,
    "int | None": 3,
    "float | None": 2.5,
    "tuple[Any, ...] | None": [{"tool_name": "Read"}],
    "Any": {"nested": [1]},
}
# The events of the pinned CLI's own list (its ``initialize`` request's hook names).
PINNED_EVENTS = [
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "PostToolBatch",
    "Notification",
    "UserPromptSubmit",
    "UserPromptExpansion",
    "SessionStart",
    "SessionEnd",
    "Stop",
    "StopFailure",
    "SubagentStart",
    "SubagentStop",
    "PreCompact",
    "PostCompact",
    "PreModelSwitch",
    "PostModelSwitch",
    "PermissionRequest",
    "PermissionDenied",
    "Setup",
    "TeammateIdle",
    "TaskCreated",
    "TaskCompleted",
    "Elicitation",
    "ElicitationResult",
    "ConfigChange",
    "WorktreeCreate",
    "WorktreeRemove",
    "InstructionsLoaded",
    "CwdChanged",
    "FileChanged",
    "DirectoryAdded",
    "MessageDisplay",
    "PreSkillShellCommand",
]
# Claude Code 2.1.337 adds ``Interrupt`` (the pinned CLI accepts it in ``initialize``).
EVENTS = [*PINNED_EVENTS, "Interrupt"]
# The hook callback 2.1.337 sends when a warm turn is interrupted in band (recorded against
# the fake API; the paths shortened).
INTERRUPT_CALLBACK = {
    "type": "control_request",
    "request_id": "8acc5133-cfb3-4e36-ac8c-e289d20d2042",
    "request": {
        "subtype": "hook_callback",
        "callback_id": "Interrupt",
        "input": {
            "session_id": "32be91e2-f02b-4190-89d9-d407f680957e",
            "transcript_path": "/w/.claude/projects/-w-project/32be91e2.jsonl",
            "cwd": "/w/project",
            "prompt_id": "b49dbf1e-71ae-4a04-b95a-0dfb59ac629a",
            "permission_mode": "default",
            "effort": {"level": "medium"},
            "hook_event_name": "Interrupt",
            "source": "user",
            "reason": "stop",
            "via": "client",
        },
        "tool_use_id": "08fec859-122d-46ce-a690-7d348c92aabf",
    },
}


def live(kinds: Any = agentrt.hooks.HOOK_KINDS) -> Any:
    options = BACKEND.parse_options({"binary": "claude"})
    return BACKEND.live(options, session_id=None, hooks=frozenset(kinds))


def callback(event: str, data: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "control_request",
        "request_id": "r-9",
        "request": {
            "subtype": "hook_callback",
            "callback_id": event,
            "input": {"hook_event_name": event, **data},
        },
    }


def answer_of(data: bytes) -> Any:
    return json.loads(data)["response"]["response"]


def own_fields(cls: type) -> list[attrs.Attribute[Any]]:
    return [f for f in attrs.fields(cls) if f.name != "raw"]


def test_every_event_of_the_pinned_cli_has_a_kind_and_a_class() -> None:
    assert list(HOOK_EVENTS) == EVENTS
    assert set(HOOK_EVENTS.values()) == set(agentrt.hooks.HOOK_KINDS) == set(HOOK_TYPES)
    for event, kind in HOOK_EVENTS.items():
        cls = HOOK_TYPES[kind]
        assert cls.__name__ == f"{event}Hook" and cls.kind == kind
        assert getattr(agentrt.hooks, cls.__name__) is cls and cls.__doc__


def test_the_opening_names_the_events_of_the_listed_kinds_only() -> None:
    hooks = json.loads(live({"session_started", "compacting"}).opening())["request"]["hooks"]
    assert hooks == {
        "SessionStart": [{"matcher": None, "hookCallbackIds": ["SessionStart"]}],
        "PreCompact": [{"matcher": None, "hookCallbackIds": ["PreCompact"]}],
    }
    every = json.loads(live().opening())["request"]["hooks"]
    assert list(every) == EVENTS


@pytest.mark.parametrize("event", EVENTS)
def test_each_event_becomes_its_typed_hook(event: str) -> None:
    cls = HOOK_TYPES[HOOK_EVENTS[event]]
    sent = {f.name: SAMPLES[str(f.type)] for f in own_fields(cls)}
    sent.update(COMMON)
    call = live().control(callback(event, sent))
    assert isinstance(call, HookCall) and type(call.hook) is cls
    hook = call.hook
    for field in own_fields(cls):
        value = getattr(hook, field.name)
        expected = sent[field.name]
        assert value == (tuple(expected) if isinstance(value, tuple) else expected), field.name
    assert hook.raw == {"hook_event_name": event, **sent}
    assert answer_of(call.answer(None)) == {}


def test_an_interrupt_in_band_on_2_1_337_is_an_interrupt_hook() -> None:
    call = live({"interrupted"}).control(INTERRUPT_CALLBACK)
    assert isinstance(call, HookCall) and type(call.hook) is agentrt.hooks.InterruptHook
    hook = call.hook
    assert (hook.kind, hook.source, hook.reason, hook.via) == (
        "interrupted",
        "user",
        "stop",
        "client",
    )
    assert hook.session_id == "32be91e2-f02b-4190-89d9-d407f680957e"
    assert answer_of(call.answer(None)) == {}
    # Not listed: the CLI goes on without the agent being asked.
    assert answer_of(live({"stopping"}).control(INTERRUPT_CALLBACK)) == {}


@pytest.mark.parametrize("event", EVENTS)
def test_a_field_of_another_type_is_none(event: str) -> None:
    cls = HOOK_TYPES[HOOK_EVENTS[event]]
    typed = [f for f in own_fields(cls) if str(f.type) != "Any"]
    call = live().control(callback(event, {f.name: object.__name__ for f in typed} | {"cwd": 7}))
    assert isinstance(call, HookCall)
    for field in typed:
        if str(field.type) != "str | None":
            assert getattr(call.hook, field.name) is None, field.name
    assert call.hook.cwd is None


def test_an_event_of_a_kind_not_listed_goes_on_without_asking() -> None:
    reply = live({"before_tool"}).control(callback("SessionStart", {"source": "startup"}))
    assert isinstance(reply, bytes) and answer_of(reply) == {}


@pytest.mark.parametrize("event", EVENTS)
def test_each_answer_becomes_the_hook_output_the_cli_reads(event: str) -> None:
    call = live().control(callback(event, {}))
    assert isinstance(call, HookCall)
    context = answer_of(call.answer(AddContext("note")))
    if event in CONTEXT_EVENTS:
        assert context == {
            "hookSpecificOutput": {"hookEventName": event, "additionalContext": "note"}
        }
    else:
        assert context == {}
    block = answer_of(call.answer(Block("why")))
    if event in ("PreToolUse", "PreSkillShellCommand", "PreModelSwitch"):
        assert block["hookSpecificOutput"] == {
            "hookEventName": event,
            "permissionDecision": "deny",
            "permissionDecisionReason": "why",
        }
    elif event == "PermissionRequest":
        assert block["hookSpecificOutput"]["decision"] == {"behavior": "deny", "message": "why"}
    else:
        assert block == {"decision": "block", "reason": "why"}


class Listens(agentrt.Agent):
    def handle_hook(self, hook: agentrt.hooks.Hook) -> None:
        return None


@pytest.mark.parametrize(
    ("listed", "match"),
    [
        (("befor_tool",), "not a hook kind; did you mean 'before_tool'"),
        ((), "is empty, so handle_hook would never be called"),
        ("before_tool", "must be a collection of hook kinds"),
    ],
)
async def test_an_agent_listing_a_kind_that_is_none_is_refused_at_its_start(
    listed: Any, match: str
) -> None:
    agent = type("Bad", (Listens,), {"hooks": listed})
    async with agentrt.open_runtime(store=agentrt.MemoryStore()) as rt:
        with pytest.raises(agentrt.InvalidOptions, match=match) as caught:
            await rt.start_agent(agent, name="a", backend="claude", binary="claude")
    assert caught.value.key == "hooks"


def test_an_agent_is_called_for_the_five_kinds_unless_it_lists_others() -> None:
    from agentrt._agent import hook_kinds

    assert hook_kinds(Listens) == {
        "before_tool",
        "after_tool",
        "prompt_submitted",
        "stopping",
        "subagent_stopping",
    }
    assert hook_kinds(type("All", (Listens,), {"hooks": agentrt.hooks.HOOK_KINDS})) == set(
        agentrt.hooks.HOOK_KINDS
    )
    assert hook_kinds(agentrt.Agent) == frozenset()
