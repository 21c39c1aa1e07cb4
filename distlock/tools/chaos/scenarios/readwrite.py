"""The read-write lock under faults: readers and writers of one key, through a proxy that
drops, delays or resets, on a Redis paused past the TTL, and beside a reader killed.

Victims on the faulted path (two readers sharing one ``ReadWriteLock``, as threads of one
service would, and a writer with its own) contend for one key with intruders on a direct,
healthy connection (a writer and a reader, each polling for the key), and with waiters
(``wait_ms``: a writer on the faulted path, a reader on a direct connection).  The
injector lands the fault once the trial's target, a reader in some trials and the writer
in the others, is inside its body with a renewal on the wire.

The checks are every scenario's (``invariants.check``), with two readers' bodies free to
overlap: a writer's body beside any other body is an overlap, judged by the bodies' own
records as a lock's pair is (no two successes; every loss beside a success surfaced); a
body that outlived its lease ended in ``LockLeaseLostError``; and the fences follow the
order of the scripts on the wire (a writer's larger than every fence granted before it,
a reader's at least the last writer's).  Each lapsing scenario must also have seen a
writer's body beside another one (the intruders really got in).

A reader killed mid-section (``readwrite-reader-killed-beside-a-live-one``) is the
semaphore's killed permit holder, for readers: its lease must end at its own expiry
instant, however often the live reader beside it renews.

The first trial of each is traced and checked by TLC against ``spec/ReadWrite.tla``
(``spec/ReadWriteTrace.tla``), as every primitive's is: its first four TTLs, condensed, at
four ticks per TTL.  That trial has one victim, the reader its fault targets, and one
waiter (the writer on the faulted path), and under a paused Redis no intruding reader:
each section at once is a model client more.
The killed reader's process records its events up to the kill; to the trace check it is
a section that stops, its share lapsing at its own expiry.  The spec has one TTL for
every lease, so in that trial the live reader's is the dead one's (renewed four times
within it); the other trials keep its ten times longer one.  The scenario's key is the
only key of the trial, so no other key of its Cluster slot takes a fence from the
counter it shares with them (which would lift a reader's fence above the last write's).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from functools import partial

from distlock import ReadWriteLock
from distlock._protocol import readers_key
from distlock.tools.chaos import waiters
from distlock.tools.chaos.clients import AnyLock
from distlock.tools.chaos.failures import require
from distlock.tools.chaos.harness import Scenario
from distlock.tools.chaos.params import RETRIES
from distlock.tools.chaos.processes import Child
from distlock.tools.chaos.recorder import Section, now
from distlock.tools.chaos.registration import Context, scenario
from distlock.tools.chaos.sections import Body
from distlock.tools.chaos.trials import VICTIM_ATTEMPTS, Injector
from distlock.tools.servers.toxiproxy import Proxy

TTL_MS = 300
#: A toxic of the proxy, added on entry and removed on exit.
Toxic = Callable[[], AbstractContextManager[object]]
TRIALS = 3

#: The killed reader's TTL, and the live reader's beside it (ten times longer, so that it
#: never lapses on a loaded machine), renewed four times within the dead reader's TTL.
KILL_TTL_MS = 1_000
LIVE_TTL_MS = 10_000
LIVE_HEARTBEAT_MS = KILL_TTL_MS // 4
#: How long the live reader stays after the kill: past one of its renewals, and well
#: before the dead reader's lease ends (at least 3/4 of its TTL after the kill).
LIVE_STAYS_S = 0.4
POLLERS = 2
#: Redis's TIME has microseconds; a score of whole milliseconds is up to 1 ms early.
TOLERANCE = 0.002


def _proxy(sc: Scenario) -> Proxy:
    assert sc.proxy is not None
    return sc.proxy


def _contend(
    sc: Scenario,
    trial: int,
    fault: Callable[[], None],
    *,
    via_proxy: bool,
    traced_reader_intrudes: bool = True,
) -> None:
    """One trial: the victims, intruders and waiters of the module's docstring, and the
    injector running ``fault``, all as threads of this process (``traced_reader_intrudes``
    false: the traced trial has no intruding reader)."""
    sc.recorder.trials += 1
    sc.trace.start(trial)
    traced = sc.trace.traced(trial)
    clients = sc.clients

    def readwrite(name: str, proxied: bool) -> ReadWriteLock:
        return clients.sync_readwrite(clients.sync_client(f"{name}-t{trial}", via_proxy=proxied))

    shared = readwrite("victim-rw0", via_proxy)
    victims: list[tuple[str, AnyLock]] = [("victim-r0", shared.read)]
    if not traced:
        # The traced trial has one victim, the reader its fault targets (_target), as a
        # lock's has (trials.TRACED_VICTIMS): each section at once is a model client more
        # for TLC (with all three, a paused Redis's trial ran past TLC's budget).
        own = readwrite("victim-rw1", via_proxy)
        victims += [("victim-r1", shared.read), ("victim-w0", own.write)]
    stop = threading.Event()
    threads = [
        threading.Thread(
            target=_victim,
            args=(sc, lock, role, sc.trials.victim_bodies(trial, i)),
            name=f"chaos-{role}",
            daemon=True,
        )
        for i, (role, lock) in enumerate(victims)
    ]
    direct = readwrite("intruder", False)
    intruders: list[tuple[str, AnyLock]] = [("intruder-w", direct.write)]
    if traced_reader_intrudes or not traced:
        intruders.append(("intruder-r", direct.read))
    helpers = [
        threading.Thread(
            target=_intruder, args=(sc, lock, role, stop), name=f"chaos-{role}", daemon=True
        )
        for role, lock in intruders
    ]
    waiting: list[tuple[str, AnyLock]] = [("waiter-w0", readwrite("waiter0", via_proxy).write)]
    if not traced:
        # The traced trial has the one waiter, on the faulted path (waiters.TRACED_WAITERS).
        waiting.append(("waiter-r1", readwrite("waiter1", False).read))
    helpers += [
        threading.Thread(
            target=waiters.sync_waiter,
            args=(sc.sections, lock, role, stop),
            name=f"chaos-{role}",
            daemon=True,
        )
        for role, lock in waiting
    ]
    sc.trials.run_threads(threads, Injector(fault), None, stop, helpers)
    clients.close_sync()
    sc.trace.stop()


def _victim(sc: Scenario, lock: AnyLock, role: str, plan: list[Body]) -> None:
    for body in plan:
        # A fault can fail the acquire itself (a connection error, never contention):
        # try again so that every planned body runs.
        for _ in range(VICTIM_ATTEMPTS):
            section = sc.sections.run_sync(lock, role, body, retries=RETRIES, retry_delay_ms=10)
            if section.entered or section.outcome != "error":
                break
            time.sleep(0.01)


def _intruder(sc: Scenario, lock: AnyLock, role: str, stop: threading.Event) -> None:
    for _ in range(200):
        if sc.sections.poll_until_entered(lock, stop, role) is None:
            return
        # Let the victims have the key between two intrusions.
        if stop.wait(sc.params.ttl * 1.5):
            return


def _target(trial: int) -> str:
    """Whom the fault of ``trial`` waits for: a reader, or the writer, in turn.  A reader
    first: the readers take the key at the start, the writer only once they are done
    (near the end of TLC's part of the traced trial, the first), so a fault on a reader
    lands, lapses and is taken over within what TLC checks."""
    return "victim-r" if trial % 2 == 0 else "victim-w"


def _finish_lapsed(sc: Scenario) -> None:
    verdict = sc.finish(expect="lapse", min_overlaps=1)
    require(
        verdict.fence_pairs > 0,
        "no writer's fence was compared with another section's: the fence check proved nothing",
    )


@scenario(
    "readwrite-proxy-drops-delays-resets",
    "read-write: readers and writers, proxy drops / delays / resets [sync]",
    "ReadWriteLock, two readers and a writer through a proxy that drops replies, delays "
    "them 2xTTL or resets connections: the lapse is surfaced, a writer's body never "
    "succeeds beside another body, writers' fences increase",
)
def readwrite_proxy_drops_delays_resets(ctx: Context) -> None:
    sc = ctx.scenario(ttl_ms=TTL_MS)
    proxy = _proxy(sc)
    toxics: list[tuple[str, Toxic]] = [
        ("timeout=0 on replies", partial(proxy.toxic, "timeout", stream="downstream", timeout=0)),
        (
            "latency 2xTTL on replies",
            partial(
                proxy.toxic, "latency", stream="downstream", latency=2 * TTL_MS, jitter=TTL_MS // 4
            ),
        ),
        (
            "reset_peer on requests",
            partial(proxy.toxic, "reset_peer", stream="upstream", timeout=0),
        ),
    ]
    for trial in range(TRIALS):
        what, toxic = toxics[trial % len(toxics)]

        def fault(victim: Section, what: str = what, toxic: Toxic = toxic) -> None:
            with toxic():
                sc.recorder.fault(what)
                sc.faults.wait_signal(victim)

        inject = partial(sc.faults.inject, fault, expect_lapse=True, who=_target(trial))
        _contend(sc, trial, inject, via_proxy=True)
    _finish_lapsed(sc)


@scenario(
    "readwrite-redis-paused-past-the-ttl",
    "read-write: Redis paused (SIGSTOP) 2.5xTTL under readers and a writer [sync]",
    "ReadWriteLock, redis-server paused for 2.5xTTL under readers and a writer: no body "
    "outlives its lease unsurfaced, a writer's body never succeeds beside another body",
    needs_own_redis=True,
)
def readwrite_redis_paused_past_the_ttl(ctx: Context) -> None:
    sc = ctx.scenario(ttl_ms=TTL_MS)
    server = sc.own_redis()

    def fault(victim: Section) -> None:
        sc.recorder.fault("redis-server paused")
        server.pause(2.5 * sc.params.ttl)

    for trial in range(TRIALS):
        inject = partial(sc.faults.inject, fault, expect_lapse=True, who=_target(trial))
        # The traced trial's reader is the victim alone: each request in flight through
        # the pause may run at any tick of it, and an intruding reader's renewal and
        # release beside the victim's took TLC from 9 s of CPU to 36 s on a trial.
        _contend(sc, trial, inject, via_proxy=False, traced_reader_intrudes=False)
    _finish_lapsed(sc)


@scenario(
    "readwrite-reader-killed-beside-a-live-one",
    "read-write: a reader killed (SIGKILL) beside a renewing one [sync]",
    "one of two readers SIGKILLed, the other renewing, then leaving: writers are refused "
    "until the dead reader's own expiry, granted right after",
)
def readwrite_reader_killed_beside_a_live_one(ctx: Context) -> None:
    """Two readers: a live one in this process (long TTL, renewing), the other in a child
    process, SIGKILLed after a renewal.  The live reader leaves soon after the kill, well
    before the dead reader's lease ends: writers (fail fast, and waiting) must then be
    refused until the dead reader's own expiry instant in Redis, which the live reader's
    renewals never moved, and granted within its TTL of the kill."""
    sc = ctx.scenario(ttl_ms=KILL_TTL_MS)
    rng = random.Random(20_261_205)
    readers = readers_key(sc.params.key)
    for trial in range(TRIALS):
        sc.recorder.trials += 1
        # The traced trial has the killed reader's events too, up to the kill: to the
        # trace check it is a section that dies (the spec's Die), its share lapsing at
        # its own expiry.
        part = sc.trace.part(trial)
        extra = () if part is None else (part,)
        sc.trace.start(trial)
        leave = threading.Event()
        live, live_section = _live_reader(sc, trial, leave)
        child = Child(
            "hold-read",
            sc.target.url,
            sc.params.prefix,
            sc.params.key_id,
            sc.params.ttl_ms,
            *extra,
        )
        done = threading.Event()
        attempts: list[Section] = []
        try:
            acquired = child.expect("ACQUIRED", 20)
            child.expect("RENEWED", 20)
            pollers = _writers(sc, trial, done, attempts)
            for t in pollers:
                t.start()
            # Kill at a random point of the heartbeat cycle (a fault's timing, not a wait).
            time.sleep(rng.uniform(0, sc.params.ttl / 4))
            killed_at = child.kill()
            sc.recorder.fault("reader SIGKILLed beside a renewing one")
            asked = now()
            score, redis_now = _score_and_time(sc, readers, acquired["token"])
            answered = now()
            # The live reader renews, then leaves while the dead one's lease still runs.
            time.sleep(LIVE_STAYS_S)
            score_then, _ = _score_and_time(sc, readers, acquired["token"])
            leave.set()
            live.join(timeout=10)
            left_at = live_section.end
            for t in pollers:
                t.join(timeout=sc.params.ttl + 10)
            require(not any(t.is_alive() for t in pollers), "writers never finished")
        finally:
            leave.set()
            done.set()
            child.close()
            live.join(timeout=10)
        sc.clients.close_sync()
        sc.trace.stop()
        if part is not None:
            sc.trace.add_part(part, "reader-process")

        token = acquired["token"]
        require(
            score is not None, f"the dead reader {token[:8]} was not in {readers} after the kill"
        )
        assert score is not None and left_at is not None
        require(
            score_then == score,
            f"the dead reader's expiry moved from {score} to {score_then} while the live "
            "reader renewed: another reader's renewal re-dated it",
        )
        left_ms = score - redis_now
        require(
            0 < left_ms <= sc.params.ttl_ms,
            f"the dead reader had {left_ms:.0f} ms left right after the kill, want within its "
            f"own TTL ({sc.params.ttl_ms} ms)",
        )
        expires_lo = asked + left_ms / 1000 - TOLERANCE
        expires_hi = answered + left_ms / 1000 + TOLERANCE
        require(
            left_at < expires_lo,
            "the live reader left after the dead one's lease ended: nothing to check "
            f"({1000 * (left_at - killed_at):.0f} ms after the kill, {left_ms:.0f} ms left)",
        )
        renewed = [
            c
            for c in sc.recorder.commands_of(live_section)
            if c.ok and killed_at < c.sent < left_at
        ]
        require(renewed, "the live reader never renewed between the kill and its leaving")
        granted = sorted((s for s in attempts if s.entered), key=lambda s: s.start or 0.0)
        refused = [s for s in attempts if s.outcome == "not_acquired"]
        require(granted, "no writer got the key after the dead reader's lease")
        first = granted[0]
        assert first.start is not None
        early = [s for s in granted if s.start is not None and s.start < expires_lo]
        require(not early, f"a writer granted before the dead reader's expiry: {early}")
        require(
            any(
                s.attempt_started > left_at and s.finished is not None and s.finished < expires_lo
                for s in refused
            ),
            "no writer was refused between the live reader's leaving and the dead reader's "
            "expiry: the 'not before' check proved nothing",
        )
        require(
            first.start <= max(expires_hi, killed_at + sc.params.ttl) + sc.params.slack,
            f"the key was free for writers {1000 * (first.start - killed_at):.0f} ms after the "
            f"kill (TTL {sc.params.ttl_ms} ms, {left_ms:.0f} ms left at the kill)",
        )
    sc.finish(expect="none")


def _live_reader(
    sc: Scenario, trial: int, leave: threading.Event
) -> tuple[threading.Thread, Section]:
    """A reader of the key until ``leave``, renewed every ``LIVE_HEARTBEAT_MS``; returns
    once it is inside its body."""
    # spec/ReadWrite.tla has one TTL for every lease: in the traced trial the live
    # reader's is the dead one's (still renewed four times within it).
    ttl_ms = KILL_TTL_MS if sc.trace.traced(trial) else LIVE_TTL_MS
    rw = sc.clients.sync_readwrite(
        sc.clients.sync_client(f"live-t{trial}", via_proxy=False),
        ttl_ms=ttl_ms,
        heartbeat_ms=LIVE_HEARTBEAT_MS,
    )

    def stay(_section: Section) -> None:
        leave.wait(sc.params.ttl + 30)

    body = Body(0.0, at_start=stay)
    thread = threading.Thread(
        target=sc.sections.run_sync,
        args=(rw.read, "live", body),
        kwargs={"retries": 0, "retry_delay_ms": 0, "ttl_ms": ttl_ms},
        name="chaos-live-reader",
        daemon=True,
    )
    thread.start()
    found: list[Section] = []

    def inside() -> bool:
        found[:] = [s for s in sc.recorder.in_body() if s.client == "live"]
        return bool(found) or not thread.is_alive()

    sc.recorder.wait_until(inside, 20)
    require(bool(found) and thread.is_alive(), "the live reader never got the key")
    return thread, found[0]


def _writers(
    sc: Scenario, trial: int, done: threading.Event, attempts: list[Section]
) -> list[threading.Thread]:
    """Writers on direct connections: ``POLLERS`` failing fast every 5 ms, and a waiter
    (``wait_ms``), whom nobody wakes: it must find the key free at its re-check."""
    roles = [(f"poller{i}", waiters.poll_until_granted) for i in range(POLLERS)]
    roles.append(("waiter0", waiters.until_granted))
    threads = []
    for role, target in roles:
        client = sc.clients.sync_client(f"{role}-t{trial}", via_proxy=False)
        rw = sc.clients.sync_readwrite(client)
        threads.append(
            threading.Thread(
                target=target,
                args=(sc.sections, rw.write, role, done, attempts),
                name=f"chaos-{role}",
                daemon=True,
            )
        )
    return threads


def _score_and_time(sc: Scenario, readers: str, token: str) -> tuple[float | None, float]:
    """A reader's expiry instant and Redis's clock, read together (ms)."""
    pipe = sc.admin.pipeline(transaction=True)
    pipe.zscore(readers, token)
    pipe.time()
    score, (seconds, micros) = pipe.execute()
    return score, seconds * 1000 + micros / 1000
