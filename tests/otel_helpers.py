"""An OpenTelemetry SDK for the telemetry tests: spans and metrics kept in memory.

The API lets a process set its tracer and meter providers once, so the SDK is installed on
first use and stays for the rest of the session; spans are kept only inside `recording`,
and metrics are read as deltas from its start.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import attrs
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import Counter, Histogram, MeterProvider
from opentelemetry.sdk.metrics.export import AggregationTemporality, InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, Span, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

DELTA = AggregationTemporality.DELTA


class _WhileRecording(SimpleSpanProcessor):
    """Exports only inside `recording`: later tests of the session make spans too."""

    on = False

    def on_end(self, span: ReadableSpan) -> None:
        if self.on:
            super().on_end(span)


_exporter = InMemorySpanExporter()
_processor = _WhileRecording(_exporter)
_reader = InMemoryMetricReader(preferred_temporality={Counter: DELTA, Histogram: DELTA})
_installed = False


def _install() -> None:
    global _installed
    if not _installed:
        provider = TracerProvider()
        provider.add_span_processor(_processor)
        trace.set_tracer_provider(provider)
        metrics.set_meter_provider(MeterProvider(metric_readers=[_reader]))
        _installed = True


@attrs.define
class Point:
    name: str
    attributes: dict[str, Any]
    value: float  # a sum's value, a histogram's sum
    count: int  # a histogram's count (1 for a sum)


@attrs.define
class Telemetry:
    """What the runtime exported since `recording` began."""

    _points: list[Point] = attrs.field(factory=list)

    def spans(self) -> list[ReadableSpan]:
        return list(_exporter.get_finished_spans())

    def named(self, prefix: str) -> list[ReadableSpan]:
        return [span for span in self.spans() if span.name.startswith(prefix)]

    def collect(self) -> list[Point]:
        """Every data point so far (each collection adds the deltas since the last)."""
        data = _reader.get_metrics_data()
        for resource in data.resource_metrics if data is not None else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    for point in metric.data.data_points:
                        attributes = dict(point.attributes or {})
                        if hasattr(point, "count"):
                            self._points.append(
                                Point(metric.name, attributes, point.sum, point.count)
                            )
                        else:
                            self._points.append(Point(metric.name, attributes, point.value, 1))
        return self._points

    def total(self, name: str, **attributes: Any) -> float:
        """The sum of ``name``'s points whose attributes include ``attributes``."""
        return sum(
            p.value
            for p in self.collect()
            if p.name == name and attributes.items() <= p.attributes.items()
        )

    def count(self, name: str, **attributes: Any) -> int:
        """How many measurements of histogram ``name`` match ``attributes``."""
        return sum(
            p.count
            for p in self.collect()
            if p.name == name and attributes.items() <= p.attributes.items()
        )

    def gauge(self, name: str, **attributes: Any) -> float | None:
        """The value an observable instrument reports now (None: it reports nothing)."""
        known = len(self._points)
        found = [
            p.value
            for p in self.collect()[known:]
            if p.name == name and attributes.items() <= p.attributes.items()
        ]
        return found[-1] if found else None

    def exported_text(self) -> str:
        """Everything exported, as text: every span (names, attributes, events, status,
        links) and every metric data point."""
        spans = [span.to_json() for span in self.spans()]
        return "\n".join(spans) + json.dumps([attrs.asdict(p) for p in self.collect()])


@contextmanager
def recording() -> Iterator[Telemetry]:
    """Keep the spans ended inside the block; metrics count from its start."""
    _install()
    _reader.get_metrics_data()  # what came before is not this test's
    _exporter.clear()
    _processor.on = True
    try:
        yield Telemetry()
    finally:
        _processor.on = False
        _exporter.clear()


def parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def span_id(span: ReadableSpan | Span) -> int:
    context = span.get_span_context()
    assert context is not None
    return context.span_id


def events(span: ReadableSpan) -> dict[str, dict[str, Any]]:
    """A span's events by name (each name once)."""
    found = {event.name: dict(event.attributes or {}) for event in span.events}
    assert len(found) == len(span.events), [event.name for event in span.events]
    return found
