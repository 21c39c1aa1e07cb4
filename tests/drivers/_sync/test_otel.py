# Generated from tests/drivers/_async/test_otel.py by tools/unasync.py: do not edit.
"""distlock.otel on both drivers against a real redis-server, read back through the SDK's
in-memory exporters: a section is a span (under the caller's span: the thread's context,
or the task's), refusals and waits are counted, losses and renewal failures are on the
span.  (The observer on its own, and one observer shared by both drivers at once:
``tests/test_otel.py``.)"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from opentelemetry.trace import SpanKind, StatusCode

from distlock import LockLeaseLostError, LockNotAcquiredError, LossReason
from distlock import Lock, LockHandle, Semaphore
from distlock.events import Acquired, Event, Renewed
from tests.redis_server import RedisServer
from tests.telemetry import SLACK_NS, Telemetry, attrs, event_time

from . import concurrency
from .concurrency import UNCANCELLED, FailsOneRenewal, client_for, signalled, sleep, spawn
from .test_lock import LateGrant

QUICK_HEARTBEAT_MS = 100


@pytest.fixture
def tel() -> Iterator[Telemetry]:
    telemetry = Telemetry()
    yield telemetry
    telemetry.shutdown()


def nothing(h: object) -> None:
    return None


def renewed_after_failure() -> tuple[concurrency.Event, Any]:
    """An observer that sets the event at the first confirmed renewal after a failure."""
    done = concurrency.Event()
    failed = concurrency.Event()

    def observer(event: Event) -> None:
        if type(event).__name__ == "RenewFailed":
            failed.set()
        elif isinstance(event, Renewed) and failed.is_set():
            done.set()

    return done, observer


# -- a completed section ------------------------------------------------------------------


def test_a_completed_section_is_one_span_under_the_callers_span(
    tel: Telemetry, redis_server: RedisServer
) -> None:
    seen: dict[str, Any] = {}

    def body(h: LockHandle) -> None:
        seen["fence"], seen["key"] = h.fence, h.key
        sleep(0.05)

    before = time.time_ns()
    locks = Lock(client_for(redis_server), prefix="otel", observers=[tel.observer])
    with locks:
        with tel.tracer.start_as_current_span("request") as request:
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


def test_metrics_follow_the_semantic_convention_style(
    tel: Telemetry, redis_server: RedisServer
) -> None:
    with Lock(client_for(redis_server), prefix="otel", observers=[tel.observer]) as locks:
        locks.run("k", nothing)
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


def test_key_attribute_and_constant_attributes_are_opt_in(
    redis_server: RedisServer,
) -> None:
    tel = Telemetry(key_attribute=True, attributes={"distlock.prefix": "otel"})
    with Lock(client_for(redis_server), prefix="otel", observers=[tel.observer]) as locks:
        locks.run("a", nothing)
        locks.run("b", nothing)
    points = tel.all_point_attributes()
    assert points and all(p["distlock.prefix"] == "otel" for p in points)
    assert all(p["distlock.key"] in ("otel:a", "otel:b") for p in points)
    assert tel.value("distlock.acquisitions", distlock_key="otel:a") == 1
    assert {attrs(s)["distlock.prefix"] for s in tel.spans()} == {"otel"}
    tel.shutdown()


# -- refusals and waits -------------------------------------------------------------------


def test_a_refused_acquisition_is_counted_not_traced(
    tel: Telemetry, redis_server: RedisServer
) -> None:
    client = client_for(redis_server)
    with Lock(client, prefix="otel") as holder, \
            Lock(client, prefix="otel", observers=[tel.observer]) as locks:
        held = holder.acquire("busy")
        assert held is not None
        assert locks.acquire("busy") is None
        with pytest.raises(LockNotAcquiredError):
            locks.run("busy", nothing, retries=2, retry_delay_ms=1)
        assert held.release() is True
    assert tel.spans() == []
    assert tel.value("distlock.acquisitions", distlock_acquire_outcome="not_acquired") == 2
    assert tel.value("distlock.acquisitions", distlock_acquire_outcome="acquired") == 0
    assert tel.value("distlock.acquire.wait_time") == 0
    assert tel.value("distlock.held_sections") == 0


def test_a_contended_grant_starts_the_span_at_the_first_attempt(
    tel: Telemetry, redis_server: RedisServer
) -> None:
    refused = concurrency.Event()

    def trace(t: dict[str, Any]) -> None:
        if t["action"] == "AcquireReply" and not t["granted"]:
            refused.set()

    client = client_for(redis_server)
    with Lock(client, prefix="otel") as holder, \
            Lock(client, prefix="otel", observers=[tel.observer], trace=trace) as locks:
        held = holder.acquire("queue")
        assert held is not None
        waiter = spawn(locks.acquire, "queue", retries=1000, retry_delay_ms=20)
        refused.wait()
        held.release()
        handle = waiter.result()
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


def test_a_rejected_renewal_ends_the_span_as_lost(
    tel: Telemetry, redis_server: RedisServer, r: redis.Redis
) -> None:
    def body(h: LockHandle) -> None:
        r.delete(h.key)
        signalled(h.signal)  # the next renewal finds the key gone

    client = client_for(redis_server)
    with Lock(client, prefix="otel", ttl_ms=10_000, observers=[tel.observer]) as locks:
        with pytest.raises(LockLeaseLostError) as info:
            locks.run("gone", body, heartbeat_ms=QUICK_HEARTBEAT_MS, **UNCANCELLED)
    assert info.value.reason is LossReason.RENEW_REJECTED

    span = tel.span()  # the release that followed the loss makes no second span
    assert span.parent is None  # no span was current there
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


def test_a_rejected_extend_ends_a_manual_handles_span(
    tel: Telemetry, redis_server: RedisServer, r: redis.Redis
) -> None:
    with Lock(client_for(redis_server), prefix="otel", observers=[tel.observer]) as locks:
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


def test_a_taken_over_key_is_lost_at_the_release(
    tel: Telemetry, redis_server: RedisServer, r: redis.Redis
) -> None:
    def body(h: LockHandle) -> None:
        r.set(h.key, "someone-else")

    with Lock(client_for(redis_server), prefix="otel", observers=[tel.observer]) as locks:
        with pytest.raises(LockLeaseLostError):
            locks.run("stolen", body)
    a = attrs(tel.span())
    assert a["distlock.outcome"] == "lost"
    assert a["distlock.loss.reason"] == "release_rejected"


def test_a_grant_arriving_too_late_is_a_span_ended_at_the_grant(
    tel: Telemetry, redis_server: RedisServer, r: redis.Redis
) -> None:
    late = LateGrant(ttl_ms=100)
    with Lock(client_for(redis_server), prefix="otel", ttl_ms=late.ttl_ms, trace=late,
                    observers=[tel.observer]) as locks:
        error = late.run(r, lambda: locks.run("late", nothing))
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

    def body(h: LockHandle) -> None:
        done.wait()

    with Lock(client, prefix="otel", ttl_ms=60_000, heartbeat_ms=20,
                    observers=[tel.observer, waiter]) as locks:
        locks.run("flaky", body)
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


def test_a_renewal_failure_under_a_hold_and_a_refusal_meanwhile(
    tel: Telemetry, redis_server: RedisServer
) -> None:
    client = FailsOneRenewal(port=redis_server.port)
    done, waiter = renewed_after_failure()
    locks = Lock(
        client, prefix="aotel", ttl_ms=60_000, heartbeat_ms=20, observers=[tel.observer, waiter]
    )
    with locks, locks.hold("flaky"):
        done.wait()
        assert locks.acquire("flaky") is None
    client.close()
    a = attrs(tel.span())
    assert a["distlock.outcome"] == "released" and a["distlock.renewal.failures"] == 1
    assert tel.value(
        "distlock.renewal.failures", error_type="redis.exceptions.ConnectionError"
    ) == 1
    assert tel.value("distlock.acquisitions", distlock_acquire_outcome="not_acquired") == 1


# -- bounds --------------------------------------------------------------------------------


def test_sections_never_released_are_bounded(redis_server: RedisServer) -> None:
    tel = Telemetry(max_open_sections=2)
    with Lock(client_for(redis_server), prefix="otel", observers=[tel.observer]) as locks:
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


# -- semaphore permits --------------------------------------------------------------------


def test_a_permit_span_has_no_fence(tel: Telemetry, redis_server: RedisServer) -> None:
    """A permit has no fence: its span and its grant event carry no ``distlock.fence``
    (the acquire script's "granted" 1 is not a fence a resource could check), while a
    lock's span, from the same observer, still does."""

    def fence_of(handle: LockHandle) -> int:
        return handle.fence

    client = client_for(redis_server)
    with Semaphore(client, limit=2, prefix="otel-sem", observers=[tel.observer]) as sem:
        sem.run("k", nothing)
    with Lock(client, prefix="otel-lock", observers=[tel.observer]) as locks:
        fence = locks.run("k", fence_of)
    lock_span, permit_span = sorted(tel.spans(), key=lambda s: attrs(s)["distlock.key"])
    assert attrs(lock_span)["distlock.key"] == "otel-lock:k"
    assert attrs(lock_span)["distlock.fence"] == fence
    a = attrs(permit_span)
    assert a["distlock.key"] == "otel-sem:k" and a["distlock.outcome"] == "released"
    assert "distlock.fence" not in a
    (granted,) = [e for e in permit_span.events if e.name == "distlock.acquired"]
    assert "distlock.fence" not in (granted.attributes or {})
    client.close()


def test_acquired_says_whether_it_is_a_permit(redis_server: RedisServer) -> None:
    seen: list[Acquired] = []

    def observe(event: Event) -> None:
        if isinstance(event, Acquired):
            seen.append(event)

    client = client_for(redis_server)
    with Semaphore(client, limit=1, prefix="ev-sem", observers=[observe]) as sem:
        sem.run("k", nothing)
    with Lock(client, prefix="ev-lock", observers=[observe]) as locks:
        locks.run("k", nothing)
    assert [event.permit for event in seen] == [True, False]
    client.close()
