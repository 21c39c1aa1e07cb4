"""Direct sends, the sync driver only: a ``KeyboardInterrupt`` between a script going out
and its reply being read, and a connection that packs commands with its own command packer
(an asyncio connection has neither; what both drivers share is in
``tests/drivers/_async/test_direct_send.py``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import pytest
import redis
from redis._parsers import Encoder

from distlock import Lock
from tests.drivers.sent import scripts
from tests.redis_server import RedisServer

TTL_MS = 30_000



def _cycle(locks: Lock) -> int:
    handle = locks.acquire("k")
    assert handle is not None
    fence = handle.fence
    assert handle.release() is True
    return fence


class _NotingRelease(redis.ConnectionPool):
    """Notes whether each connection was still connected when it came back."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.returned: list[tuple[Any, bool]] = []

    def release(self, connection: Any) -> None:
        self.returned.append((connection, connection._sock is not None))
        super().release(connection)


def _clean(pool: Any) -> bool:
    """No connection lent out, and none with anything unread on it."""
    return not pool._in_use_connections and all(
        c._sock is None or not c.can_read() for c in pool._available_connections
    )


class _InterruptedReply(redis.Connection):
    """``KeyboardInterrupt`` arrives after the first script went out, before its reply
    is read."""

    interrupted: ClassVar[list[Any]]
    last: object = None

    def send_command(self, *args: Any, **kwargs: Any) -> None:
        self.last = args[0]
        send: Callable[..., None] = super().send_command
        send(*args, **kwargs)

    def read_response(self, *args: Any, **kwargs: Any) -> Any:
        if self.last == "EVALSHA" and not self.interrupted:
            self.interrupted.append(self)
            raise KeyboardInterrupt
        return super().read_response(*args, **kwargs)


def test_a_connection_interrupted_mid_command_is_disconnected_before_it_goes_back(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    connection: Any = type("Interrupted", (_InterruptedReply,), {"interrupted": []})
    pool = _NotingRelease(port=redis_server.port, connection_class=connection)
    client = redis.Redis(connection_pool=pool)
    with Lock(client, prefix="kbd", ttl_ms=TTL_MS) as locks:
        with pytest.raises(KeyboardInterrupt):
            locks.acquire("k")
        interrupted = connection.interrupted[0]
        assert (interrupted, False) in pool.returned
        assert _clean(pool)
        _cycle(locks)  # the pool's connections still serve
    client.close()


def test_a_connection_with_its_own_command_packer_sees_every_script(
    redis_server: RedisServer,
) -> None:
    sent: list[str] = []

    class Counting(redis.Connection):
        def send_command(self, *args: Any, **kwargs: Any) -> None:
            sent.append(str(args[0]))
            super().send_command(*args, **kwargs)  # type: ignore[no-untyped-call]

    class Recording(redis.connection.PythonRespSerializer):
        def pack(self, *args: Any) -> list[bytes]:
            sent.append(str(args[0]))
            packed: list[bytes] = super().pack(*args)  # type: ignore[no-untyped-call]
            return packed

    encoder: Any = Encoder("utf-8", "strict", False)  # type: ignore[no-untyped-call]
    pools = {
        "counting": redis.ConnectionPool(connection_class=Counting, port=redis_server.port),
        "recording": redis.ConnectionPool(
            port=redis_server.port, command_packer=Recording(6000, encoder.encode)
        ),
    }
    for name, pool in pools.items():
        client = redis.Redis(connection_pool=pool)
        with Lock(client, prefix=name, ttl_ms=TTL_MS) as locks:
            _cycle(locks)  # the scripts loaded: no NOSCRIPT fallback below
            sent.clear()
            first = _cycle(locks)
            assert _cycle(locks) > first
            assert scripts(sent) == ["EVALSHA"] * 4
        client.close()
