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
from typing import Any

import redis.asyncio as aredis
from cycles import (
    FLOOR_RELEASE,
    SCRIPTS,
    TTL_MS,
    AsyncCycle,
    _script_keys,
    async_contenders,
    paired_async,
)
from harness import FLOOR, arguments, build_label, conditions, redis_url, table, times_x, write_json

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


def direct_contenders(r: aredis.Redis, locks: AsyncLock) -> dict[str, AsyncCycle]:
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


async def measure(url: str, cycles: int, rounds: int) -> dict[str, dict[str, float]]:
    r = aredis.Redis.from_url(url)
    for source in (*SCRIPTS, FLOOR_RELEASE):
        await r.script_load(source)
    async with AsyncLock(r, prefix="bench") as locks:
        result = await paired_async(direct_contenders(r, locks), 1, cycles, rounds)
    await r.aclose()
    return result


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
