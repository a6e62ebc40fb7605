"""An MCP server's question for the user (MCP's ``elicitation/create``), as Claude Code hands
it to its SDK host: a ``control_request`` of subtype ``elicitation`` (2.1.332, measured with a
stdio server of the ``mcp`` package: ``mcp_server_name``, ``message``, ``mode`` "form" or
"url", ``requested_schema``, ``url``), answered ``{"action": "accept", "content": {...}}``,
``"decline"`` or ``"cancel"``. agentrt asks the agent's ``approve_tool`` with a `ToolRequest`
whose ``question`` is a `McpElicitation`, as it asks the model's own questions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentrt.backend import (
    Allow,
    Answers,
    Deny,
    McpElicitation,
    ToolApproval,
    ToolRequest,
    control_response,
)

# The name the request goes by in `ToolRequest.tool_name`, the turn's `ToolDecisionEvent`
# and the operator console (it is not a tool of the model's).
TOOL_NAME = "McpElicitation"


def elicitation(request_id: str, request: Mapping[str, Any]) -> ToolApproval:
    """The `ToolApproval` of the CLI's ``elicitation`` request ``request_id``."""
    schema = request.get("requested_schema")
    schema = schema if isinstance(schema, Mapping) else {}
    url = request.get("url")
    question = McpElicitation(
        server=_text(request.get("mcp_server_name")),
        message=_text(request.get("message")),
        schema=schema,
        url=url if isinstance(url, str) else None,
    )
    asked = {k: v for k, v in request.items() if k != "subtype"}

    def answer(decision: Allow | Deny | Answers) -> bytes:
        if isinstance(decision, Deny):
            return control_response(request_id, {"action": "decline"})
        reply: dict[str, Any] = {"action": "accept"}
        if isinstance(decision, Answers):
            reply["content"] = _typed(decision.answers, schema)
        elif isinstance(decision.updated_input, Mapping):
            reply["content"] = dict(decision.updated_input)
        return control_response(request_id, reply)

    tool = ToolRequest(tool_name=TOOL_NAME, input=asked, tool_use_id="", question=question)
    return ToolApproval(request=tool, answer=answer)


def _typed(answers: Mapping[str, str], schema: Mapping[str, Any]) -> dict[str, Any]:
    # Each text as its property's type says (an elicitation's schema is flat: strings,
    # numbers, integers, booleans); a text that does not read as one goes as given, and the
    # server's check of the content tells the model.
    properties = schema.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    content: dict[str, Any] = {}
    for name, text in answers.items():
        spec = properties.get(name)
        content[name] = _read(text, spec.get("type") if isinstance(spec, Mapping) else None)
    return content


def _read(text: str, kind: Any) -> Any:
    try:
        if kind == "integer":
            return int(text)
        if kind == "number":
            return float(text)
    except ValueError:
        return text
    if kind == "boolean" and text.strip().lower() in ("true", "false"):
        return text.strip().lower() == "true"
    return text


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""
