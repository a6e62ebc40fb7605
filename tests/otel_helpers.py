"""An OpenTelemetry SDK for the telemetry tests: spans and metrics kept in memory.

The API lets a process set its global providers once; `recording` sets fresh ones for one
test and then puts the API back as it was (no provider set), as OpenTelemetry's own test
utilities do, so every other test runs the no-SDK path.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import attrs
import opentelemetry.metrics._internal as metrics_internal
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, Span, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util._once import Once


@attrs.define
class Point:
    name: str
    attributes: dict[str, Any]
    value: float  # a sum's value, a histogram's sum
    count: int  # a histogram's count (1 for a sum)


@attrs.define
class Telemetry:
    """What the runtime exported since `recording` began (metrics are cumulative)."""

    tracer: trace.Tracer
    _exporter: InMemorySpanExporter
    _reader: InMemoryMetricReader

    def spans(self) -> list[ReadableSpan]:
        return list(self._exporter.get_finished_spans())

    def named(self, prefix: str) -> list[ReadableSpan]:
        return [span for span in self.spans() if span.name.startswith(prefix)]

    def collect(self) -> list[Point]:
        """Every data point as of now (observable instruments are read now)."""
        points = []
        data = self._reader.get_metrics_data()
        for resource in data.resource_metrics if data is not None else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    for point in metric.data.data_points:
                        attributes = dict(point.attributes or {})
                        if hasattr(point, "count"):
                            points.append(Point(metric.name, attributes, point.sum, point.count))
                        else:
                            points.append(Point(metric.name, attributes, point.value, 1))
        return points

    def _matching(self, name: str, attributes: dict[str, Any]) -> list[Point]:
        return [
            p
            for p in self.collect()
            if p.name == name and attributes.items() <= p.attributes.items()
        ]

    def total(self, name: str, **attributes: Any) -> float:
        """The sum of ``name``'s points whose attributes include ``attributes`` (for an
        observable instrument: what it reports now)."""
        return sum(p.value for p in self._matching(name, attributes))

    def count(self, name: str, **attributes: Any) -> int:
        """How many measurements of histogram ``name`` match ``attributes``."""
        return sum(p.count for p in self._matching(name, attributes))

    def exported_text(self) -> str:
        """Everything exported, as text: every span (names, attributes, events, status,
        links) and every metric data point."""
        spans = [span.to_json() for span in self.spans()]
        return "\n".join(spans) + json.dumps([attrs.asdict(p) for p in self.collect()])


def unset_providers() -> None:
    """Undo ``set_tracer_provider`` and ``set_meter_provider`` (the API allows them once)."""
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace._TRACER_PROVIDER = None
    metrics_internal._METER_PROVIDER_SET_ONCE = Once()
    metrics_internal._METER_PROVIDER = None


@contextmanager
def recording() -> Iterator[Telemetry]:
    """Configure the SDK (in-memory exporter and reader) for the block, and no longer
    after it."""
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    trace.set_tracer_provider(tracer_provider)
    metrics.set_meter_provider(meter_provider)
    try:
        yield Telemetry(tracer_provider.get_tracer("tests"), exporter, reader)
    finally:
        unset_providers()
        tracer_provider.shutdown()
        meter_provider.shutdown()


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
