"""The sync Lock only: a body that holds the GIL past its lease starves the renewal
thread (asyncio has no timer thread to starve; its blocked event loop is in
``tests/drivers/test_lock_asyncio.py``), and the timer thread and workers of Locks never
closed end once idle (asyncio has no threads of its own)."""

from __future__ import annotations

import ctypes
import threading
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


def test_threads_of_a_lock_never_closed_end_when_idle(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The redis-py habit: a Lock made per use and dropped, never closed.  The timer
    # thread and the workers are the process's: they end once idle, Locks closed or not.
    from distlock import _scheduler
    from distlock._sync import backend

    monkeypatch.setattr(_scheduler, "IDLE_SECONDS", 0.1)
    monkeypatch.setattr(backend.WORKERS, "_idle_seconds", 0.1)
    client = redis.Redis.from_url(redis_server.url)

    def alive() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.name.startswith("distlock-")]

    for i in range(20):
        Lock(client, prefix="drop", ttl_ms=2_000).run(str(i), lambda h: None)
    assert backend.TIMERS.running and alive()  # the renewal timers did start a thread...
    ended = threading.Event()

    def poll() -> None:
        while alive():
            if ended.wait(0.05):
                return
        ended.set()

    poller = threading.Thread(target=poll)
    poller.start()
    assert ended.wait(30), f"{alive()} still alive"
    poller.join()
    client.close()
