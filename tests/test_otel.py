"""distlock.otel against a real redis-server, read back through the SDK's in-memory exporters."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
import redis.asyncio as aredis
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import distlock
import distlock.asyncio
from distlock import (
    Lock,
    LockHandle,
    LockLeaseLostError,
    LockNotAcquiredError,
    LossReason,
    ValidationError,
)
from distlock._clock import now_ms
from distlock.events import Acquired, Event, Lost, Released, Renewed
from distlock.otel import SPAN_NAME, OpenTelemetryObserver
from tests.drivers._sync.test_lock import LateGrant
from tests.failing_clients import AsyncFailsOneRenewal, FailsOneRenewal
from tests.redis_server import RedisServer

WAIT = 10.0  # generous bound on event waits; never a timing assertion
QUICK_HEARTBEAT_MS = 100
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


@pytest.fixture
def tel() -> Iterator[Telemetry]:
    telemetry = Telemetry()
    yield telemetry
    telemetry.shutdown()


def attrs(span: ReadableSpan) -> dict[str, Any]:
    assert span.attributes is not None
    return dict(span.attributes)


def event_time(span: ReadableSpan, name: str) -> int:
    (event,) = [e for e in span.events if e.name == name]
    return event.timestamp


def renewed_after_failure() -> tuple[threading.Event, Any]:
    """An observer that sets the event at the first confirmed renewal after a failure."""
    done = threading.Event()
    failed = threading.Event()

    def observer(event: Event) -> None:
        if type(event).__name__ == "RenewFailed":
            failed.set()
        elif isinstance(event, Renewed) and failed.is_set():
            done.set()

    return done, observer


# -- a completed section ------------------------------------------------------------------


def test_a_completed_section_is_one_span_under_the_callers_span(
    tel: Telemetry, r: redis.Redis
) -> None:
    seen: dict[str, Any] = {}

    def body(h: LockHandle) -> None:
        seen["fence"], seen["key"] = h.fence, h.key
        time.sleep(0.05)

    before = time.time_ns()
    with Lock(r, prefix="otel", observers=[tel.observer]) as locks, \
            tel.tracer.start_as_current_span("request") as request:
        locks.run("42", body)
    after = time.time_ns()

    span = tel.span()
    assert span.kind is SpanKind.INTERNAL
    assert span.status.status_code is StatusCode.UNSET
    assert span.parent is not None and span.parent.span_id == request.get_span_context().span_id
    a = attrs(span)
    assert a["distlock.key"] == seen["key"] == "otel:42"
    assert a["distlock.fence"] == seen["fence"]
    assert a["distlock.attempts"] == 1
    assert a["distlock.outcome"] == "released"
    assert a["distlock.release.ok"] is True
    assert a["distlock.renewals"] == 0 and a["distlock.renewal.failures"] == 0
    assert "distlock.loss.reason" not in a and "error.type" not in a
    # Monotonic event times placed on the wall clock: inside the call, in order, and the
    # body's sleep between the grant and the end.
    assert span.start_time is not None and span.end_time is not None
    granted = event_time(span, "distlock.acquired")
    assert before - SLACK_NS <= span.start_time <= granted <= span.end_time <= after + SLACK_NS
    assert span.end_time - granted >= 50_000_000
    assert a["distlock.acquire.wait_time"] == pytest.approx(
        (granted - span.start_time) / 1e9, abs=1e-6
    )

    assert tel.value("distlock.acquisitions", distlock_acquire_outcome="acquired") == 1
    assert tel.value("distlock.acquisitions", distlock_acquire_outcome="not_acquired") == 0
    assert tel.value("distlock.acquire.wait_time") == 1
    assert tel.value("distlock.hold_time", distlock_outcome="released") == 1
    (hold,) = tel.points("distlock.hold_time")
    assert hold.sum >= 0.05
    assert tel.value("distlock.held_sections") == 0
    assert tel.value("distlock.losses") == 0
    # The key stays off the metrics unless asked for.
    assert all("distlock.key" not in p for p in tel.all_point_attributes())


def test_metrics_follow_the_semantic_convention_style(tel: Telemetry, r: redis.Redis) -> None:
    with Lock(r, prefix="otel", observers=[tel.observer]) as locks:
        locks.run("k", lambda h: None)
    data = tel.reader.get_metrics_data()
    assert data is not None
    (scope,) = [s for rm in data.resource_metrics for s in rm.scope_metrics]
    assert scope.scope.name == "distlock"
    units = {m.name: m.unit for m in scope.metrics}
    assert units == {
        "distlock.acquisitions": "{acquisition}",
        "distlock.acquire.wait_time": "s",
        "distlock.hold_time": "s",
        "distlock.held_sections": "{section}",
    }
    # Durations in seconds get buckets sized for seconds, not the SDK's millisecond ones.
    (wait,) = tel.points("distlock.acquire.wait_time")
    assert wait.explicit_bounds[0] < 0.01 and wait.sum < 5


def test_key_attribute_and_constant_attributes_are_opt_in(r: redis.Redis) -> None:
    tel = Telemetry(key_attribute=True, attributes={"distlock.prefix": "otel"})
    with Lock(r, prefix="otel", observers=[tel.observer]) as locks:
        locks.run("a", lambda h: None)
        locks.run("b", lambda h: None)
    points = tel.all_point_attributes()
    assert points and all(p["distlock.prefix"] == "otel" for p in points)
    assert all(p["distlock.key"] in ("otel:a", "otel:b") for p in points)
    assert tel.value("distlock.acquisitions", distlock_key="otel:a") == 1
    assert {attrs(s)["distlock.prefix"] for s in tel.spans()} == {"otel"}
    tel.shutdown()


# -- refusals and waits -------------------------------------------------------------------


def test_a_refused_acquisition_is_counted_not_traced(tel: Telemetry, r: redis.Redis) -> None:
    with Lock(r, prefix="otel") as holder, \
            Lock(r, prefix="otel", observers=[tel.observer]) as locks:
        held = holder.acquire("busy")
        assert held is not None
        assert locks.acquire("busy") is None
        with pytest.raises(LockNotAcquiredError):
            locks.run("busy", lambda h: None, retries=2, retry_delay_ms=1)
        assert held.release() is True
    assert tel.spans() == []
    assert tel.value("distlock.acquisitions", distlock_acquire_outcome="not_acquired") == 2
    assert tel.value("distlock.acquisitions", distlock_acquire_outcome="acquired") == 0
    assert tel.value("distlock.acquire.wait_time") == 0
    assert tel.value("distlock.held_sections") == 0


def test_a_contended_grant_starts_the_span_at_the_first_attempt(
    tel: Telemetry, r: redis.Redis
) -> None:
    refused = threading.Event()

    def trace(t: dict[str, Any]) -> None:
        if t["action"] == "AcquireReply" and not t["granted"]:
            refused.set()

    got: list[LockHandle | None] = []
    with Lock(r, prefix="otel") as holder, \
            Lock(r, prefix="otel", observers=[tel.observer], trace=trace) as locks:
        held = holder.acquire("queue")
        assert held is not None
        waiter = threading.Thread(
            target=lambda: got.append(locks.acquire("queue", retries=1000, retry_delay_ms=20))
        )
        waiter.start()
        assert refused.wait(WAIT)
        held.release()
        waiter.join(WAIT)
        (handle,) = got
        assert handle is not None
        handle.release()

    span = tel.span()
    a = attrs(span)
    assert a["distlock.attempts"] >= 2
    assert span.start_time is not None
    # At least one retry delay lies between the first attempt and the grant.
    assert event_time(span, "distlock.acquired") - span.start_time >= 20_000_000
    assert a["distlock.acquire.wait_time"] >= 0.02
    (wait,) = tel.points("distlock.acquire.wait_time")
    assert wait.count == 1 and wait.sum >= 0.02


# -- losses and renewal failures ----------------------------------------------------------


def test_a_rejected_renewal_ends_the_span_as_lost(tel: Telemetry, r: redis.Redis) -> None:
    def body(h: LockHandle) -> None:
        r.delete(h.key)
        assert h.signal.wait(WAIT)  # the next renewal finds the key gone

    with Lock(r, prefix="otel", ttl_ms=10_000, observers=[tel.observer]) as locks, \
            pytest.raises(LockLeaseLostError) as info:
        locks.run("gone", body, heartbeat_ms=QUICK_HEARTBEAT_MS)
    assert info.value.reason is LossReason.RENEW_REJECTED

    span = tel.span()  # the release that followed the loss makes no second span
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description is not None and "lost" in span.status.description
    a = attrs(span)
    assert a["distlock.outcome"] == "lost"
    assert a["distlock.loss.reason"] == a["error.type"] == "renew_rejected"
    assert a["distlock.loss.detection_delay"] > 0
    assert tel.value("distlock.losses", distlock_loss_reason="renew_rejected") == 1
    assert tel.value("distlock.losses") == 1
    assert tel.value(
        "distlock.hold_time", distlock_outcome="lost", distlock_loss_reason="renew_rejected"
    ) == 1
    assert tel.value("distlock.held_sections") == 0


def test_a_rejected_extend_ends_a_manual_handles_span(tel: Telemetry, r: redis.Redis) -> None:
    with Lock(r, prefix="otel", observers=[tel.observer]) as locks:
        handle = locks.acquire("manual")
        assert handle is not None
        assert handle.extend() is True
        r.delete(handle.key)
        assert handle.extend() is False
        assert handle.release() is False
    a = attrs(tel.span())
    assert a["distlock.outcome"] == "lost"
    assert a["distlock.loss.reason"] == "extend_rejected"
    assert a["distlock.renewals"] == 1  # the first, confirmed extend
    assert tel.value("distlock.renewal.duration") == 1
    assert tel.value("distlock.losses", distlock_loss_reason="extend_rejected") == 1


def test_a_taken_over_key_is_lost_at_the_release(tel: Telemetry, r: redis.Redis) -> None:
    with Lock(r, prefix="otel", observers=[tel.observer]) as locks, \
            pytest.raises(LockLeaseLostError):
        locks.run("stolen", lambda h: r.set(h.key, "someone-else"))
    a = attrs(tel.span())
    assert a["distlock.outcome"] == "lost"
    assert a["distlock.loss.reason"] == "release_rejected"


def test_a_grant_arriving_too_late_is_a_span_ended_at_the_grant(
    tel: Telemetry, r: redis.Redis
) -> None:
    late = LateGrant(ttl_ms=100)
    with Lock(r, prefix="otel", ttl_ms=late.ttl_ms, trace=late,
              observers=[tel.observer]) as locks:
        error = late.run(r, lambda: locks.run("late", lambda h: None))
    assert isinstance(error, LockLeaseLostError)
    span = tel.span()
    a = attrs(span)
    assert a["distlock.loss.reason"] == "granted_too_late"
    assert span.status.status_code is StatusCode.ERROR
    assert span.start_time is not None and span.end_time is not None
    # The wait (the whole TTL, and more) is the span; the grant is its last instant.
    assert span.end_time - span.start_time >= late.ttl_ms * 1_000_000
    assert abs(event_time(span, "distlock.acquired") - span.end_time) < SLACK_NS
    assert tel.value("distlock.losses", distlock_loss_reason="granted_too_late") == 1


def test_a_failed_renewal_is_a_span_event_and_not_a_loss(
    tel: Telemetry, redis_server: RedisServer
) -> None:
    client = FailsOneRenewal(port=redis_server.port)
    done, waiter = renewed_after_failure()
    with Lock(client, prefix="otel", ttl_ms=60_000, heartbeat_ms=20,
              observers=[tel.observer, waiter]) as locks:
        locks.run("flaky", lambda h: done.wait(WAIT))
    assert client.failed.is_set() and done.is_set()
    client.close()

    span = tel.span()
    assert span.status.status_code is StatusCode.UNSET
    a = attrs(span)
    assert a["distlock.outcome"] == "released"
    assert a["distlock.renewal.failures"] == 1 and a["distlock.renewals"] >= 1
    (failure,) = [e for e in span.events if e.name == "distlock.renewal.failed"]
    assert failure.attributes is not None
    assert failure.attributes["exception.type"] == "redis.exceptions.ConnectionError"
    assert failure.attributes["exception.message"] == "one renewal round trip fails"
    assert failure.attributes["distlock.renewal.consecutive_failures"] == 1
    assert span.start_time is not None and span.end_time is not None
    assert event_time(span, "distlock.acquired") <= failure.timestamp <= span.end_time
    assert tel.value(
        "distlock.renewal.failures", error_type="redis.exceptions.ConnectionError"
    ) == 1
    assert tel.value("distlock.renewal.duration") >= 1
    assert tel.value("distlock.losses") == 0


# -- asyncio ------------------------------------------------------------------------------


def test_asyncio_sections_are_traced_like_sync_ones(
    tel: Telemetry, redis_server: RedisServer, r: redis.Redis
) -> None:
    async def main() -> tuple[int, int]:
        client = aredis.Redis(port=redis_server.port)
        async with distlock.asyncio.Lock(client, prefix="aotel", observers=[tel.observer]) as locks:
            with tel.tracer.start_as_current_span("request") as request:
                async with locks.hold("ok") as h:
                    await asyncio.sleep(0.02)
                    fence = h.fence

            async def lose() -> None:
                async with locks.hold("gone", heartbeat_ms=QUICK_HEARTBEAT_MS) as h:
                    r.delete(h.key)
                    await asyncio.sleep(WAIT)  # cancelled at the loss

            with pytest.raises(LockLeaseLostError):
                await lose()
        await client.aclose()
        return fence, request.get_span_context().span_id

    fence, request_id = asyncio.run(main())
    by_key = {attrs(s)["distlock.key"]: s for s in tel.spans()}
    ok, gone = by_key["aotel:ok"], by_key["aotel:gone"]
    assert ok.parent is not None and ok.parent.span_id == request_id  # the task's context
    assert attrs(ok)["distlock.fence"] == fence
    assert attrs(ok)["distlock.outcome"] == "released"
    assert ok.end_time is not None and ok.end_time - event_time(ok, "distlock.acquired") >= 20e6
    assert gone.status.status_code is StatusCode.ERROR
    assert attrs(gone)["distlock.loss.reason"] == "renew_rejected"
    assert gone.parent is None  # no span was current there
    assert tel.value("distlock.acquisitions", distlock_acquire_outcome="acquired") == 2
    assert tel.value("distlock.held_sections") == 0


def test_asyncio_renewal_failure_and_refusal(tel: Telemetry, redis_server: RedisServer) -> None:
    async def main() -> None:
        client = AsyncFailsOneRenewal(port=redis_server.port)
        done = asyncio.Event()
        failed = False

        def waiter(event: Event) -> None:
            nonlocal failed
            if type(event).__name__ == "RenewFailed":
                failed = True
            elif isinstance(event, Renewed) and failed:
                done.set()

        async with distlock.asyncio.Lock(
            client, prefix="aotel", ttl_ms=60_000, heartbeat_ms=20,
            observers=[tel.observer, waiter],
        ) as locks, locks.hold("flaky"):
            await asyncio.wait_for(done.wait(), WAIT)
            assert await locks.acquire("flaky") is None
        await client.aclose()

    asyncio.run(main())
    a = attrs(tel.span())
    assert a["distlock.outcome"] == "released" and a["distlock.renewal.failures"] == 1
    assert tel.value(
        "distlock.renewal.failures", error_type="redis.exceptions.ConnectionError"
    ) == 1
    assert tel.value("distlock.acquisitions", distlock_acquire_outcome="not_acquired") == 1


# -- one observer, many locks -------------------------------------------------------------


def test_one_observer_serves_many_locks_of_both_drivers_from_many_threads(
    tel: Telemetry, r: redis.Redis, redis_server: RedisServer
) -> None:
    threads, rounds = 6, 15
    with Lock(r, prefix="one", observers=[tel.observer], heartbeat_ms=5) as first, \
            Lock(r, prefix="two", observers=[tel.observer]) as second:

        def work(n: int) -> None:
            for i in range(rounds):
                lock = first if i % 2 else second
                # Some sections outlive a heartbeat: renewals from the timer thread too.
                lock.run(f"{n}-{i}", sleep_for(0.01 if i % 5 == 0 else 0.0))

        workers = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
        for w in workers:
            w.start()

        async def also_async() -> None:
            client = aredis.Redis(port=redis_server.port)
            async with distlock.asyncio.Lock(client, prefix="three",
                                             observers=[tel.observer]) as third:
                await asyncio.gather(*(third.run(str(i), _quick) for i in range(10)))
            await client.aclose()

        asyncio.run(also_async())
        for w in workers:
            w.join(60)
            assert not w.is_alive()

    total = threads * rounds + 10
    spans = tel.spans()
    assert len(spans) == total
    keys = {attrs(s)["distlock.key"] for s in spans}
    assert len(keys) == total
    assert {k.split(":")[0] for k in keys} == {"one", "two", "three"}
    assert all(attrs(s)["distlock.outcome"] == "released" for s in spans)
    assert tel.value("distlock.acquisitions", distlock_acquire_outcome="acquired") == total
    assert tel.value("distlock.hold_time") == total
    assert tel.value("distlock.held_sections") == 0
    assert "open_sections=0" in repr(tel.observer)


def sleep_for(seconds: float) -> Callable[[LockHandle], None]:
    return lambda handle: time.sleep(seconds)


async def _quick(handle: distlock.asyncio.LockHandle) -> None:
    await asyncio.sleep(0)


def test_sections_never_released_are_bounded(r: redis.Redis) -> None:
    tel = Telemetry(max_open_sections=2)
    with Lock(r, prefix="otel", observers=[tel.observer]) as locks:
        handles = [locks.acquire(str(i)) for i in range(3)]
        assert all(h is not None for h in handles)
        (evicted,) = tel.spans()
        assert attrs(evicted)["distlock.key"] == "otel:0"
        assert attrs(evicted)["distlock.outcome"] == "untracked"
        assert tel.value("distlock.held_sections") == 2
        for h in handles:
            assert h is not None and h.release() is True
    assert [attrs(s)["distlock.outcome"] for s in tel.spans()] == [
        "untracked", "released", "released"
    ]
    assert tel.value("distlock.held_sections") == 0
    assert tel.value("distlock.hold_time") == 2  # an untracked section has no known end
    tel.shutdown()


def test_bad_options_are_rejected() -> None:
    for bad in (0, -1, True, 1.5):
        with pytest.raises(ValidationError):
            OpenTelemetryObserver(max_open_sections=bad)  # type: ignore[arg-type]


# -- events out of order, without Redis ---------------------------------------------------


def test_events_for_a_section_no_longer_open_only_count(tel: Telemetry) -> None:
    """Events of one section can reach observers from two threads, so out of order: a
    release answered "not ours" before the loss it follows, a loss after the release."""
    obs, t = tel.observer, now_ms()
    obs(Acquired("k:1", "X.1", t - 5, 7, 1, 1.0))
    obs(Released("k:1", "X.1", t, False))
    obs(Lost("k:1", "X.1", t, LossReason.DEADLINE_PASSED, 20.0))
    obs(Acquired("k:2", "X.2", t - 5, 8, 1, 1.0))
    obs(Released("k:2", "X.2", t, True))
    obs(Lost("k:2", "X.2", t, LossReason.DEADLINE_PASSED, 20.0))
    obs(Renewed("k:2", "X.2", t, 1.0, 100.0))
    first, second = sorted(tel.spans(), key=lambda s: attrs(s)["distlock.key"])
    assert first.status.status_code is StatusCode.ERROR
    assert attrs(first)["distlock.outcome"] == "lost"
    assert attrs(first)["error.type"] == "_OTHER"
    assert attrs(second)["distlock.outcome"] == "released"
    assert tel.value("distlock.losses", distlock_loss_reason="deadline_passed") == 2
    assert tel.value("distlock.renewal.duration") == 1
    assert tel.value("distlock.held_sections") == 0


def test_event_times_are_converted_from_the_monotonic_clock() -> None:
    for ago_ms in (0.0, 60_000.0):
        before = time.time_ns()
        got = OpenTelemetryObserver._epoch_ns(now_ms() - ago_ms)
        after = time.time_ns()
        ago_ns = round(ago_ms * 1_000_000)
        assert before - ago_ns - SLACK_NS <= got <= after - ago_ns + SLACK_NS


# -- without OpenTelemetry, and with the global providers ---------------------------------


def _python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True, text=True, timeout=120, check=False,
    )


def test_distlock_never_imports_opentelemetry_and_works_without_it(
    redis_server: RedisServer,
) -> None:
    proc = _python(
        """
        import sys

        class NoOpenTelemetry:
            def find_spec(self, name, path=None, target=None):
                if name == "opentelemetry" or name.startswith("opentelemetry."):
                    raise ModuleNotFoundError(f"No module named {name!r}", name=name)
                return None

        sys.meta_path.insert(0, NoOpenTelemetry())
        import distlock, distlock.asyncio, distlock.events
        assert not [m for m in sys.modules if m.startswith("opentelemetry")]
        with distlock.Lock(sys.argv[1], prefix="plain") as locks:
            assert locks.run("k", lambda h: h.fence) >= 1
        try:
            import distlock.otel
        except ImportError as exc:
            print(exc)
        else:
            raise AssertionError("distlock.otel imported without OpenTelemetry")
        """,
        redis_server.url,
    )
    assert proc.returncode == 0, proc.stderr
    assert "pip install 'distlock[otel]'" in proc.stdout


def test_the_global_providers_are_the_fallback(redis_server: RedisServer) -> None:
    # In a child process: the global providers can be set only once per process.
    proc = _python(
        """
        import sys
        from opentelemetry import metrics, trace
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        import distlock
        from distlock.otel import OpenTelemetryObserver

        observer = OpenTelemetryObserver()  # made before the providers are set
        spans, reader = InMemorySpanExporter(), InMemoryMetricReader()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(spans))
        trace.set_tracer_provider(provider)
        metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
        with distlock.Lock(sys.argv[1], prefix="global", observers=[observer]) as locks:
            locks.run("k", lambda h: None)
        (span,) = spans.get_finished_spans()
        assert span.attributes["distlock.key"] == "global:k", span.attributes
        names = {m.name for rm in reader.get_metrics_data().resource_metrics
                 for sm in rm.scope_metrics for m in sm.metrics}
        assert "distlock.acquisitions" in names, names
        print("ok")
        """,
        redis_server.url,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


# -- semaphore permits --------------------------------------------------------------------


def test_a_permit_span_has_no_fence(tel: Telemetry, redis_server: RedisServer) -> None:
    """A permit has no fence: its span and its grant event carry no ``distlock.fence``
    (the acquire script's "granted" 1 is not a fence a resource could check), while a
    lock's span, from the same observer, still does."""
    client = redis.Redis.from_url(redis_server.url)
    with distlock.Semaphore(client, limit=2, prefix="otel-sem",
                            observers=[tel.observer]) as sem:
        sem.run("k", lambda permit: None)
    with Lock(client, prefix="otel-lock", observers=[tel.observer]) as locks:
        fence = locks.run("k", lambda handle: handle.fence)
    lock_span, permit_span = sorted(tel.spans(), key=lambda s: attrs(s)["distlock.key"])
    assert attrs(lock_span)["distlock.key"] == "otel-lock:k"
    assert attrs(lock_span)["distlock.fence"] == fence
    a = attrs(permit_span)
    assert a["distlock.key"] == "otel-sem:k" and a["distlock.outcome"] == "released"
    assert "distlock.fence" not in a
    (granted,) = [e for e in permit_span.events if e.name == "distlock.acquired"]
    assert "distlock.fence" not in (granted.attributes or {})
    client.close()


def test_an_asyncio_permit_span_has_no_fence(tel: Telemetry, redis_server: RedisServer) -> None:
    async def main() -> None:
        client = aredis.Redis.from_url(redis_server.url)
        async with distlock.asyncio.Semaphore(
            client, limit=1, prefix="otel-asem", observers=[tel.observer]
        ) as sem:
            async def body(permit: object) -> None:
                return None

            await sem.run("k", body)
        await client.aclose()

    asyncio.run(main())
    (span,) = tel.spans()
    assert "distlock.fence" not in attrs(span)
    assert attrs(span)["distlock.outcome"] == "released"


def test_acquired_says_whether_it_is_a_permit(redis_server: RedisServer) -> None:
    seen: list[Acquired] = []

    def observe(event: Event) -> None:
        if isinstance(event, Acquired):
            seen.append(event)

    client = redis.Redis.from_url(redis_server.url)
    with distlock.Semaphore(client, limit=1, prefix="ev-sem", observers=[observe]) as sem:
        sem.run("k", lambda permit: None)
    with Lock(client, prefix="ev-lock", observers=[observe]) as locks:
        locks.run("k", lambda handle: None)
    assert [event.permit for event in seen] == [True, False]
    client.close()
