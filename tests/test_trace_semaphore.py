"""Recorded traces of permit sections, validated against ``spec/Semaphore.tla``.

A permit section takes the lock's actions and records the same transitions; its Acquire
record also carries the ``limit`` (that is how ``validate-trace`` tells it from a lock's)
and it records no fence.  The traces here are real runs of the lock's core against a real
Redis, recorded as permits would be (``_as_permits``): a lock key is a semaphore of limit
1, and two keys held at once are one id's two permits.  Runs of ``distlock.Semaphore``
itself are checked too where it exists.

Genuine traces must be accepted: a contended key as limit 1, two sections overlapping as
limit 2.  The same overlap as limit 1, a refusal turned into a grant, a reply before its
request and time running backwards must be rejected, at the event they corrupt.
"""

from __future__ import annotations

import asyncio
import functools
import heapq
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio as aredis
from redis.backoff import NoBackoff
from redis.retry import Retry

import distlock
import distlock.asyncio
from distlock._clock import now_ms
from distlock._protocol import S_WITHDRAW
from distlock.tools import tracecheck
from distlock.tools.chaos.processes import Child
from distlock.trace import REDIS_DOWN, NdjsonRecorder, read_events, write_events
from tests.failing_clients import losing
from tests.redis_server import RedisServer

needs_tlc = pytest.mark.skipif(
    not (tracecheck.spec_dir() / "SemaphoreTrace.tla").is_file() or shutil.which("java") is None,
    reason="needs spec/Semaphore.tla, spec/SemaphoreTrace.tla and java",
)

Event = dict[str, Any]


class Watch:
    """A trace callable that records, and lets the test wait for an event it describes."""

    def __init__(self, rec: NdjsonRecorder) -> None:
        self.rec = rec
        self.seen: list[Event] = []
        self.cond = threading.Condition()

    def __call__(self, event: Event) -> None:
        self.rec(event)
        with self.cond:
            self.seen.append(event)
            self.cond.notify_all()

    def wait_for(self, pred: Callable[[list[Event]], bool]) -> None:
        with self.cond:
            assert self.cond.wait_for(lambda: pred(self.seen), timeout=30)


def _index(events: list[Event], action: str, **where: Any) -> int:
    return next(
        n
        for n, e in enumerate(events)
        if e["action"] == action and all(e.get(k) == v for k, v in where.items())
    )


def _as_permits(events: list[Event], limit: int, key: str = "sem:x") -> list[Event]:
    """The lock's records as a permit section records them: the Acquire carries the
    limit, no event a fence, and every section is on the one id ``key``."""
    out = []
    for e in events:
        e = {**e, "fence": None}
        if e["action"] == "Acquire":
            e.update(limit=limit, key=key)
        out.append(e)
    return out


def _contended(server: RedisServer, path: Path) -> list[Event]:
    """A section holds through a renewal while a second one is refused, then granted once
    the first exits."""
    with NdjsonRecorder(path, append=False) as rec:
        watch = Watch(rec)
        with distlock.Lock(
            server.url, prefix="st-c", ttl_ms=400, retries=200, retry_delay_ms=10, trace=watch
        ) as locks:
            first: list[str] = []

            def contender() -> None:
                with locks.hold("x"):
                    pass

            with locks.hold("x"):
                first.append(str(watch.seen[0]["client"]))
                watch.wait_for(lambda seen: any(e["action"] == "RenewReply" for e in seen))
                thread = threading.Thread(target=contender, name="st-contender")
                thread.start()
                watch.wait_for(
                    lambda seen: any(
                        e["action"] == "AcquireReply"
                        and e["client"] != first[0]
                        and not e["granted"]
                        for e in seen
                    )
                )
            thread.join(30)
            assert not thread.is_alive()
    return read_events(path)


def _overlapping(server: RedisServer, path: Path) -> list[Event]:
    """Two sections in their bodies at once, on two keys, both ending ok."""
    with NdjsonRecorder(path, append=False) as rec:
        watch = Watch(rec)
        with distlock.Lock(server.url, prefix="st-o", ttl_ms=2000, trace=watch) as locks:
            both_in = threading.Barrier(2, timeout=30)

            def section(name: str) -> None:
                with locks.hold(name):
                    both_in.wait()

            threads = [threading.Thread(target=section, args=(n,)) for n in ("x", "y")]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(30)
                assert not thread.is_alive()
    events = read_events(path)
    assert [e["outcome"] for e in events if e["action"] == "ReleaseReply"] == ["ok", "ok"]
    return events


def _check_each(traces: list[list[Event]]) -> list[tracecheck.Verdict]:
    """One verdict per single-id trace, two TLC runs at a time (TLC uses one core)."""
    with ThreadPoolExecutor(2) as pool:
        return [v for (v,) in pool.map(tracecheck.check, traces)]


def test_a_permit_trace_is_told_by_its_limit() -> None:
    lock: list[Event] = [{"action": "Acquire", "client": "S1.1", "key": "k"}]
    assert not tracecheck.is_semaphore(lock)
    permits = [{**lock[0], "limit": 2}, {"action": "AcquireReply", "client": "S1.1"}]
    assert tracecheck.is_semaphore(permits)
    assert tracecheck.semaphore_limit(permits) == 2


def test_permit_sections_with_different_limits_are_refused() -> None:
    """Callers of one id may pass different limits; the spec has one Limit."""
    first: Event = {
        "action": "Acquire",
        "key": "sem:x",
        "ttl_ms": 400,
        "watch": True,
        "renew_every_ms": 100,
        "t": 0.0,
        "phase": "acquiring",
        "outcome": "none",
        "lost": False,
        "fence": None,
    }
    mixed = [{**first, "client": "a", "limit": 1}, {**first, "client": "b", "limit": 2}]
    with pytest.raises(tracecheck.TraceError, match="one positive limit"):
        tracecheck.check_key("sem:x", mixed)
    with pytest.raises(tracecheck.TraceError, match="one positive limit"):
        tracecheck.check_key("sem:x", [{**first, "client": "a", "limit": 0}])


def test_a_permit_model_checks_the_limit_and_no_fence() -> None:
    events = [
        {
            "action": "Acquire",
            "client": "a",
            "key": "sem:x",
            "ttl_ms": 400,
            "watch": True,
            "renew_every_ms": 100,
            "retries": 0,
            "limit": 3,
            "t": 0.0,
            "phase": "acquiring",
            "outcome": "none",
            "lost": False,
            "fence": None,
        }
    ]
    model = tracecheck.build_model(events, limit=3)
    assert model.module == "SemaphoreTrace"
    assert model.trace_spec is None  # the static spec/SemaphoreTrace.tla
    assert "    Limit = 3" in model.cfg.splitlines()
    # A permit section records no fence: the pre-pass checks time only.
    granted = {**events[0], "action": "AcquireReply", "granted": True, "t": 1.0}
    assert tracecheck.prepass([events[0], granted], fences=False) is None
    assert tracecheck.prepass([events[0], granted]) is not None


@needs_tlc
@pytest.mark.tlc
def test_permit_runs_are_behaviours_of_the_spec(redis_server: RedisServer, tmp_path: Path) -> None:
    contended = _as_permits(_contended(redis_server, tmp_path / "c.ndjson"), limit=1)
    overlapping = _as_permits(_overlapping(redis_server, tmp_path / "o.ndjson"), limit=2)
    assert any(e["action"] == "AcquireReply" and not e["granted"] for e in contended)
    for events in (contended, overlapping):
        assert tracecheck.is_semaphore(events)
        assert len(tracecheck.split_by_key(events)) == 1
    for v in _check_each([contended, overlapping]):
        assert v.accepted, v.describe() + "\n" + v.output[-2000:]


@needs_tlc
@pytest.mark.tlc
def test_corrupted_permit_traces_are_rejected(redis_server: RedisServer, tmp_path: Path) -> None:
    """Each corruption of a genuine trace is rejected at the event it corrupts."""
    good = _as_permits(_contended(redis_server, tmp_path / "c.ndjson"), limit=1)
    overlap_raw = _overlapping(redis_server, tmp_path / "o.ndjson")
    first = good[0]["client"]

    # 1. Two permits held at once under limit 1: the second grant is no behaviour.
    over = _as_permits(overlap_raw, limit=1)
    grants = [n for n, e in enumerate(over) if e["action"] == "AcquireReply"]
    # 2. The contender's first refusal turned into a grant while the holder had the permit.
    refusal = _index(good, "AcquireReply", granted=False)
    assert good[refusal]["client"] != first
    forged = [*good]
    forged[refusal] = {**good[refusal], "granted": True, "phase": "held"}
    # 3. The holder's renewal reply before its request.
    send = _index(good, "RenewSend", client=first)
    reply = next(n for n in range(send + 1, len(good)) if good[n]["client"] == first)
    assert good[reply]["action"] in ("RenewReply", "RenewFail")
    reordered = [*good]
    reordered[send], reordered[reply] = good[reply], good[send]
    # 4. Time runs backwards within a section.
    backwards = [*good]
    backwards[reply] = {**good[reply], "t": good[send]["t"] - 30}

    cases: list[tuple[str, list[Event], int | None, str | None]] = [
        ("1. two permits at once under limit 1", over, None, "TLC"),
        ("2. a refusal forged into a grant", forged, refusal, "TLC"),
        ("3. reply before request", reordered, send, "TLC"),
        ("4. time runs backwards", backwards, reply, "pre-pass"),
    ]
    verdicts = _check_each([trace for _, trace, _, _ in cases])
    for (name, _, index, by), v in zip(cases, verdicts, strict=True):
        assert not v.accepted, f"{name}: accepted"
        assert v.by == by, f"{name}: {v.describe()}"
        if index is not None:
            assert v.first_unexplained == index, f"{name}: {v.describe()}"
    # The overlap is told no later than the second grant: nothing before it is wrong.
    assert verdicts[0].first_unexplained is not None
    assert verdicts[0].first_unexplained >= max(grants), verdicts[0].describe()
    assert "time runs backwards" in str(verdicts[3].reason)

    # The command line: 0 for an accepted trace, 1 for a rejected one.
    good_path, bad_path = tmp_path / "good.ndjson", tmp_path / "bad.ndjson"
    write_events(good_path, good)
    write_events(bad_path, forged)
    for trace, status in ((good_path, 0), (bad_path, 1)):
        proc = subprocess.run(
            [sys.executable, "-m", "distlock", "validate-trace", str(trace)],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert proc.returncode == status, proc.stdout + proc.stderr
    assert "REJECTED" in proc.stdout and "AcquireReply" in proc.stdout


def _two_renewed_and_one_refused(server: RedisServer, path: Path) -> list[Event]:
    """Two permits of limit 2 held at once through renewals of both, and a third section
    refused meanwhile."""
    with NdjsonRecorder(path, append=False) as rec:
        watch = Watch(rec)
        with distlock.Semaphore(
            server.url, prefix="st-s", limit=2, ttl_ms=2000, trace=watch
        ) as sem:
            both_in, checked = threading.Barrier(3, timeout=30), threading.Event()

            def section() -> None:
                with sem.hold("x"):
                    both_in.wait()
                    assert checked.wait(30)

            threads = [threading.Thread(target=section) for _ in range(2)]
            for thread in threads:
                thread.start()
            try:
                both_in.wait()
                assert sem.acquire("x") is None
                watch.wait_for(
                    lambda seen: (
                        len({e["client"] for e in seen if e["action"] == "RenewReply"}) == 2
                    )
                )
            finally:
                checked.set()
                for thread in threads:
                    thread.join(30)
    return read_events(path)


def _lost_permit(server: RedisServer, path: Path) -> list[Event]:
    """Redis loses the permits (the key deleted) while a section holds one: a renewal
    finds it gone, the signal fires and the section ends lost."""
    with (  # noqa: PT012
        NdjsonRecorder(path, append=False) as rec,
        distlock.Semaphore(server.url, prefix="st-l", limit=2, ttl_ms=2000, trace=rec) as sem,
        pytest.raises(distlock.LockLeaseLostError),
        sem.hold("x") as permit,
    ):
        sem.client.delete(permit.key)
        assert permit.signal.wait(30)
    return read_events(path)


@needs_tlc
@pytest.mark.tlc
def test_semaphore_runs_are_behaviours_of_the_spec(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    both = _two_renewed_and_one_refused(redis_server, tmp_path / "both.ndjson")
    lost = _lost_permit(redis_server, tmp_path / "lost.ndjson")
    for events in (both, lost):
        assert tracecheck.is_semaphore(events)
        assert tracecheck.semaphore_limit(events) == 2
    assert any(e["action"] == "AcquireReply" and not e["granted"] for e in both)
    assert lost[-1]["outcome"] == "lost"
    for v in _check_each([both, lost]):
        assert v.accepted, v.describe() + "\n" + v.output[-2000:]

    # The same run with a refusal forged into a third grant under limit 2 is no behaviour.
    refusal = _index(both, "AcquireReply", granted=False)
    forged = [*both]
    forged[refusal] = {**both[refusal], "granted": True, "phase": "held"}
    (v,) = tracecheck.check(forged)
    assert not v.accepted
    assert (v.first_unexplained, v.by) == (refusal, "TLC"), v.describe()


def _waiting_permits(server: RedisServer, path: Path) -> list[Event]:
    """A permit held with ``heartbeat_ms=False``; a waiter that times out meanwhile; a
    waiter woken by the holder's release, then granted, holding without a heartbeat too
    (limit 1, sync driver, threads)."""
    with NdjsonRecorder(path, append=False) as rec:
        watch = Watch(rec)
        sem_cls = distlock.Semaphore
        with sem_cls(server.url, prefix="st-w", limit=1, ttl_ms=2000, trace=watch) as sem:
            held, timed_out = threading.Event(), threading.Event()

            def blocked(wait_ms: int) -> Callable[[list[Event]], bool]:
                def pred(seen: list[Event]) -> bool:
                    waiting = {
                        e["client"]
                        for e in seen
                        if e["action"] == "Acquire" and e.get("wait_ms") == wait_ms
                    }
                    return any(e["action"] == "Block" and e["client"] in waiting for e in seen)

                return pred

            def holder() -> None:
                with sem.hold("x", heartbeat_ms=False):
                    held.set()
                    assert timed_out.wait(30)
                    watch.wait_for(blocked(10_000))

            thread = threading.Thread(target=holder)
            thread.start()
            assert held.wait(30)
            assert sem.acquire("x", wait_ms=150) is None  # times out
            timed_out.set()
            with sem.hold("x", wait_ms=10_000, heartbeat_ms=False):
                pass
            thread.join(30)
            assert not thread.is_alive()
    return read_events(path)


@needs_tlc
@pytest.mark.tlc
def test_waiting_and_unrenewed_permits_are_checked(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    """A semaphore's waiting sections (its release wakes, never hands) and its
    heartbeat-off sections are behaviours of the spec; corrupted, they are not."""
    good = _waiting_permits(redis_server, tmp_path / "w.ndjson")
    assert tracecheck.is_semaphore(good)
    actions = {e["action"] for e in good}
    assert {"Block", "Wake"} <= actions
    assert any(e["action"] == "AcquireReply" and e["outcome"] == "not_acquired" for e in good)
    holder = good[0]["client"]
    assert good[0].get("watch") and good[0].get("renew_every_ms") is None
    assert "RenewSend" not in actions
    wake = _index(good, "Wake")
    waiter = good[wake]["client"]
    refusal = _index(good, "AcquireReply", client=waiter)
    assert good[refusal]["phase"] == "waiting"

    # 1. The waiter's refusal forged into a grant while the holder has the only permit.
    forged = [*good]
    forged[refusal] = {**good[refusal], "granted": True, "phase": "held"}
    # 2. The heartbeat-off holder's body runs three TTLs past its lease with no loss:
    #    everything from its BodyDone on happens 6 s later.
    done = _index(good, "BodyDone", client=holder)
    late = [{**e, "t": e["t"] + 6_000} if n >= done else e for n, e in enumerate(good)]
    # 3. The heartbeat-off holder renews: a renewal it never sent, answered.
    renew_at = done
    renewal = [
        *good[:renew_at],
        {
            **good[renew_at - 1],
            "client": holder,
            "action": "RenewSend",
            "phase": "held",
            "outcome": "none",
            "lost": False,
            "t": good[renew_at]["t"],
        },
        {
            **good[renew_at - 1],
            "client": holder,
            "action": "RenewReply",
            "ok": True,
            "phase": "held",
            "outcome": "none",
            "lost": False,
            "t": good[renew_at]["t"],
        },
        *good[renew_at:],
    ]
    renewal[renew_at]["deadline"] = good[done]["deadline"]
    renewal[renew_at + 1]["deadline"] = good[done]["deadline"]
    # 4. Time runs backwards: the Wake before the waiter's own Block.
    backwards = [*good]
    backwards[wake] = {**good[wake], "t": good[wake - 1]["t"] - 500}

    cases: list[tuple[str, list[Event], int | None, str | None]] = [
        ("genuine: heartbeat off, timed out, woken", good, None, None),
        ("1. a waiter granted while the permit is held", forged, refusal, "TLC"),
        ("2. a heartbeat-off body past its lease", late, done, "TLC"),
        ("3. a heartbeat-off section that renews", renewal, renew_at, "TLC"),
    ]
    verdicts = _check_each([trace for _, trace, _, _ in cases])
    for (name, _, index, by), v in zip(cases, verdicts, strict=True):
        if index is None:
            assert v.accepted, f"{name}: {v.describe()}\n{v.output[-2000:]}"
        else:
            assert not v.accepted, f"{name}: accepted"
            assert (v.first_unexplained, v.by) == (index, by), f"{name}: {v.describe()}"
    problem = tracecheck.prepass(backwards, fences=False)
    assert problem is not None and problem.index == wake
    assert "time runs backwards" in problem.reason


def _resumed_permit(server: RedisServer, path: Path) -> list[Event]:
    """An asyncio permit section whose body blocks the event loop for three TTLs and then
    runs on: the starvation ends mid-body, the lease timer fires then, and the body waits
    for that signal before it ends."""
    with NdjsonRecorder(path, append=False) as rec:

        async def section() -> None:
            async with distlock.asyncio.Semaphore(
                server.url, prefix="st-r", limit=2, ttl_ms=300, trace=rec
            ) as sem:
                with pytest.raises(distlock.LockLeaseLostError):  # noqa: PT012
                    async with sem.hold("x") as permit:
                        time.sleep(0.9)  # noqa: ASYNC251 (the fault: a loop starved 3 TTLs)
                        assert await permit.signal.wait()

        asyncio.run(section())
    return read_events(path)


@needs_tlc
@pytest.mark.tlc
def test_a_permit_starvation_that_ends_mid_body(redis_server: RedisServer, tmp_path: Path) -> None:
    """A permit body that starves the timers and then runs on is accepted (the trace's
    Resume); the same run with the loss removed, the body reported ok after its lease
    ran out during the starvation, is rejected where the body ends."""
    good = _resumed_permit(redis_server, tmp_path / "resumed.ndjson")
    timeout = _index(good, "LeaseTimeout")
    done = _index(good, "BodyDone")
    assert timeout < done and good[done]["lost"] is True
    forged = [
        {**e, "lost": False, "outcome": "ok" if e["action"] == "ReleaseReply" else e["outcome"]}
        if n > timeout
        else e
        for n, e in enumerate(good)
        if n != timeout
    ]
    forged[-1] = {**forged[-1], "ok": True}
    assert forged[-1]["action"] == "ReleaseReply"
    accepted, rejected = _check_each([good, forged])
    assert accepted.accepted, accepted.describe() + "\n" + accepted.output[-2000:]
    assert not rejected.accepted, "a permit body ok after its lease ran out: accepted"
    assert rejected.first_unexplained == done - 1, rejected.describe()


#: A connection on which the withdrawal never reaches Redis.
LosesWithdrawals = losing(S_WITHDRAW)


def _abandoned_place_run(server: RedisServer, path: Path) -> list[Event]:
    """Limit 1: a holder; a waiter cancelled while blocked whose withdrawal is lost; the
    holder releases, and a later waiter is refused on the free permit, the abandoned
    place being first in line, until that place ends (asyncio driver)."""
    with NdjsonRecorder(path, append=False) as rec:
        seen: list[Event] = []

        async def main() -> None:
            loop = asyncio.get_running_loop()
            changed = asyncio.Event()

            def watch(event: Event) -> None:
                rec(event)
                seen.append(event)
                loop.call_soon_threadsafe(changed.set)

            async def until(pred: Callable[[], bool]) -> None:
                while True:
                    changed.clear()
                    if pred():
                        return
                    await asyncio.wait_for(changed.wait(), 30)

            def blocked() -> bool:
                waiting = {
                    e["client"]
                    for e in seen
                    if e["action"] == "Acquire" and e.get("wait_ms") == 20_000
                }
                return any(e["action"] == "Block" and e["client"] in waiting for e in seen)

            pool = aredis.ConnectionPool.from_url(server.url, connection_class=LosesWithdrawals)
            lossy = aredis.Redis(connection_pool=pool)
            options: dict[str, Any] = {"prefix": "st-gone", "limit": 1, "ttl_ms": 1_000}
            async with (
                distlock.asyncio.Semaphore(server.url, trace=watch, **options) as sem,
                distlock.asyncio.Semaphore(lossy, trace=watch, **options) as lossy_sem,
            ):

                async def gone() -> None:
                    async with lossy_sem.hold("x", wait_ms=20_000):
                        raise AssertionError("the cancelled waiter never holds a permit")

                async with sem.hold("x"):
                    waiter = asyncio.create_task(gone())
                    await until(blocked)
                    waiter.cancel()
                    with pytest.raises(asyncio.CancelledError):
                        await waiter
                    await until(lambda: any(e["action"] == "WithdrawFail" for e in seen))
                later = await sem.acquire("x", wait_ms=10_000)
                assert later is not None
                await later.release()
            await lossy.aclose()
            await pool.aclose()

        asyncio.run(main())
    return read_events(path)


@needs_tlc
@pytest.mark.tlc
def test_a_waiter_behind_an_abandoned_place_is_a_behaviour(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    """A waiter whose withdrawal was lost leaves its place queued: the holder's release
    frees the only permit, and a later waiter's attempts are refused on it, the abandoned
    place being first in line, until that place ends."""
    events = _abandoned_place_run(redis_server, tmp_path / "gone.ndjson")
    assert tracecheck.is_semaphore(events)
    assert "WithdrawFail" in {e["action"] for e in events}
    later = max(n for n, e in enumerate(events) if e["action"] == "AcquireReply" and e["granted"])
    released = _index(events, "ReleaseReply")
    refused = [
        e
        for e in events[released:later]
        if e["action"] == "AcquireReply" and e["client"] == events[later]["client"]
    ]
    assert refused and not any(e["granted"] for e in refused)
    (verdict,) = tracecheck.check(events)
    assert verdict.accepted, f"{verdict.describe()}\n{verdict.output[-2000:]}"


def _restarted_empty(server: RedisServer, path: Path) -> list[Event]:
    """A permit holder renewing (limit 1) while Redis is killed; a caller's acquire (and
    its cleanup release) fails while no Redis runs, declared as such; Redis comes back
    empty, the holder's renewal finds its permit gone, and a third caller is granted."""
    client = redis.Redis(
        host=server.host, port=server.port, socket_timeout=1.0, retry=Retry(NoBackoff(), 0)
    )
    with NdjsonRecorder(path, append=False) as rec:
        watch = Watch(rec)
        sem = distlock.Semaphore(client, prefix="st-r", limit=1, ttl_ms=1000, trace=watch)
        holding, restarted = threading.Event(), threading.Event()
        lost: list[BaseException] = []

        def holder() -> None:
            try:
                with sem.hold("x") as permit:
                    holding.set()
                    assert restarted.wait(30)
                    assert permit.signal.wait(30)
            except distlock.LockLeaseLostError as exc:
                lost.append(exc)

        thread = threading.Thread(target=holder, name="st-restart-holder")
        thread.start()
        assert holding.wait(30)
        watch.wait_for(lambda seen: any(e["action"] == "RenewReply" for e in seen))
        rec.declare_data_loss(now_ms())
        server.kill()  # returns once the process has exited
        since = now_ms()
        with pytest.raises(redis.ConnectionError):
            sem.acquire("x")
        rec.declare_redis_down(since, now_ms())
        server.start()
        restarted.set()
        thread.join(30)
        assert not thread.is_alive() and lost
        permit = sem.acquire("x")
        assert permit is not None
        permit.release()
        sem.close()
    client.close()
    return read_events(path)


@needs_tlc
@pytest.mark.tlc
def test_an_acquire_failed_while_redis_was_down_never_ran(
    fresh_redis: RedisServer, tmp_path: Path
) -> None:
    """A round trip sent and failed while no Redis ran is no fault and takes no permit:
    the run is a behaviour, and the same run with the last caller refused is not (only
    the failed acquire could have held the one permit), though it would be if the
    stretch without Redis were not declared (that acquire could then have run late)."""
    events = _restarted_empty(fresh_redis, tmp_path / "restart.ndjson")
    assert tracecheck.is_semaphore(events)
    # the failed acquire and its cleanup release, at least (renewals may fail there too)
    assert tracecheck.never_ran_failures(events) >= 2
    (v,) = tracecheck.check(events)
    assert v.accepted, v.describe() + "\n" + v.output[-2000:]

    last = [e for e in events if e["action"] == "AcquireReply"][-1]
    refused = events.index(last)
    forged = [
        *events[:refused],
        {**last, "granted": False, "phase": "done", "outcome": "not_acquired", "deadline": None},
    ]
    undeclared = [e for e in forged if e["action"] != REDIS_DOWN]
    v, w = _check_each([forged, undeclared])
    assert not v.accepted
    assert (v.first_unexplained, v.by) == (refused, "TLC"), v.describe()
    assert w.accepted, w.describe() + "\n" + w.output[-2000:]


def test_only_round_trips_within_a_declared_stretch_never_ran() -> None:
    """Sent at or after the stretch's start and failed at or before its end: never ran;
    sent before it, or failed after it, may have.  A declared loss comes between its
    declaration and the start of the next stretch; undeclared, or with no stretch after
    it, anywhere."""

    def attempt(client: str, sent: float, failed: float) -> list[Event]:
        base = {"client": client, "key": "k", "ttl_ms": 100, "limit": 1}
        return [
            {**base, "action": "Acquire", "t": sent},
            {**base, "action": "AcquireFail", "t": failed},
        ]

    loss = {"action": "RedisLostData", "client": "redis", "t": 5.0}
    down = {"action": REDIS_DOWN, "client": "redis", "t": 50.0, "since": 10.0}
    inside = attempt("a", 10.0, 50.0)
    before = attempt("b", 9.0, 20.0)
    after = attempt("c", 20.0, 51.0)
    events = [loss, *before, *inside, *after, down]
    assert tracecheck.never_ran_failures(events) == 1
    assert tracecheck.never_ran_failures([e for e in events if e is not down]) == 0
    assert tracecheck.loss_windows(events) == [(5.0, 10.0)]
    assert tracecheck.loss_windows([e for e in events if e is not down]) is None
    assert tracecheck.loss_windows([e for e in events if e is not loss]) is None


def _killed_beside_a_live_one(server: RedisServer, path: Path) -> list[Event]:
    """Limit 2: a live holder (TTL 4 s, renewing every 250 ms) and a holder process (TTL
    1 s) SIGKILLed after a renewal; a caller polls (fail fast) until the dead permit's own
    expiry frees it, and tries once more well after it, while the live one still renews.
    The holder process's events (recorded up to the kill) are merged into the trace."""
    part = path.with_suffix(".part")
    with NdjsonRecorder(path, append=False) as rec:
        watch = Watch(rec)
        live = distlock.Semaphore(
            server.url, prefix="st-k", limit=2, ttl_ms=4000, heartbeat_ms=250, trace=watch
        )
        poller = distlock.Semaphore(server.url, prefix="st-k", limit=2, ttl_ms=1000, trace=watch)
        holding, stop = threading.Event(), threading.Event()

        def hold_live() -> None:
            with live.hold("x", retries=0):
                holding.set()
                assert stop.wait(30)

        def attempt() -> bool:
            try:
                with poller.hold("x", retries=0):
                    return True
            except distlock.LockNotAcquiredError:
                return False

        thread = threading.Thread(target=hold_live, name="st-live-holder")
        thread.start()
        child = Child("hold-semaphore", server.url, "st-k", "x", 1000, "2", str(part))
        try:
            assert holding.wait(30)
            child.expect("ACQUIRED", 30)
            child.expect("RENEWED", 30)
            child.kill()
            renewed = sum(1 for e in watch.seen if e["action"] == "RenewReply")
            refused = 0
            while not attempt():
                refused += 1
                assert refused < 400
                time.sleep(0.02)  # a poll's pace, not a wait for anything
            assert refused > 0
            # Well past the dead permit's expiry on the live holder's own beat: ten more
            # renewals (2.5 s), two and a half times the dead permit's TTL.
            watch.wait_for(
                lambda seen: sum(1 for e in seen if e["action"] == "RenewReply") >= renewed + 10
            )
            assert attempt()
        finally:
            stop.set()
            thread.join(30)
            child.close()
            live.close()
            poller.close()
    dead = [{**e, "client": f"dead:{e['client']}"} for e in read_events(part)]
    part.unlink()
    return list(heapq.merge(read_events(path), dead, key=lambda e: e["t"]))


@needs_tlc
@pytest.mark.tlc
def test_a_holder_killed_beside_a_live_one_with_its_own_ttl(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    """Permits with TTLs of their own (4 s beside 1 s): the dead holder is a section that
    stops, its permit lapsing at its own expiry however often the live one renews.  The
    run is a behaviour (its pollers' refused sections condensed); a refused poll after the
    kill forged into a grant is not (three permits under limit 2), and neither is the
    grant well past the dead permit's expiry forged into a refusal (only the live permit
    is left: a renewal re-dating the dead one is what would refuse it)."""
    events = tracecheck.condense(_killed_beside_a_live_one(redis_server, tmp_path / "k.ndjson"))
    assert {e["ttl_ms"] for e in events if e["action"] == "Acquire"} == {1000, 4000}
    dead_last = max(n for n, e in enumerate(events) if str(e["client"]).startswith("dead:"))
    assert events[dead_last]["phase"] == "held"  # stopped mid-section: killed
    refusals = [
        n
        for n, e in enumerate(events)
        if n > dead_last and e["action"] == "AcquireReply" and e.get("granted") is False
    ]
    late = max(n for n, e in enumerate(events) if e["action"] == "AcquireReply" and e["granted"])
    assert refusals and late > refusals[-1]
    early = refusals[0]
    forged_grant = [
        *events[:early],
        {**events[early], "granted": True, "phase": "held", "outcome": "none"},
    ]
    forged_refusal = [
        *events[:late],
        {**events[late], "granted": False, "phase": "done", "outcome": "not_acquired",
         "deadline": None},
    ]
    checks = [
        functools.partial(tracecheck.check, trace, ticks=4)
        for trace in (events, forged_grant, forged_refusal)
    ]
    with ThreadPoolExecutor(2) as pool:
        (v,), (g,), (r,) = pool.map(lambda check: check(), checks)
    assert v.accepted, v.describe() + "\n" + v.output[-2000:]
    assert not g.accepted
    assert (g.first_unexplained, g.by) == (early, "TLC"), g.describe()
    assert not r.accepted
    assert (r.first_unexplained, r.by) == (late, "TLC"), r.describe()


def test_a_round_trip_failing_soon_after_the_stretch_never_ran() -> None:
    """Sent after the old process exited and failed after the stretch's end, but sooner
    after it than the clients' socket timeout and before the next declaration: only the
    new process could have run it, and a request that reached it is answered (or fails
    by that timeout), so it never ran.  Not so without the socket timeout, failed later,
    sent before the stretch, or failed after the next declaration (the new process may
    have been killed with the request in it)."""

    def attempt(client: str, sent: float, failed: float) -> list[Event]:
        base = {"client": client, "key": "k", "ttl_ms": 100, "limit": 1}
        return [
            {**base, "action": "Acquire", "t": sent},
            {**base, "action": "AcquireFail", "t": failed},
        ]

    down = {"action": REDIS_DOWN, "client": "redis", "t": 50.0, "since": 10.0}
    soon = attempt("a", 40.0, 60.0)
    after = attempt("b", 55.0, 70.0)
    late = attempt("c", 40.0, 1051.0)
    before = attempt("d", 9.0, 60.0)
    events = [*before, *soon, down, *after, *late]
    assert tracecheck.never_ran_failures(events, hang_after_ms=1000.0) == 2
    assert tracecheck.never_ran_failures(events) == 0
    # the next declaration (a data loss: Redis killed again) ends the stretch's grace
    loss = {"action": "RedisLostData", "client": "redis", "t": 65.0}
    events = [*before, *soon, down, loss, *after, *late]
    assert tracecheck.never_ran_failures(events, hang_after_ms=1000.0) == 1
