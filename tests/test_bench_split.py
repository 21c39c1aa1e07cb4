"""``benchmarks/split.py``'s rows ask Redis for what they say: the floor sent directly
does the floor's work, distlock's scripts sent directly do exactly distlock's own cycle's
(so that the gap between those two rows is Redis's, and the gap above the second is the
client's alone).  Nothing here times anything."""

from __future__ import annotations

import asyncio
from types import ModuleType

import pytest
import redis
import redis.asyncio as aredis

from distlock.asyncio import Lock as AsyncLock
from tests.benchmark_module import load_benchmark
from tests.redis_server import RedisServer
from tests.test_bench_cycles import CYCLES, _calls, _same_work


@pytest.fixture(scope="module")
def split() -> ModuleType:
    return load_benchmark("split")


def test_the_rows_ask_redis_for_what_they_say(split: ModuleType, fresh_redis: RedisServer) -> None:
    async def main() -> dict[str, dict[str, int]]:
        client = aredis.Redis(host=fresh_redis.host, port=fresh_redis.port)
        stats = redis.Redis(host=fresh_redis.host, port=fresh_redis.port)
        for source in (*split.SCRIPTS, split.FLOOR_RELEASE):
            await client.script_load(source)
        work = {}
        async with AsyncLock(client, prefix="bench") as locks:
            for name, cycle in split.direct_contenders(client, locks).items():
                key = f"bench:{name}"
                stats.config_resetstat()
                for _ in range(CYCLES):
                    await cycle(key)
                work[name] = _calls(stats)
                assert stats.exists(key) == 0, name
        await client.aclose()
        stats.close()
        return work

    work = asyncio.run(main())
    floor = {"set": CYCLES, "evalsha": CYCLES, "get": CYCLES, "del": CYCLES}
    assert work[split.FLOOR] == floor
    assert work[split.FLOOR_DIRECT] == floor
    assert work[split.SCRIPTS_DIRECT]["evalsha"] == 2 * CYCLES
    assert work[split.SCRIPTS_DIRECT]["incr"] == CYCLES  # one fence a cycle
    _same_work(work[split.SCRIPTS_DIRECT], work[split.MANUAL], work[split.RUN])
