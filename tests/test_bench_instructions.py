"""``benchmarks/instructions.py``'s contenders, run without valgrind so that they keep
measuring what they say: each distlock cycle, and distlock's scripts sent by hand, takes
the key once (one fence per cycle), the floor never runs distlock's acquire script, and
the logic-only cycles never reach a connection; against a real server (``--redis``),
every cycle is its two round trips.  Nothing here counts instructions or times anything."""

from __future__ import annotations

from types import ModuleType

import pytest
import redis

from tests.benchmark_module import load_benchmark
from tests.redis_server import RedisServer

CYCLES = 7


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_benchmark("instructions")


@pytest.mark.parametrize(
    ("driver", "name"),
    [("sync", name) for name in ("floor", "floor, distlock's scripts", "acquire + release",
                                  "acquire + release, logic only", "run()", "run(), logic only")]
    + [("asyncio", name)
       for name in ("floor", "floor, distlock's scripts", "run()", "run(), logic only")],
)
def test_each_cycle_takes_the_key_once(
    bench: ModuleType, monkeypatch: pytest.MonkeyPatch, driver: str, name: str
) -> None:
    assert name in (bench.SYNC if driver == "sync" else bench.ASYNC)
    sent: list[str] = []
    to = bench._Replies.to.__func__

    def recorded(cls: type, args: tuple[object, ...]) -> object:
        sent.append(str(args[0]))
        return to(cls, args)

    monkeypatch.setattr(bench._Replies, "to", classmethod(recorded))
    before = bench._Replies.fence
    bench._child(driver, name, CYCLES)
    fences = bench._Replies.fence - before
    if name == "floor":
        assert fences == 0
        assert sent == ["SET", "EVALSHA"] * CYCLES
    elif name.endswith("logic only"):
        assert fences == CYCLES
        assert sent == []
    else:
        assert fences == CYCLES
        assert sent == ["EVALSHA", "EVALSHA"] * CYCLES


@pytest.mark.parametrize(
    ("driver", "name"),
    [("sync", name)
     for name in ("floor", "floor, distlock's scripts", "acquire + release", "run()")]
    + [("asyncio", name) for name in ("floor", "floor, distlock's scripts", "run()")],
)
def test_against_a_real_server_each_cycle_is_its_two_round_trips(
    bench: ModuleType, fresh_redis: RedisServer, driver: str, name: str
) -> None:
    client = redis.Redis(host=fresh_redis.host, port=fresh_redis.port)
    bench.load_scripts(client)
    client.config_resetstat()
    bench._child(driver, name, CYCLES, f"redis://{fresh_redis.host}:{fresh_redis.port}/0")
    stats = client.info("commandstats")
    client.close()
    evalsha = stats.get("cmdstat_evalsha", {}).get("calls", 0)
    # The scripts' own SETs count as calls of SET too: only the floor sends SET itself.
    if name == "floor":
        assert (stats["cmdstat_set"]["calls"], evalsha) == (CYCLES, CYCLES)
    else:
        assert evalsha == 2 * CYCLES
        assert stats["cmdstat_incr"]["calls"] == CYCLES  # one fence per cycle
