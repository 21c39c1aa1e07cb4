"""Recorded traces of the reentrant lock, validated against ``spec/Reentrant.tla``.

Traces of real ``ReentrantLock`` runs (a nested hold renewed at depth 2 with a second
thread refused and then granted, a loss at depth 2, a child holder taking a deleted key
before its parent re-enters, the asyncio driver with a refused child task, a body
starved at depth 2, a key handed to a place a lost withdrawal left queued) must be
accepted; corrupted versions (a Leave at depth 1, a re-entry answered 1 while another
holder had the key, a forged inner exit after the loss, an event reordered, time running
backwards, a fence changed between levels) must be rejected at the event they corrupt.
"""

from __future__ import annotations

import asyncio
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
import redis.asyncio as aredis

import distlock
import distlock.asyncio
from distlock._core.waiting import HANDED_TTL_MS
from distlock._protocol import R_WITHDRAW
from distlock.tools import tracecheck
from distlock.trace import DATA_LOSS, NdjsonRecorder, iter_events, read_events, write_events
from tests.failing_clients import losing
from tests.redis_server import RedisServer

needs_tlc = pytest.mark.skipif(
    not (tracecheck.spec_dir() / "ReentrantTrace.tla").is_file() or shutil.which("java") is None,
    reason="needs spec/Reentrant.tla, spec/ReentrantTrace.tla and java",
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

    def wait_for(self, pred: Callable[[list[Event]], bool]) -> None:
        with self.cond:
            assert self.cond.wait_for(lambda: pred(self.seen), timeout=30)


def _count(events: list[Event], action: str, **where: Any) -> int:
    return sum(
        1 for e in events if e["action"] == action and all(e.get(k) == v for k, v in where.items())
    )


def _index(events: list[Event], action: str, **where: Any) -> int:
    return next(
        n
        for n, e in enumerate(events)
        if e["action"] == action and all(e.get(k) == v for k, v in where.items())
    )


def _nested_with_contender(server: RedisServer, path: Path) -> list[Event]:
    """A parent thread holds to depth 2 through two renewals; a second thread asks for
    the key, is refused, and is granted once the parent's outermost level exits."""
    with NdjsonRecorder(path, append=False) as rec:
        watch = Watch(rec)
        with distlock.ReentrantLock(
            server.url, prefix="rt-nest", ttl_ms=400, retries=200, retry_delay_ms=10, trace=watch
        ) as locks:
            parent: list[str] = []

            def contender() -> None:
                with locks.hold("x") as handle:
                    assert handle.depth == 1

            with locks.hold("x") as outer, locks.hold("x") as inner:
                assert (outer.depth, inner.depth) == (1, 2)
                parent.append(str(watch.seen[0]["client"]))
                watch.wait_for(lambda seen: _count(seen, "RenewReply", ok=True) >= 2)
                thread = threading.Thread(target=contender, name="rt-contender")
                thread.start()
                watch.wait_for(
                    lambda seen: any(
                        e["action"] == "AcquireReply"
                        and e["client"] != parent[0]
                        and not e["granted"]
                        for e in seen
                    )
                )
            thread.join(30)
            assert not thread.is_alive()
    return read_events(path)


def _lost_at_depth2(server: RedisServer, path: Path) -> list[Event]:
    """The key is deleted while the holder is at depth 2: a renewal finds it gone, and
    both levels raise the loss on exit."""
    with (  # noqa: PT012
        NdjsonRecorder(path, append=False) as rec,
        distlock.ReentrantLock(server.url, prefix="rt-lost", ttl_ms=400, trace=rec) as locks,
        pytest.raises(distlock.LockLeaseLostError),
        locks.hold("x") as outer,
        locks.hold("x") as inner,
    ):
        assert inner.depth == 2
        locks.client.delete(outer.key)
        assert inner.signal.wait(30)
    return read_events(path)


def _taken_before_reentry(server: RedisServer, path: Path) -> list[Event] | None:
    """The parent's key is deleted and a second thread takes it; the parent then
    re-enters and is refused (the loss).  None when a renewal found the loss first (then
    the re-entry raises without a round trip)."""
    with NdjsonRecorder(path, append=False) as rec:
        watch = Watch(rec)
        with distlock.ReentrantLock(
            server.url, prefix="rt-taken", ttl_ms=2000, trace=watch
        ) as locks:
            child_holds, parent_done = threading.Event(), threading.Event()

            def child() -> None:
                with locks.hold("x"):
                    child_holds.set()
                    assert parent_done.wait(30)

            thread = threading.Thread(target=child, name="rt-child")
            try:
                with pytest.raises(distlock.LockLeaseLostError), locks.hold("x") as outer:  # noqa: PT012
                    locks.client.delete(outer.key)
                    thread.start()
                    assert child_holds.wait(30)
                    with locks.hold("x"):
                        pass
            finally:
                parent_done.set()
                thread.join(30)
    events = read_events(path)
    return events if _count(events, "ReenterReply") == 1 else None


def _async_nested(server: RedisServer, path: Path) -> list[Event]:
    """asyncio: a task re-enters, and a child task it creates is refused."""

    async def main() -> None:
        with NdjsonRecorder(path, append=False) as rec:
            async with (
                distlock.asyncio.ReentrantLock(
                    server.url, prefix="rt-aio", ttl_ms=400, trace=rec
                ) as locks,
                locks.hold("x") as outer,
            ):
                async with locks.hold("x") as inner:
                    assert (outer.depth, inner.depth) == (1, 2)
                    assert inner.fence == outer.fence
                assert await asyncio.create_task(locks.acquire("x")) is None

    asyncio.run(main())
    return read_events(path)


def _restarted_under_reentry(server: RedisServer, path: Path) -> list[Event]:
    """Three sections on one key, each granted a larger fence; Redis restarts empty
    (declared) while the second holds at depth 2, so both its levels raise the loss; the
    third's fence is still the largest (the floor of Redis's clock under every fence)."""
    with NdjsonRecorder(path, append=False) as rec:
        watch = Watch(rec)
        with distlock.ReentrantLock(
            server.url, prefix="rt-restart", ttl_ms=2000, trace=watch
        ) as locks:
            with locks.hold("x"):
                pass
            with (  # noqa: PT012
                pytest.raises(distlock.LockLeaseLostError),
                locks.hold("x") as outer,
                locks.hold("x") as inner,
            ):
                assert (outer.depth, inner.depth) == (1, 2)
                rec.declare_data_loss(time.monotonic() * 1000.0)
                server.restart()
                assert inner.signal.wait(30)
            with locks.hold("x"):
                pass
    return read_events(path)


def _check_each(traces: list[list[Event]]) -> list[tracecheck.Verdict]:
    """One verdict per single-key trace, two TLC runs at a time (TLC uses one core)."""
    with ThreadPoolExecutor(2) as pool:
        return [v for (v,) in pool.map(tracecheck.check, traces)]


def test_a_reentrant_trace_is_told_by_its_level_changes() -> None:
    lock_events: list[Event] = [
        {"action": "Acquire", "client": "L1.1", "key": "k"},
        {"action": "AcquireReply", "client": "L1.1"},
    ]
    assert not tracecheck.is_reentrant(lock_events)
    assert tracecheck.is_reentrant([*lock_events, {"action": "Reenter", "client": "L1.1"}])


@needs_tlc
@pytest.mark.tlc
def test_reentrant_runs_are_behaviours_of_the_spec(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    nested = _nested_with_contender(redis_server, tmp_path / "nested.ndjson")
    lost = _lost_at_depth2(redis_server, tmp_path / "lost.ndjson")
    aio = _async_nested(redis_server, tmp_path / "aio.ndjson")
    assert {e["action"] for e in nested} >= {"Reenter", "ReenterReply", "Leave", "RenewReply"}
    assert _count(nested, "AcquireReply", granted=False) >= 1
    assert lost[-1]["outcome"] == "lost"
    for events, sections in ((nested, 2), (lost, 1), (aio, 2)):
        assert tracecheck.is_reentrant(events)
        assert len({e["client"] for e in events}) == sections
    verdicts = _check_each([nested, lost, aio])
    for v in verdicts:
        assert v.accepted, v.describe() + "\n" + v.output[-2000:]


@needs_tlc
@pytest.mark.tlc
def test_corrupted_reentrant_traces_are_rejected(redis_server: RedisServer, tmp_path: Path) -> None:
    """Each corruption of a genuine trace is rejected at the event it corrupts."""
    good = _nested_with_contender(redis_server, tmp_path / "nested.ndjson")
    lost = _lost_at_depth2(redis_server, tmp_path / "lost.ndjson")
    taken = None
    for n in range(3):
        taken = _taken_before_reentry(redis_server, tmp_path / f"taken-{n}.ndjson")
        if taken is not None:
            break
    assert taken is not None, "a renewal found the loss before the re-entry, three times"
    parent = good[0]["client"]

    # 1. A Leave at depth 1: the parent leaves again after its inner level exited.
    leave_reply = _index(good, "LeaveReply", client=parent)
    leave = _index(good, "Leave", client=parent)
    extra = {**good[leave], "depth": 0, "t": good[leave_reply]["t"]}
    at_depth1 = [*good[: leave_reply + 1], extra, *good[leave_reply + 1 :]]
    # 2. The re-entry answered 1 while the other holder had the key.
    reenter_reply = _index(taken, "ReenterReply")
    assert taken[reenter_reply]["ok"] is False
    forged_enter = [*taken]
    forged_enter[reenter_reply] = {**taken[reenter_reply], "ok": True, "lost": False, "depth": 2}
    # 3. The inner exit after the loss answered 1.
    lost_leave = _index(lost, "LeaveReply")
    assert lost[lost_leave]["ok"] is False
    forged_leave = [*lost]
    forged_leave[lost_leave] = {**lost[lost_leave], "ok": True}
    # 4. The re-entry's reply before its request.
    enter = _index(good, "Reenter")
    reordered = [*good[:enter], good[enter + 1], good[enter], *good[enter + 2 :]]
    # 5. Time runs backwards: the re-entry answered before it was sent.
    backwards = [*good]
    backwards[enter + 1] = {**good[enter + 1], "t": good[enter]["t"] - 30}
    # 6. The inner level carries another fence than the outermost level's.
    refenced = [*good]
    refenced[enter + 1] = {**good[enter + 1], "fence": good[enter]["fence"] + 1}

    cases: list[tuple[str, list[Event], int | None, str | None]] = [
        ("genuine: the key taken before the re-entry", taken, None, None),
        ("1. a Leave at depth 1", at_depth1, leave_reply + 1, "TLC"),
        (
            "2. re-entry answered 1 while another holder had the key",
            forged_enter,
            reenter_reply,
            "TLC",
        ),
        ("3. inner exit answered 1 after the loss", forged_leave, lost_leave, "TLC"),
        ("4. reply before request", reordered, enter, "TLC"),
        ("5. time runs backwards", backwards, enter + 1, "pre-pass"),
        ("6. fence changed between levels", refenced, enter + 1, "pre-pass"),
    ]
    verdicts = _check_each([trace for _, trace, _, _ in cases])
    for (name, _, index, by), v in zip(cases, verdicts, strict=True):
        if index is None:
            assert v.accepted, f"{name}: {v.describe()}\n{v.output[-2000:]}"
            continue
        assert not v.accepted, f"{name}: accepted"
        assert (v.first_unexplained, v.by) == (index, by), f"{name}: {v.describe()}"
    assert "time runs backwards" in str(verdicts[5].reason)
    assert "records fence" in str(verdicts[6].reason)

    # The command line: 0 for an accepted trace, 1 for a rejected one.
    good_path, bad_path = tmp_path / "good.ndjson", tmp_path / "bad.ndjson"
    write_events(good_path, good)
    write_events(bad_path, at_depth1)
    for trace, status in ((good_path, 0), (bad_path, 1)):
        proc = subprocess.run(
            [sys.executable, "-m", "distlock", "validate-trace", str(trace)],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert proc.returncode == status, proc.stdout + proc.stderr
    assert "REJECTED" in proc.stdout and "Leave" in proc.stdout


#: A section's first event, for traces built by hand.
FIRST_ACQUIRE: Event = {
    "action": "Acquire",
    "key": "k",
    "ttl_ms": 400,
    "watch": True,
    "renew_every_ms": 100,
    "t": 0.0,
    "phase": "acquiring",
    "outcome": "none",
    "lost": False,
    "fence": None,
}


def _many_sections(server: RedisServer, path: Path) -> list[Event]:
    """Five sections on one key, one after another; the first re-enters."""
    with (
        NdjsonRecorder(path, append=False) as rec,
        distlock.ReentrantLock(server.url, prefix="rt-many", ttl_ms=400, trace=rec) as locks,
    ):
        for n in range(5):
            with locks.hold("x") as outer:
                if n == 0:
                    with locks.hold("x") as inner:
                        assert (outer.depth, inner.depth) == (1, 2)
    return read_events(path)


@needs_tlc
@pytest.mark.tlc
def test_more_sections_than_holders_run_one_after_another(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    """A later section runs on a holder whose section has ended: five sections on one
    key are checked (accepted), and a reply reordered in the fifth is still rejected."""
    events = _many_sections(redis_server, tmp_path / "many.ndjson")
    assert len({e["client"] for e in events}) == 5 and tracecheck.is_reentrant(events)
    assert tracecheck.reentrant_unchecked(events) is None
    last = events[-1]["client"]
    release = _index(events, "Release", client=last)
    assert events[release + 1]["action"] == "ReleaseReply"
    reordered = [*events[:release], events[release + 1], events[release], *events[release + 2 :]]
    with ThreadPoolExecutor(2) as pool:
        genuine, bad = (v for (v,) in pool.map(tracecheck.check, [events, reordered]))
    assert genuine.accepted, genuine.describe() + "\n" + genuine.output[-2000:]
    assert not bad.accepted and bad.by == "TLC", bad.describe()
    assert bad.first_unexplained == release


def test_traces_beyond_the_spec_are_refused(tmp_path: Path) -> None:
    """More sections at once than the spec has holders, or a manual extend, cannot be
    checked."""
    first = dict(FIRST_ACQUIRE)
    four = [{**first, "client": f"s{n}"} for n in range(4)]
    with pytest.raises(tracecheck.TraceError, match="holders"):
        tracecheck.build_reentrant_model(four)
    extend = [{**first, "client": "s"}, {**first, "client": "s", "action": "Extend"}]
    with pytest.raises(tracecheck.TraceError, match="not an action"):
        tracecheck.build_reentrant_model(extend)


def test_the_shapes_the_trace_check_refuses_are_told_before_it_runs() -> None:
    """What the chaos suite skips, saying why, rather than counting as a rejected run:
    exactly the shapes build_reentrant_model refuses, and nothing else."""
    first = dict(FIRST_ACQUIRE)
    three = [{**first, "client": f"s{n}"} for n in range(3)]
    assert tracecheck.reentrant_unchecked(three) is None
    tracecheck.build_reentrant_model(three)
    four = [*three, {**first, "client": "s3"}]
    assert tracecheck.reentrant_unchecked(four) == (
        "more than 3 sections at once on one key (at event 4): spec/Reentrant.tla has 3 "
        "holders, one section each at a time"
    )
    # a declared data loss is checked (CounterSurvives FALSE), not refused
    lost = [*three, {"action": DATA_LOSS, "client": "redis", "t": 1.0}]
    assert tracecheck.reentrant_unchecked(lost) is None
    model = tracecheck.build_reentrant_model(lost)
    assert "CounterSurvives = FALSE" in model.cfg and "CheckFences == FALSE" in model.data
    assert model.rows == [0, 1, 2]
    extend = [*three, {**first, "client": "s0", "action": "Extend"}]
    assert tracecheck.reentrant_unchecked(extend) == (
        "Extend recorded: no such action in spec/Reentrant.tla"
    )
    for refused in (four, extend):
        with pytest.raises(tracecheck.TraceError):
            tracecheck.build_reentrant_model(refused)


def _waiting_reentrant(server: RedisServer, path: Path) -> list[Event]:
    """A holder re-enters (depth 2); a waiter times out meanwhile; a second waiter is
    handed the key at the holder's outermost release and re-enters too (sync driver)."""
    with NdjsonRecorder(path, append=False) as rec:
        watch = Watch(rec)
        with distlock.ReentrantLock(server.url, prefix="rt-wait", ttl_ms=400, trace=watch) as locks:
            held, timed_out = threading.Event(), threading.Event()

            def blocked(seen: list[Event]) -> bool:
                long = {
                    e["client"]
                    for e in seen
                    if e["action"] == "Acquire" and e.get("wait_ms") == 10_000
                }
                return any(e["action"] == "Block" and e["client"] in long for e in seen)

            def holder() -> None:
                with locks.hold("x"), locks.hold("x") as inner:
                    assert inner.depth == 2
                    held.set()
                    assert timed_out.wait(30)
                    watch.wait_for(blocked)

            thread = threading.Thread(target=holder, name="rt-holder")
            thread.start()
            assert held.wait(30)
            assert locks.acquire("x", wait_ms=150) is None  # times out
            timed_out.set()
            with locks.hold("x", wait_ms=10_000) as handed, locks.hold("x") as again:
                assert again.depth == 2 and again.fence == handed.fence
            thread.join(30)
            assert not thread.is_alive()
    return read_events(path)


def _async_waiting_reentrant(server: RedisServer, path: Path) -> list[Event]:
    """asyncio: a task holds at depth 2; a child task waiting for the key is cancelled
    while blocked (it withdraws); another is handed the key at the release."""
    with NdjsonRecorder(path, append=False) as rec:
        watch = Watch(rec)

        async def until(pred: Callable[[list[Event]], bool]) -> None:
            # the recorder is called on the loop's thread: poll it between loop turns
            for _ in range(30_000):
                if pred(watch.seen):
                    return
                await asyncio.sleep(0.001)
            raise AssertionError("the awaited event never came")

        def blocked(wait_ms: int) -> Callable[[list[Event]], bool]:
            def pred(seen: list[Event]) -> bool:
                mine = {
                    e["client"]
                    for e in seen
                    if e["action"] == "Acquire" and e.get("wait_ms") == wait_ms
                }
                return any(e["action"] == "Block" and e["client"] in mine for e in seen)

            return pred

        async def main() -> None:
            async with (
                distlock.asyncio.ReentrantLock(
                    server.url, prefix="rt-aiow", ttl_ms=400, trace=watch
                ) as locks,
            ):

                async def waiter() -> int:
                    async with locks.hold("x", wait_ms=10_000) as handle:
                        async with locks.hold("x") as inner:
                            assert inner.depth == 2
                        return handle.fence

                async with locks.hold("x") as outer:
                    async with locks.hold("x") as inner:
                        assert inner.depth == 2
                    cancelled = asyncio.create_task(locks.acquire("x", wait_ms=20_000))
                    await until(blocked(20_000))
                    cancelled.cancel()
                    with pytest.raises(asyncio.CancelledError):
                        await cancelled
                    await until(lambda seen: any(e["action"] == "Withdraw" for e in seen))
                    handed = asyncio.create_task(waiter())
                    await until(blocked(10_000))
                assert await handed > outer.fence

        asyncio.run(main())
    return read_events(path)


def _refusal_after_release(events: list[Event], wake: int, release: int) -> list[Event]:
    """``events`` with the handed waiter's last refusal, and all it did next, moved after
    the reply to the release that hands it the key (their times moved with them)."""
    waiter = events[wake]["client"]
    refusal = max(
        n
        for n in range(wake)
        if events[n]["client"] == waiter and events[n]["action"] == "AcquireReply"
    )
    reply = next(
        n
        for n in range(release, len(events))
        if events[n]["client"] == events[release]["client"]
        and events[n]["action"] == "ReleaseReply"
    )
    assert refusal < release < reply
    moved = [n for n in range(refusal, len(events)) if events[n]["client"] == waiter]
    t = events[reply]["t"]
    return [
        *(e for n, e in enumerate(events[: reply + 1]) if n not in moved),
        *({**events[n], "t": max(events[n]["t"], t)} for n in moved),
        *(e for n, e in enumerate(events[reply + 1 :], reply + 1) if n not in moved),
    ]


@needs_tlc
@pytest.mark.tlc
def test_waiting_reentrant_runs_are_checked(redis_server: RedisServer, tmp_path: Path) -> None:
    """A reentrant lock's waiting sections (a refusal waits, a release hands the key with
    the short handed TTL) are behaviours of spec/Reentrant.tla; corrupted, they are not."""
    good = _waiting_reentrant(redis_server, tmp_path / "w.ndjson")
    assert tracecheck.is_reentrant(good)
    assert tracecheck.reentrant_unchecked(good) is None
    wake = next(
        n for n, e in enumerate(good) if e["action"] == "Wake" and e.get("fence") is not None
    )
    waiter = good[wake]["client"]
    assert any(e["action"] == "AcquireReply" and e["outcome"] == "not_acquired" for e in good)
    aio = _async_waiting_reentrant(redis_server, tmp_path / "aio.ndjson")
    assert tracecheck.reentrant_unchecked(aio) is None
    assert {"Withdraw", "Block", "Wake", "Reenter"} <= {e["action"] for e in aio}
    grant = _index(good, "AcquireReply", granted=True)
    release = _index(good, "Release", client=good[grant]["client"])
    assert release < wake

    # 1. A body entered without a grant: the Wake hands nothing over, the waiter
    #    re-enters and runs its body anyway.
    ungranted = [
        {**e, "fence": None, "deadline": 0.0, **({"phase": "waiting"} if n == wake else {})}
        if e["client"] == waiter and n >= wake
        else e
        for n, e in enumerate(good)
    ]
    # 2. The key handed over before its holder released it: the Wake moved before Release.
    early = [
        *good[:release],
        good[wake],
        *(e for n, e in enumerate(good[release:], release) if n != wake),
    ]
    early[release] = {**early[release], "t": good[release - 1]["t"]}
    # 3. The waiter that timed out blocks again after its last refusal ended it.
    refusal = _index(good, "AcquireReply", outcome="not_acquired")
    quitter = good[refusal]["client"]
    block = _index(good, "Block", client=quitter)
    ended = [*good[: refusal + 1], {**good[block], "t": good[refusal]["t"]}, *good[refusal + 1 :]]

    # A history the run could have had: the waiter's attempt refused at Redis just before
    # the release ran, and the refusal's reply (and the block) came back after the
    # release's, the key already handed to it.
    late_refusal = _refusal_after_release(good, wake, release)

    cases: list[tuple[str, list[Event], int | None]] = [
        ("genuine sync: timed out, handed, re-entered", good, None),
        ("genuine asyncio: withdrawn, handed, re-entered", aio, None),
        ("a refusal answered after the release that hands the key", late_refusal, None),
        ("1. a body without a grant", ungranted, wake + 1),
        ("2. a key handed before its release", early, release),
        ("3. a block after giving up", ended, refusal + 1),
    ]
    verdicts = _check_each([trace for _, trace, _ in cases])
    for (name, _, index), v in zip(cases, verdicts, strict=True):
        if index is None:
            assert v.accepted, f"{name}: {v.describe()}\n{v.output[-3000:]}"
        else:
            assert not v.accepted, f"{name}: accepted"
            assert (v.first_unexplained, v.by) == (index, "TLC"), f"{name}: {v.describe()}"

    # The pre-pass: the handed lease counted from the Wake (its reply) rather than the
    # last attempt's send, which the recorded deadline would show; time running backwards.
    hand_ms = min(400, HANDED_TTL_MS)
    from_wake = [
        {**e, "deadline": good[wake]["t"] + hand_ms} if e["client"] == waiter and n >= wake else e
        for n, e in enumerate(good)
    ]
    problem = tracecheck.prepass(from_wake)
    assert problem is not None and problem.index == wake, problem
    assert "deadline" in problem.reason
    backwards = [*good]
    backwards[wake] = {**good[wake], "t": good[wake - 1]["t"] - 50}
    problem = tracecheck.prepass(backwards)
    assert problem is not None and problem.index == wake
    assert "time runs backwards" in problem.reason


def _starved_at_depth2(server: RedisServer, path: Path, *, run_on: bool) -> list[Event]:
    """asyncio: a body at depth 2 blocks the event loop for three TTLs; with ``run_on``
    it then runs on, and waits for the lease timer's signal before its level exits (the
    starvation ends mid-body); without, its level exits at once (the starvation lasts
    until the inner exit)."""

    async def main() -> None:
        with NdjsonRecorder(path, append=False) as rec:
            async with distlock.asyncio.ReentrantLock(
                server.url, prefix="rt-starved", ttl_ms=300, trace=rec
            ) as locks:
                with pytest.raises(distlock.LockLeaseLostError):  # noqa: PT012
                    async with locks.hold("x"), locks.hold("x") as inner:
                        assert inner.depth == 2
                        time.sleep(0.9)  # noqa: ASYNC251 (the fault: a loop starved 3 TTLs)
                        if run_on:
                            assert await inner.signal.wait()

    asyncio.run(main())
    return read_events(path)


@needs_tlc
@pytest.mark.tlc
def test_a_body_starved_at_depth_2(redis_server: RedisServer, tmp_path: Path) -> None:
    """A body that starves the timers at depth 2 is a behaviour of the spec, whether the
    starvation ends mid-body (the lease timer fires then, before the inner exit: the
    trace's Resume) or lasts until the inner exit.  The first run with its loss removed,
    the inner exit answered 1 after the key expired during the starvation, is rejected
    there."""
    resumed = _starved_at_depth2(redis_server, tmp_path / "resumed.ndjson", run_on=True)
    whole = _starved_at_depth2(redis_server, tmp_path / "whole.ndjson", run_on=False)
    timeout = _index(resumed, "LeaseTimeout")
    leave = _index(resumed, "Leave")
    assert _index(resumed, "ReenterReply") < timeout < leave
    # starved until the inner exit: no timer ran before it
    assert _count(whole, "RenewSend") == 0
    assert all(e["action"] != "LeaseTimeout" for e in whole[: _index(whole, "Leave")])
    reply = _index(resumed, "LeaveReply")
    assert resumed[reply]["ok"] is False
    forged = [
        {
            **e,
            "lost": False,
            **({"ok": True} if n in (reply, len(resumed) - 1) else {}),
            **({"outcome": "ok"} if e["outcome"] == "lost" else {}),
        }
        if n > timeout
        else e
        for n, e in enumerate(resumed)
        if n != timeout
    ]
    assert forged[-1]["action"] == "ReleaseReply"
    with ThreadPoolExecutor(2) as pool:
        good, also, bad = (v for (v,) in pool.map(tracecheck.check, [resumed, whole, forged]))
    assert good.accepted, f"{good.describe()}\n{good.output[-2000:]}"
    assert also.accepted, f"{also.describe()}\n{also.output[-2000:]}"
    assert not bad.accepted and bad.by == "TLC", bad.describe()
    assert bad.first_unexplained == reply - 1, bad.describe()


#: A connection on which the withdrawal never reaches Redis.
LosesWithdrawals = losing(R_WITHDRAW)


def _abandoned_place_run(server: RedisServer, path: Path) -> list[Event]:
    """asyncio: a task holds the key; a waiter cancelled while blocked loses its
    withdrawal, so its place stays queued; a third section is refused after that; the
    holder's release hands the key to the abandoned place, which nobody takes: a fourth
    section is refused at once, and a fifth, waiting, is refused until that handed key
    lapses."""
    with NdjsonRecorder(path, append=False) as rec:
        watch = Watch(rec)

        async def main() -> None:
            changed = asyncio.Event()
            # the recorder is called on the loop's thread
            watch.notify = changed.set

            async def until(pred: Callable[[list[Event]], bool]) -> None:
                while True:
                    changed.clear()
                    if pred(watch.seen):
                        return
                    await asyncio.wait_for(changed.wait(), 30)

            def blocked(seen: list[Event]) -> bool:
                waiting = {
                    e["client"]
                    for e in seen
                    if e["action"] == "Acquire" and e.get("wait_ms") == 20_000
                }
                return any(e["action"] == "Block" and e["client"] in waiting for e in seen)

            pool = aredis.ConnectionPool.from_url(server.url, connection_class=LosesWithdrawals)
            lossy = aredis.Redis(connection_pool=pool)
            options: dict[str, Any] = {"prefix": "rt-gone", "ttl_ms": 1_000, "trace": watch}
            async with (
                distlock.asyncio.ReentrantLock(server.url, **options) as locks,
                distlock.asyncio.ReentrantLock(lossy, **options) as lossy_locks,
            ):

                async def gone() -> None:
                    async with lossy_locks.hold("x", wait_ms=20_000):
                        raise AssertionError("the cancelled waiter never holds the key")

                async with locks.hold("x") as holder:
                    async with locks.hold("x") as inner:
                        assert inner.depth == 2
                    waiter = asyncio.create_task(gone())
                    await until(blocked)
                    waiter.cancel()
                    with pytest.raises(asyncio.CancelledError):
                        await waiter
                    await until(lambda seen: any(e["action"] == "WithdrawFail" for e in seen))
                    assert await asyncio.create_task(locks.acquire("x")) is None
                # The key handed to the abandoned place holds off a fresh attempt.
                assert await asyncio.create_task(locks.acquire("x")) is None
                async with locks.hold("x", wait_ms=10_000) as later:
                    # The abandoned place took a fence in between (each fence one above the
                    # last, or more: the floor of Redis's clock, lib/fence.lua).
                    assert later.fence >= holder.fence + 2
            await lossy.aclose()
            await pool.aclose()
            watch.notify = lambda: None  # the loop is about to close

        asyncio.run(main())
    return read_events(path)


@needs_tlc
@pytest.mark.tlc
def test_a_key_handed_to_an_abandoned_place_is_a_behaviour(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    """A waiter whose withdrawal was lost leaves its place queued: the release hands it
    the key, nobody renews it, and later attempts are refused on it until it lapses.  The
    next section on the abandoned waiter's holder is refused there too: the abandoned
    place's token is not that holder's."""
    events = _abandoned_place_run(redis_server, tmp_path / "gone.ndjson")
    assert "WithdrawFail" in {e["action"] for e in events}
    assert tracecheck.reentrant_unchecked(events) is None
    sections = list(dict.fromkeys(e["client"] for e in events))
    assert len(sections) == 5
    gone, fresh = sections[1], sections[3]
    (verdict,) = tracecheck.check(events)
    assert verdict.accepted, f"{verdict.describe()}\n{verdict.output[-2000:]}"
    model = tracecheck.build_reentrant_model(events)
    holders = model.data.split("HolderIndex == <<", 1)[1].split(">>", 1)[0].split(", ")
    assert holders[sections.index(fresh)] == holders[sections.index(gone)]
    assert not any(e.get("granted") for e in events if e["client"] == fresh)
    later = max(n for n, e in enumerate(events) if e["action"] == "AcquireReply" and e["granted"])
    refused = [
        e
        for e in events[:later]
        if e["action"] == "AcquireReply" and e["client"] == events[later]["client"]
    ]
    assert refused and not any(e["granted"] for e in refused)


@needs_tlc
@pytest.mark.tlc
def test_a_declared_restart_lets_reentrant_fences_start_over(
    fresh_redis: RedisServer, tmp_path: Path
) -> None:
    """Redis restarted empty under a re-entered section: the next section's fence is still
    larger.  Accepted with the recorded declaration (the key loss may lose the counter).
    Had Redis's clock gone back too, the next section could get the first one's fence again
    (written into the recorded trace here): without the declaration, refused there."""
    events = _restarted_under_reentry(fresh_redis, tmp_path / "restart.ndjson")
    assert _count(events, DATA_LOSS) == 1 and tracecheck.is_reentrant(events)
    grants = [n for n, e in enumerate(events) if e["action"] == "AcquireReply" and e["granted"]]
    fences = [events[n]["fence"] for n in grants]
    assert len(fences) == 3 and fences == sorted(set(fences))
    assert tracecheck.reentrant_unchecked(events) is None
    later = events[grants[2]]["client"], fences[2]
    undeclared = [
        {**e, "fence": fences[0]} if (e["client"], e.get("fence")) == later else e
        for e in events
        if e["action"] != DATA_LOSS
    ]
    third = _index(undeclared, "AcquireReply", client=events[grants[2]]["client"], granted=True)
    declared, plain = _check_each([events, undeclared])
    assert declared.accepted, declared.describe() + "\n" + declared.output[-2000:]
    assert not plain.accepted and plain.by == "pre-pass", plain.describe()
    assert plain.first_unexplained == third and "already granted" in str(plain.reason)


#: A chaos trial's victim (TTL 200 ms, renewed every 50 ms) at depth 2 when Redis was
#: killed and restarted empty: its renewals fail twice while Redis is down and restarting,
#: and the third, sent 153 ms after the last confirmed one (whose lease runs 198 ms), finds
#: the key gone.  Recorded (times shifted), the victim's section and the declaration only.
RESTART_UNDER_RENEWALS = """\
{"action":"Acquire","attempt":20,"client":"L2.1","deadline":0.0,"fence":null,"key":"chaos:res","lost":false,"outcome":"none","phase":"acquiring","renew_every_ms":50,"renew_in_flight":false,"retries":400,"t":1000.0,"ttl_ms":200,"watch":true}
{"action":"AcquireReply","client":"L2.1","deadline":1198.0,"fence":3,"granted":true,"lost":false,"outcome":"none","phase":"held","renew_in_flight":false,"t":1000.7}
{"action":"Reenter","client":"L2.1","deadline":1198.0,"depth":1,"fence":3,"lost":false,"outcome":"none","phase":"held","renew_in_flight":false,"t":1001.1,"to":2}
{"action":"ReenterReply","client":"L2.1","deadline":1199.1,"depth":2,"fence":3,"lost":false,"ok":true,"outcome":"none","phase":"held","renew_in_flight":false,"t":1001.9}
{"action":"RenewSend","client":"L2.1","deadline":1199.1,"fence":3,"lost":false,"outcome":"none","phase":"held","renew_in_flight":true,"t":1051.3}
{"action":"RenewReply","client":"L2.1","deadline":1249.3,"fence":3,"lost":false,"ok":true,"outcome":"none","phase":"held","renew_in_flight":false,"t":1052.7}
{"action":"RedisLostData","client":"redis","t":1052.8}
{"action":"RenewSend","client":"L2.1","deadline":1249.3,"fence":3,"lost":false,"outcome":"none","phase":"held","renew_in_flight":true,"t":1102.1}
{"action":"RenewFail","client":"L2.1","deadline":1249.3,"failures":1,"fence":3,"lost":false,"outcome":"none","phase":"held","renew_in_flight":false,"t":1116.1}
{"action":"RenewSend","client":"L2.1","deadline":1249.3,"fence":3,"lost":false,"outcome":"none","phase":"held","renew_in_flight":true,"t":1153.7}
{"action":"RenewFail","client":"L2.1","deadline":1249.3,"failures":2,"fence":3,"lost":false,"outcome":"none","phase":"held","renew_in_flight":false,"t":1168.3}
{"action":"RenewSend","client":"L2.1","deadline":1249.3,"fence":3,"lost":false,"outcome":"none","phase":"held","renew_in_flight":true,"t":1204.9}
{"action":"RenewReply","client":"L2.1","deadline":1249.3,"fence":3,"lost":true,"ok":false,"outcome":"none","phase":"held","renew_in_flight":false,"t":1208.9}
{"action":"Leave","client":"L2.1","deadline":1249.3,"depth":1,"fence":3,"lost":true,"outcome":"none","phase":"held","renew_in_flight":false,"t":1601.6}
{"action":"LeaveReply","client":"L2.1","deadline":1249.3,"depth":1,"fence":3,"lost":true,"ok":false,"outcome":"none","phase":"held","renew_in_flight":false,"t":1602.9}
{"action":"BodyDone","client":"L2.1","deadline":1249.3,"fence":3,"lost":true,"outcome":"none","phase":"body_done","renew_in_flight":false,"t":1603.0}
{"action":"Release","client":"L2.1","deadline":1249.3,"fence":3,"lost":true,"outcome":"none","phase":"releasing","renew_in_flight":false,"t":1603.0}
{"action":"ReleaseReply","client":"L2.1","deadline":1249.3,"fence":3,"lost":true,"ok":false,"outcome":"lost","phase":"done","renew_in_flight":false,"t":1603.5}
"""


@needs_tlc
@pytest.mark.tlc
def test_renewals_failing_until_late_in_the_lease_are_behaviours_of_the_spec() -> None:
    """Checked as a chaos trial is (4 ticks per TTL, the socket timeout), the trace above
    is accepted: the model's lease holds the three renewals the core sends after its last
    confirmed one, so the trace model's margin must not cut a whole tick from it."""
    from distlock.tools.chaos.params import SOCKET_TIMEOUT
    from distlock.tools.chaos.tracing import TRACE_TICKS

    events = list(iter_events(RESTART_UNDER_RENEWALS.splitlines()))
    assert _count(events, "RenewFail") == 2 and _count(events, DATA_LOSS) == 1
    (verdict,) = tracecheck.check(events, ticks=TRACE_TICKS, hang_after_ms=SOCKET_TIMEOUT * 1000.0)
    assert verdict.accepted, verdict.describe() + "\n" + verdict.output[-2000:]


#: A chaos trial (TTL 200 ms, the harness's condensed trace) whose Redis was killed and
#: restarted empty while a victim held the key at depth 2: the intruder's attempts, each a
#: section of its own (its Lock object's next), fail on a refused connection (in ~11 ms,
#: well within the 1 s socket timeout) and so do their cleanup releases, one after
#: another.  Recorded (times shifted), its first 34 events: five sections; the intruder's
#: third attempt finds a holder free only if a section whose round trips failed on their
#: connection leaves its holder.
RESTART_REFUSING_ATTEMPTS = """\
{"action":"Acquire","attempt":1,"client":"L1.1","deadline":0.0,"fence":null,"key":"chaos:res","lost":false,"outcome":"none","phase":"acquiring","renew_every_ms":50,"renew_in_flight":false,"retries":400,"t":1000.0,"ttl_ms":200,"watch":true}
{"action":"Acquire","attempt":1,"client":"L2.1","deadline":0.0,"fence":null,"key":"chaos:res","lost":false,"outcome":"none","phase":"acquiring","renew_every_ms":50,"renew_in_flight":false,"retries":400,"t":1004.3,"ttl_ms":200,"watch":true}
{"action":"Acquire","attempt":1,"client":"L3.1","deadline":0.0,"fence":null,"key":"chaos:res","lost":false,"outcome":"none","phase":"acquiring","queue_ms":400,"renew_every_ms":50,"renew_in_flight":false,"retries":0,"t":1007.7,"ttl_ms":200,"wait_ms":400,"watch":true}
{"action":"AcquireReply","client":"L3.1","deadline":1205.7,"fence":1,"granted":true,"lost":false,"outcome":"none","phase":"held","renew_in_flight":false,"t":1015.1}
{"action":"AcquireReply","client":"L2.1","deadline":0.0,"fence":null,"granted":false,"lost":false,"outcome":"none","phase":"backoff","renew_in_flight":false,"t":1020.0}
{"action":"AcquireReply","client":"L1.1","deadline":0.0,"fence":null,"granted":false,"lost":false,"outcome":"none","phase":"backoff","renew_in_flight":false,"t":1020.2}
{"action":"RenewSend","client":"L3.1","deadline":1205.7,"fence":1,"lost":false,"outcome":"none","phase":"held","renew_in_flight":true,"t":1058.6}
{"action":"RenewReply","client":"L3.1","deadline":1256.6,"fence":1,"lost":false,"ok":true,"outcome":"none","phase":"held","renew_in_flight":false,"t":1062.5}
{"action":"Acquire","attempt":5,"client":"L1.1","deadline":0.0,"fence":null,"key":"chaos:res","lost":false,"outcome":"none","phase":"acquiring","renew_every_ms":50,"renew_in_flight":false,"retries":400,"t":1062.9,"ttl_ms":200,"watch":true}
{"action":"AcquireReply","client":"L1.1","deadline":0.0,"fence":null,"granted":false,"lost":false,"outcome":"none","phase":"backoff","renew_in_flight":false,"t":1063.3}
{"action":"BodyDone","client":"L3.1","deadline":1256.6,"fence":1,"lost":false,"outcome":"none","phase":"body_done","renew_in_flight":false,"t":1067.1}
{"action":"Release","client":"L3.1","deadline":1256.6,"fence":1,"lost":false,"outcome":"none","phase":"releasing","renew_in_flight":false,"t":1067.3}
{"action":"ReleaseReply","client":"L3.1","deadline":1256.6,"fence":1,"lost":false,"ok":true,"outcome":"ok","phase":"done","renew_in_flight":false,"t":1072.7}
{"action":"Acquire","attempt":6,"client":"L1.1","deadline":0.0,"fence":null,"key":"chaos:res","lost":false,"outcome":"none","phase":"acquiring","renew_every_ms":50,"renew_in_flight":false,"retries":400,"t":1073.4,"ttl_ms":200,"watch":true}
{"action":"AcquireReply","client":"L1.1","deadline":1271.4,"fence":2,"granted":true,"lost":false,"outcome":"none","phase":"held","renew_in_flight":false,"t":1073.7}
{"action":"Reenter","client":"L1.1","deadline":1271.4,"depth":1,"fence":2,"lost":false,"outcome":"none","phase":"held","renew_in_flight":false,"t":1074.2,"to":2}
{"action":"ReenterReply","client":"L1.1","deadline":1272.2,"depth":2,"fence":2,"lost":false,"ok":true,"outcome":"none","phase":"held","renew_in_flight":false,"t":1074.7}
{"action":"Acquire","attempt":18,"client":"L2.1","deadline":0.0,"fence":null,"key":"chaos:res","lost":false,"outcome":"none","phase":"acquiring","renew_every_ms":50,"renew_in_flight":false,"retries":400,"t":1122.7,"ttl_ms":200,"watch":true}
{"action":"AcquireReply","client":"L2.1","deadline":0.0,"fence":null,"granted":false,"lost":false,"outcome":"none","phase":"backoff","renew_in_flight":false,"t":1123.3}
{"action":"RenewSend","client":"L1.1","deadline":1272.2,"fence":2,"lost":false,"outcome":"none","phase":"held","renew_in_flight":true,"t":1124.1}
{"action":"RenewReply","client":"L1.1","deadline":1322.1,"fence":2,"lost":false,"ok":true,"outcome":"none","phase":"held","renew_in_flight":false,"t":1125.1}
{"action":"RedisLostData","client":"redis","t":1125.2}
{"action":"Acquire","attempt":19,"client":"L2.1","deadline":0.0,"fence":null,"key":"chaos:res","lost":false,"outcome":"none","phase":"acquiring","renew_every_ms":50,"renew_in_flight":false,"retries":400,"t":1128.4,"ttl_ms":200,"watch":true}
{"action":"AcquireFail","client":"L2.1","deadline":0.0,"fence":null,"lost":false,"outcome":"none","phase":"abandoned","renew_in_flight":false,"t":1139.9}
{"action":"Release","client":"L2.1","deadline":0.0,"fence":null,"lost":false,"outcome":"none","phase":"releasing","renew_in_flight":false,"t":1140.0}
{"action":"ReleaseFail","client":"L2.1","deadline":0.0,"fence":null,"lost":false,"outcome":"failed","phase":"done","renew_in_flight":false,"t":1140.3}
{"action":"Acquire","attempt":1,"client":"L2.2","deadline":0.0,"fence":null,"key":"chaos:res","lost":false,"outcome":"none","phase":"acquiring","renew_every_ms":50,"renew_in_flight":false,"retries":400,"t":1140.6,"ttl_ms":200,"watch":true}
{"action":"AcquireFail","client":"L2.2","deadline":0.0,"fence":null,"lost":false,"outcome":"none","phase":"abandoned","renew_in_flight":false,"t":1151.4}
{"action":"Release","client":"L2.2","deadline":0.0,"fence":null,"lost":false,"outcome":"none","phase":"releasing","renew_in_flight":false,"t":1151.5}
{"action":"ReleaseFail","client":"L2.2","deadline":0.0,"fence":null,"lost":false,"outcome":"failed","phase":"done","renew_in_flight":false,"t":1151.9}
{"action":"Acquire","attempt":1,"client":"L2.3","deadline":0.0,"fence":null,"key":"chaos:res","lost":false,"outcome":"none","phase":"acquiring","renew_every_ms":50,"renew_in_flight":false,"retries":400,"t":1152.1,"ttl_ms":200,"watch":true}
{"action":"AcquireFail","client":"L2.3","deadline":0.0,"fence":null,"lost":false,"outcome":"none","phase":"abandoned","renew_in_flight":false,"t":1162.8}
{"action":"Release","client":"L2.3","deadline":0.0,"fence":null,"lost":false,"outcome":"none","phase":"releasing","renew_in_flight":false,"t":1162.9}
{"action":"ReleaseFail","client":"L2.3","deadline":0.0,"fence":null,"lost":false,"outcome":"failed","phase":"done","renew_in_flight":false,"t":1164.0}
"""


@needs_tlc
@pytest.mark.tlc
def test_attempts_refused_while_redis_is_down_end_their_sections() -> None:
    """A section whose round trips failed on their connection (sooner than the socket
    timeout) has nothing left to run once done: a later section takes its holder, so the
    intruder's failed attempts reuse two holders beside the victim's, and the trace (a
    prefix: the trial went on) is accepted.  Failures that may have timed out (no socket
    timeout known) may still run, and keep their holder: four sections at once."""
    from distlock.tools.chaos.params import SOCKET_TIMEOUT
    from distlock.tools.chaos.tracing import TRACE_TICKS

    hang_after_ms = SOCKET_TIMEOUT * 1000.0
    events = list(iter_events(RESTART_REFUSING_ATTEMPTS.splitlines()))
    assert _count(events, DATA_LOSS) == 1 and tracecheck.is_reentrant(events)
    assert _count(events, "AcquireFail") == 3 and _count(events, "ReleaseFail") == 3
    assert len({e["client"] for e in events} - {"redis"}) == 5
    assert tracecheck.reentrant_unchecked(events) == (
        "more than 3 sections at once on one key (at event 30): spec/Reentrant.tla has 3 "
        "holders, one section each at a time"
    )
    assert tracecheck.reentrant_unchecked(events, hang_after_ms=hang_after_ms) is None
    model = tracecheck.build_reentrant_model(
        events, complete=False, ticks=TRACE_TICKS, hang_after_ms=hang_after_ms
    )
    holders = model.data.split("HolderIndex == <<", 1)[1].split(">>", 1)[0].split(", ")
    assert holders == ["1", "2", "3", "3", "2"]
    verdict = tracecheck.check_key(
        "chaos:res", events, complete=False, ticks=TRACE_TICKS, hang_after_ms=hang_after_ms
    )
    assert verdict.accepted, verdict.describe() + "\n" + verdict.output[-2000:]


#: A chaos trial (``reentrant-redis-paused-past-the-ttl-sync``, TTL 200 ms, times shifted)
#: whose Redis was paused (SIGSTOP) from about t=757 to t=1208.  L77.1 waits (wait_ms 400):
#: refused at 658, it blocks until 758, its place in Redis kept for min(wait left, recheck,
#: LONGEST_BLOCK_MS) + QUEUE_GRACE_MS after that attempt.  L76.1's attempt, sent at 706,
#: runs after the pause (granted too late: lost) and its release at 1209 hands the key to
#: the queued L77.1, so L76.2's attempt at 1210.5 is refused.  L77.1's block ran out with
#: no element read (Wake, woken false, no fence, at 1256), and its last attempt (queue_ms 0)
#: is granted the key handed to it, with the handed fence.
PAUSED_PAST_THE_BLOCK = """\
{"action":"Acquire","attempt":1,"client":"L75.1","deadline":0.0,"fence":null,"key":"chaos:res","lost":false,"outcome":"none","phase":"acquiring","renew_every_ms":50,"renew_in_flight":false,"retries":400,"t":651.328,"ttl_ms":200,"watch":true}
{"action":"Acquire","attempt":1,"client":"L76.1","deadline":0.0,"fence":null,"key":"chaos:res","lost":false,"outcome":"none","phase":"acquiring","renew_every_ms":50,"renew_in_flight":false,"retries":400,"t":651.977,"ttl_ms":200,"watch":true}
{"action":"AcquireReply","client":"L75.1","deadline":849.328,"fence":447758514728960,"granted":true,"lost":false,"outcome":"none","phase":"held","renew_in_flight":false,"t":653.454}
{"action":"Acquire","attempt":1,"client":"L77.1","deadline":0.0,"fence":null,"key":"chaos:res","lost":false,"outcome":"none","phase":"acquiring","queue_ms":400,"renew_every_ms":50,"renew_in_flight":false,"retries":0,"t":653.915,"ttl_ms":200,"wait_ms":400,"watch":true}
{"action":"AcquireReply","client":"L76.1","deadline":0.0,"fence":null,"granted":false,"lost":false,"outcome":"none","phase":"backoff","renew_in_flight":false,"t":656.695}
{"action":"Reenter","client":"L75.1","deadline":849.328,"depth":1,"fence":447758514728960,"lost":false,"outcome":"none","phase":"held","renew_in_flight":false,"t":656.835,"to":2}
{"action":"ReenterReply","client":"L75.1","deadline":854.835,"depth":2,"fence":447758514728960,"lost":false,"ok":true,"outcome":"none","phase":"held","renew_in_flight":false,"t":657.129}
{"action":"AcquireReply","client":"L77.1","deadline":0.0,"fence":null,"granted":false,"lost":false,"outcome":"none","phase":"waiting","recheck_ms":200,"renew_in_flight":false,"t":657.95}
{"action":"Block","client":"L77.1","deadline":0.0,"fence":null,"lost":false,"outcome":"none","phase":"waiting","renew_in_flight":false,"t":657.991,"until":757.95}
{"action":"Acquire","attempt":7,"client":"L76.1","deadline":0.0,"fence":null,"key":"chaos:res","lost":false,"outcome":"none","phase":"acquiring","renew_every_ms":50,"renew_in_flight":false,"retries":400,"t":701.219,"ttl_ms":200,"watch":true}
{"action":"AcquireReply","client":"L76.1","deadline":0.0,"fence":null,"granted":false,"lost":false,"outcome":"none","phase":"backoff","renew_in_flight":false,"t":701.415}
{"action":"RenewSend","client":"L75.1","deadline":854.835,"fence":447758514728960,"lost":false,"outcome":"none","phase":"held","renew_in_flight":true,"t":701.706}
{"action":"RenewReply","client":"L75.1","deadline":899.706,"fence":447758514728960,"lost":false,"ok":true,"outcome":"none","phase":"held","renew_in_flight":false,"t":702.301}
{"action":"Acquire","attempt":8,"client":"L76.1","deadline":0.0,"fence":null,"key":"chaos:res","lost":false,"outcome":"none","phase":"acquiring","renew_every_ms":50,"renew_in_flight":false,"retries":400,"t":706.5,"ttl_ms":200,"watch":true}
{"action":"RenewSend","client":"L75.1","deadline":899.706,"fence":447758514728960,"lost":false,"outcome":"none","phase":"held","renew_in_flight":true,"t":757.14}
{"action":"LeaseTimeout","client":"L75.1","deadline":899.706,"fence":447758514728960,"lost":true,"outcome":"none","phase":"held","renew_in_flight":true,"t":899.869}
{"action":"RenewReply","client":"L75.1","deadline":899.706,"fence":447758514728960,"lost":true,"ok":false,"outcome":"none","phase":"held","renew_in_flight":false,"t":1208.972}
{"action":"AcquireReply","client":"L76.1","deadline":904.5,"fence":447758515865600,"granted":true,"lost":true,"outcome":"none","phase":"held","renew_in_flight":false,"t":1209.185}
{"action":"Release","client":"L76.1","deadline":904.5,"fence":447758515865600,"lost":true,"outcome":"none","phase":"releasing","renew_in_flight":false,"t":1209.437}
{"action":"ReleaseReply","client":"L76.1","deadline":904.5,"fence":447758515865600,"lost":true,"ok":true,"outcome":"lost","phase":"done","renew_in_flight":false,"t":1210.24}
{"action":"Acquire","attempt":1,"client":"L76.2","deadline":0.0,"fence":null,"key":"chaos:res","lost":false,"outcome":"none","phase":"acquiring","renew_every_ms":50,"renew_in_flight":false,"retries":400,"t":1210.501,"ttl_ms":200,"watch":true}
{"action":"AcquireReply","client":"L76.2","deadline":0.0,"fence":null,"granted":false,"lost":false,"outcome":"none","phase":"backoff","renew_in_flight":false,"t":1210.657}
{"action":"Wake","client":"L77.1","deadline":0.0,"fence":null,"lost":false,"outcome":"none","phase":"waiting","renew_in_flight":false,"t":1256.12,"woken":false}
{"action":"Acquire","attempt":2,"client":"L77.1","deadline":0.0,"fence":null,"key":"chaos:res","lost":false,"outcome":"none","phase":"acquiring","queue_ms":0,"renew_every_ms":50,"renew_in_flight":false,"retries":0,"t":1256.183,"ttl_ms":200,"wait_ms":400,"watch":true}
{"action":"AcquireReply","client":"L77.1","deadline":1454.183,"fence":447758515869696,"granted":true,"lost":false,"outcome":"none","phase":"held","renew_in_flight":false,"t":1256.589}
{"action":"Leave","client":"L75.1","deadline":899.706,"depth":1,"fence":447758514728960,"lost":true,"outcome":"none","phase":"held","renew_in_flight":false,"t":1258.228}
{"action":"LeaveReply","client":"L75.1","deadline":899.706,"depth":1,"fence":447758514728960,"lost":true,"ok":false,"outcome":"none","phase":"held","renew_in_flight":false,"t":1258.578}
{"action":"BodyDone","client":"L75.1","deadline":899.706,"fence":447758514728960,"lost":true,"outcome":"none","phase":"body_done","renew_in_flight":false,"t":1258.641}
{"action":"Release","client":"L75.1","deadline":899.706,"fence":447758514728960,"lost":true,"outcome":"none","phase":"releasing","renew_in_flight":false,"t":1258.664}
{"action":"ReleaseReply","client":"L75.1","deadline":899.706,"fence":447758514728960,"lost":true,"ok":false,"outcome":"lost","phase":"done","renew_in_flight":false,"t":1258.805}
{"action":"Acquire","attempt":1,"client":"L75.3","deadline":0.0,"fence":null,"key":"chaos:res","lost":false,"outcome":"none","phase":"acquiring","renew_every_ms":50,"renew_in_flight":false,"retries":400,"t":1258.991,"ttl_ms":200,"watch":true}
{"action":"AcquireReply","client":"L75.3","deadline":0.0,"fence":null,"granted":false,"lost":false,"outcome":"none","phase":"backoff","renew_in_flight":false,"t":1259.109}
{"action":"RenewSend","client":"L77.1","deadline":1454.183,"fence":447758515869696,"lost":false,"outcome":"none","phase":"held","renew_in_flight":true,"t":1306.433}
{"action":"RenewReply","client":"L77.1","deadline":1504.433,"fence":447758515869696,"lost":false,"ok":true,"outcome":"none","phase":"held","renew_in_flight":false,"t":1306.935}
{"action":"Acquire","attempt":21,"client":"L76.2","deadline":0.0,"fence":null,"key":"chaos:res","lost":false,"outcome":"none","phase":"acquiring","renew_every_ms":50,"renew_in_flight":false,"retries":400,"t":1336.353,"ttl_ms":200,"watch":true}
{"action":"AcquireReply","client":"L76.2","deadline":0.0,"fence":null,"granted":false,"lost":false,"outcome":"none","phase":"backoff","renew_in_flight":false,"t":1336.614}
{"action":"BodyDone","client":"L77.1","deadline":1504.433,"fence":447758515869696,"lost":false,"outcome":"none","phase":"body_done","renew_in_flight":false,"t":1338.57}
{"action":"Release","client":"L77.1","deadline":1504.433,"fence":447758515869696,"lost":false,"outcome":"none","phase":"releasing","renew_in_flight":false,"t":1338.64}
{"action":"ReleaseReply","client":"L77.1","deadline":1504.433,"fence":447758515869696,"lost":false,"ok":true,"outcome":"ok","phase":"done","renew_in_flight":false,"t":1338.9}
{"action":"Acquire","attempt":22,"client":"L76.2","deadline":0.0,"fence":null,"key":"chaos:res","lost":false,"outcome":"none","phase":"acquiring","renew_every_ms":50,"renew_in_flight":false,"retries":400,"t":1341.766,"ttl_ms":200,"watch":true}
{"action":"AcquireReply","client":"L76.2","deadline":1539.766,"fence":447758516140032,"granted":true,"lost":false,"outcome":"none","phase":"held","renew_in_flight":false,"t":1342.107}
{"action":"RenewSend","client":"L76.2","deadline":1539.766,"fence":447758516140032,"lost":false,"outcome":"none","phase":"held","renew_in_flight":true,"t":1392.311}
{"action":"RenewReply","client":"L76.2","deadline":1590.311,"fence":447758516140032,"lost":false,"ok":true,"outcome":"none","phase":"held","renew_in_flight":false,"t":1392.846}
{"action":"RenewSend","client":"L76.2","deadline":1590.311,"fence":447758516140032,"lost":false,"outcome":"none","phase":"held","renew_in_flight":true,"t":1443.165}
{"action":"RenewReply","client":"L76.2","deadline":1641.165,"fence":447758516140032,"lost":false,"ok":true,"outcome":"none","phase":"held","renew_in_flight":false,"t":1443.519}
"""


@needs_tlc
@pytest.mark.tlc
def test_a_key_handed_to_a_waiter_whose_block_ran_out_is_its_next_attempts() -> None:
    """A release may hand the key to a queued waiter whose block has run out (its BLPOP
    answered nil, or the client stopped reading before the element came): spec/Wait.tla's
    Wake lets the block end without the element, and its RedisAttempt grants the next
    attempt, the last one too, the key holding the waiter's token.  Checked as a chaos
    trial is, the trace above is accepted: the other section's refusal in between is
    explained by that handoff alone.  A Wake that read an element (woken) without a fence
    is no such waiter, and the refusal then has no explanation."""
    from distlock.tools.chaos.params import SOCKET_TIMEOUT
    from distlock.tools.chaos.tracing import TRACE_TICKS

    events = list(iter_events(PAUSED_PAST_THE_BLOCK.splitlines()))
    assert tracecheck.is_reentrant(events)
    wake = _index(events, "Wake", client="L77.1")
    refusal = _index(events, "AcquireReply", client="L76.2")
    release = _index(events, "ReleaseReply", client="L76.1")
    assert release < refusal < wake and events[wake]["woken"] is False
    assert events[wake + 1]["queue_ms"] == 0 and events[wake + 2]["granted"] is True
    woken = [{**e, "woken": True} if n == wake else e for n, e in enumerate(events)]
    cases: list[tuple[str, list[Event], int | None]] = [
        ("genuine: handed to a waiter whose block ran out", events, None),
        ("an element read without a fence", woken, refusal),
    ]
    for name, trace, index in cases:
        (verdict,) = tracecheck.check(
            trace,
            condensed=True,
            within_ms=800,
            ticks=TRACE_TICKS,
            hang_after_ms=SOCKET_TIMEOUT * 1000.0,
        )
        if index is None:
            assert verdict.accepted, f"{name}: {verdict.describe()}\n{verdict.output[-2000:]}"
        else:
            assert not verdict.accepted, f"{name}: accepted"
            assert (verdict.first_unexplained, verdict.by) == (index, "TLC"), name
