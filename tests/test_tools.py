"""``@agentrt.tool``: names, descriptions, the JSON schema made from the hints, the arguments
checked and converted, results and errors as the model gets them. Pure: no server, no CLI."""

from __future__ import annotations

import enum
import sys
from typing import Annotated, Any, Literal

import attrs
import msgspec
import pytest

from agentrt import Agent, InvalidOptions, MemoryStore, Tool, open_runtime, tool


class Point(msgspec.Struct):
    x: int
    y: int


@attrs.define
class Box:
    label: str
    size: float = 1.0


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@tool
async def search(
    query: Annotated[str, msgspec.Meta(description="What to look for")],
    limit: int = 10,
    *,
    mode: Literal["fast", "exact"] = "fast",
) -> list[str]:
    """Search the notes.

    Returns the matching titles."""
    return [query] * min(limit, 2)


@tool(name="place-it", description="Put a box at a point.")
async def place(box: Box, at: Point, color: Color = Color.RED) -> dict[str, Any]:
    return {"box": box, "at": at, "color": color}


class Counter(Agent):
    def __init__(self) -> None:
        self.count = 0

    @tool
    async def bump(self, by: int = 1) -> int:
        """Bump the counter."""
        self.count += by
        return self.count

    app_tools = (bump,)


def test_name_and_description_come_from_the_function() -> None:
    assert isinstance(search, Tool)
    assert search.name == "search"
    assert search.description == "Search the notes.\n\nReturns the matching titles."
    assert not search.method
    assert (place.name, place.description) == ("place-it", "Put a box at a point.")


def test_a_method_tool_stays_a_tool_on_the_class_and_instances() -> None:
    assert Counter.bump is Counter().bump is Counter.app_tools[0]
    assert Counter.bump.method


def test_the_schema_is_an_object_with_one_property_per_parameter() -> None:
    assert search.input_schema == {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to look for"},
            "limit": {"type": "integer", "default": 10},
            "mode": {"enum": ["exact", "fast"], "default": "fast"},
        },
        "required": ["query"],
        "additionalProperties": False,
    }


def test_struct_attrs_and_enum_arguments_are_defined_once_in_defs() -> None:
    schema = place.input_schema
    assert schema["properties"]["box"] == {"$ref": "#/$defs/Box"}
    assert schema["properties"]["at"] == {"$ref": "#/$defs/Point"}
    assert schema["required"] == ["box", "at"]
    assert set(schema["$defs"]) == {"Box", "Point", "Color"}
    assert schema["$defs"]["Box"]["required"] == ["label"]


def test_a_method_tool_schema_leaves_out_self() -> None:
    assert Counter.bump.input_schema["properties"] == {"by": {"type": "integer", "default": 1}}


def test_arguments_are_converted_to_the_hinted_types() -> None:
    kwargs = place.convert({"box": {"label": "a"}, "at": {"x": 1, "y": 2}, "color": "blue"})
    assert kwargs == {"box": Box("a", 1.0), "at": Point(1, 2), "color": Color.BLUE}
    assert search.convert({"query": "q"}) == {"query": "q", "limit": 10, "mode": "fast"}


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"query": 3}, "argument `query`: Expected `str`, got `int`"),
        ({"query": "q", "limit": "ten"}, "argument `limit`: Expected `int`, got `str`"),
        ({"query": "q", "mode": "slow"}, "argument `mode`: Invalid enum value 'slow'"),
        ({}, "Object missing required field `query`"),
        ({"query": "q", "extra": 1}, "Object contains unknown field `extra`"),
    ],
)
async def test_bad_arguments_become_an_error_result_naming_the_argument(
    arguments: dict[str, Any], message: str
) -> None:
    result = await search.call(None, arguments)
    assert result.is_error
    assert result.text == f"invalid arguments for search: {message}"


async def test_a_nested_bad_argument_is_named_by_its_path() -> None:
    result = await place.call(None, {"box": {"label": 1}, "at": {"x": 1, "y": 2}})
    assert result.text == (
        "invalid arguments for place-it: argument `box.label`: Expected `str`, got `int`"
    )


async def test_results_reach_the_model_as_text() -> None:
    assert (await search.call(None, {"query": "q"})).text == '["q","q"]'
    result = await place.call(None, {"box": {"label": "a"}, "at": {"x": 1, "y": 2}})
    assert msgspec.json.decode(result.text) == {
        "box": {"label": "a", "size": 1.0},
        "at": {"x": 1, "y": 2},
        "color": "red",
    }
    assert not result.is_error


async def test_a_method_tool_is_called_on_the_agent_instance() -> None:
    agent = Counter()
    assert (await Counter.bump.call(agent, {"by": 2})).text == "2"
    assert (await Counter.bump.call(agent, None)).text == "3"
    assert agent.count == 3


async def test_an_exception_becomes_an_error_result_with_secrets_redacted() -> None:
    @tool
    async def leaky() -> str:
        raise PermissionError("denied for api_key=sk-ant-abcdefghijklmnopqrstuvwxyz0123")

    result = await leaky.call(None, {})
    assert result.is_error and isinstance(result.error, PermissionError)
    assert result.text.startswith("leaky raised PermissionError: denied for ")
    assert "sk-ant-" not in result.text


def test_a_function_that_is_not_async_is_refused() -> None:
    def sync(x: int) -> int:
        return x

    with pytest.raises(TypeError, match="needs an async function"):
        tool(sync)  # type: ignore[arg-type]


def test_a_parameter_without_a_hint_is_refused_by_name() -> None:
    async def f(x: int, y) -> None:  # type: ignore[no-untyped-def]
        pass

    with pytest.raises(TypeError, match="tool 'f': parameter 'y' needs a type hint"):
        tool(f)


@pytest.mark.parametrize("signature", ["*args: int", "**kw: int", "x: int, /"])
def test_parameters_the_model_cannot_pass_by_name_are_refused(signature: str) -> None:
    namespace: dict[str, Any] = {}
    exec(f"async def f({signature}) -> None: pass", namespace)
    with pytest.raises(TypeError, match="must be a plain or keyword-only parameter"):
        tool(namespace["f"])


@pytest.mark.parametrize("name", ["", "has space", "dots.in.it", "x" * 51])
def test_a_bad_name_is_refused(name: str) -> None:
    with pytest.raises(ValueError, match="must be 1 to 50 letters, digits"):
        tool(name=name)(search.function)


def test_hints_that_make_no_schema_are_refused_when_checked() -> None:
    class Opaque:
        pass

    @tool
    async def odd(thing: Opaque) -> None:
        pass

    with pytest.raises(TypeError, match="tool 'odd': its type hints make no schema"):
        odd.check()


async def start_with_tools(value: object) -> None:
    """Start a claude agent with ``app_tools=value`` (no turn: the CLI never runs)."""
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(
            Agent, name="a", backend="claude", binary=sys.executable, app_tools=value
        )


@pytest.mark.parametrize(
    ("value", "why"),
    [
        (search, "app_tools must be a list of @agentrt.tool functions"),
        ([search.function], "is not an @agentrt.tool function"),
        ([search, tool(search.function)], "two tools are named 'search'"),
    ],
)
async def test_check_tools_names_what_is_wrong(value: Any, why: str) -> None:
    with pytest.raises(InvalidOptions) as caught:
        await start_with_tools(value)
    assert caught.value.key == "app_tools"
    assert why in str(caught.value)


async def test_app_tools_is_a_runtime_option_checked_at_start() -> None:
    await start_with_tools([search, place])
    with pytest.raises(InvalidOptions) as caught:
        await start_with_tools([search, search])
    assert caught.value.key == "app_tools"
    assert "two tools are named 'search'" in str(caught.value)
