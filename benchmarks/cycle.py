"""Lock-cycle overhead against the hand-written floor, measured in one run.

The floor is what a careful user writes by hand: ``SET key token NX PX ttl`` then the
compare-and-delete release by EVALSHA, two round trips.  distlock's cycle is also two
round trips (acquire script, release script); the difference is the state machine, the
timer registration and the verdict.  The sync run also times distlock's two scripts sent by
hand, which separates the protocol's server-side cost (the fence) from the client's.
Rounds alternate floor and distlock so drift on a shared machine hits both alike; the
report is the median ratio.

    python benchmarks/cycle.py [--cycles N] [--rounds R] [--url redis://...]
    python benchmarks/cycle.py --latency-ms 1   # through Toxiproxy, 1 ms added per reply

On loopback a round trip is a few tens of microseconds, so the fixed cost of the state
machine shows as a large ratio; ``--latency-ms`` puts a real Toxiproxy with a latency
toxic between the clients and Redis, the way a network does.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import secrets
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import redis
import redis.asyncio as aredis

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from distlock import Lock
from distlock._core.commands import Command, Op
from distlock._protocol import ACQUIRE, RELEASE, encode, released_key
from distlock.asyncio import Lock as AsyncLock

#: The careful user's compare-and-delete, sent by EVALSHA (loaded by main()).
FLOOR_RELEASE = """if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""
FLOOR_SHA = hashlib.sha1(FLOOR_RELEASE.encode()).hexdigest()


def sync_floor(r: redis.Redis, n: int) -> float:
    sha = FLOOR_SHA
    t0 = time.perf_counter()
    for _ in range(n):
        token = secrets.token_hex(16)
        if r.set("bench:floor", token, nx=True, px=30_000):
            r.evalsha(sha, 1, "bench:floor", token)
    return time.perf_counter() - t0


def sync_scripts(r: redis.Redis, n: int) -> float:
    """distlock's own two scripts sent by hand: the wire cost of its protocol, fence included."""
    key = "bench:scripts"
    _, acquire_keys, _ = encode(Command(Op.ACQUIRE, key, "", 30_000))
    _, (_, _, *release_keys), (_, *release_args) = encode(Command(Op.RELEASE, key, "", 30_000))
    t0 = time.perf_counter()
    for _ in range(n):
        token = secrets.token_hex(16)
        if r.evalsha(ACQUIRE.sha, 2, *acquire_keys, token, 30_000):
            # The release record is the token's own (released_key).
            record = released_key(key, token)
            r.evalsha(RELEASE.sha, 5, key, record, *release_keys, token, *release_args)
    return time.perf_counter() - t0


def sync_distlock(locks: Lock, n: int) -> float:
    body: Callable[[object], None] = lambda h: None  # noqa: E731
    t0 = time.perf_counter()
    for _ in range(n):
        locks.run("dl", body)
    return time.perf_counter() - t0


async def async_floor(r: aredis.Redis, n: int) -> float:
    sha = FLOOR_SHA
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
    r.script_load(FLOOR_RELEASE)
    r.script_load(RELEASE.source)
    r.script_load(ACQUIRE.source)
    with Lock(r, prefix="bench") as locks:
        sync_floor(r, cycles // 10)
        sync_scripts(r, cycles // 10)
        sync_distlock(locks, cycles // 10)
        floors, by_hand, ours = [], [], []
        for i in range(rounds):
            if i % 2:
                floors.append(sync_floor(r, cycles))
                by_hand.append(sync_scripts(r, cycles))
                ours.append(sync_distlock(locks, cycles))
            else:
                ours.append(sync_distlock(locks, cycles))
                by_hand.append(sync_scripts(r, cycles))
                floors.append(sync_floor(r, cycles))
    r.close()
    wire = [h / f for f, h in zip(floors, by_hand, strict=True)]
    print(
        f"{'sync':<8} distlock's two scripts by hand "
        f"{statistics.median(by_hand) / cycles * 1e6:8.1f} us/cycle   median ratio to the "
        f"floor {statistics.median(wire):.3f} (the protocol's own cost, fence included)"
    )
    return report("sync", floors, ours, cycles)


async def run_async(url: str, cycles: int, rounds: int) -> dict[str, float]:
    r = aredis.Redis.from_url(url)
    await r.script_load(FLOOR_RELEASE)
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
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--url", help="a Redis to use (default: start a private redis-server)")
    parser.add_argument("--cycles", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument(
        "--latency-ms", type=int, default=0, help="reply latency added by a Toxiproxy toxic"
    )
    args = parser.parse_args()

    def bench(url: str) -> None:
        run_sync(url, args.cycles, args.rounds)
        asyncio.run(run_async(url, args.cycles, args.rounds))

    with ExitStack() as stack:
        url = args.url
        if url is None:
            from tests.redis_server import RedisServer

            url = stack.enter_context(RedisServer()).url
        if args.latency_ms:
            url = stack.enter_context(proxied(url, args.latency_ms))
        bench(url)


@contextmanager
def proxied(url: str, latency_ms: int) -> Iterator[str]:
    """``url`` behind a Toxiproxy that delays every reply by ``latency_ms``."""
    from urllib.parse import urlsplit

    from distlock.tools.servers.toxiproxy import (
        ToxiproxyClient,
        ToxiproxyServer,
        find_server_binary,
    )
    from tests.redis_server import free_port

    binary = find_server_binary()
    if binary is None:
        raise SystemExit("Toxiproxy is not installed: run `bash .ci/setup`")
    server = ToxiproxyServer(binary).start()
    try:
        target = urlsplit(url)
        api = ToxiproxyClient(server.url)
        port = free_port()
        proxy = api.create_proxy(
            "bench", listen=f"127.0.0.1:{port}", upstream=f"{target.hostname}:{target.port}"
        )
        proxy.add_toxic("latency", stream="downstream", latency=latency_ms)
        print(f"through Toxiproxy, +{latency_ms} ms per reply")
        yield f"redis://127.0.0.1:{port}{target.path}"
    finally:
        server.stop()


if __name__ == "__main__":
    main()
