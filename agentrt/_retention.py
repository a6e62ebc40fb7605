"""The per-turn event log behind ``Response.events`` and ``Response.event_coverage``.

At most ``max_events`` events and ``max_event_bytes`` bytes (JSON encoding) are kept.
``compact`` keeps the longest prefix that fits and reports exactly what it left out;
``lossless`` refuses the first event over a limit (the turn then fails with
``event_capture_overflow``).

Retained events are kept as their JSON encoding, one line each in one buffer: that
encoding is what sizing needs anyway, and bytes cost a fraction of the objects (a turn
keeps up to a thousand events, a runtime hundreds of turns' Responses). `RetainedEvents`
decodes them when they are read.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Mapping, Sequence
from functools import partial
from typing import Any, Literal, overload

import attrs
import msgspec

from ._events import AnyEvent, Event, EventCoverage, Omission

Limit = Literal["max_events", "max_event_bytes"]

_encoder = msgspec.json.Encoder()
_decoder: msgspec.json.Decoder[AnyEvent] = msgspec.json.Decoder(AnyEvent)


class CaptureOverflow(Exception):
    """A lossless log refused an event; ``detail`` says which limit and what was kept."""

    def __init__(self, detail: dict[str, Any]) -> None:
        self.detail = detail
        super().__init__(
            f"{detail['rejected_event_kind']} event of {detail['rejected_event_bytes']} bytes "
            f"crossed {detail['limit']} ({detail['retained_events']} events, "
            f"{detail['retained_bytes']} bytes retained)"
        )


class RetainedEvents(Sequence[Event]):
    """``Response.events``: an immutable sequence of events stored as JSON lines, each
    decoded on first access and cached. ``len``, equality (with another one or a tuple)
    and hashing behave as for the tuple of its events.

    Events come back as their JSON decodes: equal to what was delivered for everything a
    CLI prints (JSON values); a Python-only value an in-process backend put in an ``Any``
    field comes back as its JSON form (a tuple as a list). ``pinned`` events (the turn's
    terminal) are returned as the very objects, so ``events[-1] is terminal`` holds.
    """

    __slots__ = ("_cache", "_data", "_ends", "_pinned")

    def __init__(
        self,
        data: bytes = b"",
        ends: Sequence[int] = (),
        pinned: Mapping[int, Event] | None = None,
    ) -> None:
        # ``ends[i]`` is where event i's encoding ends; a newline separates encodings.
        self._data = data
        self._ends = ends
        self._pinned = tuple(pinned.items()) if pinned else ()
        # Made on first access: 8 bytes an event in every Response nobody reads the events of.
        self._cache: list[Event | None] | None = None

    def _events(self) -> list[Event | None]:
        cache = self._cache
        if cache is None:
            cache = self._cache = [None] * len(self._ends)
            for index, event in self._pinned:
                cache[index] = event
        return cache

    def __len__(self) -> int:
        return len(self._ends)

    @overload
    def __getitem__(self, index: int) -> Event: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[Event, ...]: ...
    def __getitem__(self, index: int | slice) -> Event | tuple[Event, ...]:
        if isinstance(index, slice):
            return tuple(self)[index]
        cache = self._events()
        event = cache[index]  # raises IndexError as a tuple would; normalises negatives below
        if event is None:
            index %= len(cache)
            start = self._ends[index - 1] + 1 if index else 0
            event = cache[index] = _decoder.decode(
                memoryview(self._data)[start : self._ends[index]]
            )
        return event

    def __iter__(self) -> Iterator[Event]:
        cache = self._events()
        if None in cache:
            # One pass over the whole buffer is cheaper than one decode call per event.
            for index, event in enumerate(_decoder.decode_lines(self._data)):
                if cache[index] is None:
                    cache[index] = event
        return iter(cache)  # type: ignore[arg-type]  # no None left

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RetainedEvents):
            return self._data == other._data or tuple(self) == tuple(other)
        if isinstance(other, tuple):
            return tuple(self) == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"RetainedEvents({tuple(self)!r})"


@attrs.define
class EventLog:
    mode: Literal["compact", "lossless"]
    max_events: int
    max_event_bytes: int
    observed: int = 0
    retained_bytes: int = 0
    first_omission: Omission | None = None
    # The retained events' JSON, newline-terminated, and where each one ends.
    _data: bytearray = attrs.field(factory=bytearray)
    # A partial, not a lambda: no Python call a turn.
    _ends: array[int] = attrs.field(factory=partial(array, "q"))

    @property
    def retained(self) -> int:
        return len(self._ends)

    @property
    def keeping(self) -> bool:
        """False once compact retention has left an event out: from then on `add` only
        counts, and `skipped` may count instead."""
        return self.first_omission is None

    def skipped(self, count: int) -> None:
        """Count ``count`` events that were not offered to `add` (only once not `keeping`:
        they would not have been kept)."""
        assert self.first_omission is not None
        self.observed += count

    def add(self, event: Event) -> bool:
        """Count ``event`` and keep it if it fits (True if kept); lossless raises
        `CaptureOverflow` instead of omitting (the refused event is then not counted)."""
        if self.first_omission is not None:
            # The kept events are a prefix: after the first omission nothing is kept, so
            # nothing is encoded either.
            self.observed += 1
            return False
        # The encoding is the size. It is appended rather than encoded in place
        # (`encode_into`): msgspec grows a buffer by half again each time, bytearray's own
        # growth adds an eighth, and a turn's buffer lives as long as the turn (with a
        # hundred turns in flight, megabytes of capacity nobody uses: bench/README.md). The
        # extra copy is one event's bytes, and a log encodes at most one event more than it
        # keeps. The newline goes in with ``append``: a second ``+=`` costs a buffer export.
        encoded = _encoder.encode(event)
        size = len(encoded)
        ends = self._ends
        if len(ends) < self.max_events and self.retained_bytes + size <= self.max_event_bytes:
            self.observed += 1
            data = self._data
            data += encoded
            ends.append(len(data))
            data.append(0x0A)
            self.retained_bytes += size
            return True
        return self._refuse(event, size)

    def _refuse(self, event: Event, size: int) -> bool:
        # Over a limit: compact leaves the event out (and every later one), lossless raises.
        limit: Limit = "max_events" if len(self._ends) >= self.max_events else "max_event_bytes"
        index = self.observed
        if self.mode == "lossless":
            raise CaptureOverflow(
                {
                    "limit": limit,
                    "max_events": self.max_events,
                    "max_event_bytes": self.max_event_bytes,
                    "observed_events": index,
                    "retained_events": len(self._ends),
                    "retained_bytes": self.retained_bytes,
                    "rejected_event_kind": event.kind,
                    "rejected_event_bytes": size,
                }
            )
        self.observed = index + 1
        self.first_omission = Omission(index=index, kind=event.kind, size=size, limit=limit)
        return False

    def events(self, pinned: Mapping[int, Event] | None = None) -> RetainedEvents:
        """The retained events, as ``Response.events``; ``pinned`` maps indices to the
        objects to hand back for them."""
        data = bytes(self._data)
        # 4 bytes an offset where they fit (they do unless max_event_bytes is over 4 GiB).
        ends = array("I" if len(data) < 2**32 else "q", self._ends)
        return RetainedEvents(data, ends, pinned)

    def coverage(self) -> EventCoverage:
        retained = len(self._ends)
        return EventCoverage(
            mode=self.mode,
            observed=self.observed,
            retained=retained,
            omitted=self.observed - retained,
            retained_bytes=self.retained_bytes,
            first_omission=self.first_omission,
        )
