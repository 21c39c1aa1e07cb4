"""Uncontended lock cycles (take a free key, release it) against the hand-written floor.

The floor is what a careful user writes by hand: ``SET key token NX PX ttl``, then the
compare-and-delete release by ``EVALSHA``: two round trips, nothing else.  Contenders:

- sync cycle: ``acquire()`` + ``release()`` (distlock's manual handle), redis-py's
  ``Lock``, python-redis-lock, pottery's ``Redlock``;
- in every column, distlock's own two scripts sent by hand (``SCRIPTS_BY_HAND``): the
  floor's cycle with distlock's server-side work (a fence drawn, a release remembered,
  the queue looked at), so that distlock's ratio splits into what its guarantees cost
  Redis (this row's ratio) and what its client adds (distlock's ratio over this row's);
- sync cycle with renewal armed: distlock's ``run()`` (a heartbeat and a deadline watch
  armed for the body) and python-redis-lock with ``auto_renewal=True``; the others have
  no background renewal;
- asyncio with 1, 10 and 100 tasks, each cycling its own key: distlock's ``run()``,
  redis-py's asyncio ``Lock``, pottery's ``AIORedlock``.

Every contender runs in every round, interleaved, each of its turns paired with a turn of
the floor run right beside it (the floor first in one round, second in the next); the
table is the median ratio within those pairs.  Peers are measured only when installed
(``pip install -e .[bench]``).

A round is short by default: 20 cycles per contender (under 10 ms), 300 rounds.  On a
shared virtual machine the speed of a loopback round trip drifts by tens of per cent over
seconds; with turns of 2,000 cycles (a second each) the same build's ratio moved by 0.10
from run to run, with turns of 20 by 0.04 at most.  Taken against the floor's turn of the
same round, several turns away, the same cycle entered twice (the by-hand row's sync and
armed columns run the same function) came out at 1.01x and 1.09x in one noisy run; a
floor turn right beside each turn takes that drift out of the ratio.  Those two cells
stay in the table as its gauge of noise.

    python benchmarks/cycles.py [--rounds R] [--cycles N] [--pin] [--json FILE]
"""

from __future__ import annotations

import asyncio
import functools
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
    Turns,
    arguments,
    build_label,
    conditions,
    interleave,
    paired_turns,
    peer,
    redis_url,
    summarize_turns,
    table,
    times_x,
    write_json,
)

from distlock import Lock
from distlock._protocol import (
    ACQUIRE,
    RELEASE,
    RELEASE_MEMORY_MS,
    fence_key,
    queue_keys,
    released_key,
)
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
#: Cycles each contender runs before the first round (connections, scripts, caches).
WARM_UP = 200

SyncCycle = Callable[[int], float]
#: The contender that sends distlock's scripts through redis-py, as the floor sends its own.
SCRIPTS_BY_HAND = "floor, distlock's scripts"


@functools.cache
def _script_keys(key: str) -> tuple[tuple[str, str], tuple[str, str, str]]:
    """The KEYS of ``key``'s acquire and those of its release after the record (which is
    the token's own: :func:`released_key`): worked out once, as a user sending the scripts
    by hand would keep them."""
    queue, places, _ = queue_keys(key)
    return (key, fence_key(key)), (queue, places, fence_key(key))


#: What the hand-written rows send by ``EVALSHA``: the floor's release and distlock's two.
SCRIPTS = (FLOOR_RELEASE, ACQUIRE.source, RELEASE.source)


def load_scripts(r: redis.Redis) -> None:
    """Every script of :data:`SCRIPTS`, loaded for ``EVALSHA``."""
    for source in SCRIPTS:
        r.script_load(source)


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

    def by_hand() -> None:
        acquire_keys, release_keys = _script_keys("bench:by-hand")
        token = secrets.token_hex(16)
        if r.evalsha(ACQUIRE.sha, 2, *acquire_keys, token, TTL_MS):
            key = "bench:by-hand"
            record = released_key(key, token)
            r.evalsha(RELEASE.sha, 5, key, record, *release_keys, token, RELEASE_MEMORY_MS)

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
        SCRIPTS_BY_HAND: _timed(by_hand),
        "distlock": _timed(distlock_cycle),
        "redis-py Lock": _timed(redis_py),
    }
    # Sending scripts arms nothing: the hand-written rows stand for the armed column too.
    armed: dict[str, SyncCycle] = {
        FLOOR: plain[FLOOR],
        SCRIPTS_BY_HAND: plain[SCRIPTS_BY_HAND],
        "distlock": _timed(distlock_armed),
    }

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
#: Per contender: its medians and ratios (``harness.summarize_turns``).
Summary = dict[str, dict[str, float]]



def every_sync_contender(r: redis.Redis, locks: Lock) -> dict[str, SyncCycle]:
    """Every sync contender by name, the armed ones suffixed (the floor has no armed cycle)."""
    plain, armed = sync_contenders(r, locks)
    return {**plain, **{f"{k} (armed)": v for k, v in armed.items() if k != FLOOR}}

def async_contenders(r: aredis.Redis, locks: AsyncLock) -> dict[str, AsyncCycle]:
    async def floor(key: str) -> None:
        token = secrets.token_hex(16)
        if await r.set(key, token, nx=True, px=TTL_MS):
            await r.evalsha(FLOOR_SHA, 1, key, token)

    async def by_hand(key: str) -> None:
        acquire_keys, release_keys = _script_keys(key)
        token = secrets.token_hex(16)
        if await r.evalsha(ACQUIRE.sha, 2, *acquire_keys, token, TTL_MS):
            record = released_key(key, token)
            await r.evalsha(RELEASE.sha, 5, key, record, *release_keys, token, RELEASE_MEMORY_MS)

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
        SCRIPTS_BY_HAND: by_hand,
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


#: Each task's fewest cycles in a turn: a task's start is not part of a lock cycle.
MIN_PER_TASK = 5


def _per_task(tasks: int, cycles: int) -> int:
    return max(MIN_PER_TASK, cycles // tasks)


async def _tasks(cycle: AsyncCycle, name: str, tasks: int, cycles: int) -> float:
    """The seconds ``_per_task(tasks, cycles)`` cycles in each of ``tasks`` tasks take,
    each task on its own key."""
    per_task = _per_task(tasks, cycles)

    async def worker(i: int) -> None:
        key = f"bench:{name}:{i}"
        for _ in range(per_task):
            await cycle(key)

    t0 = time.perf_counter()
    await asyncio.gather(*(worker(i) for i in range(tasks)))
    return time.perf_counter() - t0


async def _turn(cycle: AsyncCycle, name: str, tasks: int, cycles: int) -> tuple[float, float]:
    """One turn's wall-clock and CPU seconds, both scaled to ``cycles`` (with many tasks, a
    turn runs more)."""
    scale = cycles / (_per_task(tasks, cycles) * tasks)
    c0 = time.process_time()
    wall = await _tasks(cycle, name, tasks, cycles)
    return wall * scale, (time.process_time() - c0) * scale


async def run_async(url: str, cycles: int, rounds: int) -> dict[int, Summary]:
    r = aredis.Redis.from_url(url, max_connections=2 * max(TASKS) + 10)
    for source in SCRIPTS:
        await r.script_load(source)
    out: dict[int, Summary] = {}
    async with AsyncLock(r, prefix="bench") as locks:
        contenders = async_contenders(r, locks)
        for tasks in TASKS:
            out[tasks] = await paired_async(contenders, tasks, cycles, rounds)
    await r.aclose()
    return out


async def paired_async(
    contenders: dict[str, AsyncCycle], tasks: int, cycles: int, rounds: int
) -> Summary:
    """Every contender's turns in ``tasks`` tasks, each beside a turn of the floor, in
    :func:`paired_turns` order, after a warm-up (connections, scripts)."""
    for name, cycle in contenders.items():
        await _tasks(cycle, name, tasks, WARM_UP)
    turns = Turns(list(contenders))
    floor = contenders[FLOOR]
    for name, floor_first in paired_turns(list(contenders), rounds):
        if floor_first:
            beside = await _turn(floor, FLOOR, tasks, cycles)
            own = await _turn(contenders[name], name, tasks, cycles)
        else:
            own = await _turn(contenders[name], name, tasks, cycles)
            beside = await _turn(floor, FLOOR, tasks, cycles)
        turns.record_pair(name, own, beside)
    return summarize_turns(turns, cycles)


def _rows(
    names: list[str], sync: Summary, asynchronous: dict[int, Summary], field: str
) -> list[list[str]]:
    """A table's rows: ``field`` (a ratio) of each contender, in each column."""
    rows = []
    for name in names:
        armed_row = sync.get(f"{name} (armed)")
        rows.append([
            name,
            times_x(sync[name][field]) if name in sync else "n/a",
            times_x(armed_row[field]) if armed_row else ("1.00×" if name == FLOOR else "n/a"),
            " / ".join(
                times_x(asynchronous[t][name][field]) if name in asynchronous[t] else "n/a"
                for t in TASKS
            ),
        ])
    return rows


def main() -> dict[str, Any]:
    parser = arguments((__doc__ or "").split("\n\n")[0], rounds=300)
    parser.add_argument("--cycles", type=int, default=20, help="cycles per contender per round")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.cycles = 10, 10
    with redis_url(args) as url:
        r = redis.Redis.from_url(url)
        load_scripts(r)
        with Lock(r, prefix="bench") as locks:
            contenders = every_sync_contender(r, locks)
            for fn in contenders.values():
                fn(WARM_UP)
            turns = interleave(
                {name: partial(fn, args.cycles) for name, fn in contenders.items()},
                args.rounds,
            )
        r.close()
        sync = summarize_turns(turns, args.cycles)
        asynchronous = asyncio.run(run_async(url, args.cycles, args.rounds))

    names = [n for n in sync if not n.endswith("(armed)")]
    for name in asynchronous[TASKS[0]]:
        if name not in names:
            names.append(name)
    headers = ["contender", "sync cycle", "sync cycle, renewal armed",
               "asyncio " + " / ".join(map(str, TASKS)) + " tasks"]
    print(f"\nUncontended cycles ({build_label()}), median ratio to the floor over "
          f"{args.rounds} interleaved rounds")
    print(f"(floor: sync {sync[FLOOR]['us']:.0f} µs/cycle; asyncio "
          + " / ".join(f"{asynchronous[t][FLOOR]['us']:.0f}" for t in TASKS)
          + " µs/cycle at " + " / ".join(map(str, TASKS)) + " tasks)")
    print(table(headers, _rows(names, sync, asynchronous, "ratio")))
    print("\nThe client's CPU per cycle (this process, all threads), median ratio to the floor's")
    print(f"(floor: sync {sync[FLOOR]['cpu_us']:.0f} µs/cycle; asyncio "
          + " / ".join(f"{asynchronous[t][FLOOR]['cpu_us']:.0f}" for t in TASKS)
          + " µs/cycle)")
    print(table(headers, _rows(names, sync, asynchronous, "cpu_ratio")))
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
