"""distlock.otel's observer on its own (events out of order, its clock, its options), one
observer serving many locks of both drivers at once, and the package without
OpenTelemetry or with the global providers; read back through the SDK's in-memory
exporters.  The spans and metrics of each driver's sections, on both drivers, are in
``tests/drivers/_async/test_otel.py``."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator

import pytest
import redis
import redis.asyncio as aredis
from opentelemetry.trace import StatusCode

import distlock.asyncio
from distlock import Lock, LockHandle, LossReason, ValidationError
from distlock._clock import now_ms
from distlock.events import Acquired, Lost, Released, Renewed
from distlock.otel import OpenTelemetryObserver
from tests.redis_server import RedisServer
from tests.telemetry import SLACK_NS, Telemetry, attrs


@pytest.fixture
def tel() -> Iterator[Telemetry]:
    telemetry = Telemetry()
    yield telemetry
    telemetry.shutdown()


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
