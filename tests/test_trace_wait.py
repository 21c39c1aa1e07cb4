"""Recorded traces of waiting sections (``wait_ms``), validated against the lock's spec.

A waiting section records, beside the lock's actions, its blocks (``Block``), their ends
(``Wake``, with the fence of a key a release handed over) and its withdrawal
(``Withdraw``, ``WithdrawReply``, ``WithdrawFail``).  The trace model takes them as client
steps whose effect on the lease is the lock's: a refused attempt waits, a release may hand
the key to a waiter, and a Wake with a fence is a grant counted from the last attempt's
send, with the short handed TTL.

Real runs of both drivers against a real Redis must be accepted: a waiter handed the key,
a waiter that times out, a waiter cancelled while blocked (it withdraws).  Corrupted
traces must be rejected at the event they corrupt: a handed fence not above an earlier
grant's, time running backwards, a body entered without a grant, a key handed over before
its holder released it, a deadline forged later than any reply allows.
"""

from __future__ import annotations

import asyncio
import shutil
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aredis

import distlock
import distlock.asyncio
from distlock._protocol import WITHDRAW
from distlock.tools import tracecheck
from distlock.trace import NdjsonRecorder, read_events
from tests.failing_clients import losing
from tests.redis_server import RedisServer

needs_tlc = pytest.mark.skipif(
    not (tracecheck.spec_dir() / "DistLock.tla").is_file() or shutil.which("java") is None,
    reason="needs spec/DistLock.tla and java",
)

Event = dict[str, Any]


class Watch:
    """A trace callable that records, and lets the test wait for an event it describes."""

    def __init__(self, rec: NdjsonRecorder) -> None:
        self.rec = rec
        self.seen: list[Event] = []
        self.cond = threading.Condition()
        #: Called after each event (the asyncio run wakes its task with it).
        self.notify: Callable[[], None] = lambda: None

    def __call__(self, event: Event) -> None:
        self.rec(event)
        with self.cond:
            self.seen.append(event)
            self.cond.notify_all()
        self.notify()

    def blocked(self, wait_ms: int) -> Callable[[], bool]:
        """Whether a section waiting ``wait_ms`` has blocked."""

        def pred() -> bool:
            waiting = {
                e["client"]
                for e in self.seen
                if e["action"] == "Acquire" and e.get("wait_ms") == wait_ms
            }
            return any(e["action"] == "Block" and e["client"] in waiting for e in self.seen)

        return pred

    def on_loop(self) -> Callable[[Callable[[], bool]], Awaitable[None]]:
        """For the running event loop: wake it at each event, and return ``until(pred)``,
        which waits (without blocking the loop) for an event that makes ``pred`` true."""
        loop = asyncio.get_running_loop()
        changed = asyncio.Event()

        def notify() -> None:
            loop.call_soon_threadsafe(changed.set)

        self.notify = notify

        async def until(pred: Callable[[], bool]) -> None:
            while True:
                changed.clear()
                if pred():
                    return
                await asyncio.wait_for(changed.wait(), 30)

        return until

    def wait_for(self, pred: Callable[[], bool]) -> None:
        with self.cond:
            assert self.cond.wait_for(pred, timeout=30)


def _sync_run(server: RedisServer, path: Path) -> list[Event]:
    """A holder; a waiter that times out while it holds; a waiter handed the key at its
    release (sync driver, threads)."""
    with NdjsonRecorder(path, append=False) as rec:
        watch = Watch(rec)
        held, timed_out = threading.Event(), threading.Event()
        with distlock.Lock(server.url, prefix="trw-sync", ttl_ms=400, trace=watch) as locks:

            def holder() -> None:
                def body(handle: distlock.LockHandle) -> None:
                    held.set()
                    assert timed_out.wait(30)
                    # the handed waiter blocks before the release
                    watch.wait_for(watch.blocked(10_000))

                locks.run("k", body)

            thread = threading.Thread(target=holder)
            thread.start()
            assert held.wait(30)
            assert locks.acquire("k", wait_ms=150) is None  # times out
            timed_out.set()
            handed = locks.run("k", lambda handle: handle.fence, wait_ms=10_000)
            thread.join(30)
            assert handed is not None
    return read_events(path)


def _async_run(server: RedisServer, path: Path) -> list[Event]:
    """A manual holder; a waiter cancelled while blocked (it withdraws); a waiter handed
    the key at the holder's release (asyncio driver, tasks)."""
    with NdjsonRecorder(path, append=False) as rec:
        watch = Watch(rec)

        async def main() -> None:
            until = watch.on_loop()

            async with distlock.asyncio.Lock(
                # a manual holder is not renewed: a TTL that outlasts the run
                server.url,
                prefix="trw-aio",
                ttl_ms=2_000,
                trace=watch,
            ) as locks:
                holder = await locks.acquire("k")
                assert holder is not None
                cancelled = asyncio.create_task(locks.acquire("k", wait_ms=20_000))
                await until(watch.blocked(20_000))
                cancelled.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await cancelled
                await until(lambda: any(e["action"] == "Withdraw" for e in watch.seen))

                async def waiter() -> int:
                    async with locks.hold("k", wait_ms=10_000) as handle:
                        return handle.fence

                handed = asyncio.create_task(waiter())
                await until(watch.blocked(10_000))
                await holder.release()
                assert await handed > holder.fence
            watch.notify = lambda: None  # the loop is about to close

        asyncio.run(main())
    return read_events(path)


#: A connection on which the withdrawal never reaches Redis.
LosesWithdrawals = losing(WITHDRAW)


def _abandoned_place_run(server: RedisServer, path: Path) -> list[Event]:
    """A waiter cancelled while blocked whose withdrawal is lost: the holder's release
    hands the key to its place, which nobody takes, and a later waiter is refused until
    that handed key lapses (asyncio driver)."""
    with NdjsonRecorder(path, append=False) as rec:
        watch = Watch(rec)

        async def main() -> None:
            until = watch.on_loop()

            pool = aredis.ConnectionPool.from_url(server.url, connection_class=LosesWithdrawals)
            lossy = aredis.Redis(connection_pool=pool)
            options: dict[str, Any] = {"prefix": "trw-gone", "ttl_ms": 1_000, "trace": watch}
            async with (
                distlock.asyncio.Lock(server.url, **options) as locks,
                distlock.asyncio.Lock(lossy, **options) as lossy_locks,
            ):

                async def gone() -> None:
                    async with lossy_locks.hold("k", wait_ms=20_000):
                        raise AssertionError("the cancelled waiter never holds the key")

                async with locks.hold("k") as holder:
                    waiter = asyncio.create_task(gone())
                    await until(watch.blocked(20_000))
                    waiter.cancel()
                    with pytest.raises(asyncio.CancelledError):
                        await waiter
                    await until(lambda: any(e["action"] == "WithdrawFail" for e in watch.seen))
                later = await locks.acquire("k", wait_ms=10_000)
                assert later is not None
                # The abandoned place took a fence in between (each fence one above the
                # last, or more: the floor of Redis's clock, lib/fence.lua).
                assert later.fence >= holder.fence + 2
                await later.release()
            await lossy.aclose()
            await pool.aclose()
            watch.notify = lambda: None  # the loop is about to close

        asyncio.run(main())
    return read_events(path)


def _first(events: list[Event], action: str, **where: Any) -> int:
    return next(
        n
        for n, e in enumerate(events)
        if e["action"] == action and all(e.get(k) == v for k, v in where.items())
    )


def _handed_wake(events: list[Event]) -> int:
    return next(
        n for n, e in enumerate(events) if e["action"] == "Wake" and e.get("fence") is not None
    )


def _check_each(traces: list[list[Event]]) -> list[tracecheck.Verdict]:
    """One verdict per single-key trace, two TLC runs at a time (TLC uses one core)."""
    with ThreadPoolExecutor(2) as pool:
        return [v for (v,) in pool.map(tracecheck.check, traces)]


@needs_tlc
@pytest.mark.tlc
def test_waiting_traces_are_behaviours_and_corrupted_ones_are_rejected(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    sync = _sync_run(redis_server, tmp_path / "sync.ndjson")
    aio = _async_run(redis_server, tmp_path / "aio.ndjson")
    # What the runs must show for the check to mean anything.
    assert any(e["action"] == "AcquireReply" and e["outcome"] == "not_acquired" for e in sync)
    assert "Withdraw" in {e["action"] for e in aio}
    wake = _handed_wake(sync)
    waiter = sync[wake]["client"]
    grant = _first(sync, "AcquireReply", granted=True)
    assert sync[wake]["fence"] > sync[grant]["fence"]
    release = _first(sync, "Release", client=sync[grant]["client"])
    assert release < wake

    # A body entered without a grant: the Wake hands nothing over, the body runs anyway.
    ungranted = [
        {**e, "fence": None, "deadline": 0.0, **({"phase": "waiting"} if n == wake else {})}
        if e["client"] == waiter and n >= wake
        else e
        for n, e in enumerate(sync)
    ]
    # The key handed over before its holder released it: the Wake moved before Release.
    early = [
        *sync[:release],
        sync[wake],
        *(e for n, e in enumerate(sync[release:], release) if n != wake),
    ]
    early[release] = {**early[release], "t": sync[release - 1]["t"]}

    # A history the run could have had: the waiter's attempt refused at Redis just before
    # the release ran, and the refusal's reply (and all the waiter did next) back after
    # the release's.
    refusal = max(
        n
        for n in range(wake)
        if sync[n]["client"] == waiter and sync[n]["action"] == "AcquireReply"
    )
    reply = _first(sync, "ReleaseReply", client=sync[grant]["client"])
    assert refusal < release < reply
    moved = [n for n in range(refusal, len(sync)) if sync[n]["client"] == waiter]
    late_refusal = [
        *(e for n, e in enumerate(sync[: reply + 1]) if n not in moved),
        *({**sync[n], "t": max(sync[n]["t"], sync[reply]["t"])} for n in moved),
        *(e for n, e in enumerate(sync[reply + 1 :], reply + 1) if n not in moved),
    ]

    cases: list[tuple[str, list[Event], int | None]] = [
        ("genuine sync: timed out, handed", sync, None),
        ("a refusal answered after the release that hands the key", late_refusal, None),
        ("genuine asyncio: withdrawn, handed", aio, None),
        ("a body without a grant", ungranted, _first(ungranted, "BodyDone", client=waiter)),
        ("a key handed before its release", early, release),
    ]
    verdicts = _check_each([trace for _, trace, _ in cases])
    for (name, _, index), v in zip(cases, verdicts, strict=True):
        if index is None:
            assert v.accepted, f"{name}: {v.describe()}\n{v.output[-2000:]}"
        else:
            assert not v.accepted, f"{name}: accepted"
            assert (v.first_unexplained, v.by) == (index, "TLC"), f"{name}: {v.describe()}"


@needs_tlc
@pytest.mark.tlc
def test_a_key_handed_to_an_abandoned_place_is_a_behaviour(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    """A waiter whose withdrawal was lost leaves its place queued: the release hands it
    the key, nobody renews it, and the next waiter is refused on it until it lapses."""
    events = _abandoned_place_run(redis_server, tmp_path / "gone.ndjson")
    assert "WithdrawFail" in {e["action"] for e in events}
    later = max(n for n, e in enumerate(events) if e["action"] == "AcquireReply" and e["granted"])
    refused = [
        e
        for e in events[:later]
        if e["action"] == "AcquireReply" and e["client"] == events[later]["client"]
    ]
    assert refused and not any(e["granted"] for e in refused)
    (verdict,) = tracecheck.check(events)
    assert verdict.accepted, f"{verdict.describe()}\n{verdict.output[-2000:]}"


def test_corrupted_waiting_traces_are_refused_by_the_prepass(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    """Fences, clocks, wait deadlines and lease deadlines need no model: the pre-pass
    names the event."""
    sync = _sync_run(redis_server, tmp_path / "sync.ndjson")
    assert tracecheck.prepass(sync) is None
    wake = _handed_wake(sync)
    waiter = sync[wake]["client"]
    grant = _first(sync, "AcquireReply", granted=True)

    # A handed fence that is not above the holder's, granted before the waiter's attempt.
    stale = [
        {**e, "fence": sync[grant]["fence"]} if e["client"] == waiter and e["fence"] else e
        for e in sync
    ]
    problem = tracecheck.prepass(stale)
    assert problem is not None and problem.index == wake
    assert "already granted" in problem.reason

    # Time runs backwards: the Wake before the waiter's own Block.
    block = max(n for n, e in enumerate(sync[:wake]) if e["client"] == waiter)
    backwards = [*sync]
    backwards[wake] = {**sync[wake], "t": sync[block]["t"] - 50}
    problem = tracecheck.prepass(backwards)
    assert problem is not None and problem.index == wake
    assert "time runs backwards" in problem.reason

    # A waiter that gives up 10 s before its wait ran out: its attempts' wait forged.
    gave_up = _first(sync, "AcquireReply", outcome="not_acquired")
    quitter = sync[gave_up]["client"]
    early_quit = [
        {**e, "wait_ms": e["wait_ms"] + 10_000, "queue_ms": e["queue_ms"] + 10_000}
        if e["client"] == quitter and e["action"] == "Acquire"
        else e
        for e in sync
    ]
    problem = tracecheck.prepass(early_quit)
    assert problem is not None and problem.index == gave_up
    assert "before its wait deadline" in problem.reason

    # The handed lease's deadline forged 4 s later, on the Wake and after it.
    forged = [
        {**e, "deadline": e["deadline"] + 4_000} if e["client"] == waiter and n >= wake else e
        for n, e in enumerate(sync)
    ]
    problem = tracecheck.prepass(forged)
    assert problem is not None and problem.index == wake
    assert "deadline" in problem.reason


@needs_tlc
@pytest.mark.tlc
def test_a_lock_hands_the_key_to_a_waiter_whose_block_ran_out() -> None:
    """The lock's waiters as the reentrant lock's (see test_trace_reentrant's
    PAUSED_PAST_THE_BLOCK, its levels taken out): a release hands the key to a queued
    waiter whose block has run out with no element read, another section's attempt is
    refused on that key, and the waiter's next attempt is granted it: a behaviour of
    spec/DistLock.tla with spec/Wait.tla's waiting.  A Wake that read an element without a
    fence leaves that refusal unexplained."""
    from distlock.tools.chaos.params import SOCKET_TIMEOUT
    from distlock.tools.chaos.tracing import TRACE_TICKS
    from distlock.trace import iter_events
    from tests.test_trace_reentrant import PAUSED_PAST_THE_BLOCK

    levels = {"Reenter", "ReenterReply", "Leave", "LeaveReply"}
    recorded = list(iter_events(PAUSED_PAST_THE_BLOCK.splitlines()))
    # without its re-entry, the outer holder's lease is the one its grant confirmed
    granted = next(e for e in recorded if e["action"] == "AcquireReply")["deadline"]
    entered = next(e for e in recorded if e["action"] == "ReenterReply")["deadline"]
    events = [
        {
            **{k: v for k, v in e.items() if k != "depth"},
            **({"deadline": granted} if e.get("deadline") == entered else {}),
        }
        for e in recorded
        if e["action"] not in levels
    ]
    assert not tracecheck.is_reentrant(events)
    wake = next(n for n, e in enumerate(events) if e["action"] == "Wake")
    refusal = next(
        n for n, e in enumerate(events) if e["client"] == "L76.2" and e["action"] == "AcquireReply"
    )
    woken = [{**e, "woken": True} if n == wake else e for n, e in enumerate(events)]
    for trace, index in ((events, None), (woken, refusal)):
        (verdict,) = tracecheck.check(
            trace,
            condensed=True,
            within_ms=800,
            ticks=TRACE_TICKS,
            hang_after_ms=SOCKET_TIMEOUT * 1000.0,
        )
        if index is None:
            assert verdict.accepted, verdict.describe() + "\n" + verdict.output[-2000:]
        else:
            assert not verdict.accepted
            assert (verdict.first_unexplained, verdict.by) == (index, "TLC")
