"""The per-turn event log behind ``Response.events`` and ``Response.event_coverage``.

At most ``max_events`` events and ``max_event_bytes`` bytes (JSON encoding) are kept.
``compact`` keeps the longest prefix that fits and reports exactly what it left out;
``lossless`` refuses the first event over a limit (the turn then fails with
``event_capture_overflow``).
"""

from __future__ import annotations

from typing import Any, Literal

import attrs

from ._events import Event, EventCoverage, Omission, event_size

Limit = Literal["max_events", "max_event_bytes"]


class CaptureOverflow(Exception):
    """A lossless log refused an event; ``detail`` says which limit and what was kept."""

    def __init__(self, detail: dict[str, Any]) -> None:
        self.detail = detail
        super().__init__(
            f"{detail['rejected_event_kind']} event of {detail['rejected_event_bytes']} bytes "
            f"crossed {detail['limit']} ({detail['retained_events']} events, "
            f"{detail['retained_bytes']} bytes retained)"
        )


@attrs.define
class EventLog:
    mode: Literal["compact", "lossless"]
    max_events: int
    max_event_bytes: int
    events: list[Event] = attrs.field(factory=list)
    observed: int = 0
    retained_bytes: int = 0
    first_omission: Omission | None = None

    def add(self, event: Event) -> None:
        """Count ``event`` and keep it if it fits; lossless raises `CaptureOverflow` instead
        of omitting (the refused event is then not counted as observed)."""
        index = self.observed
        if self.first_omission is not None:
            # The kept events are a prefix: after the first omission nothing is kept.
            self.observed = index + 1
            return
        size = event_size(event)
        limit: Limit
        if len(self.events) >= self.max_events:
            limit = "max_events"
        elif self.retained_bytes + size > self.max_event_bytes:
            limit = "max_event_bytes"
        else:
            self.observed = index + 1
            self.events.append(event)
            self.retained_bytes += size
            return
        if self.mode == "lossless":
            raise CaptureOverflow(
                {
                    "limit": limit,
                    "max_events": self.max_events,
                    "max_event_bytes": self.max_event_bytes,
                    "observed_events": index,
                    "retained_events": len(self.events),
                    "retained_bytes": self.retained_bytes,
                    "rejected_event_kind": event.kind,
                    "rejected_event_bytes": size,
                }
            )
        self.observed = index + 1
        self.first_omission = Omission(index=index, kind=event.kind, size=size, limit=limit)

    def coverage(self) -> EventCoverage:
        retained = len(self.events)
        return EventCoverage(
            mode=self.mode,
            observed=self.observed,
            retained=retained,
            omitted=self.observed - retained,
            retained_bytes=self.retained_bytes,
            first_omission=self.first_omission,
        )
