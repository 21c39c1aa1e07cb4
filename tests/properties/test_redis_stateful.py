"""Many handles from both drivers contend for a few ids on a real redis-server.

Each client is a sync :class:`distlock.Lock` or an asyncio :class:`distlock.asyncio.Lock`
with a short TTL.  Rules start ``hold`` sections (a thread per sync body, a task on one
event loop thread for asyncio bodies) or manual handles, end bodies, extend, release,
hold a client's renewals at a gate (a hung extend path), expire keys (``PEXPIRE key 1``),
delete keys (Redis losing them), and let time pass so TTLs run out.

Every section is recorded (client, id, start, end, fence, outcome).  The invariants need
no clock assumption, so no timing is asserted:

- NoOverlappingSuccess: two sections on one id that both reported success never had
  their bodies overlap;
- every loss surfaced: a section whose token was deleted from Redis behind its back, or
  whose key was granted to another section (a larger fence) before its body ended,
  never reports success.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
import time
import uuid
from collections import Counter
from collections.abc import Coroutine, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

import pytest
import redis
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

import distlock
import distlock.asyncio
from distlock._core.section import Outcome, Section
from tests.properties import profiles
from tests.properties.gates import AsyncGatedRedis, Gate, GatedRedis
from tests.redis_server import RedisServer

T = TypeVar("T")

IDS: Final = ("a", "b")
#: Long enough that nothing in the test waits this long unless something is broken.
LIVENESS_S: Final = 30.0

#: Trace events of the examples run so far (one list per example), for trace validation.
RECORDED: list[list[dict[str, Any]]] = []
#: Every section of every example, for the summary line.
ALL_RECORDS: list[Record] = []


def _now() -> float:
    return time.monotonic()


@dataclass
class Record:
    """One section as its caller saw it."""

    client: str
    id: str
    kind: str  # "run" | "manual"
    start: float | None = None
    end: float | None = None
    fence: int | None = None
    token: str | None = None
    #: "ok", "lost", "not_acquired" or "error: ..."; None while running.
    outcome: str | None = None
    core_outcome: Outcome | None = None
    section: Section | None = None
    #: The test deleted this section's token from Redis before the section released it.
    deleted: bool = False
    started: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)


@contextlib.contextmanager
def _recording(rec: Record) -> Iterator[None]:
    """Record how a ``hold`` section ended, whatever it raised; then mark it done."""
    try:
        yield
        rec.outcome = "ok"
    except distlock.LockNotAcquiredError:
        rec.outcome = "not_acquired"
    except distlock.LockLeaseLostError:
        rec.outcome = "lost"
    except BaseException as exc:
        rec.outcome = f"error: {exc!r}"
    finally:
        if rec.section is not None:
            rec.core_outcome = rec.section.outcome
        rec.started.set()
        rec.done.set()


class LoopThread:
    """One asyncio event loop in a daemon thread, for the asyncio clients."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.submit(coro).result(LIVENESS_S)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(LIVENESS_S)
        self.loop.close()


class Client:
    """A Lock of one driver, its gate, and the section it is running (one at a time)."""

    def __init__(self, name: str, gate: Gate) -> None:
        self.name = name
        self.gate = gate
        self.record: Record | None = None
        self.finish: Any = None  # threading.Event or asyncio.Event of the running body
        self.handle: Any = None  # the manual handle, if any
        #: From the rule that starts a section to the rule that ends it.  Preconditions read
        #: this, never ``record.done``: a section may end on its own (not acquired, or lost
        #: and cancelled) at a moment the rule sequence does not decide, and Hypothesis needs
        #: the same rules enabled each time it replays a sequence.
        self.active = False


class RedisMachine(RuleBasedStateMachine):
    server: RedisServer
    loop: LoopThread

    def __init__(self) -> None:
        super().__init__()
        self.prefix = f"prop-{uuid.uuid4().hex[:10]}"
        self.admin = redis.Redis(host=self.server.host, port=self.server.port)
        self.records: list[Record] = []
        self.tokens: dict[str, Record] = {}
        self.events: list[dict[str, Any]] = []
        self._events_lock = threading.Lock()
        self.sync: list[tuple[Client, distlock.Lock]] = []
        self.aio: list[tuple[Client, distlock.asyncio.Lock]] = []
        RECORDED.append(self.events)

    def _trace(self, event: dict[str, Any]) -> None:
        with self._events_lock:
            self.events.append(event)

    @initialize(ttl_ms=st.sampled_from([120, 250]), heartbeat=st.sampled_from([None, False]))
    def make_clients(self, ttl_ms: int, heartbeat: bool | None) -> None:
        host, port = self.server.host, self.server.port
        for n in range(2):
            gate = Gate()
            lock = distlock.Lock(
                GatedRedis(gate, host=host, port=port),
                prefix=self.prefix,
                ttl_ms=ttl_ms,
                heartbeat_ms=heartbeat,
                trace=self._trace,
            )
            self.sync.append((Client(f"sync{n}", gate), lock))
        for n in range(2):
            gate = Gate()

            async def make(gate: Gate = gate) -> distlock.asyncio.Lock:
                return distlock.asyncio.Lock(
                    AsyncGatedRedis(gate, host=host, port=port),
                    prefix=self.prefix,
                    ttl_ms=ttl_ms,
                    heartbeat_ms=heartbeat,
                    trace=self._trace,
                )

            self.aio.append((Client(f"aio{n}", gate), self.loop.run(make())))

    # -- helpers ---------------------------------------------------------------------------

    def clients(self) -> Iterator[Client]:
        for c, _ in self.sync:
            yield c
        for c, _ in self.aio:
            yield c

    def _idle(self) -> list[Client]:
        return [c for c in self.clients() if not c.active]

    def _begin(self, client: Client, id: str, kind: str) -> Record:
        rec = Record(client.name, id, kind)
        client.record = rec
        client.handle = None
        client.finish = None
        client.active = True
        self.records.append(rec)
        ALL_RECORDS.append(rec)
        return rec

    def _granted(self, rec: Record, handle: Any) -> None:
        rec.start = _now()
        rec.fence = handle.fence
        rec.token = handle.token
        rec.section = handle._section
        self.tokens[handle.token] = rec

    def _sync_lock(self, client: Client) -> distlock.Lock | None:
        return next((lock for c, lock in self.sync if c is client), None)

    def _aio_lock(self, client: Client) -> distlock.asyncio.Lock | None:
        return next((lock for c, lock in self.aio if c is client), None)

    # -- sections --------------------------------------------------------------------------

    @precondition(lambda self: bool(self._idle()))
    @rule(pick=st.integers(0, 7), id=st.sampled_from(IDS))
    def start_run(self, pick: int, id: str) -> None:
        """``hold(id)``: the body runs until ``finish_body`` (or until cancelled on loss)."""
        idle = self._idle()
        client = idle[pick % len(idle)]
        rec = self._begin(client, id, "run")
        sync_lock = self._sync_lock(client)
        if sync_lock is not None:
            finish = threading.Event()
            client.finish = finish
            threading.Thread(target=self._sync_body, args=(sync_lock, rec, finish)).start()
        else:
            aio_lock = self._aio_lock(client)
            assert aio_lock is not None

            async def start() -> None:
                finish = asyncio.Event()
                client.finish = finish
                asyncio.get_running_loop().create_task(self._aio_body(aio_lock, rec, finish))

            self.loop.run(start())
        assert rec.started.wait(LIVENESS_S), f"{rec} neither entered its body nor failed"

    def _sync_body(self, lock: distlock.Lock, rec: Record, finish: threading.Event) -> None:
        with _recording(rec), lock.hold(rec.id, retries=0) as handle:
            self._granted(rec, handle)
            rec.started.set()
            finish.wait()
            rec.end = _now()

    async def _aio_body(
        self, lock: distlock.asyncio.Lock, rec: Record, finish: asyncio.Event
    ) -> None:
        with _recording(rec):
            async with lock.hold(rec.id, retries=0) as handle:
                self._granted(rec, handle)
                rec.started.set()
                try:
                    await finish.wait()
                finally:
                    rec.end = _now()

    @precondition(lambda self: bool(self._idle()))
    @rule(pick=st.integers(0, 7), id=st.sampled_from(IDS))
    def start_manual(self, pick: int, id: str) -> None:
        """``acquire(id)``: a manual handle, extended and released by later rules."""
        idle = self._idle()
        client = idle[pick % len(idle)]
        rec = self._begin(client, id, "manual")
        sync_lock = self._sync_lock(client)
        try:
            if sync_lock is not None:
                handle: Any = sync_lock.acquire(id, retries=0)
            else:
                aio_lock = self._aio_lock(client)
                assert aio_lock is not None
                handle = self.loop.run(aio_lock.acquire(id, retries=0))
        except distlock.LockLeaseLostError as exc:
            # A grant whose reply came after the lease it granted (a slow machine, a TTL
            # of 120 ms): no section starts, and the key was given back.
            late = exc.reason is distlock.LossReason.GRANTED_TOO_LATE
            rec.outcome = "lost" if late else f"error: {exc!r}"
            rec.started.set()
            rec.done.set()
            return
        if handle is None:
            rec.outcome = "not_acquired"
            rec.done.set()
        else:
            client.handle = handle
            self._granted(rec, handle)
        rec.started.set()

    def _running(self, kind: str) -> list[Client]:
        return [
            c
            for c in self.clients()
            if c.active and c.record is not None and c.record.kind == kind
        ]

    @precondition(lambda self: bool(self._running("run")))
    @rule(pick=st.integers(0, 7))
    def finish_body(self, pick: int) -> None:
        """The body returns; the section releases and reports."""
        running = self._running("run")
        client = running[pick % len(running)]
        rec = client.record
        assert rec is not None
        self._finish_run(client)
        # Releases do not pass the gate: the section finishes even with renewals held.
        assert rec.done.wait(LIVENESS_S), f"{rec} did not finish"

    def _finish_run(self, client: Client) -> None:
        client.active = False
        if isinstance(client.finish, threading.Event):
            client.finish.set()
        elif client.finish is not None:
            self.loop.loop.call_soon_threadsafe(client.finish.set)

    @precondition(lambda self: any(c.gate.is_open for c in self._running("manual")))
    @rule(pick=st.integers(0, 7))
    def extend(self, pick: int) -> None:
        """``handle.extend()`` on a manual handle (not while its extends are held)."""
        running = [c for c in self._running("manual") if c.gate.is_open]
        client = running[pick % len(running)]
        if client.handle is None:
            return  # its acquire found the key taken
        if self._sync_lock(client) is not None:
            client.handle.extend()
        else:
            self.loop.run(client.handle.extend())

    @precondition(lambda self: bool(self._running("manual")))
    @rule(pick=st.integers(0, 7))
    def release(self, pick: int) -> None:
        running = self._running("manual")
        client = running[pick % len(running)]
        self._release_manual(client)

    def _release_manual(self, client: Client) -> None:
        client.active = False
        rec = client.record
        assert rec is not None
        if client.handle is None:
            return  # its acquire found the key taken: nothing to release
        rec.end = _now()
        if self._sync_lock(client) is not None:
            ok = client.handle.release()
        else:
            ok = self.loop.run(client.handle.release())
        rec.outcome = "ok" if ok else "lost"
        rec.core_outcome = client.handle._section.outcome
        rec.done.set()

    # -- faults and time ----------------------------------------------------------------------

    @rule(pick=st.integers(0, 7))
    def pause_renewals(self, pick: int) -> None:
        """Hold this client's extend calls: its renewals hang with no answer."""
        clients = list(self.clients())
        clients[pick % len(clients)].gate.close()

    @rule(pick=st.integers(0, 7))
    def resume_renewals(self, pick: int) -> None:
        clients = list(self.clients())
        clients[pick % len(clients)].gate.open()

    @rule(id=st.sampled_from(IDS))
    def expire_key(self, id: str) -> None:
        """``PEXPIRE key 1`` from outside the lock."""
        self.admin.pexpire(f"{self.prefix}:{id}", 1)

    @rule(id=st.sampled_from(IDS))
    def delete_key(self, id: str) -> None:
        """Redis loses the key: whoever's token it held must not report success."""
        token = self.admin.getdel(f"{self.prefix}:{id}")
        if token is not None:
            rec = self.tokens.get(token.decode() if isinstance(token, bytes) else token)
            if rec is not None:
                rec.deleted = True

    @rule(ms=st.sampled_from([10, 60, 150, 300]))
    def let_time_pass(self, ms: int) -> None:
        """Time passes: TTLs run out, heartbeats fire (the scenario, not a synchronisation)."""
        time.sleep(ms / 1000.0)

    # -- invariants ---------------------------------------------------------------------------

    def _finished(self) -> list[Record]:
        return [r for r in self.records if r.done.is_set()]

    @invariant()
    def no_overlapping_success(self) -> None:
        ok = [r for r in self._finished() if r.outcome == "ok"]
        for a, b in itertools.combinations(ok, 2):
            if a.id != b.id:
                continue
            assert a.start is not None and a.end is not None
            assert b.start is not None and b.end is not None
            assert a.end <= b.start or b.end <= a.start, f"both succeeded, overlapping: {a} {b}"

    @invariant()
    def every_loss_surfaced(self) -> None:
        finished = self._finished()
        for a in finished:
            assert a.outcome is not None and not a.outcome.startswith("error"), a
            if a.outcome != "ok":
                continue
            assert a.core_outcome is Outcome.OK, a
            assert not a.deleted, f"{a} reported success after its key was deleted"
            for b in self.records:
                if b is a or b.id != a.id or b.fence is None or b.start is None:
                    continue
                assert a.fence is not None and a.end is not None
                if b.fence > a.fence:
                    assert b.start >= a.end, (
                        f"{a} reported success though {b} was granted the key before it ended"
                    )

    def teardown(self) -> None:
        for client in self.clients():
            client.gate.open()
        for client in self.clients():
            rec = client.record
            if rec is None or not client.active:
                continue
            if rec.kind == "manual":
                self._release_manual(client)
            else:
                self._finish_run(client)
        for rec in self.records:
            assert rec.done.wait(LIVENESS_S), f"{rec} did not finish"
        for _, lock in self.sync:
            lock.close()
        for _, alock in self.aio:
            self.loop.run(alock.aclose())
        self.admin.close()
        self.no_overlapping_success()
        self.every_loss_surfaced()


@pytest.fixture(scope="module")
def loop_thread() -> Iterator[LoopThread]:
    loop = LoopThread()
    yield loop
    loop.close()


def test_contending_clients(redis_server: RedisServer, loop_thread: LoopThread) -> None:
    RedisMachine.server = redis_server
    RedisMachine.loop = loop_thread
    run_state_machine_as_test(RedisMachine, settings=profiles.scaled(20, floor=10, steps=30))
    outcomes = Counter(r.outcome for r in ALL_RECORDS)
    print(f"redis stateful: {len(RECORDED)} examples, {len(ALL_RECORDS)} sections {dict(outcomes)}")
