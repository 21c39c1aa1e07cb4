# Generated from tests/drivers/_async/test_direct_send.py by tools/unasync.py: do not edit.
"""Scripts go straight onto a pooled connection when the client's ``execute_command`` has
nothing to do for them (distlock/_direct.py), on both drivers against a real redis-server.

Which path a command took is observed from outside: redis-py's own ``execute_command``
(sync: ``_execute_command``) is wrapped on its class with a counter, which the direct send
never calls and which every client that must keep ``execute_command`` still goes through.
What must not change on the direct path: NOSCRIPT falls back to EVAL, the client's
``Retry`` retries a killed connection as it says, decoded replies, and a connection
interrupted mid-command goes back to the pool disconnected.  Each runtime's own ways are
in ``tests/drivers/test_direct_send_asyncio.py`` (a cancellation, a connection's own
``pack_command``) and ``tests/drivers/test_direct_send_threads.py`` (a
``KeyboardInterrupt``, a connection's own command packer).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, ClassVar

import pytest
import redis

from distlock._direct import plain_client
from distlock import Lock
from distlock.tools.servers.topologies import Cluster
from tests.drivers.sent import scripts
from tests.redis_server import RedisServer

from .concurrency import (
    Connection,
    ConnectionPool,
    Redis,
    RedisCluster,
    connected,
    local_address,
    retrying,
    unread,
)

TTL_MS = 30_000




def cycle(locks: Lock) -> int:
    handle = locks.acquire("k")
    assert handle is not None
    fence = handle.fence
    assert handle.release() is True
    return fence


def connections(pool: Any) -> int:
    return len(pool._available_connections) + len(pool._in_use_connections)


# -- which clients take the direct path ----------------------------------------------------


@pytest.mark.usefixtures("r")
def test_a_plain_client_sends_its_scripts_directly(
    redis_server: RedisServer, through_execute: list[str]
) -> None:
    for decode in (False, True):
        client = Redis(port=redis_server.port, decode_responses=decode)
        with Lock(client, prefix=f"plain{decode}", ttl_ms=TTL_MS) as locks:
            first = cycle(locks)
            # Fences decoded to ints, whatever the client decodes.
            assert cycle(locks) > first
        assert scripts(through_execute) == []
        assert not client.connection_pool._in_use_connections
        client.close()


@pytest.mark.usefixtures("r", "through_execute")
def test_a_client_that_wraps_execute_command_sees_every_command(
    redis_server: RedisServer,
) -> None:
    seen: list[str] = []

    class Wrapped(Redis):
        def execute_command(self, *args: Any, **options: Any) -> Any:
            seen.append(str(args[0]))
            send: Callable[..., Any] = super().execute_command
            return send(*args, **options)

    wrapped = Wrapped(port=redis_server.port)
    with Lock(wrapped, prefix="wrapped", ttl_ms=TTL_MS) as locks:
        cycle(locks)
    assert scripts(seen) == ["EVALSHA", "EVALSHA"]
    wrapped.close()

    # Wrapped on the instance, not the class: the same.
    instance = Redis(port=redis_server.port)
    plain_send: Callable[..., Any] = instance.execute_command

    def wrapper(*args: Any, **options: Any) -> Any:
        seen.append(f"instance {args[0]}")
        return plain_send(*args, **options)

    instance.execute_command = wrapper  # type: ignore[method-assign]
    with Lock(instance, prefix="wrapped", ttl_ms=TTL_MS) as locks:
        cycle(locks)
    assert seen.count("instance EVALSHA") == 2
    instance.close()


@pytest.mark.usefixtures("r")
def test_a_plain_client_s_script_replies_skip_its_parse_response(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reply is what parse_response would return: it is read with the connection's
    read_response alone."""
    parsed: list[str] = []
    parse: Any = Redis.parse_response

    def counted(self: Any, conn: Any, name: str, **options: Any) -> Any:
        parsed.append(name)
        return parse(self, conn, name, **options)

    monkeypatch.setattr(Redis, "parse_response", counted)
    for protocol in (2, 3):
        client = Redis(port=redis_server.port, protocol=protocol, decode_responses=True)
        with Lock(client, prefix=f"reads{protocol}", ttl_ms=TTL_MS) as locks:
            first = cycle(locks)
            assert cycle(locks) > first
        assert "EVALSHA" not in parsed
        client.close()


@pytest.mark.usefixtures("r")
def test_a_client_that_parses_its_own_way_parses_every_script_reply(
    redis_server: RedisServer,
) -> None:
    """A class that overrides parse_response (a recording client), an instance that
    replaces it, and a response callback set for EVALSHA: each sees every reply."""
    seen: list[str] = []

    class Parsing(Redis):
        def parse_response(
            self, connection: Any, command_name: str | bytes, **options: Any
        ) -> Any:
            seen.append(f"class {command_name!s}")
            parse: Callable[..., Any] = super().parse_response
            return parse(connection, command_name, **options)

    instance = Redis(port=redis_server.port)
    plain_parse: Callable[..., Any] = instance.parse_response

    def parse(conn: Any, name: Any, **options: Any) -> Any:
        seen.append(f"instance {name}")
        return plain_parse(conn, name, **options)

    instance.parse_response = parse  # type: ignore[method-assign,assignment]
    with_callback = Redis(port=redis_server.port)

    def passed_on(reply: Any, **options: Any) -> Any:
        seen.append("callback EVALSHA")
        return reply

    callback: Any = passed_on  # redis-py's two drivers type a callback each their own way
    with_callback.set_response_callback("EVALSHA", callback)
    for client, who in (
        (Parsing(port=redis_server.port), "class"),
        (instance, "instance"),
        (with_callback, "callback"),
    ):
        with Lock(client, prefix=who, ttl_ms=TTL_MS) as locks:
            cycle(locks)
        assert seen.count(f"{who} EVALSHA") == 2, (who, seen)
        client.close()


@pytest.mark.usefixtures("r")
def test_a_single_connection_client_keeps_to_its_one_connection(
    redis_server: RedisServer, through_execute: list[str]
) -> None:
    client = Redis(port=redis_server.port, single_connection_client=True)
    with Lock(client, prefix="single", ttl_ms=TTL_MS) as locks:
        cycle(locks)
    assert scripts(through_execute) == ["EVALSHA", "EVALSHA"]
    assert connections(client.connection_pool) == 1  # the pool never lent a second one
    client.close()


def test_a_cluster_client_is_never_sent_to_directly(redis_cluster: Cluster) -> None:
    seen: list[str] = []

    class Wrapped(RedisCluster):
        def execute_command(self, *args: Any, **kwargs: Any) -> Any:
            seen.append(str(args[0]))
            send: Callable[..., Any] = super().execute_command
            return send(*args, **kwargs)

    client = Wrapped.from_url(redis_cluster.url)
    assert plain_client(client, Redis) is False
    with Lock(client, prefix="{cl}", ttl_ms=TTL_MS) as locks:
        cycle(locks)
    # Both scripts went through it (each after an EVAL too if the node had not seen it).
    assert scripts(seen).count("EVALSHA") == 2
    client.close()


@pytest.mark.usefixtures("r")
def test_redis_py_observability_once_on_sends_through_execute_command(
    redis_server: RedisServer, through_execute: list[str]
) -> None:
    """redis-py's metrics are process-wide and may be switched on at any time: each
    command asks."""
    from redis.observability import providers

    instance = providers.get_observability_instance()
    client = Redis(port=redis_server.port)
    with Lock(client, prefix="otel", ttl_ms=TTL_MS) as locks:
        cycle(locks)
        assert scripts(through_execute) == []
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(instance, "_provider_manager", object())
            cycle(locks)
        assert scripts(through_execute) == ["EVALSHA", "EVALSHA"]
    client.close()


# -- what the direct path keeps ----------------------------------------------------------------


def test_noscript_after_script_flush_falls_back_to_eval(
    redis_server: RedisServer, r: redis.Redis, through_execute: list[str]
) -> None:
    client = Redis(port=redis_server.port)
    with Lock(client, prefix="flush", ttl_ms=TTL_MS) as locks:
        first = cycle(locks)
        evals = r.info("commandstats").get("cmdstat_eval", {}).get("calls", 0)
        r.script_flush()
        assert cycle(locks) > first
    assert r.info("commandstats")["cmdstat_eval"]["calls"] == evals + 2  # acquire, release
    assert scripts(through_execute) == []
    client.close()


class PausedThenKilled(Connection):
    """The first script sent is held by CLIENT PAUSE WRITE, and the connection killed by
    the server while it waits: the command was sent and never answered."""

    admin: ClassVar[redis.Redis]
    killed: ClassVar[threading.Event]

    def send_command(self, *args: Any, **kwargs: Any) -> None:
        first = args[0] == "EVALSHA" and not self.killed.is_set()
        if first:
            self.admin.client_pause(30_000, all=False)
        send: Callable[..., None] = super().send_command
        send(*args, **kwargs)
        if first:
            self.admin.client_kill_filter(addr=local_address(self))
            self.killed.set()
            self.admin.client_unpause()


class NotingRelease(ConnectionPool):
    """Notes whether each connection was still connected when it came back."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.returned: list[tuple[Any, bool]] = []

    def release(self, connection: Any) -> None:
        self.returned.append((connection, connected(connection)))
        release: Callable[..., None] = super().release
        release(connection)


def killing_client(server: RedisServer, r: redis.Redis, retries: int) -> Redis:
    connection: Any = type("Killed", (PausedThenKilled,), {"admin": r, "killed": threading.Event()})
    return Redis(
        connection_pool=NotingRelease(
            port=server.port, connection_class=connection, retry=retrying(retries)
        )
    )


def clean(pool: Any) -> bool:
    """No connection lent out, and none with anything unread on it."""
    if pool._in_use_connections:
        return False
    return not [c for c in pool._available_connections if unread(c)]


def test_a_connection_killed_mid_command_is_retried_as_the_client_s_retry_says(
    redis_server: RedisServer, r: redis.Redis, through_execute: list[str]
) -> None:
    client = killing_client(redis_server, r, retries=1)
    pool: Any = client.connection_pool
    with Lock(client, prefix="killed", ttl_ms=TTL_MS) as locks:
        handle = locks.acquire("k")
        assert handle is not None
        # The one retry reconnected the same connection and sent the script again, within
        # the one send: the flow never saw the error.
        assert [was_connected for _, was_connected in pool.returned] == [True]
        assert r.get("killed:k") == handle.token.encode()
        assert handle.release() is True
    assert clean(pool)
    assert scripts(through_execute) == []
    client.close()
    pool.disconnect()

    client = killing_client(redis_server, r, retries=0)
    pool = client.connection_pool
    with Lock(client, prefix="killed0", ttl_ms=TTL_MS) as locks:
        with pytest.raises(redis.ConnectionError):
            locks.acquire("k")
        assert [was_connected for _, was_connected in pool.returned] == [False]
        assert r.exists("killed0:k") == 0
    assert clean(pool)
    client.close()
    pool.disconnect()


def test_a_connection_that_sends_its_own_way_sees_every_script(
    redis_server: RedisServer,
) -> None:
    sent: list[str] = []

    class Counting(Connection):
        def send_command(self, *args: Any, **kwargs: Any) -> None:
            sent.append(str(args[0]))
            send: Callable[..., None] = super().send_command
            send(*args, **kwargs)

    pool = ConnectionPool(connection_class=Counting, port=redis_server.port)
    client = Redis(connection_pool=pool)
    with Lock(client, prefix="counting", ttl_ms=TTL_MS) as locks:
        cycle(locks)  # the scripts loaded: no NOSCRIPT fallback below
        sent.clear()
        first = cycle(locks)
        assert cycle(locks) > first
        assert scripts(sent) == ["EVALSHA"] * 4
    client.close()
    pool.disconnect()
