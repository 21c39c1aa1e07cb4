"""``benchmarks/server_instructions.py``'s contenders, run without valgrind so that they keep
asking Redis for what they say: the floor its two commands, distlock's scripts sent by hand
exactly the work a distlock ``acquire()`` + ``release()`` asks for.  Nothing here counts
instructions."""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType

import pytest
import redis

from tests.benchmark_module import load_benchmark
from tests.redis_server import RedisServer

CYCLES = 7


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_benchmark("server_instructions")


@pytest.fixture
def r() -> Iterator[redis.Redis]:
    server = RedisServer().start()
    client = redis.Redis.from_url(server.url)
    try:
        yield client
    finally:
        client.close()
        server.stop()


def _calls(r: redis.Redis) -> dict[str, int]:
    stats = r.info("commandstats")
    return {name.removeprefix("cmdstat_"): v["calls"] for name, v in stats.items()}


def test_each_contender_asks_redis_for_its_cycle(bench: ModuleType, r: redis.Redis) -> None:
    bench.load_scripts(r)
    work = {}
    for name in bench.NAMES:
        r.config_resetstat()
        bench.send(r, name, CYCLES)
        work[name] = _calls(r)
        work[name].pop("config|resetstat", None)
    assert work["floor"] == {"set": CYCLES, "evalsha": CYCLES, "get": CYCLES, "del": CYCLES}
    by_hand = work["floor, distlock's scripts"]
    assert by_hand["evalsha"] == 2 * CYCLES and by_hand["incr"] == CYCLES
    # A SET per acquire and per release, and one more for the fence counter whenever the
    # clock's floor has moved past it (once a millisecond has passed since the last fence).
    for done in (by_hand, work["acquire + release"]):
        assert 2 * CYCLES <= done.pop("set") <= 3 * CYCLES
    assert work["acquire + release"] == by_hand
