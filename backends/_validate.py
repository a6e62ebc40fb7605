"""Option checks shared by the backends, and the parser that turns the first unknown key
or bad value into an `agentrt.InvalidOptions`."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import attrs

from agentrt.backend import InvalidOptions, did_you_mean

T = TypeVar("T")
Check = Callable[[Any], Any]


class Bad(ValueError):
    """A check's verdict: why a value is refused (the parser adds the key and the value)."""


def string(value: Any) -> str:
    if not isinstance(value, str):
        raise Bad(f"expected a string, got {type(value).__name__}")
    return value


def text(value: Any) -> str:
    if not string(value):
        raise Bad("expected a non-empty string")
    return value  # type: ignore[no-any-return]


def path(value: Any) -> str:
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str) or not value:
        raise Bad("expected a path (a non-empty str or os.PathLike)")
    if "\0" in value:
        raise Bad("a path cannot contain a NUL byte")
    return value


def boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise Bad(f"expected True or False, got {type(value).__name__}")
    return value


def choice(allowed: tuple[str, ...]) -> Check:
    def check(value: Any) -> Any:
        if not isinstance(value, str) or value not in allowed:
            hint = did_you_mean(value, allowed) if isinstance(value, str) else ""
            raise Bad(f"expected one of {', '.join(map(repr, allowed))}{hint}")
        return value

    return check


def strings(value: Any) -> tuple[str, ...]:
    # A bare string is refused: iterating it would pass one character per item.
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) and v for v in value):
        raise Bad("expected a list of non-empty strings")
    return tuple(value)


def paths(value: Any) -> tuple[str, ...]:
    items = value if isinstance(value, list | tuple) else [value]
    try:
        return tuple(path(v) for v in items)
    except Bad:
        raise Bad("expected a path or a list of paths (str or os.PathLike)") from None


def args_without(reserved: tuple[str, ...]) -> Check:
    """A check for ``extra_args``: a list of strings with none of the ``reserved`` flags
    (``--flag`` or ``--flag=value``), which the backend sets itself."""

    def check(value: Any) -> tuple[str, ...]:
        args = strings(value)
        for arg in args:
            flag = arg.split("=", 1)[0]
            if flag in reserved:
                raise Bad(f"{flag} is set by the backend and cannot be passed in extra_args")
        return args

    return check


def env_mapping(value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise Bad("expected a mapping of variable names to string values")
    for name, val in value.items():
        if not isinstance(name, str) or not name or "=" in name or "\0" in name:
            raise Bad(f"variable name {name!r} is not a valid environment variable name")
        if not isinstance(val, str) or "\0" in val:
            # Named by its variable only: the value may well be a credential.
            raise Bad(f"the value of {name} must be a str with no NUL byte")
    return dict(value)


def same_as_env(key: str, value: str | None, env: Mapping[str, str], variable: str) -> None:
    """Refuse option ``key`` (a CLI's home folder) when ``env`` sets ``variable``, the
    variable the backend sets from it, to another path: the CLI would read one of the two."""
    given = env.get(variable)
    if value is not None and given is not None and given != value:
        raise InvalidOptions(key, value, f"differs from env[{variable!r}]={given!r}")


def make_parser(
    cls: type[T],
    checks: Mapping[str, Check],
    *,
    shown: Callable[[str, Any], Any] = lambda key, value: value,
    keys: Mapping[str, str] | None = None,
) -> Callable[[Mapping[str, Any]], T]:
    """A function from raw options to ``cls`` that runs ``checks[field]`` on each given value.

    A ``None`` value means "unset". The first unknown key is reported with the closest known
    one (and every known key, as ``known_options``, for the runtime to add its own); a bad
    value with its key, the value as ``shown(key, value)`` lets an error show it, and why.
    Each attrs field of ``cls`` needs exactly one check. ``keys`` maps a field to
    the key callers spell it with, where the two differ (a field cannot be named
    ``continue``).

    A plain loop rather than a cattrs converter: every agent's start parses its options,
    and cattrs would be imported (its memory: bench/README.md) by every process that starts
    one."""
    # In the fields' order: the first bad value reported is the first field's.
    names = [a.name for a in attrs.fields(cls)]  # type: ignore[arg-type]
    assert set(checks) == set(names)
    spelled = {name: (keys or {}).get(name, name) for name in names}
    field_of = {key: name for name, key in spelled.items()}
    known = tuple(spelled.values())

    def parse(raw: Mapping[str, Any]) -> T:
        if not isinstance(raw, Mapping):
            raise InvalidOptions("options", raw, "expected a mapping of option names to values")
        given = {k: v for k, v in raw.items() if v is not None}
        unknown = sorted(str(k) for k in given if k not in field_of)
        if unknown:
            key = unknown[0]
            hint = did_you_mean(key, known) or f"; known options: {', '.join(known)}"
            raise InvalidOptions(
                key, shown(key, given.get(key)), "unknown option" + hint, known_options=known
            )
        values: dict[str, Any] = {}
        for name in names:
            key = spelled[name]
            if key in given:
                try:
                    values[name] = checks[name](given[key])
                except Exception as exc:  # a check's verdict, or its failure on the value
                    raise InvalidOptions(key, shown(key, given[key]), str(exc)) from exc
        return cls(**values)

    return parse
