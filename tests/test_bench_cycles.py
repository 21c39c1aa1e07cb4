"""``benchmarks/cycles.py``'s hand-written rows keep measuring what they say, against a real
server: the floor sends ``SET`` and its own ``EVALSHA``; the row of distlock's scripts sent
by hand asks Redis for exactly the work distlock's own cycle asks for (the same commands,
as many of each: one fence a cycle, the release remembered), armed or not, sync or asyncio,
so that the gap between the two rows is the client's alone.  Nothing here times anything."""

from __future__ import annotations

import asyncio
from types import ModuleType

import pytest
import redis
import redis.asyncio as aredis

from distlock import Lock
from distlock.asyncio import Lock as AsyncLock
from tests.benchmark_module import load_benchmark
from tests.redis_server import RedisServer

CYCLES = 5


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_benchmark("cycles")


def _calls(client: redis.Redis) -> dict[str, int]:
    """The commands Redis ran since the last reset, scripts' own calls included."""
    stats = client.info("commandstats")
    return {
        name.removeprefix("cmdstat_"): int(v["calls"])
        for name, v in stats.items()
        if name not in ("cmdstat_config|resetstat", "cmdstat_info")
    }


def _same_work(*works: dict[str, int]) -> None:
    """The same commands, as many times, but for the SETs that move a fence counter up to
    the floor of Redis's clock (lib/fence.lua): at most one a grant, as timing has it."""
    sets = [work.get("set", 0) for work in works]
    assert max(sets) - min(sets) <= CYCLES, sets
    rest = [{k: v for k, v in work.items() if k != "set"} for work in works]
    assert all(other == rest[0] for other in rest), works


def test_the_sync_rows_ask_redis_for_what_they_say(
    bench: ModuleType, fresh_redis: RedisServer
) -> None:
    client = redis.Redis(host=fresh_redis.host, port=fresh_redis.port)
    bench.load_scripts(client)
    with Lock(client, prefix="bench") as locks:
        plain, armed = bench.sync_contenders(client, locks)
        cycles = {
            "floor": plain[bench.FLOOR],
            "by hand": plain[bench.SCRIPTS_BY_HAND],
            "distlock": plain["distlock"],
            "distlock armed": armed["distlock"],
        }
        work = {}
        for name, cycle in cycles.items():
            client.config_resetstat()
            cycle(CYCLES)
            work[name] = _calls(client)
    assert work["floor"] == {"set": CYCLES, "evalsha": CYCLES, "get": CYCLES, "del": CYCLES}
    assert work["by hand"]["evalsha"] == 2 * CYCLES
    assert work["by hand"]["incr"] == CYCLES  # one fence a cycle
    _same_work(work["by hand"], work["distlock"], work["distlock armed"])
    assert client.exists("bench:by-hand", "bench:cycle", "bench:armed") == 0
    client.close()


def test_the_asyncio_rows_ask_redis_for_what_they_say(
    bench: ModuleType, fresh_redis: RedisServer
) -> None:
    async def main() -> dict[str, dict[str, int]]:
        client = aredis.Redis(host=fresh_redis.host, port=fresh_redis.port)
        stats = redis.Redis(host=fresh_redis.host, port=fresh_redis.port)
        for source in bench.SCRIPTS:
            await client.script_load(source)
        work = {}
        async with AsyncLock(client, prefix="bench") as locks:
            contenders = bench.async_contenders(client, locks)
            for name in (bench.FLOOR, bench.SCRIPTS_BY_HAND, "distlock"):
                stats.config_resetstat()
                for _ in range(CYCLES):
                    await contenders[name](f"bench:{name}")
                work[name] = _calls(stats)
                assert stats.exists(f"bench:{name}") == 0
        await client.aclose()
        stats.close()
        return work

    work = asyncio.run(main())
    assert work[bench.FLOOR] == {"set": CYCLES, "evalsha": CYCLES, "get": CYCLES, "del": CYCLES}
    assert work[bench.SCRIPTS_BY_HAND]["incr"] == CYCLES
    _same_work(work[bench.SCRIPTS_BY_HAND], work["distlock"])
