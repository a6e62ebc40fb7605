"""What a live CLI asks an agent during a turn: may this tool run (`ToolRequest`, answered
`Allow` or `Deny` by ``Agent.approve_tool``), and the hooks around tool use and prompts
(`Hook`, answered `Block`, `AddContext` or None by ``Agent.handle_hook``).

Questions for a person come the same way, as the tool calls they are in the CLI: Claude
Code's ``AskUserQuestion`` (a `ToolRequest` whose ``question`` is `UserQuestions`, answered
`Answers`) and its plan approval, ``ExitPlanMode`` (``question`` a `PlanApproval`: `Allow`
approves the plan, `Deny` keeps the model planning and tells it why); and an MCP server's
question in one of its tool calls (``question`` a `McpElicitation`, answered `Answers`).

A backend's `LiveProtocol.control` turns such a request into a `ToolApproval` or a
`HookCall`: the question, and how to write its answer back to the CLI.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

from ._hooks import Hook


@attrs.frozen
class QuestionOption:
    """One answer a `Question` offers: its ``label`` (what the answer says) and what it
    means (``description``)."""

    label: str
    description: str = ""


@attrs.frozen
class Question:
    """One question of `UserQuestions`: its text, a short ``header``, the ``options`` offered
    and whether several may be chosen (``multi_select``; the answer joins their labels with
    ", "). The person may answer with other text than an option's label too."""

    question: str
    header: str = ""
    options: tuple[QuestionOption, ...] = ()
    multi_select: bool = False


@attrs.frozen
class UserQuestions:
    """The model asks the user (Claude Code's ``AskUserQuestion`` tool): answer with
    `Answers`, one per question's text; `Deny` tells the model nobody answers."""

    questions: tuple[Question, ...]


@attrs.frozen
class PlanApproval:
    """The model asks to leave plan mode and carry out its plan (Claude Code's
    ``ExitPlanMode``): `Allow` approves it (the CLI leaves plan mode), `Deny` keeps the model
    planning and tells it why. ``plan``: the plan's text, where the CLI sends it."""

    plan: str | None = None


@attrs.frozen
class McpElicitation:
    """An MCP server asks the user for input in the middle of one of its tool calls (MCP's
    ``elicitation/create``), which the CLI hands to the agent as a `ToolRequest` named
    ``"McpElicitation"`` (its ``input`` is the CLI's request). ``server``: the server's name;
    ``message``: its question; ``schema``: the JSON schema of the form it wants filled
    (``properties``, each a string, number, integer or boolean, and ``required``), empty in
    URL mode, where ``url`` is the page the user is sent to.

    `Answers` fills the form, one text per property's name (read as the property's type);
    `Allow` with ``updated_input`` sends that mapping as the form's content (`Allow()`
    alone accepts with no content: a URL mode request, a form with nothing required);
    `Deny` declines it."""

    server: str
    message: str
    schema: Mapping[str, Any] = attrs.field(factory=dict)
    url: str | None = None


@attrs.frozen
class ToolRequest:
    """The CLI asks whether a tool call may run. ``parent_tool_use_id`` is the Task call
    whose subagent makes it (None on the main thread). ``question``: for a tool that asks
    a person (`UserQuestions`, `PlanApproval`), or an MCP server's question
    (`McpElicitation`), the question typed; None for other tools."""

    tool_name: str
    input: Any
    tool_use_id: str
    parent_tool_use_id: str | None = None
    question: UserQuestions | PlanApproval | McpElicitation | None = None


@attrs.frozen
class Allow:
    """Run the tool; with ``updated_input``, run it with that input instead."""

    updated_input: Any = None


@attrs.frozen
class Deny:
    """Do not run the tool; ``message`` tells the model why."""

    message: str


@attrs.frozen
class Answers:
    """The answer to `UserQuestions`: ``answers`` maps each question's text to the answer
    (an option's label, several joined with ", ", or text of the person's own)."""

    answers: Mapping[str, str]


@attrs.frozen
class AskOperator:
    """Let a person decide (in the operator console, ``agentrt console``): the request
    waits in the store, with ``reason`` shown beside it, until someone decides it there
    (once: a second decision is refused) or ``approval_timeout`` passes, which answers
    ``default`` (None: the tool is denied). For `UserQuestions` the person answers by
    allowing with the tool's input plus its ``answers`` (the console's "Allow with edited
    input"). Needs a store with the `agentrt.store.ApprovalStore` methods."""

    reason: str = ""
    default: Allow | Deny | Answers | None = None


Decision = Allow | Deny | Answers


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
