"""OpenTelemetry traces and metrics from distlock's lifecycle events.

Install with ``pip install 'distlock[otel]'`` (it brings ``opentelemetry-api``; the SDK and
exporters are the application's choice), then pass one observer to every ``Lock``, sync
or asyncio::

    from distlock.otel import OpenTelemetryObserver

    otel = OpenTelemetryObserver()            # the global tracer and meter providers
    locks = Lock(client, observers=[otel])

Only this module imports OpenTelemetry: ``distlock`` itself works without it.  The
observer is built on :mod:`distlock.events` and sees nothing else, so what it reports is
what the lock's state machine decided, at the instants it decided it.

Traces
------
One span per **section** (one key held once), named ``distlock.section``.  A span name
must not grow with the data (the OpenTelemetry naming rule), so the key is an attribute,
not part of the name: ``lock <key>`` would make one span name per id, and the prefix
cannot be recovered from a key reliably (both a prefix and an id may contain ``:``).  The
name follows the library's own vocabulary and the metric namespace below.  Kind
``INTERNAL``: holding a lock is not one request; Redis instrumentation, if any, adds the
``EVALSHA`` client spans beside it.

- It **starts at the first attempt's send** (``Acquired.t - Acquired.waited_ms``), so the
  time spent waiting behind another owner is visible, and carries a span event
  ``distlock.acquired`` at the grant.  Its parent is whatever span is current where the
  grant is handed to observers: the caller's thread (sync) or task (asyncio), so the
  section nests under the caller's request span.
- It **ends at the release** (``Released``) or **at the moment the loss became known**
  (``Lost``), whichever comes first: from a loss on, the section no longer ran under
  mutual exclusion, so the span ends there.  A loss also sets status ``ERROR`` (with the
  reason's sentence as description), ``error.type`` and ``distlock.loss.reason`` (the
  :class:`~distlock.errors.LossReason` name in lower case, e.g. ``renew_rejected``) and
  ``distlock.loss.detection_delay`` (seconds since the last send Redis confirmed).
- Attributes: ``distlock.key``, ``distlock.fence`` (not on a semaphore permit's span: a
  permit has no fence), ``distlock.attempts``,
  ``distlock.acquire.wait_time`` (s), ``distlock.client`` (the section's label, as in
  ``trace=`` records), and at the end ``distlock.outcome`` (``released`` or ``lost``),
  ``distlock.release.ok`` when a release answered, ``distlock.renewals`` and
  ``distlock.renewal.failures`` (confirmed and failed renewal round trips during the
  section).
- Each failed renewal round trip (:class:`~distlock.events.RenewFailed`, not a loss) is a
  span event ``distlock.renewal.failed`` with ``distlock.renewal.consecutive_failures``,
  ``exception.type`` and ``exception.message``.  Confirmed renewals are only counted: one
  event per heartbeat would exhaust the span's event limit on a long section.

A refused acquisition (:class:`~distlock.events.NotAcquired`) makes **no span**, only the
``distlock.acquisitions`` count with outcome ``not_acquired``.  No event marks when a
refused acquisition began, so its span could only be an instant with no duration, and a
span per refusal multiplies span volume exactly when a hot key is contended (six callers
on one id: one section, five refusals).  The refusal reaches the caller anyway, as
``LockNotAcquiredError`` (``run``/``hold``, which instrumented frameworks record on the
caller's span) or as ``None`` (``acquire``).

Metrics
-------
OpenTelemetry semantic-convention style: dotted lower-case names, UCUM units, durations
in seconds as histograms (with advisory bucket boundaries sized for them, since the SDK's
default buckets are sized for milliseconds; a View overrides them):

- ``distlock.acquisitions`` (Counter, ``{acquisition}``): acquisitions that ended, with
  ``distlock.acquire.outcome`` = ``acquired`` or ``not_acquired``.
- ``distlock.acquire.wait_time`` (Histogram, ``s``): from the first attempt's send to the
  grant (``Acquired.waited_ms``).
- ``distlock.hold_time`` (Histogram, ``s``): from the grant to the release or to the
  moment the loss was known, with ``distlock.outcome`` (``released``/``lost``) and, for a
  loss, ``distlock.loss.reason``.
- ``distlock.held_sections`` (UpDownCounter, ``{section}``): sections held now.
- ``distlock.renewal.duration`` (Histogram, ``s``): round trips of confirmed renewals (and
  of manual ``extend`` calls, which the events do not tell apart).
- ``distlock.renewal.failures`` (Counter, ``{failure}``): failed renewal round trips, with
  ``error.type`` (the exception's class, e.g. ``redis.exceptions.ConnectionError``).
- ``distlock.losses`` (Counter, ``{loss}``): known losses, with ``distlock.loss.reason``.

**No key on metrics by default.**  Every distinct attribute set is a time series that the
SDK keeps in memory for the life of the process and the backend stores and bills; lock
ids are typically order or user ids, unbounded, so a key attribute would grow without
limit (the SDK caps each instrument at 2,000 series by default and folds the rest into
one overflow series, which is worse than none).  ``key_attribute=True`` adds
``distlock.key`` to every metric point for deployments whose ids are a small fixed set
(``"nightly-report"``, ``"migrations"``); ``attributes={"distlock.prefix": "orders"}``
adds constant attributes to spans and metrics, which is how one observer per ``Lock``
tells namespaces apart without the key.  Spans always carry the key: a span is one
record, not a series.

Clocks
------
An event's ``t`` is the client's monotonic clock in milliseconds (``time.monotonic() *
1000``, the clock the state machine reads); OpenTelemetry wants nanoseconds since the
epoch.  Each event is converted when it is delivered, as *wall clock now* minus *how long
ago on the monotonic clock*, so a span's start, events and end are placed at the instants
the state machine saw them even when the event reaches the observer later (sync
observers run on worker threads), and durations are monotonic differences, never hurt by
a wall-clock step between two events.

Threads, ordering and limits
----------------------------
One observer may serve any number of ``Lock`` objects of both drivers: sections are told
apart by ``event.client``, which is unique in the process, and shared state is guarded,
since sync observers are called from caller and worker threads at once.  Events of one
section can reach observers from different threads, so out of order in rare races (a
deadline loss detected on the timer thread is handed over through a worker while the
caller's own release is reported directly).  An event whose section is no longer open
(a loss reported after the release) still counts in the metrics, but can no longer change
the span.  A manual handle that is never released (left to expire by its TTL) sends no
further event, so its span stays open; at most ``max_open_sections`` sections are tracked
at once, and beyond that the oldest is ended with ``distlock.outcome = "untracked"``.

Observers run synchronously (in asyncio, on the event loop): export through a
``BatchSpanProcessor`` and a ``PeriodicExportingMetricReader``, never a synchronous
exporter, so no lock waits on the network for its telemetry.
"""

from __future__ import annotations

import importlib.metadata
import threading
import time
from collections.abc import Mapping
from typing import Final

try:
    from opentelemetry import metrics, trace
    from opentelemetry.trace import Span, SpanKind, Status, StatusCode
    from opentelemetry.util.types import AttributeValue
except ImportError as exc:  # pragma: no cover - exercised in a subprocess by the tests
    raise ImportError(
        "distlock.otel needs the OpenTelemetry API, which is not installed: "
        "pip install 'distlock[otel]'",
        name=exc.name,
    ) from exc

from distlock._clock import now_ms
from distlock.errors import ValidationError
from distlock.events import Acquired, Event, Lost, NotAcquired, Released, Renewed, RenewFailed

__all__ = ["SPAN_NAME", "OpenTelemetryObserver"]

#: The name of every section's span (low cardinality: the key is an attribute).
SPAN_NAME: Final = "distlock.section"

#: Advisory histogram buckets, in seconds.  Round trips: loopback to a slow WAN.
_ROUND_TRIP_BUCKETS: Final = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
)
#: Waits: one round trip uncontended, up to retries behind a long holder.
_WAIT_BUCKETS: Final = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
    30.0, 60.0,
)
#: Holds: a quick body to a long job.
_HOLD_BUCKETS: Final = (
    0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0,
)

_DEFAULT_MAX_OPEN: Final = 10_000


def _version() -> str:
    try:
        return importlib.metadata.version("distlock")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - a bare checkout
        return ""


def _type_name(error: BaseException | None) -> str:
    """``error.type``: the exception's fully qualified class name (bounded), or ``_OTHER``."""
    if error is None:
        return "_OTHER"
    cls = type(error)
    if cls.__module__ == "builtins":
        return cls.__qualname__
    return f"{cls.__module__}.{cls.__qualname__}"


class _Section:
    """One open section's span and counters.  ``mutex`` serialises what is done to the
    span, since a renewal's event and the release can be delivered on two threads."""

    __slots__ = ("ended", "failures", "granted_at", "metric_attrs", "mutex", "renewals", "span")

    def __init__(
        self, span: Span, granted_at: float, metric_attrs: dict[str, AttributeValue]
    ) -> None:
        self.span = span
        self.granted_at = granted_at
        self.metric_attrs = metric_attrs
        self.renewals = 0
        self.failures = 0
        self.ended = False
        self.mutex = threading.Lock()


class OpenTelemetryObserver:
    """A distlock observer that records sections as spans and lifecycle events as metrics.

    ``tracer_provider`` / ``meter_provider``: where spans and metrics go; None uses the
    global providers (``opentelemetry.trace.set_tracer_provider`` and
    ``opentelemetry.metrics.set_meter_provider``; set them before or after making the
    observer, the API's proxies forward).  ``key_attribute``: add ``distlock.key`` to
    metric points too (off by default: keys are unbounded, see the module docs).
    ``attributes``: constant attributes added to every span and metric point.
    ``max_open_sections``: how many sections are tracked at once before the oldest is
    ended as ``untracked`` (only a manual handle that is never released stays open).

    Thread-safe; one instance may serve many locks and both drivers.
    """

    def __init__(
        self,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
        *,
        key_attribute: bool = False,
        attributes: Mapping[str, AttributeValue] | None = None,
        max_open_sections: int = _DEFAULT_MAX_OPEN,
    ) -> None:
        if isinstance(max_open_sections, bool) or not isinstance(max_open_sections, int) or (
            max_open_sections < 1
        ):
            raise ValidationError(
                f"max_open_sections must be an int >= 1, got {max_open_sections!r}"
            )
        version = _version()
        self._tracer = trace.get_tracer("distlock", version, tracer_provider=tracer_provider)
        meter = metrics.get_meter("distlock", version, meter_provider=meter_provider)
        self._key_attribute = key_attribute
        self._attributes: dict[str, AttributeValue] = dict(attributes or {})
        self._max_open = max_open_sections
        #: Open sections by ``event.client`` (unique in the process), oldest first.
        self._open: dict[str, _Section] = {}
        self._mutex = threading.Lock()

        self._acquisitions = meter.create_counter(
            "distlock.acquisitions",
            unit="{acquisition}",
            description="Acquisitions that ended: granted, or refused after every allowed "
            "attempt.",
        )
        self._wait_time = meter.create_histogram(
            "distlock.acquire.wait_time",
            unit="s",
            description="Time from the first attempt's send to the grant.",
            explicit_bucket_boundaries_advisory=_WAIT_BUCKETS,
        )
        self._hold_time = meter.create_histogram(
            "distlock.hold_time",
            unit="s",
            description="Time from the grant to the release, or to the moment the loss was "
            "known.",
            explicit_bucket_boundaries_advisory=_HOLD_BUCKETS,
        )
        self._held = meter.create_up_down_counter(
            "distlock.held_sections",
            unit="{section}",
            description="Sections granted and not yet released or known lost.",
        )
        self._renewal_duration = meter.create_histogram(
            "distlock.renewal.duration",
            unit="s",
            description="Round-trip time of confirmed renewals and manual extends.",
            explicit_bucket_boundaries_advisory=_ROUND_TRIP_BUCKETS,
        )
        self._renewal_failures = meter.create_counter(
            "distlock.renewal.failures",
            unit="{failure}",
            description="Renewal round trips that failed (not a loss: the next heartbeat "
            "retries).",
        )
        self._losses = meter.create_counter(
            "distlock.losses",
            unit="{loss}",
            description="Sections whose lease was known lost.",
        )

    # -- delivery ------------------------------------------------------------------------

    def __call__(self, event: Event) -> None:
        if isinstance(event, Acquired):
            self._acquired(event)
        elif isinstance(event, Renewed):
            self._renewed(event)
        elif isinstance(event, RenewFailed):
            self._renew_failed(event)
        elif isinstance(event, Lost):
            self._lost(event)
        elif isinstance(event, Released):
            self._released(event)
        elif isinstance(event, NotAcquired):
            self._acquisitions.add(
                1, {**self._metric_attrs(event.key), "distlock.acquire.outcome": "not_acquired"}
            )

    def __repr__(self) -> str:
        with self._mutex:
            open_sections = len(self._open)
        return f"<{type(self).__name__} open_sections={open_sections}>"

    # -- helpers -------------------------------------------------------------------------

    @staticmethod
    def _epoch_ns(t_ms: float) -> int:
        """An event's ``t`` (client monotonic ms) as OpenTelemetry's epoch nanoseconds."""
        return time.time_ns() - round((now_ms() - t_ms) * 1_000_000)

    def _metric_attrs(self, key: str) -> dict[str, AttributeValue]:
        attrs = dict(self._attributes)
        if self._key_attribute:
            attrs["distlock.key"] = key
        return attrs

    def _take(self, client: str) -> _Section | None:
        with self._mutex:
            return self._open.pop(client, None)

    def _get(self, client: str) -> _Section | None:
        with self._mutex:
            return self._open.get(client)

    def _end(
        self,
        section: _Section,
        end_ns: int,
        outcome: str,
        *,
        hold_s: float | None = None,
        reason: str | None = None,
        attributes: Mapping[str, AttributeValue] | None = None,
        status: Status | None = None,
    ) -> None:
        """End ``section``'s span once; take it out of the held gauge, into the hold times."""
        with section.mutex:
            if section.ended:
                return
            section.ended = True
            span = section.span
            span.set_attribute("distlock.outcome", outcome)
            if reason is not None:
                span.set_attribute("distlock.loss.reason", reason)
            span.set_attributes(
                {
                    **(attributes or {}),
                    "distlock.renewals": section.renewals,
                    "distlock.renewal.failures": section.failures,
                }
            )
            if status is not None:
                span.set_status(status)
            span.end(end_time=end_ns)
        self._held.add(-1, section.metric_attrs)
        if hold_s is not None:
            metric = {**section.metric_attrs, "distlock.outcome": outcome}
            if reason is not None:
                metric["distlock.loss.reason"] = reason
            self._hold_time.record(max(0.0, hold_s), metric)

    # -- events --------------------------------------------------------------------------

    def _acquired(self, event: Acquired) -> None:
        metric_attrs = self._metric_attrs(event.key)
        self._acquisitions.add(1, {**metric_attrs, "distlock.acquire.outcome": "acquired"})
        wait_s = max(0.0, event.waited_ms) / 1000.0
        self._wait_time.record(wait_s, metric_attrs)
        granted_ns = self._epoch_ns(event.t)
        # A permit has no fence (its event's 1 is the script's "granted"): a fence
        # attribute on it would be read as one.
        granted: dict[str, AttributeValue] = (
            {"distlock.attempts": event.attempts}
            if event.permit
            else {"distlock.fence": event.fence, "distlock.attempts": event.attempts}
        )
        span = self._tracer.start_span(
            SPAN_NAME,
            kind=SpanKind.INTERNAL,
            attributes={
                **self._attributes,
                "distlock.key": event.key,
                **granted,
                "distlock.acquire.wait_time": wait_s,
                "distlock.client": event.client,
            },
            start_time=granted_ns - round(wait_s * 1_000_000_000),
        )
        span.add_event("distlock.acquired", granted, timestamp=granted_ns)
        self._held.add(1, metric_attrs)
        section = _Section(span, event.t, metric_attrs)
        evicted: _Section | None = None
        with self._mutex:
            self._open[event.client] = section
            if len(self._open) > self._max_open:
                evicted = self._open.pop(next(iter(self._open)))
        if evicted is not None:
            self._end(evicted, time.time_ns(), "untracked")

    def _renewed(self, event: Renewed) -> None:
        self._renewal_duration.record(
            max(0.0, event.rtt_ms) / 1000.0, self._metric_attrs(event.key)
        )
        section = self._get(event.client)
        if section is not None:
            with section.mutex:
                section.renewals += 1

    def _renew_failed(self, event: RenewFailed) -> None:
        error_type = _type_name(event.error)
        self._renewal_failures.add(1, {**self._metric_attrs(event.key), "error.type": error_type})
        section = self._get(event.client)
        if section is None:
            return
        attrs: dict[str, AttributeValue] = {
            "distlock.renewal.consecutive_failures": event.failures,
            "exception.type": error_type,
        }
        if event.error is not None:
            attrs["exception.message"] = str(event.error)
        with section.mutex:
            section.failures += 1
            if not section.ended:
                section.span.add_event(
                    "distlock.renewal.failed", attrs, timestamp=self._epoch_ns(event.t)
                )

    def _lost(self, event: Lost) -> None:
        reason = event.reason.name.lower()
        self._losses.add(1, {**self._metric_attrs(event.key), "distlock.loss.reason": reason})
        section = self._take(event.client)
        if section is None:
            return
        self._end(
            section,
            self._epoch_ns(event.t),
            "lost",
            hold_s=(event.t - section.granted_at) / 1000.0,
            reason=reason,
            attributes={
                "distlock.loss.detection_delay": max(0.0, event.detection_delay_ms) / 1000.0,
                "error.type": reason,
            },
            status=Status(StatusCode.ERROR, f"lock {event.key!r} was lost: {event.reason.value}"),
        )

    def _released(self, event: Released) -> None:
        section = self._take(event.client)
        if section is None:
            return  # the section was lost before: its span ended with the loss
        end_ns = self._epoch_ns(event.t)
        hold_s = (event.t - section.granted_at) / 1000.0
        if event.ok:
            self._end(
                section, end_ns, "released", hold_s=hold_s,
                attributes={"distlock.release.ok": True},
            )
            return
        # A release answered "not ours" always comes after a loss, whose Lost is still on
        # its way from another thread: report the loss without the reason it will count.
        self._end(
            section,
            end_ns,
            "lost",
            hold_s=hold_s,
            attributes={"distlock.release.ok": False, "error.type": "_OTHER"},
            status=Status(
                StatusCode.ERROR,
                f"lock {event.key!r} was lost: the release found the key expired or held by "
                "another owner",
            ),
        )
