"""Helpers for the shape of the public API, after trio's ``_util``."""

from __future__ import annotations

import inspect
import math
from abc import ABCMeta
from collections.abc import Mapping
from types import TracebackType
from typing import Any, NoReturn, Self, TypeGuard, TypeVar

import msgspec

T = TypeVar("T")


class NoPublicConstructor(ABCMeta):
    """Metaclass of a class that only agentrt makes: calling the class raises `TypeError`
    naming the class's ``_made_by``; agentrt makes instances with ``_create``."""

    _made_by: str

    def __call__(cls, *args: object, **kwargs: object) -> NoReturn:
        raise TypeError(
            f"{cls.__module__}.{cls.__qualname__} has no public constructor; use {cls._made_by}"
        )

    def _create(cls: type[T], *args: object, **kwargs: object) -> T:
        return super().__call__(*args, **kwargs)  # type: ignore[misc, no-any-return]


class ClosingReader:
    """The shape of agentrt's readers (`EventStream`, `UnsolicitedTurns`, on each face): an
    async iterator that ``close()`` ends, and an async context manager that closes it."""

    __slots__ = ()

    def close(self) -> None:
        raise NotImplementedError

    def __aiter__(self) -> Self:
        return self

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def fixup_module_metadata(module_name: str, namespace: Mapping[str, Any]) -> None:
    """Make the public names of ``namespace`` (and their methods) say they live in
    ``module_name`` rather than the private module that defines them, as trio does, so
    tracebacks and reprs say ``agentrt.TurnFailed``. Pickling still works: each name is
    found where its ``__module__`` now points. A Struct's string annotations are resolved
    first, in the module that wrote them: msgspec (a decoder, ``help()``'s signature) would
    look for their names where ``__module__`` points."""
    seen: set[int] = set()

    def fix_one(obj: object) -> None:
        if id(obj) in seen:
            return
        seen.add(id(obj))
        if isinstance(obj, staticmethod | classmethod):
            obj = obj.__func__
        if not (isinstance(obj, type) or inspect.isfunction(obj)):
            return
        if not obj.__module__.startswith("agentrt._"):
            return
        if isinstance(obj, type) and issubclass(obj, msgspec.Struct):
            obj.__annotations__ = inspect.get_annotations(obj, eval_str=True)
        obj.__module__ = module_name
        if isinstance(obj, type):
            # A private base's methods are the public class's own (`Runtime`'s agent calls,
            # from `AgentCalls`); the base itself keeps its module.
            private = [base for base in obj.__mro__[1:] if base.__module__.startswith("agentrt._")]
            for owner in (obj, *private):
                for value in list(owner.__dict__.values()):
                    fix_one(value)

    for name, obj in namespace.items():
        if not name.startswith("_"):
            fix_one(obj)


def finite_number(value: object) -> TypeGuard[int | float]:
    """Whether ``value`` is a finite int or float (a bool is not a number here): what an
    option of seconds, dollars or cores must be before its range is checked."""
    return not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)
