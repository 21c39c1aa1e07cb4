# Generated from tests/drivers/_async/test_dead_waiters.py by tools/unasync.py: do not edit.
"""A waiter that dies while queued costs the waiters behind it a short, stated bound, on
both drivers.

Nobody can tell a dead waiter from a slow one, so what a waiter leaves behind ends soon
whatever the TTL (see :mod:`distlock._core.waiting`): its place ends within
``LONGEST_BLOCK_MS + QUEUE_GRACE_MS`` of its last attempt, and a key handed to it lives
``HANDED_TTL_MS`` until its first renewal, which a dead waiter never sends.  Here the
waiter is a real process (of the driver under test), killed while blocked; the one behind
it waits 10 s, a third of the dead waiter's 30 s TTL, which it would have had to wait out
before.

Also: the kinds refuse each other's keys, so each has its own queue: a lock's release
never hands its key to a reentrant lock's waiter (which would start its body on a key in
the wrong format, and lose it at its first renewal).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from typing import Any

import pytest
import redis

from distlock._core.commands import Kind
from distlock._protocol import queue_keys
from distlock import Lock, ReentrantLock, Semaphore
from tests.redis_server import RedisServer

from .concurrency import DRIVER, client_for, spawn, until

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
    def main():
        client = redis.asyncio.Redis.from_url(url)
        locks = getattr(distlock.asyncio, name)(client, prefix="dw", ttl_ms=TTL, **extra)
        def body(h):
            return None
        locks.run("k", body, wait_ms=600_000)
    asyncio.run(main())
"""

KINDS: dict[str, tuple[Any, Kind, dict[str, Any]]] = {
    "lock": (Lock, Kind.LOCK, {}),
    "reentrant": (ReentrantLock, Kind.REENTRANT, {}),
    "semaphore": (Semaphore, Kind.SEMAPHORE, {"limit": 1}),
}


def queued(r: redis.Redis, kind: Kind) -> list[Any]:
    return r.lrange(queue_keys("dw:k", kind)[0], 0, -1)


def doomed_waiter(server: RedisServer, kind: str) -> subprocess.Popen[bytes]:
    """A waiter of the driver under test, in a process of its own (started at once)."""
    return subprocess.Popen(
        [sys.executable, "-c", _WAITER, server.url, kind, DRIVER, str(DEAD_TTL_MS)],
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )


def fence_of(h: Any) -> Any:
    return h.fence


def served(h: Any) -> bool:
    return True


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_waiter_killed_while_queued_holds_up_the_next_for_a_short_bound(
    redis_server: RedisServer, r: redis.Redis, kind: str
) -> None:
    factory, queue_kind, extra = KINDS[kind]
    client = client_for(redis_server)
    locks: Any = factory(client, prefix="dw", ttl_ms=DEAD_TTL_MS, **extra)
    holder = locks.acquire("k")
    assert holder is not None
    dead = doomed_waiter(redis_server, kind)
    try:
        until(lambda: len(queued(r, queue_kind)) == 1, "the doomed waiter queued")
    finally:
        dead.send_signal(signal.SIGKILL)
        dead.wait()
    body = served if kind == "semaphore" else fence_of
    live = spawn(locks.run, "k", body, wait_ms=LIVE_WAIT_MS)
    until(lambda: len(queued(r, queue_kind)) == 2, "the live waiter queued behind it")
    assert holder.release() is True
    # Served within its 10 s, though the dead waiter was first with a 30 s TTL.
    got = live.result()
    if kind == "semaphore":
        assert got is True
    else:
        assert isinstance(got, int) and got > (holder.fence or 0)
    locks.close()
    client.close()


@pytest.mark.parametrize("releaser", ["lock", "reentrant"])
def test_a_release_never_hands_the_key_to_another_kind_s_waiter(
    redis_server: RedisServer, r: redis.Redis, releaser: str
) -> None:
    other = "reentrant" if releaser == "lock" else "lock"
    trace: list[dict[str, Any]] = []
    client = client_for(redis_server)
    holding = KINDS[releaser][0](client, prefix="dw", ttl_ms=DEAD_TTL_MS)
    waiting = KINDS[other][0](client, prefix="dw", ttl_ms=DEAD_TTL_MS, trace=trace.append)
    holder = holding.acquire("k")
    assert holder is not None
    kinds: list[object] = []
    renewed: list[bool] = []

    def body(h: object) -> None:
        kinds.append(r.type("dw:k"))
        # Until a renewal was answered: accepted, in the key's own format.
        until(lambda: any(t["action"] == "RenewReply" for t in trace), "a renewal")
        renewed.append(True)

    waiter = spawn(waiting.run, "k", body, wait_ms=LIVE_WAIT_MS)
    until(lambda: len(queued(r, KINDS[other][1])) == 1, "the other kind's waiter queued")
    assert holder.release() is True
    waiter.result()
    assert renewed == [True]
    assert kinds == [b"string" if other == "lock" else b"hash"]
    assert [t["ok"] for t in trace if t["action"] == "RenewReply"][:1] == [True]
    holding.close()
    waiting.close()
    client.close()
