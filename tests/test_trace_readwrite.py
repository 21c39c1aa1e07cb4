"""Recorded traces of a read-write lock's sections, validated against ``spec/ReadWrite.tla``.

A read or write section takes the lock's actions and records the same transitions; its
Acquire record also carries the role (``kind``: read or write), which is how
``validate-trace`` tells a read-write lock's key from the others.  Readers share fences: a
read grant reports the slot's counter as the last write left it.

Hand-written traces pin the model's reading of each step: readers sharing, a writer
waiting behind readers, a waiter giving up, a withdrawal, renewals, a manual handle.
Corrupted, each must be rejected at the event it corrupts: a writer granted while a
reader's lease is live, a reader granted while a writer holds, a writer's fence not above
an earlier one, a reader's fence that is no write's, a release answered 1 after the lease
expired.
"""

from __future__ import annotations

import shutil
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from distlock.tools import tracecheck

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


def _withdrawn() -> list[Event]:
    """A writer holds; a waiting reader is refused and withdraws (cancelled): its place
    goes, and a fail-fast writer after the holder's release is granted."""
    w1, w2 = _Section("W1", "write"), _Section("W2", "write")
    r = _Section("R", "read", wait_ms=5000)
    return [
        w1.acquire(0),
        w1.granted(2, 20),
        r.acquire(10),
        r.refused(12, "waiting"),
        r.block(13),
        _ev("Withdraw", "R", 40, "done", outcome="not_acquired"),
        _ev("WithdrawReply", "R", 42, "done", outcome="not_acquired"),
        *w1.done(60),
        w2.acquire(70),
        w2.granted(72, 21),
        *w2.done(90),
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
def test_readwrite_traces_are_behaviours_of_the_spec() -> None:
    traces = [_shared_then_writer(), _gave_up_then_reader(), _withdrawn(), _manual_write()]
    for v in _check_each(traces):
        assert v.accepted, v.describe() + "\n" + v.output[-2000:]


@needs_tlc
@pytest.mark.tlc
def test_corrupted_readwrite_traces_are_rejected() -> None:
    """Each corruption is rejected at the event it corrupts."""
    good = _shared_then_writer()

    # 1. The waiting writer's first attempt granted while two readers hold.
    refusal = _index(good, "AcquireReply", client="W2")
    writer_beside_readers = [
        *good[:refusal],
        {**good[refusal], "granted": True, "phase": "held", "fence": 11, "deadline": 1070.0},
    ]
    # 2. The fail-fast reader granted while the first writer holds (its fence).
    r1 = _index(good, "AcquireReply", client="R1")
    reader_beside_writer = [
        *good[:r1],
        {**good[r1], "granted": True, "phase": "held", "outcome": "none", "fence": 10},
    ]
    # 3. The second writer's fence no larger than the first's (the pre-pass), and (4.)
    #    a reader's fence above the write it follows: TLC orders it after a later write.
    late = _index(good, "AcquireReply", client="W2", granted=True)
    not_larger = [{**e, "fence": 9} if e["client"] == "W2" and e.get("fence") else e for e in good]
    r2 = _index(good, "AcquireReply", client="R2")
    above = [{**e, "fence": 11} if e["client"] == "R2" and e.get("fence") else e for e in good]
    # 5. A manual write handle's release sent 3 TTLs after its grant, answered 1.
    manual = _manual_write()
    released_late = [{**e, "t": e["t"] + 3000} if n >= 2 else e for n, e in enumerate(manual)]
    reply = _index(released_late, "ReleaseReply")
    # 6. A reader granted while a writer waits ahead of it (readers hold, the writer's
    #    place is queued): the queued writer holds back new readers.
    gave_up = _gave_up_then_reader()
    r2_at = _index(gave_up, "Acquire", client="R2")
    block = _index(gave_up, "Block", client="W")
    cut = [
        *gave_up[: block + 1],
        {**gave_up[r2_at], "t": 100.0},
        {**gave_up[r2_at + 1], "t": 102.0, "deadline": 1100.0},
    ]
    jumped = block + 2

    cases: list[tuple[str, list[Event], int, str]] = [
        ("1. a writer granted beside live readers", writer_beside_readers, refusal, "TLC"),
        ("2. a reader granted while a writer holds", reader_beside_writer, r1, "TLC"),
        ("3. a writer's fence not above an earlier one", not_larger, late, "pre-pass"),
        ("4. a reader's fence past the write it follows", above, r2, "TLC"),
        ("5. a release answered 1 after the lease expired", released_late, reply, "TLC"),
        ("6. a reader granted past a queued writer", cut, jumped, "TLC"),
    ]
    verdicts = _check_each([trace for _, trace, _, _ in cases])
    for (name, _, index, by), v in zip(cases, verdicts, strict=True):
        assert not v.accepted, f"{name}: accepted"
        assert (v.first_unexplained, v.by) == (index, by), f"{name}: {v.describe()}"
