"""The sync Lock only: a body that holds the GIL past its lease starves the renewal
thread (asyncio has no timer thread to starve; its blocked event loop is in
``tests/drivers/test_lock_asyncio.py``), and the timer thread and workers of Locks never
closed end once idle (asyncio has no threads of its own)."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import time
from typing import Any

import pytest
import redis

from distlock import Lock, LockHandle, LockLeaseLostError, LossReason
from tests.redis_server import RedisServer


def test_gil_held_past_the_ttl_is_caught(r: redis.Redis) -> None:
    ttl_ms = 500
    # PyDLL calls keep the GIL, so the timer thread cannot run while usleep blocks.
    libc = ctypes.PyDLL(None)
    sent_at: list[float] = []
    ran: list[int] = []

    def trace(event: dict[str, Any]) -> None:
        if event["action"] == "Acquire":
            sent_at.append(event["t"])

    def body(h: LockHandle) -> None:
        ran.append(1)
        # Hold the GIL until the lease, counted from the acquire's send, is over on the
        # client's own clock: the section is certainly past its deadline when it ends.
        left_ms = sent_at[0] + ttl_ms - time.monotonic() * 1000
        libc.usleep(int(max(0.0, left_ms) * 1000) + 1_000)

    with (
        Lock(r, prefix="gil", ttl_ms=ttl_ms, heartbeat_ms=ttl_ms // 2, trace=trace) as locks,
        pytest.raises(LockLeaseLostError) as info,
    ):
        locks.run("k", body)
    assert ran == [1]
    # Whichever of the starved timer or the completion check sees the deadline first; a
    # renewal the timer sent just before the GIL was taken finds the key expired.  Not a
    # release rejection: the loss must be known before the release reply says so.
    assert info.value.reason in (
        LossReason.DEADLINE_AT_COMPLETION,
        LossReason.DEADLINE_PASSED,
        LossReason.RENEW_REJECTED,
    )


#: Run in a process of its own: the timer thread of the test process also serves every
#: earlier test's Locks, whose entries (a disarmed renewal waits in its bucket until its
#: instant) may keep it up for a lease after their last use.
_IDLE_THREADS = """
import sys, threading
import redis
import distlock
from distlock import _scheduler
from distlock._sync import backend

_scheduler.IDLE_SECONDS = 0.1
backend.WORKERS._idle_seconds = 0.1
client = redis.Redis.from_url(sys.argv[1])

def alive():
    return [t for t in threading.enumerate() if t.name.startswith("distlock-")]

for i in range(20):
    distlock.Lock(client, prefix="drop", ttl_ms=2_000).run(str(i), lambda h: None)
assert backend.TIMERS.running and alive(), "the renewal timers started no thread"
ended = threading.Event()

def poll():
    while alive():
        if ended.wait(0.05):
            return
    ended.set()

poller = threading.Thread(target=poll)
poller.start()
assert ended.wait(30), f"{alive()} still alive"
poller.join()
client.close()
print("ended")
"""


def test_threads_of_a_lock_never_closed_end_when_idle(redis_server: RedisServer) -> None:
    # The redis-py habit: a Lock made per use and dropped, never closed.  The timer
    # thread and the workers are the process's: they end once idle, Locks closed or not.
    proc = subprocess.run(
        [sys.executable, "-c", _IDLE_THREADS, redis_server.url],
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ended"
