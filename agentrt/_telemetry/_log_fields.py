"""The structured fields of the runtime's log records: the agent, backend, request and
session of the task that logs, added by a filter on every logger the runtime writes to."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Protocol

import trio

from .._requests import Request

__all__ = ["LOGGERS", "AgentLogs", "LogFields"]

# Every logger the runtime writes to (tests/test_telemetry.py checks the package uses no
# other): each gets the filter below.
LOGGERS = ("agentrt", "agentrt.process", "agentrt.env", "agentrt.tools", "agentrt.console")


class LogFields(Protocol):
    """Where an agent's log fields are read, when a record is made (an agent's slot)."""

    @property
    def name(self) -> str: ...

    @property
    def backend(self) -> str: ...

    @property
    def current(self) -> Request | None: ...

    @property
    def session_id(self) -> str | None: ...


# The agent each working task is bound to, by task. Not a context variable: setting one
# gives the task a context of its own that outlives the reset (about 120 B per idle agent).
_bound: dict[trio.lowlevel.Task, LogFields] = {}


class AgentLogs:
    """In the block, the records the calling task (and the tasks it starts in nurseries
    of its own) logs carry ``slot``'s agent, backend, current request id and session id.
    An agent binds them while it works, not while it idles: a binding held is memory per
    idle agent."""

    __slots__ = ("_outer", "_slot", "_task")

    def __init__(self, slot: LogFields) -> None:
        self._slot = slot
        self._task: trio.lowlevel.Task | None = None
        self._outer: LogFields | None = None

    def __enter__(self) -> None:
        task = self._task = trio.lowlevel.current_task()
        self._outer = _bound.get(task)
        _bound[task] = self._slot

    def __exit__(self, *exc_info: object) -> None:
        assert self._task is not None
        if self._outer is None:
            del _bound[self._task]
        else:
            _bound[self._task] = self._outer
        self._task = self._outer = None


def _bound_slot() -> LogFields | None:
    """The binding of the calling task or of the nearest task above it."""
    try:
        task: trio.lowlevel.Task | None = trio.lowlevel.current_task()
    except RuntimeError:  # not in a trio task: a worker thread, or no trio at all
        return None
    while task is not None:
        slot = _bound.get(task)
        if slot is not None:
            return slot
        nursery = task.parent_nursery
        task = None if nursery is None else nursery.parent_task
    return None


def _log_fields(slot: LogFields) -> Mapping[str, object]:
    fields: dict[str, object] = {"agent": slot.name, "backend": slot.backend}
    if slot.current is not None:
        fields["request_id"] = slot.current.ref.id
    if slot.session_id is not None:
        fields["session_id"] = slot.session_id
    return fields


class _AgentFields(logging.Filter):
    """Adds the bound agent's fields to a record, under what ``extra`` already set."""

    def filter(self, record: logging.LogRecord) -> bool:
        slot = _bound_slot()
        if slot is not None:
            for key, value in _log_fields(slot).items():
                if not hasattr(record, key):
                    setattr(record, key, value)
        return True


_filter = _AgentFields()
for _name in LOGGERS:
    logging.getLogger(_name).addFilter(_filter)
