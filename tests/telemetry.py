"""An OpenTelemetry observer wired to the SDK's in-memory exporters, read back by the tests of
``distlock.otel`` (``tests/test_otel.py``, and on both drivers
``tests/drivers/_async/test_otel.py``)."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from distlock.otel import SPAN_NAME, OpenTelemetryObserver

#: How far a converted timestamp may sit from the wall clock read around it (the two
#: clocks may be slewed apart by NTP by a few hundred parts per million).
SLACK_NS = 5_000_000


class Telemetry:
    """An observer wired to an in-memory span exporter and metric reader."""

    def __init__(self, **options: Any) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        self.observer = OpenTelemetryObserver(
            tracer_provider=self.tracer_provider, meter_provider=self.meter_provider, **options
        )
        self.tracer = self.tracer_provider.get_tracer("tests")

    def spans(self) -> list[ReadableSpan]:
        return [s for s in self.exporter.get_finished_spans() if s.name == SPAN_NAME]

    def span(self) -> ReadableSpan:
        (span,) = self.spans()
        return span

    def points(self, name: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        if data is None:
            return []
        return [
            point
            for resource in data.resource_metrics
            for scope in resource.scope_metrics
            for metric in scope.metrics
            if metric.name == name
            for point in metric.data.data_points
        ]

    def value(self, name: str, **attrs: object) -> float:
        """A counter's value, or a histogram's count, for points carrying ``attrs``
        (attribute names with ``_`` for ``.``, e.g. ``distlock_outcome``)."""
        wanted = {k.replace("_", "."): v for k, v in attrs.items()}
        total = 0.0
        for point in self.points(name):
            if all(point.attributes.get(k) == v for k, v in wanted.items()):
                total += point.count if hasattr(point, "count") else point.value
        return total

    def all_point_attributes(self) -> list[dict[str, Any]]:
        data = self.reader.get_metrics_data()
        assert data is not None
        return [
            dict(point.attributes or {})
            for resource in data.resource_metrics
            for scope in resource.scope_metrics
            for metric in scope.metrics
            for point in metric.data.data_points
        ]

    def shutdown(self) -> None:
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()


def attrs(span: ReadableSpan) -> dict[str, Any]:
    assert span.attributes is not None
    return dict(span.attributes)


def event_time(span: ReadableSpan, name: str) -> int:
    (event,) = [e for e in span.events if e.name == name]
    return event.timestamp
