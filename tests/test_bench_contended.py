"""``benchmarks/contended.py`` run for a moment, so that it keeps working: every contender is
a lock (no two workers hold the key at once), round trips are counted on both sides, and
the table and its JSON render.  Nothing here times anything."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import redis

from tests.benchmark_module import load_benchmark
from tests.redis_server import RedisServer

WORKERS = 3
SECONDS = 0.2


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_benchmark("contended")


def _key() -> str:
    return f"bench-test-{uuid.uuid4().hex[:8]}"


@pytest.mark.parametrize("name", ["floor+signal", "distlock wait", "redis-py Lock"])
def test_every_thread_contender_is_a_lock_and_is_counted(
    bench: ModuleType, redis_server: RedisServer, name: str
) -> None:
    client = bench.counting_client(redis_server.url)
    key = _key()
    contender = bench.SYNC_CONTENDERS[name](client, key)
    try:
        with bench.monitored(redis_server.url) as seen:
            acquisitions = bench.sync_round(contender, SECONDS, WORKERS)
        # Every wait ended in a grant: no queue, place or wake list is left behind.
        assert [
            k
            for k in client.scan_iter(match=f"distlock:*{key}*")
            if b":released:" not in k and b":fence:" not in k
        ] == []
    finally:
        contender.close()
        client.close()
    assert acquisitions
    assert bench.overlapping(acquisitions) == []
    # Each acquisition sent at least its granting command; the server saw those and the
    # releases.
    assert all(a.round_trips >= 1 for a in acquisitions)
    assert sum(seen.values()) >= 2 * len(acquisitions)
    stats = bench.summarise(name, "threads", [acquisitions], WORKERS)
    assert stats.acquisitions == len(acquisitions)
    assert sum(stats.per_worker) == len(acquisitions)


@pytest.mark.parametrize("name", ["floor+signal", "distlock wait", "redis-py Lock"])
def test_every_asyncio_contender_is_a_lock_and_is_counted(
    bench: ModuleType, redis_server: RedisServer, name: str
) -> None:
    async def main() -> list[Any]:
        client = bench.counting_async_client(redis_server.url)
        contender = bench.ASYNC_CONTENDERS[name](client, _key())
        try:
            done: list[Any] = await bench.async_round(contender, SECONDS, WORKERS)
            return done
        finally:
            await contender.aclose()
            await client.aclose()

    acquisitions = asyncio.run(main())
    assert acquisitions
    assert bench.overlapping(acquisitions) == []
    assert all(a.round_trips >= 1 for a in acquisitions)


@pytest.mark.parametrize(("name", "trips"), [("floor+signal", 3), ("distlock wait", 2)])
def test_a_contended_acquisition_s_round_trips(
    bench: ModuleType, redis_server: RedisServer, name: str, trips: int
) -> None:
    """A held key makes the next caller wait: refused, blocked until the release wakes it,
    granted; counted on the connections (the BLPOP included), three round trips for the
    floor (its woken waiter sends SET NX again) and two for distlock (the release hands
    the key over in its reply to the BLPOP)."""
    client = bench.counting_client(redis_server.url)
    contender = bench.SYNC_CONTENDERS[name](client, _key())
    admin = redis.Redis.from_url(redis_server.url)
    counter = [0]
    token = bench._worker.set(counter)
    try:
        release = contender.acquire()
        assert release is not None
        assert counter[0] == 1
        got: list[int] = []

        def second() -> None:
            mine = [0]
            bench._worker.set(mine)
            again = contender.acquire()
            assert again is not None
            got.append(mine[0])
            again()

        waiter = threading.Thread(target=second)
        waiter.start()
        # The waiter is blocked once Redis lists a client blocked on a wake-up list.
        give_up = time.monotonic() + 10
        while not int(admin.info("clients")["blocked_clients"]):
            assert time.monotonic() < give_up, "the second caller never blocked"
        release()
        waiter.join(10)
        assert got == [trips]
    finally:
        bench._worker.reset(token)
        contender.close()
        client.close()
        admin.close()


def test_the_table_and_json_render_with_ratios_to_the_floor(
    bench: ModuleType, tmp_path: Path, redis_server: RedisServer
) -> None:
    out = tmp_path / "report.json"
    rows = bench.main(
        [
            "--url",
            redis_server.url,
            "--seconds",
            str(SECONDS),
            "--rounds",
            "1",
            "--workers",
            str(WORKERS),
            "--contenders",
            "floor+signal",
            "distlock wait",
            "--drivers",
            "threads",
            "--json",
            str(out),
        ]
    )
    assert [r.contender for r in rows] == ["floor+signal", "distlock wait"]
    assert all(set(r.ratios) == {"handoff_p50", "wait_p99"} for r in rows)
    written = json.loads(out.read_text())
    assert [r["contender"] for r in written] == ["floor+signal", "distlock wait"]
    assert set(written[1]["ratios"]) == {"handoff_p50", "wait_p99"}
    assert any("targets (threads)" in line for line in bench.table(rows))
