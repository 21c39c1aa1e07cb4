"""Uncontended lock cycles (take a free key, release it) against the hand-written floor.

The floor is what a careful user writes by hand: ``SET key token NX PX ttl``, then the
compare-and-delete release by ``EVALSHA``: two round trips, nothing else.  Contenders:

- sync cycle: ``acquire()`` + ``release()`` (distlock's manual handle), redis-py's
  ``Lock``, python-redis-lock, pottery's ``Redlock``;
- sync cycle with renewal armed: distlock's ``run()`` (a heartbeat and a deadline watch
  armed for the body) and python-redis-lock with ``auto_renewal=True``; the others have
  no background renewal;
- asyncio with 1, 10 and 100 tasks, each cycling its own key: distlock's ``run()``,
  redis-py's asyncio ``Lock``, pottery's ``AIORedlock``.

Every contender runs in every round, interleaved; the table is the median ratio to the
floor.  Peers are measured only when installed (``pip install -e .[bench]``).

    python benchmarks/cycles.py [--rounds R] [--cycles N] [--pin] [--json FILE]
"""

from __future__ import annotations

import asyncio
import hashlib
import secrets
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import redis
import redis.asyncio as aredis
from harness import (
    FLOOR,
    arguments,
    conditions,
    interleave,
    peer,
    redis_url,
    summarize,
    table,
    times_x,
    write_json,
)

from distlock import Lock
from distlock.asyncio import Lock as AsyncLock

#: The careful user's compare-and-delete.
FLOOR_RELEASE = """if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""
FLOOR_SHA = hashlib.sha1(FLOOR_RELEASE.encode()).hexdigest()
TTL_MS = 30_000
TASKS = (1, 10, 100)

SyncCycle = Callable[[int], float]


def _timed(cycle: Callable[[], object]) -> SyncCycle:
    def run(n: int) -> float:
        t0 = time.perf_counter()
        for _ in range(n):
            cycle()
        return time.perf_counter() - t0

    return run


def sync_contenders(
    r: redis.Redis, locks: Lock
) -> tuple[dict[str, SyncCycle], dict[str, SyncCycle]]:
    """(plain cycles, cycles with renewal armed), by contender name."""

    def floor() -> None:
        token = secrets.token_hex(16)
        if r.set("bench:floor", token, nx=True, px=TTL_MS):
            r.evalsha(FLOOR_SHA, 1, "bench:floor", token)

    def distlock_cycle() -> None:
        handle = locks.acquire("cycle")
        assert handle is not None
        handle.release()

    def body(handle: object) -> None:
        return None

    def distlock_armed() -> None:
        locks.run("armed", body)

    def redis_py() -> None:
        lock = r.lock("bench:redis-py", timeout=TTL_MS / 1000)
        if lock.acquire(blocking=False):
            lock.release()

    plain: dict[str, SyncCycle] = {
        FLOOR: _timed(floor),
        "distlock": _timed(distlock_cycle),
        "redis-py Lock": _timed(redis_py),
    }
    armed: dict[str, SyncCycle] = {FLOOR: plain[FLOOR], "distlock": _timed(distlock_armed)}

    prl: Any = peer("redis_lock")
    if prl is not None:

        def prl_cycle(renew: bool) -> Callable[[], None]:
            def cycle() -> None:
                lock = prl.Lock(r, "bench:prl", expire=TTL_MS // 1000, auto_renewal=renew)
                if lock.acquire(blocking=False):
                    lock.release()

            return cycle

        plain["python-redis-lock"] = _timed(prl_cycle(False))
        armed["python-redis-lock"] = _timed(prl_cycle(True))

    pottery: Any = peer("pottery")
    if pottery is not None:

        def pottery_cycle() -> None:
            lock = pottery.Redlock(
                key="bench:pottery", masters={r}, auto_release_time=TTL_MS / 1000
            )
            if lock.acquire(blocking=False):
                lock.release()

        plain["pottery"] = _timed(pottery_cycle)
    return plain, armed


AsyncCycle = Callable[[str], Awaitable[None]]



def every_sync_contender(r: redis.Redis, locks: Lock) -> dict[str, SyncCycle]:
    """Every sync contender by name, the armed ones suffixed (the floor has no armed cycle)."""
    plain, armed = sync_contenders(r, locks)
    return {**plain, **{f"{k} (armed)": v for k, v in armed.items() if k != FLOOR}}

def async_contenders(r: aredis.Redis, locks: AsyncLock) -> dict[str, AsyncCycle]:
    async def floor(key: str) -> None:
        token = secrets.token_hex(16)
        if await r.set(key, token, nx=True, px=TTL_MS):
            await r.evalsha(FLOOR_SHA, 1, key, token)

    async def body(handle: object) -> None:
        return None

    async def distlock_run(key: str) -> None:
        await locks.run(key, body)

    async def redis_py(key: str) -> None:
        lock = r.lock(key, timeout=TTL_MS / 1000)
        if await lock.acquire(blocking=False):
            await lock.release()

    contenders: dict[str, AsyncCycle] = {
        FLOOR: floor,
        "distlock": distlock_run,
        "redis-py Lock": redis_py,
    }
    pottery: Any = peer("pottery")
    if pottery is not None:

        async def pottery_cycle(key: str) -> None:
            lock = pottery.AIORedlock(key=key, masters={r}, auto_release_time=TTL_MS / 1000)
            if await lock.acquire(blocking=False):
                await lock.release()

        contenders["pottery"] = pottery_cycle
    return contenders


async def _tasks(cycle: AsyncCycle, name: str, tasks: int, cycles: int) -> float:
    """``cycles`` cycles in all, spread over ``tasks`` tasks each on its own key."""
    per_task = max(1, cycles // tasks)

    async def worker(i: int) -> None:
        key = f"bench:{name}:{i}"
        for _ in range(per_task):
            await cycle(key)

    t0 = time.perf_counter()
    await asyncio.gather(*(worker(i) for i in range(tasks)))
    return time.perf_counter() - t0


async def run_async(url: str, cycles: int, rounds: int) -> dict[int, dict[str, dict[str, float]]]:
    r = aredis.Redis.from_url(url, max_connections=2 * max(TASKS) + 10)
    await r.script_load(FLOOR_RELEASE)
    out: dict[int, dict[str, dict[str, float]]] = {}
    async with AsyncLock(r, prefix="bench") as locks:
        contenders = async_contenders(r, locks)
        for tasks in TASKS:
            for name, cycle in contenders.items():
                await _tasks(cycle, name, tasks, cycles // 10)  # warm-up: connections, scripts
            times: dict[str, list[float]] = {name: [] for name in contenders}
            names = list(contenders)
            for i in range(rounds):
                shift = i % len(names)
                for name in names[shift:] + names[:shift]:
                    times[name].append(await _tasks(contenders[name], name, tasks, cycles))
            out[tasks] = summarize(times, cycles)
    await r.aclose()
    return out


def main() -> dict[str, Any]:
    parser = arguments((__doc__ or "").split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=2000, help="cycles per contender per round")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.cycles = 3, 300
    with redis_url(args) as url:
        r = redis.Redis.from_url(url)
        r.script_load(FLOOR_RELEASE)
        with Lock(r, prefix="bench") as locks:
            contenders = every_sync_contender(r, locks)
            for fn in contenders.values():
                fn(args.cycles // 10)
            times = interleave(
                {name: partial(fn, args.cycles) for name, fn in contenders.items()},
                args.rounds,
            )
        r.close()
        sync = summarize(times, args.cycles)
        asynchronous = asyncio.run(run_async(url, args.cycles, args.rounds))

    names = [n for n in sync if not n.endswith("(armed)")]
    for name in asynchronous[TASKS[0]]:
        if name not in names:
            names.append(name)
    rows = []
    for name in names:
        armed_row = sync.get(f"{name} (armed)")
        rows.append([
            name,
            times_x(sync[name]["ratio"]) if name in sync else "n/a",
            times_x(armed_row["ratio"]) if armed_row else ("1.00×" if name == FLOOR else "n/a"),
            " / ".join(
                times_x(asynchronous[t][name]["ratio"]) if name in asynchronous[t] else "n/a"
                for t in TASKS
            ),
        ])
    print(f"\nUncontended cycles, median ratio to the floor over {args.rounds} interleaved rounds")
    print(f"(floor: sync {sync[FLOOR]['us']:.0f} µs/cycle; asyncio "
          + " / ".join(f"{asynchronous[t][FLOOR]['us']:.0f}" for t in TASKS)
          + " µs/cycle at " + " / ".join(map(str, TASKS)) + " tasks)")
    print(table(
        ["contender", "sync cycle", "sync cycle, renewal armed",
         "asyncio " + " / ".join(map(str, TASKS)) + " tasks"],
        rows,
    ))
    result = {
        "benchmark": "cycles",
        "conditions": conditions(args),
        "rounds": args.rounds,
        "cycles": args.cycles,
        "sync": sync,
        "asyncio": {str(t): v for t, v in asynchronous.items()},
    }
    write_json(args.json, result)
    return result


if __name__ == "__main__":
    main()
