"""A waiter that dies while queued costs the waiters behind it a short, stated bound.

Nobody can tell a dead waiter from a slow one, so what a waiter leaves behind ends soon
whatever the TTL (see :mod:`distlock._core.waiting`): its place ends within
``LONGEST_BLOCK_MS + QUEUE_GRACE_MS`` of its last attempt, and a key handed to it lives
``HANDED_TTL_MS`` until its first renewal, which a dead waiter never sends.  Here the
waiter is a real process, killed while blocked; the one behind it waits 10 s, a third of
the dead waiter's 30 s TTL, which it would have had to wait out before.

Also: the kinds refuse each other's keys, so each has its own queue: a lock's release
never hands its key to a reentrant lock's waiter (which would start its body on a key in
the wrong format, and lose it at its first renewal).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
import redis

import distlock
from distlock._core.commands import Kind
from distlock._protocol import queue_keys
from tests.redis_server import RedisServer

#: The dead waiter's TTL: what the queue behind it used to wait out.
DEAD_TTL_MS = 30_000
#: How long the live waiter waits: a third of that, and several times the bound.
LIVE_WAIT_MS = 10_000

_WAITER = """
import asyncio, sys
import redis, redis.asyncio
import distlock, distlock.asyncio
url, kind, driver, TTL = *sys.argv[1:4], int(sys.argv[4])
extra = {"limit": 1} if kind == "semaphore" else {}
name = {"lock": "Lock", "reentrant": "ReentrantLock", "semaphore": "Semaphore"}[kind]
if driver == "sync":
    locks = getattr(distlock, name)(redis.Redis.from_url(url), prefix="dw", ttl_ms=TTL, **extra)
    locks.run("k", lambda h: None, wait_ms=600_000)
else:
    async def main():
        client = redis.asyncio.Redis.from_url(url)
        locks = getattr(distlock.asyncio, name)(client, prefix="dw", ttl_ms=TTL, **extra)
        async def body(h):
            return None
        await locks.run("k", body, wait_ms=600_000)
    asyncio.run(main())
"""

KINDS = {
    "lock": (distlock.Lock, Kind.LOCK, {}),
    "reentrant": (distlock.ReentrantLock, Kind.REENTRANT, {}),
    "semaphore": (distlock.Semaphore, Kind.SEMAPHORE, {"limit": 1}),
}


def until(condition: Callable[[], object], what: str) -> None:
    """Poll Redis's state (Redis cannot call us back, so no event can stand in)."""
    deadline = time.monotonic() + 30
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.005)


def queued(r: redis.Redis, kind: Kind) -> list[Any]:
    return r.lrange(queue_keys("dw:k", kind)[0], 0, -1)


@pytest.mark.parametrize(
    ("kind", "driver"),
    [("lock", "sync"), ("lock", "asyncio"), ("reentrant", "asyncio"), ("semaphore", "sync")],
)
def test_a_waiter_killed_while_queued_holds_up_the_next_for_a_short_bound(
    redis_server: RedisServer, r: redis.Redis, kind: str, driver: str
) -> None:
    factory, queue_kind, extra = KINDS[kind]
    client = redis.Redis.from_url(redis_server.url)
    locks: Any = factory(client, prefix="dw", ttl_ms=DEAD_TTL_MS, **extra)
    holder = locks.acquire("k")
    assert holder is not None
    dead = subprocess.Popen(
        [sys.executable, "-c", _WAITER, redis_server.url, kind, driver, str(DEAD_TTL_MS)],
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    try:
        until(lambda: len(queued(r, queue_kind)) == 1, "the doomed waiter queued")
    finally:
        dead.send_signal(signal.SIGKILL)
        dead.wait()
    got: list[object] = []

    def live() -> None:
        fence = (lambda h: True) if kind == "semaphore" else (lambda h: h.fence)
        got.append(locks.run("k", fence, wait_ms=LIVE_WAIT_MS))

    waiter = threading.Thread(target=live, daemon=True)
    waiter.start()
    until(lambda: len(queued(r, queue_kind)) == 2, "the live waiter queued behind it")
    assert holder.release() is True
    waiter.join(60)
    assert not waiter.is_alive()
    # Served within its 10 s, though the dead waiter was first with a 30 s TTL.
    assert len(got) == 1 and not isinstance(got[0], BaseException)
    if kind != "semaphore":
        assert isinstance(got[0], int) and got[0] > (holder.fence or 0)
    locks.close()
    client.close()


@pytest.mark.parametrize("releaser", ["lock", "reentrant"])
def test_a_release_never_hands_the_key_to_another_kind_s_waiter(
    r: redis.Redis, releaser: str
) -> None:
    other = "reentrant" if releaser == "lock" else "lock"
    trace: list[dict[str, Any]] = []
    holding = KINDS[releaser][0](r, prefix="dw", ttl_ms=DEAD_TTL_MS)
    waiting = KINDS[other][0](r, prefix="dw", ttl_ms=DEAD_TTL_MS, trace=trace.append)
    holder = holding.acquire("k")
    assert holder is not None
    kinds: list[object] = []
    renewed = threading.Event()

    def body(h: object) -> None:
        kinds.append(r.type("dw:k"))
        # Until a renewal was answered: accepted, in the key's own format.
        until(lambda: any(t["action"] == "RenewReply" for t in trace), "a renewal")
        renewed.set()

    waiter = threading.Thread(
        target=lambda: waiting.run("k", body, wait_ms=LIVE_WAIT_MS), daemon=True
    )
    waiter.start()
    until(lambda: len(queued(r, KINDS[other][1])) == 1, "the other kind's waiter queued")
    assert holder.release() is True
    waiter.join(60)
    assert renewed.is_set()
    assert kinds == [b"string" if other == "lock" else b"hash"]
    assert [t["ok"] for t in trace if t["action"] == "RenewReply"][:1] == [True]
    holding.close()
    waiting.close()
