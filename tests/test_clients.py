"""What a Lock refuses as its client, checked when it is made, not at first use, by both
drivers.  What each driver accepts, against a real redis-server, is in
``tests/drivers/_async/test_clients.py``."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import redis
import redis.asyncio as aredis

import distlock
import distlock.asyncio
from distlock import ValidationError


@pytest.mark.parametrize(
    ("client", "message"),
    [
        (42, "client must be a redis.client.Redis or redis.cluster.RedisCluster"),
        (None, "client must be a redis"),
        (b"redis://localhost", "client must be a redis"),
        ("http://localhost:6379", "must start with redis://"),
        ("localhost:6379", "must start with redis://"),
        (redis.Redis, "client must be a redis"),  # the class, not an instance
    ],
)
def test_bad_clients_are_refused_when_the_lock_is_made(client: Any, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        distlock.Lock(client)
    with pytest.raises(ValidationError):
        distlock.asyncio.Lock(client)


def test_a_client_of_the_other_driver_is_refused_with_the_way_out() -> None:
    async_client = aredis.Redis()
    with pytest.raises(ValidationError, match=r"use it with distlock\.asyncio's Lock"):
        distlock.Lock(async_client)  # type: ignore[arg-type]
    sync_client = redis.Redis()
    with pytest.raises(ValidationError, match=r"use it with distlock's Lock"):
        distlock.asyncio.Lock(sync_client)  # type: ignore[arg-type]
    sync_client.close()
    asyncio.run(async_client.aclose())
