"""A lock holder killed with SIGKILL mid-section: the key must outlive it by its TTL, no
less (nobody else gets in early) and no more (the TTL is the crash backstop)."""

from __future__ import annotations

import random
import threading
import time

from distlock.tools.chaos import waiters
from distlock.tools.chaos.failures import require
from distlock.tools.chaos.processes import Child
from distlock.tools.chaos.recorder import Section, now
from distlock.tools.chaos.registration import Context, scenario

TRIALS = 3
POLLERS = 2
#: Redis reports PTTL in whole milliseconds; the poll replies are timed on our side.
TOLERANCE = 0.002


@scenario(
    "holder-killed-mid-section",
    "client process killed (SIGKILL) mid-section [sync]",
    "the holder process SIGKILLed after a renewal: refused until the key's PTTL runs out, "
    "waiters included",
)
def holder_killed_mid_section(ctx: Context) -> None:
    sc = ctx.scenario(ttl_ms=300)
    rng = random.Random(20_261_129)
    for trial in range(TRIALS):
        sc.recorder.trials += 1
        # The first trial's trace has the holder's events too, up to the kill: to the
        # trace check the dead holder is a section that stops (a starved one, whose
        # timers never run again), the key it leaves behind lapsing after its TTL.
        part = sc.trace.part(trial)
        extra = () if part is None else (part,)
        params = sc.params
        child = Child("hold", sc.target.url, params.prefix, params.key_id, params.ttl_ms, *extra)
        sc.trace.start(trial)
        try:
            acquired = child.expect("ACQUIRED", 20)
            child.expect("RENEWED", 20)
            done = threading.Event()
            attempts: list[Section] = []
            pollers = waiters.beside_a_dead_holder(
                sc.clients, sc.sections, trial, done, attempts, POLLERS
            )
            for t in pollers:
                t.start()
            # Kill at a random point of the heartbeat cycle (a fault's timing, not a wait).
            time.sleep(rng.uniform(0, sc.params.ttl / 4))
            killed_at = child.kill()
            sc.recorder.fault("lock holder SIGKILLed")
            asked = now()
            pttl = sc.admin.pttl(sc.params.key)
            answered = now()
            owner = sc.admin.get(sc.params.key)
            for t in pollers:
                t.join(timeout=sc.params.ttl + 10)
            require(not any(t.is_alive() for t in pollers), "pollers never finished")
        finally:
            child.close()
        sc.clients.close_sync()
        sc.trace.stop()
        if part is not None:
            sc.trace.add_part(part, "holder-process")

        # Held by the dead process right after the kill, for at most one TTL more.
        require(
            isinstance(owner, bytes) and owner.decode() == acquired["token"],
            f"the key's owner right after the kill: {owner!r}, want {acquired}",
        )
        require(0 < pttl <= sc.params.ttl_ms, f"PTTL right after the kill: {pttl} ms")
        expires_lo = asked + pttl / 1000 - TOLERANCE
        expires_hi = answered + pttl / 1000 + TOLERANCE
        # In the order the key was granted: a waiter asks long before it is granted.
        granted = sorted((s for s in attempts if s.entered), key=lambda s: s.start or 0.0)
        refused = [s for s in attempts if s.outcome == "not_acquired"]
        require(granted, "nobody got the lock after its holder died")
        first = granted[0]
        assert first.start is not None
        # Not before: every answer that came back before the key could have expired was no.
        early = [s for s in granted if s.start is not None and s.start < expires_lo]
        require(not early, f"granted before the dead holder's TTL ran out: {early}")
        require(
            any(
                s.attempt_started > killed_at and s.finished is not None and s.finished < expires_lo
                for s in refused
            ),
            "no attempt was refused between the kill and the expiry: the 'not before' check "
            "proved nothing",
        )
        # And after: promptly, within the TTL of the kill (plus polling and slack).
        require(
            first.start <= max(expires_hi, killed_at + sc.params.ttl) + sc.params.slack,
            f"the key was freed {1000 * (first.start - killed_at):.0f} ms after the kill "
            f"(TTL {sc.params.ttl_ms} ms, PTTL {pttl} ms)",
        )
    sc.finish(expect="none")
