"""Lenient readers of a stream-json frame's fields: a value of another type than the field's
reads as None (or as nothing), so that no JSON value makes the translator raise."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._events import Usage


def str_field(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def int_field(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def number_field(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def mappings(content: Any) -> list[Mapping[str, Any]]:
    """The JSON objects of a list field (content blocks, MCP servers, denials)."""
    return [b for b in content if isinstance(b, Mapping)] if isinstance(content, list) else []


def usage_field(value: Any) -> Usage | None:
    # A decoded object is a dict: the ABC check (a Python call) only for other mappings.
    if type(value) is not dict and not isinstance(value, Mapping):
        return None
    # int_field inlined (a usage a model call): a decoded JSON int is exactly an int.
    get = value.get
    inputs, outputs = get("input_tokens"), get("output_tokens")
    created, read = get("cache_creation_input_tokens"), get("cache_read_input_tokens")
    return Usage(
        input_tokens=inputs if type(inputs) is int else 0,
        output_tokens=outputs if type(outputs) is int else 0,
        cache_creation_input_tokens=created if type(created) is int else 0,
        cache_read_input_tokens=read if type(read) is int else 0,
    )
