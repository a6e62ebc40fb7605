"""The JSON-RPC 2.0 lines of the Agent Client Protocol, one object a line.

The messages are the ``agent-client-protocol`` package's schema (its pydantic models,
generated from the protocol's JSON schema): what agentrt writes is built from them and what
it reads is validated by them. The package's own connection runs on asyncio and does its
own I/O; agentrt's runtime does every read and write, so a backend uses the schema alone
and this module adds the envelope (an id, a method, the params).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

import msgspec
import pydantic
from acp.meta import AGENT_METHODS, CLIENT_METHODS
from acp.schema import BaseModel

from agentrt.backend import ProtocolError, redact

M = TypeVar("M", bound=BaseModel)

INITIALIZE = AGENT_METHODS["initialize"]
AUTHENTICATE = AGENT_METHODS["authenticate"]
SESSION_NEW = AGENT_METHODS["session_new"]
SESSION_LOAD = AGENT_METHODS["session_load"]
SESSION_PROMPT = AGENT_METHODS["session_prompt"]
SESSION_CANCEL = AGENT_METHODS["session_cancel"]
SESSION_UPDATE = CLIENT_METHODS["session_update"]
REQUEST_PERMISSION = CLIENT_METHODS["session_request_permission"]

# JSON-RPC's "method not found": the answer to a request of the agent's agentrt does not
# serve (files, terminals, an agent's own extensions), as it offers none in initialize.
NOT_SERVED = -32601

_encode = msgspec.json.Encoder().encode


def params(model: BaseModel) -> dict[str, Any]:
    """A message's JSON object under the protocol's names."""
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def request(request_id: int, method: str, message: BaseModel) -> bytes:
    return _line({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params(message)})


def notification(method: str, message: BaseModel) -> bytes:
    return _line({"jsonrpc": "2.0", "method": method, "params": params(message)})


def result(request_id: Any, message: BaseModel) -> bytes:
    return _line({"jsonrpc": "2.0", "id": request_id, "result": params(message)})


def refusal(request_id: Any, method: Any) -> bytes:
    """The error answer to a request agentrt does not serve."""
    error = {"code": NOT_SERVED, "message": f"agentrt does not serve {redact(str(method))}"}
    return _line({"jsonrpc": "2.0", "id": request_id, "error": error})


def parsed(model: type[M], value: Any, what: str) -> M:
    """``value`` validated as ``model``; `ProtocolError` if it is not."""
    try:
        return model.model_validate(value)
    except pydantic.ValidationError as exc:
        message = f"the agent's {what} is not an ACP {model.__name__}: {brief(value)} ({exc})"
        raise ProtocolError(message) from None


def error_text(error: Any) -> str:
    """A JSON-RPC error object as one line: its message and its data, redacted."""
    if not isinstance(error, Mapping):
        return brief(error)
    text = str(error.get("message") or "error")
    data = error.get("data")
    if data is not None:
        details = data.get("details") if isinstance(data, Mapping) else None
        text += f": {details if isinstance(details, str) else brief(data)}"
    return redact(text)[:500]


def brief(value: Any) -> str:
    try:
        text = _encode(value).decode(errors="replace")
    except (TypeError, msgspec.EncodeError):
        text = repr(value)
    return redact(text)[:500]


def _line(message: Mapping[str, Any]) -> bytes:
    return _encode(message) + b"\n"
