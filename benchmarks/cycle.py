"""Lock-cycle overhead against the hand-written floor, measured in one run.

The floor is what a careful user writes by hand: ``SET key token NX PX ttl`` then the
compare-and-delete release by EVALSHA, two round trips.  distlock's cycle is also two
round trips (acquire script, release script); the difference is the state machine, the
timer registration and the verdict.  Rounds alternate floor and distlock so drift on a
shared machine hits both alike; the report is the median ratio.

    python benchmarks/cycle.py [--cycles N] [--rounds R] [--url redis://...]
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import redis
import redis.asyncio as aredis

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from distlock import Lock
from distlock.asyncio import Lock as AsyncLock
from distlock.scripts import RELEASE


def sync_floor(r: redis.Redis, n: int) -> float:
    sha = RELEASE.sha
    t0 = time.perf_counter()
    for _ in range(n):
        token = secrets.token_hex(16)
        if r.set("bench:floor", token, nx=True, px=30_000):
            r.evalsha(sha, 1, "bench:floor", token)
    return time.perf_counter() - t0


def sync_distlock(locks: Lock, n: int) -> float:
    body: Callable[[object], None] = lambda h: None  # noqa: E731
    t0 = time.perf_counter()
    for _ in range(n):
        locks.run("dl", body)
    return time.perf_counter() - t0


async def async_floor(r: aredis.Redis, n: int) -> float:
    sha = RELEASE.sha
    t0 = time.perf_counter()
    for _ in range(n):
        token = secrets.token_hex(16)
        if await r.set("bench:afloor", token, nx=True, px=30_000):
            await r.evalsha(sha, 1, "bench:afloor", token)
    return time.perf_counter() - t0


async def async_distlock(locks: AsyncLock, n: int) -> float:
    async def body(h: object) -> None:
        return None

    t0 = time.perf_counter()
    for _ in range(n):
        await locks.run("adl", body)
    return time.perf_counter() - t0


def report(name: str, floors: list[float], ours: list[float], n: int) -> dict[str, float]:
    ratios = [o / f for f, o in zip(floors, ours, strict=True)]
    row = {
        "floor_us": statistics.median(floors) / n * 1e6,
        "distlock_us": statistics.median(ours) / n * 1e6,
        "ratio": statistics.median(ratios),
    }
    print(
        f"{name:<8} floor {row['floor_us']:8.1f} us/cycle   distlock {row['distlock_us']:8.1f} "
        f"us/cycle   median ratio {row['ratio']:.3f}  (min {min(ratios):.3f}, "
        f"max {max(ratios):.3f}, {len(ratios)} rounds)"
    )
    return row


def run_sync(url: str, cycles: int, rounds: int) -> dict[str, float]:
    r = redis.Redis.from_url(url)
    r.script_load(RELEASE.source)
    with Lock(r, prefix="bench") as locks:
        sync_floor(r, cycles // 10)
        sync_distlock(locks, cycles // 10)
        floors, ours = [], []
        for i in range(rounds):
            if i % 2:
                floors.append(sync_floor(r, cycles))
                ours.append(sync_distlock(locks, cycles))
            else:
                ours.append(sync_distlock(locks, cycles))
                floors.append(sync_floor(r, cycles))
    r.close()
    return report("sync", floors, ours, cycles)


async def run_async(url: str, cycles: int, rounds: int) -> dict[str, float]:
    r = aredis.Redis.from_url(url)
    await r.script_load(RELEASE.source)
    async with AsyncLock(r, prefix="bench") as locks:
        await async_floor(r, cycles // 10)
        await async_distlock(locks, cycles // 10)
        floors, ours = [], []
        for i in range(rounds):
            if i % 2:
                floors.append(await async_floor(r, cycles))
                ours.append(await async_distlock(locks, cycles))
            else:
                ours.append(await async_distlock(locks, cycles))
                floors.append(await async_floor(r, cycles))
    await r.aclose()
    return report("asyncio", floors, ours, cycles)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="a Redis to use (default: start a private redis-server)")
    parser.add_argument("--cycles", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    if args.url:
        run_sync(args.url, args.cycles, args.rounds)
        asyncio.run(run_async(args.url, args.cycles, args.rounds))
        return
    from tests.redis_server import RedisServer

    with RedisServer() as server:
        run_sync(server.url, args.cycles, args.rounds)
        asyncio.run(run_async(server.url, args.cycles, args.rounds))


if __name__ == "__main__":
    main()
