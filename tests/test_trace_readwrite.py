"""Recorded traces of a read-write lock's sections, validated against ``spec/ReadWrite.tla``.

A read or write section takes the lock's actions and records the same transitions; its
Acquire record also carries the role (``kind``: read or write), which is how
``validate-trace`` tells a read-write lock's key from the others.  Readers share fences: a
read grant reports the slot's counter as the last write left it.

Real runs against a real Redis (readers and writers contending, fail-fast and waiting,
sync and asyncio) must be accepted; hand-written traces pin the model's reading of steps
a run does not reliably show (a writer's place holding back a reader, a waiter that gave
up no longer queued).  Corrupted, each must be rejected at the event it corrupts: a writer
granted while a reader's lease is live, a reader granted while a writer holds or past a
queued writer, a writer's fence not above an earlier one, a reader's fence past the write
it follows, a release answered 1 after the lease expired.
"""

from __future__ import annotations

import asyncio
import shutil
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import distlock
import distlock.asyncio
from distlock.tools import tracecheck
from distlock.trace import NdjsonRecorder, read_events
from tests.redis_server import RedisServer

needs_tlc = pytest.mark.skipif(
    not (tracecheck.spec_dir() / "ReadWriteTrace.tla").is_file() or shutil.which("java") is None,
    reason="needs spec/ReadWrite.tla, spec/ReadWriteTrace.tla and java",
)

Event = dict[str, Any]

TTL_MS = 1000
KEY = "rw:x"


def _ev(action: str, client: str, t: float, phase: str, **fields: Any) -> Event:
    event: Event = {
        "action": action,
        "client": client,
        "t": float(t),
        "phase": phase,
        "outcome": "none",
        "lost": False,
        "fence": None,
    }
    event.update(fields)
    return event


class _Section:
    """One section's events, as the core records them (the recorder's fields)."""

    def __init__(
        self,
        client: str,
        kind: str,
        *,
        wait_ms: int | None = None,
        watch: bool = True,
        retries: int = 0,
    ) -> None:
        self.client, self.kind, self.wait_ms, self.watch = client, kind, wait_ms, watch
        self.retries = retries
        self.fence: int | None = None
        self.deadline: float | None = None
        self.attempts = 0
        self.sent = 0.0
        self.until = 0.0

    def _held(self, action: str, t: float, phase: str, **fields: Any) -> Event:
        extra: dict[str, Any] = {"fence": self.fence}
        if self.deadline is not None:
            extra["deadline"] = self.deadline
        return _ev(action, self.client, t, phase, **{**extra, **fields})

    def acquire(self, t: float) -> Event:
        self.attempts += 1
        self.sent = t
        waiting: dict[str, Any] = {}
        if self.wait_ms is not None:
            if self.attempts == 1:
                self.until = t + self.wait_ms
            left = self.until - t
            waiting = {"wait_ms": self.wait_ms, "queue_ms": max(0, int(left))}
        return _ev(
            "Acquire",
            self.client,
            t,
            "acquiring",
            attempt=self.attempts,
            key=KEY,
            ttl_ms=TTL_MS,
            renew_every_ms=TTL_MS // 4 if self.watch else None,
            watch=self.watch,
            retries=self.retries,
            kind=self.kind,
            **waiting,
        )

    def granted(self, t: float, fence: int) -> Event:
        self.fence = fence
        self.deadline = self.sent + TTL_MS
        return self._held("AcquireReply", t, "held", granted=True)

    def refused(self, t: float, phase: str = "done") -> Event:
        outcome = "not_acquired" if phase == "done" else "none"
        extra = {"recheck_ms": 500} if self.wait_ms is not None and phase == "waiting" else {}
        return _ev("AcquireReply", self.client, t, phase, outcome=outcome, granted=False, **extra)

    def block(self, t: float) -> Event:
        return _ev("Block", self.client, t, "waiting", until=min(t + 500, self.until))

    def wake(self, t: float) -> Event:
        return _ev("Wake", self.client, t, "waiting", woken=True)

    def renew(self, t: float, reply_t: float) -> list[Event]:
        send = self._held("RenewSend", t, "held")
        self.deadline = t + TTL_MS
        return [send, self._held("RenewReply", reply_t, "held", ok=True)]

    def done(self, t: float, ok: bool = True) -> list[Event]:
        body = self._held("BodyDone", t, "body_done") if self.watch else None
        release = self._held("Release", t + 1, "releasing")
        reply = self._held(
            "ReleaseReply", t + 3, "done", outcome="ok" if ok else "lost", ok=ok, lost=not ok
        )
        return [e for e in (body, release, reply) if e is not None]


def _shared_then_writer() -> list[Event]:
    """A writer holds; a reader is refused meanwhile (fail fast); once the writer is out,
    two readers share its fence while a waiting writer is refused and blocks; after the
    readers release, the writer's next attempt is granted a larger fence."""
    w1, r1, r2, r3 = (_Section(c, "read") for c in ("W1", "R1", "R2", "R3"))
    w1.kind = "write"
    w2 = _Section("W2", "write", wait_ms=5000)
    return [
        w1.acquire(0),
        w1.granted(2, 10),
        r1.acquire(10),
        r1.refused(12),
        *w1.done(50),
        r2.acquire(60),
        r2.granted(62, 10),
        r3.acquire(64),
        r3.granted(66, 10),
        w2.acquire(70),
        w2.refused(72, "waiting"),
        w2.block(73),
        *r2.done(100),
        *r3.done(110),
        w2.wake(114),
        w2.acquire(115),
        w2.granted(117, 11),
        *w2.done(150),
    ]


def _gave_up_then_reader() -> list[Event]:
    """A reader holds, renewing; a writer waits behind it, and its last attempt (sent at
    its deadline) is refused: the script takes it out of the queue, so a reader that comes
    next is granted beside the first."""
    r1, r2 = _Section("R1", "read"), _Section("R2", "read")
    w = _Section("W", "write", wait_ms=300)
    return [
        r1.acquire(0),
        r1.granted(2, 7),
        w.acquire(10),
        w.refused(12, "waiting"),
        w.block(13),
        *r1.renew(250, 252),
        w.wake(310),
        w.acquire(311),
        w.refused(313),
        r2.acquire(320),
        r2.granted(322, 7),
        *r2.done(340),
        *r1.done(400),
    ]


def _manual_write() -> list[Event]:
    """A manual write handle, released within its lease (answered 1)."""
    w = _Section("W", "write", watch=False)
    return [w.acquire(0), w.granted(2, 30), *w.done(500)]


def _check_each(traces: list[list[Event]]) -> list[tracecheck.Verdict]:
    """One verdict per single-key trace, two TLC runs at a time (TLC uses one core)."""
    with ThreadPoolExecutor(2) as pool:
        return [v for (v,) in pool.map(tracecheck.check, traces)]


def _index(events: list[Event], action: str, **where: Any) -> int:
    return next(
        n
        for n, e in enumerate(events)
        if e["action"] == action and all(e.get(k) == v for k, v in where.items())
    )


def test_a_readwrite_trace_is_told_by_its_roles() -> None:
    events = _shared_then_writer()
    assert tracecheck.is_readwrite(events)
    assert tracecheck.readers_of(events) == {"R1", "R2", "R3"}
    assert not tracecheck.is_semaphore(events) and not tracecheck.is_reentrant(events)
    lock = [{k: v for k, v in e.items() if k != "kind"} for e in events]
    assert not tracecheck.is_readwrite(lock)


def test_a_readwrite_model() -> None:
    events = _gave_up_then_reader()
    model = tracecheck.build_readwrite_model(events)
    assert model.module == "ReadWriteTrace"
    assert model.trace_spec is None  # the static spec/ReadWriteTrace.tla
    cfg = model.cfg.splitlines()
    assert "    Clients = {1, 2, 3}" in cfg
    assert "    Writers <- TraceWriters" in cfg and "    Waiters <- TraceWaiters" in cfg
    assert 'Role == <<"read", "write", "read">>' in model.data
    assert "Waits == <<FALSE, TRUE, FALSE>>" in model.data
    # The writer's last attempt (queue_ms 0) is row 9: its refusal leaves the queue.
    assert events[8]["queue_ms"] == 0
    assert "LastSent == <<0, 9, 0>>" in model.data
    # Readers share the fence: one rank.
    assert "Fence == <<1, 0, 1>>" in model.data


def test_a_data_loss_or_a_handed_key_is_not_a_readwrite_behaviour() -> None:
    events = _manual_write()
    with pytest.raises(tracecheck.TraceError, match="losing the keys"):
        tracecheck.build_readwrite_model([*events, {"action": tracecheck.DATA_LOSS, "t": 600.0}])
    handed = [*events[:2], _ev("Wake", "W", 3, "held", fence=30)]
    with pytest.raises(tracecheck.TraceError, match="never hands the key over"):
        tracecheck.build_readwrite_model(handed)
    unknown = [{k: v for k, v in events[0].items() if k != "kind"}]
    with pytest.raises(tracecheck.TraceError, match="records no role"):
        tracecheck.build_readwrite_model(unknown)


def test_refused_fail_fast_sections_are_condensed() -> None:
    """A writer polling a held key with fail-fast sections (one refused attempt each, a
    section and a model client each: the chaos suite's pollers) keeps the first and the
    last of its run: a refused fail-fast attempt leaves nothing at Redis (no place, no
    lease), so the sections between change nothing a later event can tell."""

    def refused(client: str, t: float) -> list[Event]:
        return [
            _ev("Acquire", client, t, "acquiring", key=KEY, kind="write", ttl_ms=TTL_MS,
                retries=0, watch=True),
            _ev("AcquireReply", client, t + 1, "done", granted=False, outcome="not_acquired"),
        ]

    polls = [e for n in range(5) for e in refused(f"P1.{n + 1}", 10.0 * n)]
    waiting = [{**e, "wait_ms": 500} for e in refused("P2.1", 3.0)]
    kept = {e["client"] for e in tracecheck.condense([*polls, *waiting])}
    assert kept == {"P1.1", "P1.5", "P2.1"}


def _killed_reader() -> list[Event]:
    """Two readers; one is killed after a renewal (its events stop mid-section), the
    other renews and leaves; a writer polling fail-fast is refused while the dead
    reader's share lasts (its renewal's send plus its TTL: 1255 ms), granted after."""
    dead, live = _Section("D", "read"), _Section("L", "read")
    w1, w2 = _Section("W.1", "write"), _Section("W.2", "write")
    return [
        dead.acquire(0),
        dead.granted(2, 7),
        live.acquire(5),
        live.granted(7, 7),
        *dead.renew(255, 257),
        *live.renew(260, 262),
        *live.renew(510, 512),
        *live.done(600),
        w1.acquire(700),
        w1.refused(702),
        w2.acquire(1400),
        w2.granted(1402, 8),
        *w2.done(1500),
    ]


@needs_tlc
@pytest.mark.tlc
def test_a_killed_reader_dies_and_its_share_lapses_at_its_own_expiry() -> None:
    """A section whose events stop mid-section may die (the spec's Die): the run is a
    behaviour, the writer refused while the dead reader's share lasts; its refusal
    forged into a grant is not (the dead reader's share is still live then)."""
    events = _killed_reader()
    model = tracecheck.build_readwrite_model(events, ticks=4)
    assert '"die"' in model.cfg and "die |-> {1}" in model.data
    refused = _index(events, "AcquireReply", client="W.1")
    forged = [
        *events[:refused],
        {**events[refused], "granted": True, "phase": "held", "outcome": "none", "fence": 8},
    ]
    accepted, rejected = _check_each([events, forged])
    assert accepted.accepted, accepted.describe() + "\n" + accepted.output[-2000:]
    assert not rejected.accepted
    assert (rejected.first_unexplained, rejected.by) == (refused, "TLC"), rejected.describe()


def test_no_starvation_is_offered_once_a_section_is_lost() -> None:
    """A reader whose renewal hangs past its lease (a paused Redis) fires its lease
    timeout, and the renewal's refusal comes back late: late before the timeout, its
    timers may have been held back (a starvation is offered, and its end), but once lost
    it has no timer left, so the late reply is no sign of one."""
    r = _Section("R", "read")
    events = [
        r.acquire(0),
        r.granted(2, 7),
        r._held("RenewSend", 250, "held"),
        r._held("LeaseTimeout", 1002, "held", lost=True),
        r._held("RenewReply", 1900, "held", lost=True, ok=False),
        r._held("BodyDone", 2000, "body_done", lost=True),
    ]
    rows = tracecheck.build_readwrite_model(events, ticks=4).data.split("Trace == <<")[1]
    offers = [
        (row.split("starve |-> ")[1].split("}")[0], row.split("resume |-> ")[1].split("}")[0])
        for row in rows.split("],")
    ]
    timeout, reply = 3, 4
    assert offers[timeout] == ("{1", "{1")
    assert offers[reply] == ("{", "{")


def test_the_prepass_lets_readers_share_fences() -> None:
    events = _shared_then_writer()
    readers = tracecheck.readers_of(events)
    assert tracecheck.prepass(events, readers=readers) is None
    # Without the readers' sharing, the second reader's fence repeats the first's.
    problem = tracecheck.prepass(events)
    assert problem is not None and "already granted" in problem.reason

    grant = _index(events, "AcquireReply", client="R2")

    def refenced(fence: int) -> list[Event]:
        return [
            {**e, "fence": fence} if e["client"] == "R2" and e.get("fence") is not None else e
            for e in events
        ]

    # A reader's fence below the write whose reply came before its request.
    problem = tracecheck.prepass(refenced(9), readers=readers)
    assert problem is not None and problem.index == grant and "below fence 10" in problem.reason
    # A reader's fence that no write was granted, above the first write's.
    problem = tracecheck.prepass(refenced(12), readers=readers)
    assert problem is not None and problem.index == grant and "no write's fence" in problem.reason
    # Readers before any write share one value (the counter as it stood).
    first = _gave_up_then_reader()
    assert tracecheck.prepass(first, readers=tracecheck.readers_of(first)) is None
    split = [{**e, "fence": 8} if e["client"] == "R2" and e.get("fence") else e for e in first]
    problem = tracecheck.prepass(split, readers=tracecheck.readers_of(split))
    assert problem is not None and "differs from fence 7" in problem.reason


@needs_tlc
@pytest.mark.tlc
def test_hand_written_readwrite_traces() -> None:
    """A waiter that gave up is out of the queue: a reader after it is granted beside the
    first; the same reader granted while that writer still waits, ahead of it, is no
    behaviour, nor is a reader granted the fence of a write that comes after it."""
    good = _gave_up_then_reader()
    # 1. A reader granted while a writer waits ahead of it (a reader holds, the writer's
    #    place is queued): the queued writer holds back new readers.
    r2_at = _index(good, "Acquire", client="R2")
    block = _index(good, "Block", client="W")
    jumped = [
        *good[: block + 1],
        {**good[r2_at], "t": 100.0},
        {**good[r2_at + 1], "t": 102.0, "deadline": 1100.0},
    ]
    # 2. A reader's fence past the write it follows, a later write's: TLC orders it.
    shared = _shared_then_writer()
    r2 = _index(shared, "AcquireReply", client="R2")
    above = [{**e, "fence": 11} if e["client"] == "R2" and e.get("fence") else e for e in shared]

    cases: list[tuple[str, list[Event], int | None, str | None]] = [
        ("genuine: a waiter gave up, a reader after it", good, None, None),
        ("1. a reader granted past a queued writer", jumped, block + 2, "TLC"),
        ("2. a reader's fence past the write it follows", above, r2, "TLC"),
    ]
    verdicts = _check_each([trace for _, trace, _, _ in cases])
    for (name, _, index, by), v in zip(cases, verdicts, strict=True):
        if index is None:
            assert v.accepted, f"{name}: {v.describe()}\n{v.output[-2000:]}"
        else:
            assert not v.accepted, f"{name}: accepted"
            assert (v.first_unexplained, v.by) == (index, by), f"{name}: {v.describe()}"


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


def _contended(server: RedisServer, path: Path) -> list[Event]:
    """Sync, threads: two readers hold at once through a renewal each; meanwhile a
    fail-fast writer is refused, a waiting writer is refused and blocks, and a fail-fast
    reader is held back by that queued writer; once the readers are out, the writer is
    granted a larger fence."""
    with NdjsonRecorder(path, append=False) as rec:
        watch = Watch(rec)
        with distlock.ReadWriteLock(server.url, prefix="rt-c", ttl_ms=400, trace=watch) as rw:
            all_in, out = threading.Barrier(3, timeout=30), threading.Event()

            def reader() -> None:
                with rw.read.hold("x"):
                    all_in.wait()
                    assert out.wait(30)

            def writer() -> None:
                with rw.write.hold("x", wait_ms=5000):
                    pass

            readers = [threading.Thread(target=reader) for _ in range(2)]
            for thread in readers:
                thread.start()
            all_in.wait()
            assert rw.write.acquire("x") is None
            waiter = threading.Thread(target=writer)
            waiter.start()
            watch.wait_for(lambda seen: any(e["action"] == "Block" for e in seen))
            assert rw.read.acquire("x") is None
            watch.wait_for(lambda seen: sum(e["action"] == "RenewReply" for e in seen) >= 2)
            out.set()
            for thread in (*readers, waiter):
                thread.join(30)
                assert not thread.is_alive()
    return read_events(path)


def _waiting_readers(server: RedisServer, path: Path) -> list[Event]:
    """asyncio: a writer holds through a renewal; a waiting reader times out (its last
    attempt refused), another waits and is granted the writer's fence once it is out; a
    waiting writer is cancelled while blocked (withdrawn); then a manual reader handle,
    the same fence again."""
    with NdjsonRecorder(path, append=False) as rec:

        async def main() -> None:
            seen: list[Event] = []
            changed = asyncio.Event()

            def watch(event: Event) -> None:
                rec(event)
                seen.append(event)
                changed.set()

            async def until(pred: Callable[[list[Event]], bool]) -> None:
                while not pred(seen):
                    changed.clear()
                    await asyncio.wait_for(changed.wait(), 30)

            def blocked(kind: str) -> Callable[[list[Event]], bool]:
                """Whether a section of that role waiting 5 s has blocked."""

                def pred(s: list[Event]) -> bool:
                    waiting = {
                        e["client"]
                        for e in s
                        if e["action"] == "Acquire"
                        and e["kind"] == kind
                        and e.get("wait_ms") == 5000
                    }
                    return any(e["action"] == "Block" and e["client"] in waiting for e in s)

                return pred

            async with distlock.asyncio.ReadWriteLock(
                server.url, prefix="rt-w", ttl_ms=400, trace=watch
            ) as rw:
                out = asyncio.Event()

                async def writer() -> None:
                    async with rw.write.hold("x"):
                        await until(lambda s: any(e["action"] == "RenewReply" for e in s))
                        await out.wait()

                async def reader() -> None:
                    async with rw.read.hold("x", wait_ms=5000):
                        pass

                holder = asyncio.create_task(writer())
                await until(lambda s: any(e.get("granted") for e in s))
                assert await rw.read.acquire("x", wait_ms=150) is None
                waiter = asyncio.create_task(reader())
                await until(blocked("read"))
                cancelled = asyncio.create_task(rw.write.acquire("x", wait_ms=5000))
                await until(blocked("write"))
                cancelled.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await cancelled
                await until(lambda s: any(e["action"] == "WithdrawReply" for e in s))
                out.set()
                await holder
                await waiter
                handle = await rw.read.acquire("x")
                assert handle is not None
                assert await handle.release()

        asyncio.run(main())
    return read_events(path)


@needs_tlc
@pytest.mark.tlc
def test_readwrite_runs_are_behaviours_of_the_spec(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    """Real runs, accepted; corrupted, rejected where they go wrong."""
    contended = _contended(redis_server, tmp_path / "c.ndjson")
    waiting = _waiting_readers(redis_server, tmp_path / "w.ndjson")
    for events in (contended, waiting):
        assert tracecheck.is_readwrite(events)
        assert len(tracecheck.split_by_key(events)) == 1
    # What the runs show: readers sharing one fence, then a larger writer's fence; the
    # writer's fence shared by the readers after it; a waiter's last attempt refused; a
    # withdrawal; a reader held back by a queued writer.
    grants = [e for e in contended if e["action"] == "AcquireReply" and e["granted"]]
    kinds = {e["client"]: e["kind"] for e in contended if e["action"] == "Acquire"}
    assert [kinds[e["client"]] for e in grants] == ["read", "read", "write"]
    assert grants[0]["fence"] == grants[1]["fence"] < grants[2]["fence"]
    late = [e for e in waiting if e["action"] == "AcquireReply" and e["granted"]]
    assert len({e["fence"] for e in late}) == 1 and len(late) == 3
    assert any(e["action"] == "Acquire" and e.get("queue_ms") == 0 for e in waiting)
    assert any(e["action"] == "WithdrawReply" for e in waiting)

    # 1. The fail-fast writer's refusal forged into a grant while the readers hold.
    refused_writer = next(
        n
        for n, e in enumerate(contended)
        if e["action"] == "AcquireReply" and kinds[e["client"]] == "write" and not e["granted"]
    )
    beside_readers = [*contended]
    beside_readers[refused_writer] = {
        **contended[refused_writer],
        "granted": True,
        "phase": "held",
        "outcome": "none",
        "fence": grants[2]["fence"] + 1,
    }
    # 2. The reader that timed out granted (the writer's fence) while the writer holds.
    wkinds = {e["client"]: e["kind"] for e in waiting if e["action"] == "Acquire"}
    refused_reader = next(
        n
        for n, e in enumerate(waiting)
        if e["action"] == "AcquireReply" and wkinds[e["client"]] == "read" and not e["granted"]
    )
    beside_writer = [
        *waiting[:refused_reader],
        {
            **waiting[refused_reader],
            "granted": True,
            "phase": "held",
            "fence": late[0]["fence"],
        },
    ]
    # 3. The waiting writer granted the readers' fence (no larger than theirs).
    writer = grants[2]["client"]
    granted_at = contended.index(grants[2])
    reused = [
        {**e, "fence": grants[0]["fence"]} if e["client"] == writer and e["fence"] else e
        for e in contended
    ]
    # 4. The manual reader's release sent 3 TTLs late, still answered 1.
    manual = waiting[-1]["client"]
    release = _index(waiting, "Release", client=manual)
    released_late = [
        {**e, "t": e["t"] + 1200} if n >= release else e for n, e in enumerate(waiting)
    ]

    cases: list[tuple[str, list[Event], int | None, str | None]] = [
        ("genuine: contended, sync", contended, None, None),
        ("genuine: waiting readers, asyncio", waiting, None, None),
        ("1. a writer granted beside live readers", beside_readers, refused_writer, "TLC"),
        ("2. a reader granted while a writer holds", beside_writer, refused_reader, "TLC"),
        ("3. a writer's fence not above the readers'", reused, granted_at, "pre-pass"),
        ("4. a release answered 1 after the lease expired", released_late, len(waiting) - 1, "TLC"),
    ]
    verdicts = _check_each([trace for _, trace, _, _ in cases])
    for (name, _, index, by), v in zip(cases, verdicts, strict=True):
        if index is None:
            assert v.accepted, f"{name}: {v.describe()}\n{v.output[-2000:]}"
        else:
            assert not v.accepted, f"{name}: accepted"
            assert (v.first_unexplained, v.by) == (index, by), f"{name}: {v.describe()}"
