"""What a live CLI asks an agent during a turn: may this tool run (`ToolRequest`, answered
`Allow` or `Deny` by ``Agent.approve_tool``), and the hooks around tool use and prompts
(`Hook`, answered `Block`, `AddContext` or None by ``Agent.handle_hook``).

A backend's `LiveProtocol.control` turns such a request into a `ToolApproval` or a
`HookCall`: the question, and how to write its answer back to the CLI.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from ._hooks import Hook


@attrs.frozen
class ToolRequest:
    """The CLI asks whether a tool call may run. ``parent_tool_use_id`` is the Task call
    whose subagent makes it (None on the main thread)."""

    tool_name: str
    input: Any
    tool_use_id: str
    parent_tool_use_id: str | None = None


@attrs.frozen
class Allow:
    """Run the tool; with ``updated_input``, run it with that input instead."""

    updated_input: Any = None


@attrs.frozen
class Deny:
    """Do not run the tool; ``message`` tells the model why."""

    message: str


@attrs.frozen
class AskOperator:
    """Let a person decide (in the operator console, ``agentrt console``): the request
    waits in the store, with ``reason`` shown beside it, until someone allows or denies it
    there or ``approval_timeout`` denies it. Needs a store with the
    `agentrt.store.ApprovalStore` methods."""

    reason: str = ""


Decision = Allow | Deny


@attrs.frozen
class Block:
    """Answer to a hook: ``before_tool`` (and ``skill_shell_command``,
    ``permission_requested``): the tool does not run; ``model_switching``: the model stays;
    ``after_tool`` and ``prompt_submitted``: the model is told to stop and why; ``stopping``
    and ``subagent_stopping``: the model goes on instead of ending its reply. ``reason``
    reaches the model. Other events cannot be blocked: the CLI goes on."""

    reason: str


@attrs.frozen
class AddContext:
    """Answer to a hook: ``text`` is added to what the model sees next, for the events whose
    answer the CLI takes context from (docs/hooks.md lists them); elsewhere it is dropped."""

    text: str


HookAnswer = Block | AddContext | None


@attrs.frozen
class ToolApproval:
    """A backend's form of a `ToolRequest`: ``answer`` makes the lines that reply."""

    request: ToolRequest
    answer: Callable[[Decision], bytes]


@attrs.frozen
class HookCall:
    """A backend's form of a `Hook`: ``answer`` makes the lines that reply."""

    hook: Hook
    answer: Callable[[HookAnswer], bytes]


Ask = ToolApproval | HookCall
