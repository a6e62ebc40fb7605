"""Application tools: ``@agentrt.tool`` turns a typed async function (or a method of an
`Agent` subclass) into a tool the model can call, with its JSON schema made from the type
hints by msgspec, which also checks and converts the arguments the model sends.

This module knows nothing about MCP or any CLI: it describes tools and calls them. The
loopback server that offers them to a CLI is `agentrt._tool_server`.
"""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, overload

import attrs
import msgspec

from ._redact import redact

# What the CLIs accept in an MCP tool's name, less the room Claude Code's prefix
# (``mcp__agentrt__``) takes of the model API's 64-character limit.
MAX_NAME = 50
_NAME = re.compile(r"[A-Za-z0-9_-]+")

ToolFunction = Callable[..., Awaitable[Any]]


class ToolArgumentError(ValueError):
    """The model's arguments do not fit the tool's signature (the message names the
    argument); the model gets it as an error result."""


@attrs.frozen(eq=False)
class Tool:
    """An application tool; made by `tool`. ``name`` and ``description`` are what the model
    sees; ``method`` says whether the function is a method of an `Agent` subclass (its
    first parameter is ``self``), called on the agent instance that serves the turn."""

    function: ToolFunction
    name: str
    description: str | None
    method: bool
    _arguments: type[msgspec.Struct] | None = attrs.field(default=None, init=False)

    def __get__(self, instance: object, owner: type | None = None) -> Tool:
        # On the class or an instance alike, a method tool stays the tool (``Coder.lookup``
        # in ``app_tools``); the runtime passes the instance when the model calls it.
        return self

    @property
    def arguments(self) -> type[msgspec.Struct]:
        """The Struct type of the arguments, built from the hints on first use (so hints
        may name types defined after the function)."""
        if self._arguments is None:
            object.__setattr__(self, "_arguments", _arguments_type(self))
        assert self._arguments is not None
        return self._arguments

    @property
    def input_schema(self) -> dict[str, Any]:
        """The JSON schema of the arguments: an object with one property per parameter."""
        (ref,), components = msgspec.json.schema_components(
            (self.arguments,), ref_template="#/$defs/{name}"
        )
        name = ref["$ref"].rsplit("/", 1)[-1]
        schema = dict(components.pop(name))
        schema.pop("title", None)
        if components:
            schema["$defs"] = components
        return schema

    def check(self) -> None:
        """Raise `TypeError` if the hints cannot make a schema (an unknown or unsupported type)."""
        try:
            self.input_schema  # noqa: B018 - built for its errors
        except (NameError, TypeError) as exc:
            raise TypeError(f"tool {self.name!r}: its type hints make no schema ({exc})") from exc

    def convert(self, raw: Mapping[str, Any] | None) -> dict[str, Any]:
        """The keyword arguments for the function, from the model's JSON arguments;
        `ToolArgumentError` names the argument that does not fit."""
        try:
            converted = msgspec.convert(dict(raw or {}), self.arguments)
        except msgspec.ValidationError as exc:
            raise ToolArgumentError(_argument_message(str(exc))) from None
        return {name: getattr(converted, name) for name in self.arguments.__struct_fields__}

    async def call(self, agent: object, raw: Mapping[str, Any] | None) -> ToolResult:
        """Run the tool on the model's arguments: its result as text, or an error result
        (bad arguments, or any exception the tool raised) that names what went wrong."""
        try:
            kwargs = self.convert(raw)
        except ToolArgumentError as exc:
            return ToolResult(f"invalid arguments for {self.name}: {exc}", is_error=True)
        try:
            if self.method:
                value = await self.function(agent, **kwargs)
            else:
                value = await self.function(**kwargs)
        except Exception as exc:
            text = redact(f"{self.name} raised {type(exc).__name__}: {exc}")
            return ToolResult(text, is_error=True, error=exc)
        return ToolResult(result_text(value))


@attrs.frozen
class ToolResult:
    """What goes back to the model: ``text``, and whether it reports an error. ``error`` is
    the exception the tool raised, if it did (for the log, never sent as it is)."""

    text: str
    is_error: bool = False
    error: Exception | None = attrs.field(default=None, eq=False, repr=False)


def result_text(value: Any) -> str:
    """A tool's return value as the model reads it: a string as it is, anything else as JSON
    (msgspec encodes builtins, Structs, dataclasses and attrs classes)."""
    if isinstance(value, str):
        return value
    return msgspec.json.encode(value).decode()


@overload
def tool(function: ToolFunction, /) -> Tool: ...
@overload
def tool(
    *, name: str | None = None, description: str | None = None
) -> Callable[[ToolFunction], Tool]: ...


def tool(
    function: ToolFunction | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
) -> Tool | Callable[[ToolFunction], Tool]:
    """Make an async function a tool the model can call (``@agentrt.tool`` or
    ``@agentrt.tool(name=..., description=...)``).

    The tool's name is the function's (letters, digits, ``_`` and ``-``, at most 50), its
    description the docstring. Every parameter needs a type hint; the hints make the JSON
    schema the model sees and check what it sends: builtins, ``Literal``, enums, msgspec
    Structs, dataclasses, attrs classes, ``Annotated[..., msgspec.Meta(description=...)]``,
    and defaults for optional arguments. A function whose first parameter is ``self`` is a
    method tool: defined in an `Agent` subclass, it is called on the instance that runs the
    agent. The return value reaches the model as text (a string as it is, anything else as
    JSON). Choose tools with ``start_agent(..., app_tools=[...])`` or the class attribute
    ``app_tools``. Raises `TypeError` for a function that is not ``async``, a parameter
    without a hint, ``*args``/``**kwargs`` or positional-only parameters, and `ValueError`
    for a bad name.
    """

    def make(fn: ToolFunction) -> Tool:
        return _make_tool(fn, name, description)

    return make if function is None else make(function)


def _make_tool(fn: ToolFunction, name: str | None, description: str | None) -> Tool:
    if not inspect.iscoroutinefunction(fn):
        raise TypeError(
            f"@agentrt.tool needs an async function (it runs in the runtime's trio loop); "
            f"got {fn!r}"
        )
    chosen = fn.__name__ if name is None else name
    if not isinstance(chosen, str) or not _NAME.fullmatch(chosen) or len(chosen) > MAX_NAME:
        raise ValueError(
            f"tool name {chosen!r} must be 1 to {MAX_NAME} letters, digits, '_' or '-'"
        )
    parameters = list(inspect.signature(fn).parameters.values())
    method = bool(parameters) and parameters[0].name == "self"
    for parameter in parameters[1:] if method else parameters:
        if parameter.kind not in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY):
            raise TypeError(
                f"tool {chosen!r}: parameter {parameter.name!r} must be a plain or keyword-only "
                "parameter (the model passes arguments by name)"
            )
        if parameter.annotation is parameter.empty:
            raise TypeError(f"tool {chosen!r}: parameter {parameter.name!r} needs a type hint")
    text = inspect.getdoc(fn) if description is None else description
    return Tool(fn, chosen, text or None, method)


def _arguments_type(t: Tool) -> type[msgspec.Struct]:
    hints = typing.get_type_hints(t.function, include_extras=True)
    fields: list[tuple[str, Any] | tuple[str, Any, Any]] = []
    parameters = list(inspect.signature(t.function).parameters.values())
    for parameter in parameters[1:] if t.method else parameters:
        hint = hints[parameter.name]
        if parameter.default is parameter.empty:
            fields.append((parameter.name, hint))
        else:
            fields.append((parameter.name, hint, parameter.default))
    # kw_only: defaults may come before required parameters, as keyword-only ones can.
    return msgspec.defstruct(
        f"{t.name}_arguments", fields, kw_only=True, forbid_unknown_fields=True
    )


_PATH = re.compile(r" - at `\$\.([^`]*)`$")


def _argument_message(message: str) -> str:
    # msgspec says "Expected `int`, got `str` - at `$.count`": name the argument first.
    match = _PATH.search(message)
    if match is None:
        return message
    return f"argument `{match.group(1)}`: {message[: match.start()]}"


def check_tools(value: object, key: str = "app_tools") -> tuple[Tool, ...]:
    """``value`` (a sequence of tools) as a tuple, or `TypeError`/`ValueError` saying which
    item is not a tool, which name repeats, or whose hints make no schema."""
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise TypeError(f"{key} must be a list of @agentrt.tool functions, not {value!r}")
    tools = tuple(value)
    seen: set[str] = set()
    for item in tools:
        if not isinstance(item, Tool):
            raise TypeError(f"{key}: {item!r} is not an @agentrt.tool function")
        if item.name in seen:
            raise ValueError(f"{key}: two tools are named {item.name!r}")
        seen.add(item.name)
        item.check()
    return tools
