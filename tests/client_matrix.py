"""The clients users build, for running the same contract on each of them.

A test suite that builds every client with an explicit timeout and a small pool proves the
contract for those clients only: redis-py 8's ``from_url`` gives its connections a 5 s
socket timeout that ``connection_pool.connection_kwargs`` does not show, a URL handed to the
Lock is turned into a client the Lock owns, RESP3 and ``decode_responses`` change what
replies look like, the parser may be hiredis or pure Python, and pools may be bounded or
block.  Each :class:`ClientConfig` builds one of them, for the sync and the asyncio driver,
from the URL of a real server (with credentials in it for the restricted user).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import redis
import redis.asyncio as aredis
from redis._parsers import _AsyncHiredisParser, _AsyncRESP2Parser, _HiredisParser, _RESP2Parser
from redis.utils import HIREDIS_AVAILABLE

from distlock._core.commands import Kind
from distlock._protocol import queue_keys
from tests.docs_acl import documented_acl
from tests.redis_server import RedisServer

#: What a sync config gives a Lock (a client or a URL), and how to let go of it afterwards.
SyncMade = tuple["redis.Redis | str", Callable[[], None]]
#: The same for the asyncio driver.
AsyncMade = tuple["aredis.Redis | str", Callable[[], Awaitable[None]]]


@dataclass(frozen=True)
class ClientConfig:
    """One way of building a client: ``sync(url)`` and ``asyncio(url)`` (called inside the
    event loop) return what to pass to a Lock and how to close it afterwards."""

    name: str
    sync: Callable[[str], SyncMade]
    asyncio: Callable[[str], AsyncMade]
    #: Connect as the restricted user docs/acl.md documents (the URL carries its name).
    restricted: bool = False


def _sync_client(**kwargs: Any) -> Callable[[str], SyncMade]:
    def make(url: str) -> SyncMade:
        client = redis.Redis.from_url(url, **kwargs)
        return client, client.close

    return make


def _async_client(**kwargs: Any) -> Callable[[str], AsyncMade]:
    def make(url: str) -> AsyncMade:
        client = aredis.Redis.from_url(url, **kwargs)
        return client, client.aclose

    return make


def _sync_url(url: str) -> SyncMade:
    return url, lambda: None


def _async_url(url: str) -> AsyncMade:
    async def nothing() -> None:
        pass

    return url, nothing


def _sync_pool(blocking: bool) -> Callable[[str], SyncMade]:
    def make(url: str) -> SyncMade:
        pool: redis.ConnectionPool
        if blocking:
            pool = redis.BlockingConnectionPool.from_url(url, max_connections=4, timeout=10)
        else:
            pool = redis.ConnectionPool.from_url(url, max_connections=4)
        client = redis.Redis(connection_pool=pool)

        def close() -> None:
            client.close()
            pool.disconnect()

        return client, close

    return make


def _async_pool(blocking: bool) -> Callable[[str], AsyncMade]:
    def make(url: str) -> AsyncMade:
        pool: aredis.ConnectionPool
        if blocking:
            pool = aredis.BlockingConnectionPool.from_url(url, max_connections=4, timeout=10)
        else:
            pool = aredis.ConnectionPool.from_url(url, max_connections=4)
        client = aredis.Redis(connection_pool=pool)

        async def close() -> None:
            await client.aclose()
            await pool.disconnect()

        return client, close

    return make


assert HIREDIS_AVAILABLE, "hiredis is a test dependency: the hiredis cell would be the default"

CONFIGS: tuple[ClientConfig, ...] = (
    # redis-py's defaults, as the documentation's examples build them: a hidden 5 s socket timeout.
    ClientConfig("from_url", _sync_client(), _async_client()),
    # The Lock makes (and owns) the client from the URL.
    ClientConfig("url", _sync_url, _async_url),
    ClientConfig(
        "timeouts",
        _sync_client(socket_timeout=2.0, socket_connect_timeout=1.0),
        _async_client(socket_timeout=2.0, socket_connect_timeout=1.0),
    ),
    ClientConfig("resp3", _sync_client(protocol=3), _async_client(protocol=3)),
    ClientConfig(
        "decode", _sync_client(decode_responses=True), _async_client(decode_responses=True)
    ),
    ClientConfig(
        "python_parser",
        _sync_client(parser_class=_RESP2Parser),
        _async_client(parser_class=_AsyncRESP2Parser),
    ),
    ClientConfig(
        "hiredis", _sync_client(parser_class=_HiredisParser),
        _async_client(parser_class=_AsyncHiredisParser),
    ),
    ClientConfig("bounded_pool", _sync_pool(blocking=False), _async_pool(blocking=False)),
    ClientConfig("blocking_pool", _sync_pool(blocking=True), _async_pool(blocking=True)),
    # The documented restricted user, connecting the way the documentation's examples connect.
    ClientConfig("acl", _sync_client(), _async_client(), restricted=True),
)

#: The configs under their names, for the cases that run on a few of them only.
BY_NAME = {config.name: config for config in CONFIGS}


#: The prefixes the documented restricted users are given rights on; ids are unique per case.
PREFIX = {"lock": "orders", "reentrant": "orders", "semaphore": "workers", "election": "election"}
USER = {"lock": "locker", "reentrant": "locker", "semaphore": "worker", "election": "elector"}
#: The semaphore's documented rights, and what waiting adds to them (the semaphore's
#: guide): the wake lists, the queue's commands and BLPOP.
SEMAPHORE_WAIT_ACL = documented_acl("worker-waits")


def documented_lock_acl() -> list[str]:
    """The rules of docs/acl.md's ``ACL SETUSER locker ...`` line, exactly as documented."""
    return documented_acl("locker")


class Endpoint:
    """The session's redis-server, with the documented restricted users set up on it."""

    def __init__(self, server: RedisServer) -> None:
        self.server = server
        admin = redis.Redis(host=server.host, port=server.port)
        admin.acl_setuser("locker", reset=True)
        admin.execute_command("ACL", "SETUSER", "locker", *documented_lock_acl())  # type: ignore[no-untyped-call]
        admin.acl_setuser("worker", reset=True)
        admin.execute_command("ACL", "SETUSER", "worker", *SEMAPHORE_WAIT_ACL)  # type: ignore[no-untyped-call]
        admin.acl_setuser("elector", reset=True)
        admin.execute_command("ACL", "SETUSER", "elector", *documented_acl("elector"))  # type: ignore[no-untyped-call]
        admin.close()

    def url(self, config: ClientConfig, kind: str) -> str:
        if not config.restricted:
            return self.server.url
        return f"redis://{USER[kind]}:s3cret@{self.server.host}:{self.server.port}/0"

    def close(self) -> None:
        """Take the restricted users away again."""
        admin = redis.Redis(host=self.server.host, port=self.server.port)
        admin.acl_deluser("locker", "worker", "elector")
        admin.close()


def queues(key: str) -> list[str]:
    """Every kind's queue of ``key`` (each kind waits in its own)."""
    return [queue_keys(key, kind)[0] for kind in Kind]


def queue_and_places(key: str) -> list[str]:
    return [name for kind in Kind for name in queue_keys(key, kind)[:2]]


def leaves_nothing(admin: redis.Redis, key: str) -> None:
    """Neither the key nor anything of its queue is left once every holder released."""
    assert admin.exists(key, *queue_and_places(key)) == 0
    assert [w for kind in Kind for w in admin.keys(queue_keys(key, kind)[2] + "*")] == []
