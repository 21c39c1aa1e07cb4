# Generated from tests/drivers/_async/test_wait_deadline.py by tools/unasync.py: do not edit.
"""A wait ends at its deadline, not when Redis gets round to ending the block, on both
drivers.

Redis ends a ``BLPOP``'s timeout on its own timers (``hz``, 10 by default): up to about
100 ms late, later on a busy server.  A waiter whose ``wait_ms`` runs out must not pay
that: its last block is cut on the client's clock, at the deadline.  Here Redis is made
unable to answer at all past the waiter's deadline (``DEBUG SLEEP`` holds its one thread),
and the waiter's ``Wake`` must come before Redis is back: an order of events (the wake came
while Redis was still asleep), not a measured duration.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis

from distlock._clock import now_ms
from distlock import Lock
from tests.redis_server import RedisServer

from .concurrency import blocking, client_for, spawn, until

WAIT_MS = 400
#: How long Redis is held asleep, from when the waiter is blocked: far past its deadline.
ASLEEP_S = 2.5


@pytest.fixture
def sleepy() -> Iterator[RedisServer]:
    with RedisServer(args=("--enable-debug-command", "yes")) as server:
        yield server


def blocked(r: redis.Redis) -> bool:
    return any(c.get("cmd") == "blpop" and "b" in c.get("flags", "") for c in r.client_list())


def put_to_sleep(r: redis.Redis) -> float:
    """Hold Redis asleep for ``ASLEEP_S``; the instant, on the core's clock, before which it
    cannot be back (it is put to sleep after this instant)."""
    asleep_from = now_ms()
    r.execute_command("DEBUG", "SLEEP", ASLEEP_S)  # type: ignore[no-untyped-call]
    return asleep_from + ASLEEP_S * 1000


def test_a_timed_out_wait_ends_at_its_deadline(sleepy: RedisServer) -> None:
    admin = redis.Redis(port=sleepy.port)
    trace: list[dict[str, Any]] = []
    holder = Lock(client_for(sleepy), prefix="dl")
    waiting = Lock(client_for(sleepy), prefix="dl", trace=trace.append)
    with holder, waiting:
        held = holder.acquire("k", ttl_ms=60_000)
        assert held is not None
        waiter = spawn(waiting.acquire, "k", wait_ms=WAIT_MS)
        until(lambda: blocked(admin), "the waiter blocked")
        back = blocking(put_to_sleep, admin)
        assert waiter.result() is None
        assert held.release()
    [wake] = [t for t in trace if t["action"] == "Wake"]
    assert wake["woken"] is False and wake["t"] < back  # cut at the deadline, not by Redis
    admin.close()
