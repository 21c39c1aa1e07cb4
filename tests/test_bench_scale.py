"""``benchmarks/scale.py`` keeps measuring what it says: its lateness reads each renewal's
due instant off the core's grid, and its pipeline count sees the renewals of one tick go out
together, against a real server, on both drivers.  Nothing here times anything."""

from __future__ import annotations

import asyncio
import math
from types import ModuleType

import pytest

from distlock._core.lease import RENEW_STEPS
from distlock.events import Acquired, Renewed
from tests.benchmark_module import load_benchmark
from tests.redis_server import RedisServer

HEARTBEAT_MS = 640


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_benchmark("scale")


def test_lateness_is_the_send_against_the_grid_instant_it_was_due(bench: ModuleType) -> None:
    watch = bench.Lateness(HEARTBEAT_MS)
    step = HEARTBEAT_MS / RENEW_STEPS
    watch.watching = True
    watch(Acquired("k", "c", 1003.0, 1, 1, 0.0))
    due = math.ceil((1003.0 + HEARTBEAT_MS) / step) * step  # 1650: the grid point after 1643
    watch(Renewed("k", "c", due + 4.0 + 2.0, 2.0, 0.0))  # sent 4 ms after it was due
    assert (watch.renewals, watch.worst_ms, watch.late) == (1, pytest.approx(4.0), 0)
    # The next one is due a heartbeat after that send, on the grid: sent a step and a bit late.
    due = math.ceil((due + 4.0 + HEARTBEAT_MS) / step) * step
    watch(Renewed("k", "c", due + step + 1.0 + 3.0, 3.0, 0.0))
    assert (watch.renewals, watch.late) == (2, 1)
    assert watch.worst_ms == pytest.approx(step + 1.0)


def _batched(row: dict[str, float]) -> None:
    # The renewals went out in fewer pipelines than renewals: a tick's renewals share one.
    assert row["renewals"] > 0
    assert 0 < row["pipelines"] < row["observed_renewals"]


def test_a_ticks_renewals_share_a_pipeline_sync(
    bench: ModuleType, redis_server: RedisServer
) -> None:
    row = bench.sync_child([redis_server.url], False, 200, HEARTBEAT_MS, 1.5)
    _batched(row)


def test_a_ticks_renewals_share_a_pipeline_asyncio(
    bench: ModuleType, redis_server: RedisServer
) -> None:
    row = asyncio.run(bench.async_child(redis_server.url, 200, HEARTBEAT_MS, 1.5))
    _batched(row)
