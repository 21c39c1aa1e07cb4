"""What a held lock costs in memory, pinned: a service may hold thousands of locks at once.

The shapes of the per-lock objects (a section's slots, the token kept as an int, one
timer entry per renewed lock rather than an object, a group's tuple) were each chosen for
bytes per held lock.  This test holds that choice to a budget: the Python heap a held,
renewed lock keeps alive (``hold()`` entered, its renewal armed), measured with
``tracemalloc`` in a child process of its own so nothing else the suite runs allocates
during the measurement.  ``tracemalloc`` counts the allocations themselves, so the figure is
the same on a loaded machine as on a quiet one; the resident-set figures, which also count
the allocator's slack, are ``benchmarks/held.py``'s.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.redis_server import RedisServer

ROOT = Path(__file__).resolve().parent.parent

#: Locks held for the measurement: enough that the fixed costs (the first timer, the
#: connection, the script cache) are noise beside them.
LOCKS = 2000

#: Python heap per held, renewed lock, in bytes.  Measured at about 649 B (sync) and
#: 636 B (asyncio), of which 32 B is the fence: a floor on Redis's clock, an int of 49
#: bits (a lock's first fence in its slot used to be 1, an int Python never allocates).
#: The budget leaves room for a field, not for an object more per lock.
BUDGET = {"sync": 680, "asyncio": 670}

_CHILD = """
import asyncio, gc, json, sys, tracemalloc
import redis, redis.asyncio as aredis
import distlock, distlock.asyncio

url, n, driver = sys.argv[1], int(sys.argv[2]), sys.argv[3]
probe = redis.Redis.from_url(url)

def start():
    gc.collect()
    tracemalloc.start()
    return tracemalloc.get_traced_memory()[0]

def stop(before):
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    held = sum(1 for _ in probe.scan_iter("mem:k*", count=1000))
    return {"per_lock": (after - before) / n, "held": held}

def sync():
    r = redis.Redis.from_url(url)
    with distlock.Lock(r, prefix="mem", ttl_ms=60_000) as locks:
        # warm: imports, the connection, the scripts, the renewal thread
        warm = [locks.hold(f"w{i}") for i in range(10)]
        for held in warm:
            held.__enter__()
        before = start()
        holds = [locks.hold(f"k{i}") for i in range(n)]
        for held in holds:
            held.__enter__()
        figures = stop(before)
        for held in reversed(warm + holds):
            held.__exit__(None, None, None)
    r.close()
    return figures

async def asyncio_driver():
    r = aredis.Redis.from_url(url)
    async with distlock.asyncio.Lock(r, prefix="mem", ttl_ms=60_000) as locks:
        warm = [locks.hold(f"w{i}") for i in range(10)]
        for held in warm:
            await held.__aenter__()
        before = start()
        holds = [locks.hold(f"k{i}") for i in range(n)]
        for held in holds:
            await held.__aenter__()
        figures = stop(before)
        for held in reversed(warm + holds):
            await held.__aexit__(None, None, None)
    await r.aclose()
    return figures

figures = sync() if driver == "sync" else asyncio.run(asyncio_driver())
figures["left"] = sum(1 for _ in probe.scan_iter("mem:*", count=1000))
print(json.dumps(figures))
"""


@pytest.mark.parametrize("driver", ["sync", "asyncio"])
def test_a_held_lock_costs_no_more_than_its_budget(driver: str) -> None:
    with RedisServer() as server:
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, server.url, str(LOCKS), driver],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=240,
        )
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout.splitlines()[-1])
    # The locks were really held while measured, and given back after.
    assert figures["held"] == LOCKS
    assert figures["left"] == 0
    per_lock = figures["per_lock"]
    assert per_lock <= BUDGET[driver], (
        f"a held, renewed lock ({driver}) keeps {per_lock:.0f} B of Python heap alive, "
        f"over its budget of {BUDGET[driver]} B"
    )
