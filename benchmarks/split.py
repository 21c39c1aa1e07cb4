"""Where one asyncio task's uncontended cycle goes: Redis's work for distlock's scripts,
or distlock's own Python.

``cycles.py``'s by-hand row sends distlock's scripts through redis-py's
``execute_command``, which packs their longer commands argument by argument: its ratio to
the floor is Redis's extra work and redis-py's extra packing together.  Here each side's
commands also go straight onto a pooled connection, packed once, with nothing of distlock
around them (as distlock's own direct send does, :mod:`distlock._direct`), so:

- ``floor, sent directly`` over ``floor``: what redis-py's ``execute_command`` costs the
  floor (and what distlock's direct send does not pay);
- ``distlock's scripts, sent directly`` over ``floor, sent directly``: Redis's extra work
  for distlock's two scripts (the grant's fence, the release's record and queue check),
  with the client's part the same on both sides;
- ``distlock run()`` over ``distlock's scripts, sent directly``: distlock's own Python for
  a renewed cycle (the section, its transitions, the flows, the timer, the hold), and
  ``acquire()`` + ``release()`` likewise for a manual one.

Each contender takes a free key and releases it, one connection from the pool per command,
in paired short turns against the floor (see ``harness.py``), as ``cycles.py`` measures.

    python benchmarks/split.py [--pin] [--rounds N] [--json FILE]
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any

import redis.asyncio as aredis
from cycles import (
    FLOOR_RELEASE,
    SCRIPTS,
    TTL_MS,
    WARM_UP,
    _script_keys,
    async_contenders,
)
from harness import (
    FLOOR,
    Turns,
    arguments,
    build_label,
    conditions,
    paired_turns,
    redis_url,
    summarize_turns,
    table,
    times_x,
    write_json,
)

from distlock._protocol import (
    ACQUIRE,
    RELEASE,
    RELEASE_MEMORY_MS,
    Script,
    pack_evalsha,
    released_key,
)
from distlock.asyncio import Lock as AsyncLock

FLOOR_DIRECT = "floor, sent directly"
SCRIPTS_DIRECT = "distlock's scripts, sent directly"
RUN = "distlock run()"
MANUAL = "distlock acquire() + release()"
#: The floor's compare-and-delete, for packing by hand.
_FLOOR_SCRIPT = Script(FLOOR_RELEASE)

Cycle = Callable[[str], Awaitable[None]]


def direct_contenders(r: aredis.Redis, locks: AsyncLock) -> dict[str, Cycle]:
    """The floor, both sides sent directly, and distlock's two cycles, by name."""
    pool: Any = r.connection_pool

    async def call(packed: bytes) -> Any:
        conn = await pool.get_connection()
        try:
            await conn.send_packed_command([packed])
            return await r.parse_response(conn, "EVALSHA")
        finally:
            await pool.release(conn)

    async def floor_direct(key: str) -> None:
        token = secrets.token_hex(16)
        conn = await pool.get_connection()
        try:
            await conn.send_packed_command(conn.pack_command("SET", key, token, "NX", "PX", TTL_MS))
            granted = await r.parse_response(conn, "SET")
        finally:
            await pool.release(conn)
        if granted:
            await call(pack_evalsha(_FLOOR_SCRIPT, [key], [token], "utf-8", "strict"))

    async def scripts_direct(key: str) -> None:
        acquire_keys, release_keys = _script_keys(key)
        token = secrets.token_hex(16)
        acquire = pack_evalsha(ACQUIRE, list(acquire_keys), [token, TTL_MS], "utf-8", "strict")
        if await call(acquire):
            keys = [key, released_key(key, token), *release_keys]
            await call(pack_evalsha(RELEASE, keys, [token, RELEASE_MEMORY_MS], "utf-8", "strict"))

    async def manual(key: str) -> None:
        handle = await locks.acquire(key)
        assert handle is not None
        await handle.release()

    by_name = async_contenders(r, locks)
    return {
        FLOOR: by_name[FLOOR],
        FLOOR_DIRECT: floor_direct,
        SCRIPTS_DIRECT: scripts_direct,
        MANUAL: manual,
        RUN: by_name["distlock"],
    }


async def _turn(cycle: Cycle, name: str, cycles: int) -> tuple[float, float]:
    key = f"bench:split:{name}"
    c0, t0 = time.process_time(), time.perf_counter()
    for _ in range(cycles):
        await cycle(key)
    return time.perf_counter() - t0, time.process_time() - c0


async def measure(url: str, cycles: int, rounds: int) -> dict[str, dict[str, float]]:
    r = aredis.Redis.from_url(url)
    for source in (*SCRIPTS, FLOOR_RELEASE):
        await r.script_load(source)
    async with AsyncLock(r, prefix="bench") as locks:
        contenders = direct_contenders(r, locks)
        for name, cycle in contenders.items():
            await _turn(cycle, name, WARM_UP)
        turns = Turns(list(contenders))
        floor = contenders[FLOOR]
        for name, floor_first in paired_turns(list(contenders), rounds):
            if floor_first:
                beside = await _turn(floor, FLOOR, cycles)
                own = await _turn(contenders[name], name, cycles)
            else:
                own = await _turn(contenders[name], name, cycles)
                beside = await _turn(floor, FLOOR, cycles)
            turns.record_pair(name, own, beside)
    await r.aclose()
    return summarize_turns(turns, cycles)


def main() -> dict[str, Any]:
    parser = arguments((__doc__ or "").split("\n\n")[0], rounds=300)
    parser.add_argument("--cycles", type=int, default=20, help="cycles per contender per turn")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.cycles = 10, 10
    with redis_url(args) as url:
        result = asyncio.run(measure(url, args.cycles, args.rounds))
    print(f"\nOne asyncio task's uncontended cycle ({build_label()}), median ratio to the "
          f"floor over {args.rounds} paired rounds (floor: {result[FLOOR]['us']:.0f} µs/cycle)")
    rows = [[name, times_x(v["ratio"]), times_x(v["cpu_ratio"])] for name, v in result.items()]
    print(table(["contender", "wall clock", "client CPU"], rows))
    scripts = result[SCRIPTS_DIRECT]["ratio"] / result[FLOOR_DIRECT]["ratio"]
    python = result[RUN]["ratio"] / result[SCRIPTS_DIRECT]["ratio"]
    print(f"\nRedis's extra work for distlock's scripts: {scripts:.2f}× the floor's, sent alike")
    print(f"distlock's own Python in run(): {python:.2f}× its scripts sent directly")
    out = {"benchmark": "split", "conditions": conditions(args), "rounds": args.rounds,
           "cycles": args.cycles, "asyncio_1_task": result}
    write_json(args.json, out)
    return out


if __name__ == "__main__":
    main()
