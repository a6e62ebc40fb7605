"""Keeping internal nurseries out of the caller's exception types.

trio's nurseries wrap every exception that leaves them in an `ExceptionGroup`, so a
`TurnFailed` raised in the body of ``async with open_runtime()`` would come out as a group
of a group of one. `collapse_exception_groups` unwraps groups of one (at any depth), as
trio itself did with ``strict_exception_groups=False``: a single exception leaves as
itself, with the frames it crossed, its ``__cause__`` and its ``__context__``; a group
leaves only when several exceptions really happened at once (what one of them caused,
another task met as a consequence of it, is not one more).
"""

from __future__ import annotations

from collections.abc import Iterator
from types import TracebackType
from typing import Any


def _concat_tb(head: TracebackType | None, tail: TracebackType | None) -> TracebackType | None:
    # Iterative: the tail may be as deep as a RecursionError's.
    heads = []
    while head is not None:
        heads.append(head)
        head = head.tb_next
    for entry in reversed(heads):
        tail = TracebackType(tail, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return tail


def collapse(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """``group`` without its consequences (`without_consequences`), with every group of one
    replaced by its exception, recursively; a group of one at the top gives that exception,
    its traceback extended by the group's."""
    return _collapse(without_consequences(group))


def without_consequences(group: BaseExceptionGroup[BaseException]) -> BaseExceptionGroup[Any]:
    """``group`` without the exceptions whose ``__cause__`` is another exception of it: one
    object raised in one task and given as the cause of what other tasks met. A supervisor
    that gives up stops its agents with its `RestartLimitExceeded` as the cause of the
    `AgentStopped` their waiters get, and raises it too: the block that owns it then ends
    with the give-up alone, as itself, rather than beside what it caused."""
    leaves = list(_leaves(group))
    raised = {id(exc) for exc in leaves}

    def consequence(exc: BaseException) -> bool:
        return exc.__cause__ is not exc and id(exc.__cause__) in raised

    if not any(consequence(exc) for exc in leaves):
        return group
    # (A group matched whole would be kept whole: only leaves are matched.)
    kept = group.subgroup(
        lambda exc: not isinstance(exc, BaseExceptionGroup) and not consequence(exc)
    )
    return group if kept is None else kept


def _leaves(group: BaseExceptionGroup[BaseException]) -> Iterator[BaseException]:
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            yield from _leaves(exc)
        else:
            yield exc


def _collapse(group: BaseExceptionGroup[BaseException]) -> BaseException:
    exceptions = [
        _collapse(exc) if isinstance(exc, BaseExceptionGroup) else exc for exc in group.exceptions
    ]
    if len(exceptions) == 1:
        sole = exceptions[0]
        sole.__traceback__ = _concat_tb(group.__traceback__, sole.__traceback__)
        return sole
    if all(new is old for new, old in zip(exceptions, group.exceptions, strict=True)):
        return group
    derived = group.derive(exceptions)
    derived.__traceback__ = group.__traceback__
    derived.__cause__ = group.__cause__
    derived.__context__ = group.__context__
    derived.__suppress_context__ = group.__suppress_context__
    if hasattr(group, "__notes__"):
        derived.__notes__ = list(group.__notes__)
    return derived


class _CollapseExceptionGroups:
    """Re-raises an exception group leaving the block as `collapse` makes it. A class with
    no state rather than a generator: every idle agent's task sits in one, and one shared
    instance costs it nothing."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if not isinstance(error, BaseExceptionGroup):
            return
        collapsed = collapse(error)
        if collapsed is error:
            return
        # Raising here would make the group the exception's __context__: keep its own.
        context = collapsed.__context__
        try:
            raise collapsed
        finally:
            collapsed.__context__ = context
            del collapsed, context, error  # no reference cycle through this frame


_COLLAPSE = _CollapseExceptionGroups()


def collapse_exception_groups() -> _CollapseExceptionGroups:
    """A context manager that re-raises an exception group leaving its block as `collapse`
    makes it."""
    return _COLLAPSE
