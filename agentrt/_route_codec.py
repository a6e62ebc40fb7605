"""What a routed call carries through the database: its arguments and its answer (a value,
or the `AgentRTError` it raised), as pickles that only agentrt's own classes may come
back out of.

Pickle, because a `Response` holds events, usage, the CLI's raw frames and a structured
output of any JSON shape, and an error its own fields: each rebuilt as the same class on the
other side. Loading is restricted (`_AgentrtOnly`): a pickle may name only classes that
agentrt defines and a few builtin containers, never a function or a module's other
attributes, so a row written by someone else cannot make a runtime run arbitrary code
through `pickle`'s usual ``os.system`` gadgets.
"""

from __future__ import annotations

import io
import pickle
from typing import Any

from ._errors import AgentRTError
from ._events import Response

# What else a value of the API may hold: builtin containers (Response.raw and
# structured_output are JSON shapes), the arrays a Response's retained events keep, and
# msgspec's rebuild of keyword-only Structs (it calls a class the pickle names, which
# `find_class` has let through only if it is agentrt's).
_OTHERS = frozenset(
    {("builtins", name) for name in ("dict", "list", "tuple", "set", "frozenset", "bytes")}
    | {("builtins", "bytearray"), ("array", "_array_reconstructor"), ("array", "array")}
    | {("msgspec._utils", "rebuild")}
)


def _rebuild_error(cls: type[AgentRTError], args: tuple[Any, ...], state: dict[str, Any]) -> Any:
    """An agentrt error as it was raised: its message and its fields (their ``__init__``s
    take other arguments than the message ``args`` holds)."""
    if not (isinstance(cls, type) and issubclass(cls, AgentRTError)):
        raise pickle.UnpicklingError(f"not an agentrt error: {cls!r}")
    error = cls.__new__(cls)
    error.args = args
    error.__dict__.update(state)
    return error


class _Pickler(pickle.Pickler):
    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, AgentRTError):
            return _rebuild_error, (type(obj), obj.args, dict(obj.__dict__))
        if isinstance(obj, Response):
            obj.text  # noqa: B018 (a text kept as UTF-8 becomes the str it pickles as)
        return NotImplemented


class _AgentrtOnly(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _OTHERS:
            return super().find_class(module, name)
        if module == __name__ and name == "_rebuild_error":
            return _rebuild_error
        if module == "agentrt" or module.startswith("agentrt."):
            found = super().find_class(module, name)
            if isinstance(found, type) and found.__module__.startswith("agentrt"):
                return found
        raise pickle.UnpicklingError(f"a routed call may not carry {module}.{name}")


def encode(value: object) -> bytes:
    buffer = io.BytesIO()
    _Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(value)
    return buffer.getvalue()


def decode(data: bytes) -> Any:
    return _AgentrtOnly(io.BytesIO(data)).load()
