"""Stuck turns: a model that repeats itself, found from the turn's tool calls and results.

The patterns are those of OpenHands' stuck detector that a turn's events show: the same
tool call with the same result ``stuck_repeats`` times in a row (a model that keeps
looking at an answer that does not change), and the same tool call ending in an error
``stuck_errors`` times in a row (a model that keeps retrying what fails; the error's text
may differ, a timestamp or a path in it). Anything else between them (another call, a
different input or result) starts the count again. A call is its tool's name and its input,
compared as canonical JSON; so is a result's content.
"""

from __future__ import annotations

from typing import Any

import attrs
import msgspec

from ._events import ToolResultEvent, ToolUseEvent

_encode = msgspec.json.Encoder(order="sorted").encode


def _canonical(value: Any) -> bytes:
    try:
        return _encode(value)
    except (TypeError, msgspec.EncodeError):
        return repr(value).encode()


@attrs.frozen
class Stuck:
    """Why a turn is stuck: the message and the detail its `TurnFailed` carries."""

    message: str
    detail: dict[str, Any]


@attrs.define
class LoopWatch:
    """Counts the repeats of one turn's tool calls; `saw` each tool call and result."""

    repeats: int | None
    errors: int | None
    # The calls that have no result yet, by tool-use id: canonical (name, input), and name.
    _calls: dict[str, tuple[bytes, str]] = attrs.field(factory=dict)
    _last_call: bytes | None = None
    _last_result: bytes | None = None
    _same: int = 0
    _failing: int = 0

    @classmethod
    def of(cls, repeats: int | None, errors: int | None) -> LoopWatch | None:
        """A watch with these thresholds, or None where both are off."""
        return None if repeats is None and errors is None else cls(repeats, errors)

    def saw(self, event: ToolUseEvent | ToolResultEvent) -> Stuck | None:
        """Count ``event``; return why the turn is stuck once a threshold is reached."""
        if type(event) is ToolUseEvent:
            self._calls[event.id] = (_canonical((event.name, event.input)), event.name)
            return None
        assert type(event) is ToolResultEvent
        found = self._calls.pop(event.tool_use_id, None)
        if found is None:  # a result of a call this turn never showed: nothing to compare
            return None
        call, name = found
        result = _canonical(event.content)
        again = call == self._last_call
        self._same = self._same + 1 if again and result == self._last_result else 1
        self._failing = (self._failing + 1 if again else 1) if event.is_error else 0
        self._last_call, self._last_result = call, result
        if self.repeats is not None and self._same >= self.repeats:
            return _stuck(name, "with the same result", self._same, "stuck_repeats")
        if self.errors is not None and self._failing >= self.errors:
            return _stuck(name, "failing each time", self._failing, "stuck_errors")
        return None


def _stuck(name: str, how: str, times: int, option: str) -> Stuck:
    # The input is not repeated here: it may hold what must not be stored (a command's
    # token), and the turn's events have it.
    return Stuck(
        f"the model called {name} {times} times in a row with the same input, {how} "
        f"(the agent's {option} option)",
        {"tool_name": name, "times": times, "option": option},
    )
